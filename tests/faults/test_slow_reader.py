"""A client that reads one byte a second gets backpressure: the provider waits for it.

The client asks for a long reply (a million 100-byte deltas, ~180 MB on the
wire) from a provider that makes each event on demand and holds nothing
(``fault_plugins.Firehose``, which counts what it made), shrinks its socket's
receive buffer, then reads one byte a second for ``SECONDS`` seconds. Every
second the worker's RSS is sampled and the ``probe`` model reports how many
deltas the firehose has made.

What "bounded buffering" means, asserted directly:

- the provider is paused: after the buffers filled, it makes (almost) nothing
  more while the client reads nothing, and in all it made a tiny part of the
  reply, no more than fits in the gateway's buffers;
- the worker's memory is bounded and flat, far below the reply;
- the stream is still open (the write deadline, 30 s by default, has not
  passed) and the gateway serves everyone else meanwhile.
"""

from __future__ import annotations

import json
import socket
import time

import httpx
from tests.faults.conftest import MEDIA_TYPE, probe, request_body

from tokenwire.testing import processes

SECONDS = 12
REPLY_DELTAS = 1_000_000
#: Bytes on the wire per firehose delta (an SSE frame of a 100-byte text).
FRAME_BYTES = 180


def test_a_slow_reader_pauses_the_provider_and_buffering_is_bounded(
    gateway: processes.ServedProcess,
) -> None:
    worker = gateway.worker()
    body = request_body("firehose")
    head = (
        f"POST /v1/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {MEDIA_TYPE}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    made_before = probe(gateway)["firehose_made"]
    baseline = processes.rss_kib(worker)
    growth: list[float] = []
    made: list[int] = []
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", gateway.port))
        sock.settimeout(30)
        sock.sendall(head + body)
        received = b""
        for _ in range(SECONDS):
            received += sock.recv(1)
            growth.append((processes.rss_kib(worker) - baseline) / 1024)
            made.append(probe(gateway)["firehose_made"] - made_before)
            time.sleep(1)  # the client's reading pace: this is the slow reader
        still_open = not _closed(sock)
    finally:
        sock.close()
    shown = json.dumps({"rss_growth_mib": [round(g, 1) for g in growth], "made": made})
    print(f"worker RSS {baseline / 1024:.1f} MiB at start; {shown}")
    assert received == b"HTTP/1.1 200"[: len(received)] and len(received) == SECONDS

    # The provider waits for the client: in the second half it made next to
    # nothing (the client read 6 bytes), and in all no more than the buffers hold.
    half = len(made) // 2
    assert made[-1] - made[half] < 5_000, shown
    assert made[-1] * FRAME_BYTES < 16 << 20, shown  # vs ~180 MB for the whole reply
    assert made[-1] < REPLY_DELTAS // 10, shown
    # Memory bounded and flat once the buffers are full.
    assert max(growth) < 16, shown
    assert growth[-1] - growth[half] < 4, shown
    # Not cut: a slow reader is not a stalled one until the write deadline passes.
    assert still_open
    assert httpx.get(gateway.url + "/healthz", timeout=30).status_code == 200


def _closed(sock: socket.socket) -> bool:
    sock.setblocking(False)
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True
    finally:
        sock.setblocking(True)
