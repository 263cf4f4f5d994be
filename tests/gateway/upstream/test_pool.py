"""The gateway's HTTP/1.1 upstream client (``tokenwire.gateway.upstream``).

Parsing is checked on the protocol object fed by hand (every split of a response
gives the same body, tests/vectors/upstream/http11-responses.json); pooling,
reuse, cancellation, timeouts and TLS on real sockets, against small asyncio
servers on 127.0.0.1 (tests/gateway/upstream_server.py).
"""

from __future__ import annotations

import asyncio
import json
import ssl
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.gateway.upstream_server import DEADLINE, OPENAI_OK, Server, answer, chunked, run

from tokenwire.gateway.upstream import HIGH_WATER, MAX_HEAD, Pool, UpstreamError
from tokenwire.gateway.upstream.protocol import Connection
from tokenwire.testing import async_wait_until
from tokenwire.testing.certs import self_signed

VECTORS = json.loads(
    (Path(__file__).parents[2] / "vectors" / "upstream" / "http11-responses.json").read_text()
)
GOOD = {v["name"]: v for v in VECTORS["responses"]}
BAD = {v["name"]: v for v in VECTORS["malformed"]}

# --- the protocol, fed by hand ---------------------------------------------------------


class FakeTransport:
    """What ``Connection`` uses of a transport: write, close, pause/resume reading."""

    def __init__(self) -> None:
        self.written = b""
        self.closed = False
        self.paused = False

    def write(self, data: bytes) -> None:
        self.written += data

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False


def _fed(pieces: list[bytes], *, eof: bool = False) -> tuple[Connection, FakeTransport]:
    loop = asyncio.new_event_loop()
    connection = Connection(loop)
    transport = FakeTransport()
    connection.connection_made(transport)  # type: ignore[arg-type]
    connection.begin(b"POST / HTTP/1.1\r\n\r\n", 5.0)
    for piece in pieces:
        connection.data_received(piece)
    if eof:
        connection.eof_received()
    loop.close()
    return connection, transport


def _body(connection: Connection) -> bytes:
    """Everything the consumer gets, without waiting (the response is all in)."""
    out = []
    for piece in connection._pieces:
        assert type(piece) is bytes  # fed to translator.feed as is
        out.append(piece)
    return b"".join(out)


def _splits(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    edges = [0, *points, len(data)]
    return [data[a:b] for a, b in zip(edges, edges[1:], strict=False) if b > a]


@pytest.mark.parametrize("name", sorted(GOOD))
def test_each_response_is_read_whole_and_its_reuse_told(name: str) -> None:
    vector = GOOD[name]
    data = vector["response"].encode()
    connection, transport = _fed([data], eof=vector.get("until_close", False))
    assert connection.error is None
    assert connection.complete
    assert connection.status == 200
    assert _body(connection) == vector["body"].encode()
    assert connection.reusable is vector["reusable"]


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(sorted(GOOD)), cuts=st.lists(st.integers(0, 10_000), max_size=12))
def test_any_split_of_a_response_gives_the_same_body(name: str, cuts: list[int]) -> None:
    vector = GOOD[name]
    data = vector["response"].encode()
    connection, _ = _fed(_splits(data, cuts), eof=vector.get("until_close", False))
    assert connection.error is None and connection.complete
    assert _body(connection) == vector["body"].encode()
    assert connection.reusable is vector["reusable"]


def test_every_single_cut_point_of_a_chunked_response() -> None:
    # Each boundary in turn: inside the size line, between CR and LF, in the trailers...
    data = GOOD["chunked-extensions-trailers"]["response"].encode()
    for cut in range(len(data) + 1):
        connection, _ = _fed(_splits(data, [cut]))
        assert _body(connection) == GOOD["chunked-extensions-trailers"]["body"].encode(), cut
        assert connection.reusable


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_malformed_response_is_an_error_naming_what_is_wrong(name: str) -> None:
    vector = BAD[name]
    connection, transport = _fed([vector["response"].encode()], eof=vector.get("then_eof", False))
    assert isinstance(connection.error, UpstreamError)
    assert not connection.error.timeout
    assert vector["error"] in connection.error.reason
    assert not connection.reusable
    assert transport.closed or connection.lost


def test_a_head_over_the_limit_is_refused() -> None:
    head = b"HTTP/1.1 200 OK\r\n" + b"x-big: " + b"a" * 1000 + b"\r\n"
    pieces = [head] + [b"x-more: " + b"b" * 1000 + b"\r\n"] * (MAX_HEAD // 1000 + 2)
    connection, transport = _fed(pieces)
    assert connection.error is not None
    assert f"response head over {MAX_HEAD} bytes" in connection.error.reason
    assert transport.closed


def test_a_head_over_the_limit_in_one_read_is_refused() -> None:
    data = b"HTTP/1.1 200 OK\r\nx-big: " + b"a" * (MAX_HEAD + 10) + b"\r\n\r\n"
    connection, _ = _fed([data])
    assert connection.error is not None and "response head over" in connection.error.reason


def test_an_endless_chunk_size_line_is_refused() -> None:
    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext="
    connection, transport = _fed([head] + [b"e" * 1024] * 8)
    assert connection.error is not None
    assert "chunk-size line over" in connection.error.reason
    assert transport.closed


def test_reading_pauses_when_the_consumer_is_behind_and_resumes_when_it_catches_up() -> None:
    loop = asyncio.new_event_loop()
    try:
        connection = Connection(loop)
        transport = FakeTransport()
        connection.connection_made(transport)  # type: ignore[arg-type]
        connection.begin(b"GET / HTTP/1.1\r\n\r\n", 5.0)
        connection.data_received(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        piece = b"x" * 4096
        chunk = b"%x\r\n%s\r\n" % (len(piece), piece)
        sent = 0
        while not transport.paused:
            connection.data_received(chunk)
            sent += len(piece)
            assert sent <= HIGH_WATER + len(piece)  # it pauses once over the mark
        pieces = loop.run_until_complete(connection.read())
        assert sum(map(len, pieces)) == sent
        assert not transport.paused
    finally:
        loop.close()


def test_bytes_after_the_end_of_a_response_make_the_connection_unusable() -> None:
    data = GOOD["content-length"]["response"].encode()
    connection, transport = _fed([data, b"HTTP/1.1 200 OK\r\n"])
    assert connection.complete and not connection.reusable and transport.closed


async def fetch(pool: Pool, url: str, **timeouts: float) -> tuple[int, bytes]:
    options = {"read_timeout": 5.0, "connect_timeout": 5.0, "pool_timeout": 5.0} | timeouts
    async with pool.stream(
        "POST", url + "/x", {"content-type": "text/plain"}, b"hi", **options
    ) as r:
        body = b""
        while pieces := await r.read():
            body += b"".join(pieces)
        return r.status, body


@pytest.mark.parametrize("name", ["chunked", "content-length", "close-delimited"])
def test_bodies_over_a_socket(name: str) -> None:
    vector = GOOD[name]

    async def main() -> None:
        respond = answer(vector["response"].encode(), keep=vector["reusable"])
        async with Server(respond) as server:
            pool = Pool()
            try:
                status, body = await fetch(pool, server.url)
                assert (status, body) == (200, vector["body"].encode())
                assert server.requests[0].startswith(b"POST /x HTTP/1.1\r\n")
                assert b"\r\ncontent-length: 2\r\n" in server.requests[0]
                assert pool.stats()["idle"] == (1 if vector["reusable"] else 0)
            finally:
                await pool.aclose()

    run(main())


def test_two_sequential_requests_share_one_connection() -> None:
    async def main() -> None:
        async with Server(answer(GOOD["chunked"]["response"].encode())) as server:
            pool = Pool()
            try:
                for _ in range(2):
                    assert (await fetch(pool, server.url))[1] == GOOD["chunked"]["body"].encode()
                assert server.connections == 1
                assert pool.stats() | {"waiting": 0} == {
                    "open": 1,
                    "idle": 1,
                    "active": 0,
                    "waiting": 0,
                    "opened": 1,
                }
            finally:
                await pool.aclose()
            await server.until(lambda: server.eofs == 1)  # aclose closed it

    run(main())


def test_connection_close_is_not_reused() -> None:
    raw = GOOD["content-length-connection-close"]["response"].encode()

    async def main() -> None:
        async with Server(answer(raw, keep=False)) as server:
            pool = Pool()
            for _ in range(2):
                assert (await fetch(pool, server.url))[1] == b"hello"
            assert server.connections == 2
            assert pool.stats()["open"] == 0

    run(main())


def test_an_idle_connection_the_server_closed_is_not_used_again() -> None:
    # Keep-alive by the headers, but the server hangs up right after each answer.
    raw = GOOD["chunked"]["response"].encode()

    async def main() -> None:
        async with Server(answer(raw, keep=False)) as server:
            pool = Pool()
            assert (await fetch(pool, server.url))[0] == 200
            await server.until(lambda: server.connections == 1 and pool.stats()["open"] == 0)
            assert (await fetch(pool, server.url))[0] == 200
            assert server.connections == 2
            await pool.aclose()

    run(main())


def test_a_pooled_connection_closed_as_the_request_goes_out_is_retried_once() -> None:
    ok = GOOD["chunked"]["response"].encode()

    async def respond(server: Server, n: int, reader: Any, writer: Any) -> bool:
        if n == 1:
            return False  # the idle close crossing our request: no byte of an answer
        writer.write(ok)
        return True

    async def main() -> None:
        async with Server(respond) as server:
            pool = Pool()
            assert (await fetch(pool, server.url))[0] == 200
            assert (await fetch(pool, server.url))[0] == 200
            assert len(server.requests) == 3 and server.connections == 2
            await pool.aclose()

    run(main())


def test_a_silent_pooled_connection_is_not_retried() -> None:
    # A timeout is not a stale connection: the request is not sent twice.
    ok = GOOD["chunked"]["response"].encode()

    async def respond(server: Server, n: int, reader: Any, writer: Any) -> bool:
        if n == 1:
            await reader.read()
            return False
        writer.write(ok)
        return True

    async def main() -> None:
        async with Server(respond) as server:
            pool = Pool()
            assert (await fetch(pool, server.url))[0] == 200
            with pytest.raises(UpstreamError) as caught:
                await fetch(pool, server.url, read_timeout=0.05)
            assert caught.value.timeout and caught.value.phase == "read"
            assert len(server.requests) == 2
            await pool.aclose()

    run(main())


def test_a_cancelled_read_closes_its_connection_at_once() -> None:
    async def respond(server: Server, n: int, reader: Any, writer: Any) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n")
        await writer.drain()
        await reader.read()  # until the client hangs up
        server.eofs += 1
        return False

    async def main() -> None:
        async with Server(respond) as server:
            pool = Pool()
            first = asyncio.Event()

            async def reader() -> None:
                async with pool.stream(
                    "POST", server.url, {}, b"", read_timeout=30, connect_timeout=5, pool_timeout=5
                ) as response:
                    assert await response.read() == [b"first"]
                    first.set()
                    await response.read()  # never answered

            task = asyncio.create_task(reader())
            async with asyncio.timeout(DEADLINE):
                await first.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await server.until(lambda: server.eofs >= 1)
            assert pool.stats() | {"opened": 0} == {
                "open": 0,
                "idle": 0,
                "active": 0,
                "waiting": 0,
                "opened": 0,
            }

    run(main())


def test_a_cancelled_connect_leaves_no_connection() -> None:
    async def main() -> None:
        async with Server(answer(b"")) as server:
            pool = Pool()
            task = asyncio.create_task(fetch(pool, server.url))
            await asyncio.sleep(0)  # one loop turn, not a pause: the connect has started
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert pool.stats()["open"] == 0
            # The SYN was out (loopback answers it in the kernel): the server got a
            # connection, and its end.
            await server.until(lambda: server.connections == 1 and server.eofs == 1)

    run(main())


def test_the_pool_bound_makes_a_request_wait_then_time_out() -> None:
    async def respond(server: Server, n: int, reader: Any, writer: Any) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhalf")
        await reader.read()
        return False

    async def main() -> None:
        async with Server(respond) as server:
            pool = Pool(max_connections=1)
            holder = asyncio.create_task(fetch(pool, server.url))
            await server.until(lambda: len(server.requests) == 1)
            with pytest.raises(UpstreamError) as caught:
                await fetch(pool, server.url, pool_timeout=0.05)
            assert caught.value.timeout and caught.value.phase == "pool"
            assert server.connections == 1
            holder.cancel()
            with pytest.raises(asyncio.CancelledError):
                await holder
            assert pool.stats()["open"] == 0

    run(main())


def test_a_request_waiting_for_the_pool_gets_the_connection_freed() -> None:
    gate = asyncio.Event()

    async def respond(server: Server, n: int, reader: Any, writer: Any) -> bool:
        if n == 0:
            await gate.wait()
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        return True

    async def main() -> None:
        async with Server(respond) as server:
            pool = Pool(max_connections=1)
            first = asyncio.create_task(fetch(pool, server.url))
            await server.until(lambda: len(server.requests) == 1)
            second = asyncio.create_task(fetch(pool, server.url))
            await async_wait_until(lambda: pool.stats()["waiting"] == 1)
            gate.set()
            assert await first == (200, b"ok")
            assert await second == (200, b"ok")
            assert server.connections == 1
            await pool.aclose()

    run(main())


def test_tls_upstream_with_alpn_http11(tmp_path: Path) -> None:
    pytest.importorskip("cryptography", reason="certificates are made with cryptography")

    cert, key, ca = self_signed(tmp_path)
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(cert, key)
    server_context.set_alpn_protocols(["http/1.1"])
    client_context = ssl.create_default_context(cafile=str(ca))
    client_context.set_alpn_protocols(["http/1.1"])
    alpn: list[str | None] = []

    async def respond(server: Server, n: int, reader: Any, writer: Any) -> bool:
        alpn.append(writer.get_extra_info("ssl_object").selected_alpn_protocol())
        writer.write(chunked(OPENAI_OK))
        return True

    async def main() -> None:
        server = Server(respond)
        tcp = await asyncio.start_server(server._serve, "127.0.0.1", 0, ssl=server_context)
        port = tcp.sockets[0].getsockname()[1]
        try:
            pool = Pool(ssl_context=client_context)
            for _ in range(2):
                status, body = await fetch(pool, f"https://localhost:{port}")
                assert (status, body) == (200, OPENAI_OK)
            assert server.connections == 1 and alpn == ["http/1.1", "http/1.1"]
            await pool.aclose()
            # The default context verifies the certificate: this one is not trusted.
            with pytest.raises(UpstreamError, match="TLS failed"):
                await fetch(Pool(), f"https://localhost:{port}")
        finally:
            tcp.close()
            await tcp.wait_closed()

    run(main())
