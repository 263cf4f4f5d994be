"""Request-head limits on a real ``tokenwire serve`` (issue 30), no key needed to attack.

HPACK amplification: a header put once in the HPACK table and then named by a
one-byte index decodes to kilobytes per byte on the wire. With granian's
HTTP/2 default (16 MiB of decoded headers per stream, 200 streams per
connection), 130 KB on the wire pinned +65 MB of the worker until the body
timeout. ``[server] max_header_bytes`` (default 16 KiB) bounds HTTP/2's
header list and HTTP/1.1's head alike; ``http2_max_concurrent_streams``
(default 100) bounds the streams per connection.

Bare-LF line ends and zero-padded chunk sizes: granian (hyper) accepts both
and no option turns them off. RFC 9112 allows the first (§2.2) and the second
is a valid chunk size; the tests pin what the server does with them, which is
what docs/gateway.md ("Security") argues is safe behind a proxy that
re-frames the request (nginx, HAProxy, Envoy, cloud load balancers).

Bounded: one gateway, at most 32 streams on one connection, 127.0.0.1 only.
"""

from __future__ import annotations

import contextlib
import json
import socket
import time
from collections.abc import Iterator

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.settings
import hyperframe.frame
import pytest

from tokenwire.gateway.config import ConfigError, parse
from tokenwire.testing import processes

DEADLINE_S = 10.0
BODY = json.dumps(
    {
        "version": "1.0",
        "stream": True,
        "model": "demo",
        "messages": [{"role": "user", "content": "hi"}],
    }
).encode()


@pytest.fixture(scope="module")
def h2c_gateway() -> Iterator[processes.ServedProcess]:
    config = processes.gateway_config({}, {"cleartext_http2": True})
    with processes.serve_gateway(config) as gateway:
        yield gateway


def _h2(port: int) -> tuple[socket.socket, h2.connection.H2Connection]:
    sock = socket.create_connection(("127.0.0.1", port), timeout=DEADLINE_S)
    conn = h2.connection.H2Connection(
        h2.config.H2Configuration(client_side=True, header_encoding="utf-8")
    )
    conn.initiate_connection()
    sock.sendall(conn.data_to_send())
    return sock, conn


def _read(sock: socket.socket, conn: h2.connection.H2Connection, until: object) -> list[object]:
    """Every event the connection carries until ``until(events)`` holds, it closes, or the deadline.

    Every byte up to the close is parsed. A server that defends itself sends GOAWAY
    and then closes, often while our own answer (a SETTINGS ACK) is still on its
    way: that send fails, but the GOAWAY already sits in our receive buffer. So a
    failed send only stops the sending; reading goes on until EOF or a reset.
    """
    events: list[object] = []
    sending = True
    deadline = time.monotonic() + DEADLINE_S
    while not until(events) and time.monotonic() < deadline:  # type: ignore[operator]
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            data = sock.recv(65536)
        except TimeoutError:
            break
        except OSError:  # reset: what arrived before it was read already
            break
        if not data:
            break
        events += conn.receive_data(data)
        if sending:
            try:
                sock.sendall(conn.data_to_send())
            except OSError:
                sending = False
    return events


def _advertised(port: int) -> dict[int, int]:
    sock, conn = _h2(port)
    try:
        events = _read(
            sock, conn, lambda evs: any(isinstance(e, h2.events.RemoteSettingsChanged) for e in evs)
        )
    finally:
        sock.close()
    settings = next(e for e in events if isinstance(e, h2.events.RemoteSettingsChanged))
    return {k: v.new_value for k, v in settings.changed_settings.items()}


def test_the_server_advertises_its_head_limits(h2c_gateway: processes.ServedProcess) -> None:
    changed = _advertised(h2c_gateway.port)
    assert changed[h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS] == 100
    assert changed[h2.settings.SettingCodes.MAX_HEADER_LIST_SIZE] == 16 * 1024


def test_the_limits_hold_with_several_workers_and_are_configurable() -> None:
    # --workers 2 is granian's supervisor and its forked workers, not the embedded server.
    server = {"cleartext_http2": True, "max_header_bytes": 9000, "http2_max_concurrent_streams": 7}
    config = processes.gateway_config({}, server)
    with processes.serve_gateway(config, workers=2) as gateway:
        changed = _advertised(gateway.port)
    assert changed[h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS] == 7
    assert changed[h2.settings.SettingCodes.MAX_HEADER_LIST_SIZE] == 9000


def test_an_hpack_amplification_is_refused_and_pins_no_memory(
    h2c_gateway: processes.ServedProcess,
) -> None:
    worker = h2c_gateway.worker()
    before = processes.rss_kib(worker)
    sock, conn = _h2(h2c_gateway.port)
    # 500 references to one 4 KB table entry: ~4 KB on the wire, 2 MB decoded.
    padding = [("x-pad", "v" * 4000)] * 500
    on_wire = 0
    streams = []
    try:
        for _ in range(32):
            stream_id = conn.get_next_available_stream_id()
            head = [
                (":method", "POST"),
                (":path", "/v1/stream"),
                (":scheme", "http"),
                (":authority", "127.0.0.1"),
                ("content-type", "application/llm-request+json"),
                ("content-length", str(len(BODY))),  # the body never comes: pinned till timeout
                *padding,
            ]
            conn.send_headers(stream_id, head, end_stream=False)
            data = conn.data_to_send()
            on_wire += len(data)
            try:
                sock.sendall(data)
            except OSError:
                break  # the server closed the connection: that is a refusal
            streams.append(stream_id)

        def refused(events: list[object]) -> bool:
            if any(isinstance(e, h2.events.ConnectionTerminated) for e in events):
                return True
            ended = {
                e.stream_id  # type: ignore[attr-defined]
                for e in events
                if isinstance(e, h2.events.StreamReset | h2.events.StreamEnded)
            }
            return set(streams) <= ended

        events = _read(sock, conn, refused)
        grown_kib = processes.rss_kib(worker) - before
    finally:
        sock.close()
    goaway = [e for e in events if isinstance(e, h2.events.ConnectionTerminated)]
    statuses = [
        dict(e.headers).get(":status")  # type: ignore[attr-defined]
        for e in events
        if isinstance(e, h2.events.ResponseReceived)
    ]
    assert goaway or (statuses and set(statuses) == {"431"}), (events[:10], on_wire)
    # Unbounded, 32 streams pin 64 MB of decoded headers: here, next to nothing.
    assert grown_kib < 16 * 1024, f"+{grown_kib} KiB for {on_wire} bytes on the wire"


def _goaway(events: list[object]) -> list[h2.events.ConnectionTerminated]:
    return [e for e in events if isinstance(e, h2.events.ConnectionTerminated)]


def test_a_rapid_reset_flood_still_gets_goaway(h2c_gateway: processes.ServedProcess) -> None:
    # CVE-2023-44487: streams opened and reset at once, faster than they are served.
    sock, conn = _h2(h2c_gateway.port)
    head = [(":method", "GET"), (":path", "/healthz"), (":scheme", "http"), (":authority", "x")]
    flood = b""
    for _ in range(2000):
        stream_id = conn.get_next_available_stream_id()
        conn.send_headers(stream_id, head, end_stream=True)
        conn.reset_stream(stream_id)
        flood += conn.data_to_send()
    try:
        with contextlib.suppress(OSError):  # closed mid-flood: that is the defence
            sock.sendall(flood)
        events = _read(sock, conn, lambda evs: bool(_goaway(evs)))
    finally:
        sock.close()
    goaway = _goaway(events)
    assert goaway, events[-5:]
    # RFC 9113 §5.4.1: a connection error; hyper calls a reset flood ENHANCE_YOUR_CALM.
    assert goaway[0].error_code != h2.errors.ErrorCodes.NO_ERROR, goaway[0]


def test_a_continuation_flood_still_gets_goaway(h2c_gateway: processes.ServedProcess) -> None:
    # CVE-2024-27316 and kin: a HEADERS frame without END_HEADERS, then CONTINUATION
    # frames without end, each full of (empty, valid) header fields.
    sock, conn = _h2(h2c_gateway.port)
    head = hyperframe.frame.HeadersFrame(1)
    head.data = conn.encoder.encode(
        [(":method", "GET"), (":path", "/healthz"), (":scheme", "http"), (":authority", "x")]
    )
    head.flags.add("END_STREAM")
    sent = 0
    try:
        with contextlib.suppress(OSError):  # closed mid-flood: that is the defence
            sock.sendall(head.serialize())
            for _ in range(4096):  # at most 64 MB, never reached
                more = hyperframe.frame.ContinuationFrame(1)
                more.data = b"\x00" * 16_000
                sock.sendall(more.serialize())
                sent += 16_009
        events = _read(sock, conn, lambda evs: bool(_goaway(evs)))
    finally:
        sock.close()
    assert _goaway(events), events[-5:]
    # Refused mid-flood: the connection closed long before the 64 MB were sent
    # (what got through is the kernel's socket buffers).
    assert sent < 4096 * 16_009 // 2, sent


def _http1(port: int, raw: bytes) -> bytes:
    """Send ``raw``; the answer's head (and the stream, up to its end)."""
    with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE_S) as sock:
        sock.sendall(raw)
        out = b""
        while b"\r\n\r\n" not in out or (
            out.startswith(b"HTTP/1.1 200") and b"stream.end" not in out
        ):
            data = sock.recv(65536)
            if not data:
                break
            out += data
        return out


def _head(*lines: bytes, sep: bytes = b"\r\n", length: int = len(BODY)) -> bytes:
    fields = [b"POST /v1/stream HTTP/1.1", b"Host: 127.0.0.1", *lines]
    fields.append(b"Content-Type: application/llm-request+json")
    fields.append(b"Content-Length: %d" % length)
    return sep.join(fields) + sep + sep


def test_an_http1_head_over_the_limit_gets_431(h2c_gateway: processes.ServedProcess) -> None:
    port = h2c_gateway.port
    under = _http1(port, _head(b"X-Pad: " + b"a" * 12_000) + BODY)
    over = _http1(port, _head(b"X-Pad: " + b"a" * 20_000) + BODY)
    assert under.startswith(b"HTTP/1.1 200")
    assert over.startswith(b"HTTP/1.1 431")


def test_bare_lf_line_ends_mean_what_crlf_means(h2c_gateway: processes.ServedProcess) -> None:
    # RFC 9112 §2.2: a recipient MAY take a bare LF for a line end. hyper does,
    # and so do nginx, HAProxy and Envoy: each line is one header either way,
    # never a value running on into the next one.
    port = h2c_gateway.port
    answer = _http1(port, _head(b"X-A: 1", sep=b"\n") + BODY)
    assert answer.startswith(b"HTTP/1.1 200") and b"stream.end" in answer
    # A Content-Length after a bare LF is a Content-Length: a shorter one cuts the body.
    cut = _http1(port, _head(b"X-A: 1", sep=b"\n", length=len(BODY) - 2) + BODY)
    assert cut.startswith(b"HTTP/1.1 400")


def test_a_zero_padded_chunk_size_is_the_same_size(h2c_gateway: processes.ServedProcess) -> None:
    port = h2c_gateway.port
    head = (
        b"POST /v1/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: application/llm-request+json\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    size = b"%x" % len(BODY)
    padded = _http1(port, head + b"0" * 100_000 + size + b"\r\n" + BODY + b"\r\n0\r\n\r\n")
    assert padded.startswith(b"HTTP/1.1 200") and b"stream.end" in padded
    # A chunk extension is bounded: 100 KB of it is refused.
    extended = size + b";" + b"e" * 100_000
    refused = _http1(port, head + extended + b"\r\n" + BODY + b"\r\n0\r\n\r\n")
    assert not refused.startswith(b"HTTP/1.1 200")


@pytest.mark.parametrize(
    ("server", "where"),
    [
        ({"max_header_bytes": 4096}, "server.max_header_bytes"),
        ({"max_header_bytes": 32 << 20}, "server.max_header_bytes"),
        ({"http2_max_concurrent_streams": 0}, "server.http2_max_concurrent_streams"),
    ],
)
def test_head_limits_are_checked(server: dict[str, int], where: str) -> None:
    with pytest.raises(ConfigError, match=where):
        parse({"server": server})
