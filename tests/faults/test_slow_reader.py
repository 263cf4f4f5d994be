"""A client that reads one byte a second: the gateway buffers a bounded amount.

The client asks for a long reply (a million 100-byte deltas, ~180 MB on the
wire) from a provider that makes each event on demand and holds nothing, so
any growth is the gateway's own buffering. It shrinks its socket's receive
buffer, then reads one byte a second for ``SECONDS`` seconds while the
worker's RSS is sampled. A gateway that kept
generating into memory would grow by the whole reply; backpressure keeps the
growth to socket buffers plus one high-water mark of queued frames.
"""

from __future__ import annotations

import json
import socket
import time

import httpx
from tests.faults.conftest import MEDIA_TYPE, request_body

from tokenwire.testing import processes

SECONDS = 12


def test_a_slow_reader_gets_bounded_buffering(gateway: processes.ServedProcess) -> None:
    worker = gateway.worker()
    body = request_body("firehose")
    head = (
        f"POST /v1/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {MEDIA_TYPE}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    baseline = processes.rss_kib(worker)
    samples: list[float] = []
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", gateway.port))
        sock.settimeout(30)
        sock.sendall(head + body)
        received = b""
        for _ in range(SECONDS):
            received += sock.recv(1)
            samples.append((processes.rss_kib(worker) - baseline) / 1024)
            time.sleep(1)
    finally:
        sock.close()
    assert received.startswith(b"HTTP/1.1 200") or received == b"HTTP/1.1 200"[: len(received)]
    shown = json.dumps([round(s, 1) for s in samples])
    print(f"worker RSS {baseline / 1024:.1f} MiB at start; growth each second (MiB): {shown}")
    # Bounded: far below the ~180 MB reply, and flat once the buffers are full.
    assert max(samples) < 16, shown
    assert samples[-1] - samples[len(samples) // 2] < 4, shown
    # The gateway is still there for everyone else.
    assert httpx.get(gateway.url + "/healthz", timeout=30).status_code == 200
