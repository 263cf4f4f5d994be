"""The gateway's HTTP/1.1 upstream client (``tokenwire.gateway.upstream``) and its use by
``HTTPProvider``.

Parsing is checked on the protocol object fed by hand (every split of a response
gives the same body, tests/vectors/upstream/http11-responses.json); pooling,
reuse, cancellation and timeouts on real sockets, against small asyncio servers
on 127.0.0.1 written here; the error events through ``HTTPProvider``, next to
what the httpx path gives for the same upstream answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenwire import events as ev
from tokenwire import translate
from tokenwire.gateway import config as gwconfig
from tokenwire.gateway import providers
from tokenwire.gateway.context import RequestContext
from tokenwire.gateway.providers import HTTPProvider
from tokenwire.gateway.upstream import HIGH_WATER, MAX_HEAD, Pool, UpstreamError
from tokenwire.gateway.upstream.protocol import Connection
from tokenwire.request import build
from tokenwire.server import Exchange
from tokenwire.testing import async_wait_until

VECTORS = json.loads(
    (Path(__file__).parent.parent / "vectors" / "upstream" / "http11-responses.json").read_text()
)
GOOD = {v["name"]: v for v in VECTORS["responses"]}
BAD = {v["name"]: v for v in VECTORS["malformed"]}
DEADLINE = 10.0  # bounded waits on conditions, never a measured time


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


# --- real sockets -------------------------------------------------------------------------

Respond = Callable[["Server", int, asyncio.StreamReader, asyncio.StreamWriter], Awaitable[bool]]


class Server:
    """An HTTP/1.1 server on 127.0.0.1:0 that answers request ``n`` with ``respond``.

    ``respond`` returns whether to keep the connection. Counts connections and
    the EOFs it saw from the client.
    """

    def __init__(self, respond: Respond) -> None:
        self.respond = respond
        self.connections = 0
        self.eofs = 0
        self.requests: list[bytes] = []
        self.url = ""
        self.writers: list[asyncio.StreamWriter] = []

    async def __aenter__(self) -> Server:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()
        await self.server.wait_closed()
        for writer in self.writers:  # connections still open: closed before the loop ends
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.writers.append(writer)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except asyncio.IncompleteReadError:
                    self.eofs += 1
                    break
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                self.requests.append(head + await reader.readexactly(length))
                keep = await self.respond(self, len(self.requests) - 1, reader, writer)
                await writer.drain()
                if not keep:
                    break
        except (ConnectionError, asyncio.IncompleteReadError):
            self.eofs += 1
        finally:
            writer.close()

    async def until(self, predicate: Callable[[], bool]) -> None:
        """Wait (bounded) until ``predicate()``, for what either side changes."""
        await async_wait_until(predicate, timeout=DEADLINE, max_interval=0.01)


def answer(raw: bytes, *, keep: bool = True) -> Respond:
    async def respond(server: Server, n: int, reader: Any, writer: Any) -> bool:
        writer.write(raw)
        return keep

    return respond


async def fetch(pool: Pool, url: str, **timeouts: float) -> tuple[int, bytes]:
    options = {"read_timeout": 5.0, "connect_timeout": 5.0, "pool_timeout": 5.0} | timeouts
    async with pool.stream(
        "POST", url + "/x", {"content-type": "text/plain"}, b"hi", **options
    ) as r:
        body = b""
        while pieces := await r.read():
            body += b"".join(pieces)
        return r.status, body


def run(coro: Awaitable[Any]) -> Any:
    async def main() -> Any:
        return await coro

    try:
        return asyncio.run(main())
    finally:
        gc.collect()  # an unclosed socket is reported by the test that left it


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


# --- through HTTPProvider ---------------------------------------------------------------------

OPENAI_OK = (
    b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m",'
    b'"choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"},"finish_reason":null}]}\n\n'
    b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m",'
    b'"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
    b"data: [DONE]\n\n"
)


def chunked(body: bytes, *, head: bytes = b"") -> bytes:
    return (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n"
        + head
        + b"\r\n"
        + b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    )


async def generate(provider: HTTPProvider) -> list[ev.Event]:
    request = build(model="m", messages="hi")
    return [event async for event in provider.generate(request)]


def provider_for(url: str, pool: Pool, **kw: Any) -> HTTPProvider:
    return HTTPProvider("openai", pool=pool, base_url=url + "/v1", api_key="sk-test", **kw)


def only_error(events: list[ev.Event]) -> ev.ErrorEvent:
    errors = [e for e in events if isinstance(e, ev.ErrorEvent)]
    assert len(errors) == 1, events
    assert isinstance(events[-1], ev.StreamEnd) or events[-1] is errors[0], events
    return errors[0]


def test_the_provider_streams_and_returns_the_connection_to_the_pool() -> None:
    async def main() -> None:
        async with Server(answer(chunked(OPENAI_OK))) as server:
            pool = Pool()
            provider = provider_for(server.url, pool)
            for _ in range(2):
                events = await generate(provider)
                assert "".join(e.text for e in events if isinstance(e, ev.ContentDelta)) == "Hi"
                assert isinstance(events[-1], ev.StreamEnd)
            assert server.connections == 1
            head = server.requests[0].lower()
            assert b"authorization: bearer sk-test" in head
            assert b"accept-encoding: identity" in head
            await pool.aclose()

    run(main())


async def generate_until_end(provider: HTTPProvider) -> list[ev.Event]:
    """What the server does (server.StreamEndpoint._produce): stop at stream.end, then aclose."""
    request = build(model="m", messages="hi")
    iterator = provider.generate(request)
    events: list[ev.Event] = []
    try:
        async for event in iterator:
            events.append(event)
            if isinstance(event, ev.StreamEnd):
                break
    finally:
        await iterator.aclose()
    return events


def test_a_provider_closed_at_stream_end_still_returns_its_connection() -> None:
    # Regression: closing the generator at stream.end threw GeneratorExit through the
    # pool's block, which dropped the connection though its body had been read to the
    # end: every request through the gateway dialled the upstream anew.
    async def main() -> None:
        async with Server(answer(chunked(OPENAI_OK))) as server:
            pool = Pool()
            provider = provider_for(server.url, pool)
            for _ in range(3):
                events = await generate_until_end(provider)
                assert isinstance(events[-1], ev.StreamEnd)
            assert server.connections == 1
            assert pool.stats()["opened"] == 1
            await pool.aclose()

    run(main())


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            b"HTTP/1.1 200 OK\r\n" + b"x-big: " + b"a" * (MAX_HEAD + 1) + b"\r\n\r\n",
            "upstream connection failed (RemoteProtocolError: response head over "
            f"{MAX_HEAD} bytes)",
        ),
        (
            BAD["bad-chunk-size"]["response"].encode(),
            "upstream connection failed (RemoteProtocolError: malformed response (",
        ),
        (
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
            + b"%x\r\n%s\r\n" % (len(OPENAI_OK[:120]), OPENAI_OK[:120])
            + b"40\r\npart",
            "upstream connection failed (RemoteProtocolError: the upstream closed the "
            "connection mid-response)",
        ),
    ],
    ids=["oversized-head", "bad-chunk-size", "eof-mid-body"],
)
def test_a_broken_response_ends_the_stream_with_internal_error(raw: bytes, message: str) -> None:
    async def main() -> None:
        async with Server(answer(raw, keep=False)) as server:
            pool = Pool()
            events = await generate(provider_for(server.url, pool))
            error = only_error(events)
            assert error.code == "internal_error"
            assert error.message.startswith(message), error.message
            assert isinstance(events[0], ev.StreamStart) and isinstance(events[-1], ev.StreamEnd)
            assert "127.0.0.1" not in error.message
            assert pool.stats()["open"] == 0

    run(main())


def test_a_compressed_body_is_refused_not_fed_to_the_translator() -> None:
    raw = chunked(b"\x1f\x8b\x08\x00garbage", head=b"content-encoding: gzip\r\n")

    async def main() -> None:
        async with Server(answer(raw)) as server:
            events = await generate(provider_for(server.url, Pool()))
            error = only_error(events)
            assert error.code == "internal_error"
            assert "'gzip' body, though identity was asked for" in error.message

    run(main())


def test_a_header_that_would_break_its_line_is_never_sent() -> None:
    async def main() -> None:
        async with Server(answer(chunked(OPENAI_OK))) as server:
            provider = HTTPProvider(
                "openai", pool=Pool(), base_url=server.url + "/v1", api_key="sk\r\nx-evil: 1"
            )
            error = only_error(await generate(provider))
            assert error.code == "internal_error"
            assert error.message.startswith("upstream request not sent (header 'authorization'")
            assert "evil" not in error.message  # the value (a key) is never quoted
            assert server.requests == []

    run(main())


def test_connection_refused_is_internal_error() -> None:
    async def main() -> None:
        async with Server(answer(b"")) as server:
            url = server.url
        # The server is closed: its port refuses.
        events = await generate(provider_for(url, Pool()))
        error = only_error(events)
        assert error.code == "internal_error"
        assert error.message == "upstream connection failed (ConnectError: connection refused)"

    run(main())


def test_a_silent_upstream_is_a_read_timeout_overloaded() -> None:
    async def respond(server: Server, n: int, reader: Any, writer: Any) -> bool:
        await reader.read()
        server.eofs += 1
        return False

    async def main() -> None:
        async with Server(respond) as server:
            pool = Pool()
            events = await generate(provider_for(server.url, pool, timeout_s=0.1))
            error = only_error(events)
            assert error.code == "overloaded"
            assert error.message == "the upstream did not answer in time (read timeout)"
            await server.until(lambda: server.eofs >= 1)  # and it was hung up on
            assert pool.stats()["open"] == 0

    run(main())


def test_a_stall_between_chunks_is_a_read_timeout() -> None:
    async def respond(server: Server, n: int, reader: Any, writer: Any) -> bool:
        first = OPENAI_OK.split(b"\n\n")[0] + b"\n\n"
        writer.write(
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n%x\r\n%s\r\n"
            % (len(first), first)
        )
        await reader.read()
        return False

    async def main() -> None:
        async with Server(respond) as server:
            events = await generate(provider_for(server.url, Pool(), timeout_s=0.1))
            assert "".join(e.text for e in events if isinstance(e, ev.ContentDelta)) == "Hi"
            error = only_error(events)
            assert (error.code, error.message) == (
                "overloaded",
                "the upstream did not answer in time (read timeout)",
            )

    run(main())


@pytest.mark.parametrize("status", [429, 500, 503, 400])
def test_an_error_status_is_the_same_event_as_over_httpx(status: int) -> None:
    body = b'{"error":{"message":"nope","type":"invalid_request_error","code":"bad"}}'
    raw = b"HTTP/1.1 %d Error\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (
        status,
        len(body),
        body,
    )
    # The vendor's own mapping decides (the table in providers.py's docstring).
    code, message = translate.get("openai").http_error(status, body)
    assert code == {429: "rate_limited", 503: "overloaded"}.get(status, code)

    async def main() -> None:
        async with Server(answer(raw)) as server:
            pool = Pool()
            ours = await generate(provider_for(server.url, pool))
            async with httpx.AsyncClient() as client:
                theirs = await generate(
                    HTTPProvider("openai", client=client, base_url=server.url + "/v1", api_key="k")
                )
            assert ours == theirs
            # ...and the status rides along, for routing (never parsed from the message).
            expected = ev.ErrorEvent(
                v=ev.VERSION, seq=0, code=code, message=message, upstream_status=status
            )
            assert ours == [expected]
            assert pool.stats()["idle"] == 1  # the error body was read whole: reusable
            await pool.aclose()

    run(main())


def test_the_trace_context_goes_upstream() -> None:
    async def main() -> None:
        async with Server(answer(chunked(OPENAI_OK))) as server:
            ctx = RequestContext()
            ctx.traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
            ctx.tracestate = "vendor=1"
            pool = Pool()
            try:
                request = build(model="m", messages="hi")
                provider = provider_for(server.url, pool)
                [event async for event in provider.serve(request, Exchange(context=ctx))]
            finally:
                await pool.aclose()
            head = server.requests[0]
            assert b"traceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" in head
            assert b"tracestate: vendor=1" in head

    run(main())


def test_tls_upstream_with_alpn_http11(tmp_path: Path) -> None:
    pytest.importorskip("cryptography", reason="certificates are made with cryptography")
    from tests.gateway.gateway_procs import self_signed

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


# --- which client a model gets ------------------------------------------------------------


def _models(**keys: Any) -> gwconfig.Config:
    entry = {"name": "m", "provider": "openai", "base_url": "http://127.0.0.1:9/v1", **keys}
    return gwconfig.parse({"models": [entry]})


def test_the_default_is_the_http11_pool_and_http2_keeps_httpx() -> None:
    clients = providers.UpstreamClients()
    default = providers.build_providers(_models(), clients)["m"]
    assert isinstance(default, HTTPProvider)
    assert default.pool is clients.pool and default.client is None
    # No http = "2" model yet: httpx's client is not made (nor imported, in a gateway).
    assert clients._httpx is None
    h2 = providers.build_providers(_models(http="2"), clients)["m"]
    assert isinstance(h2, HTTPProvider)
    assert h2.client is clients.http2 and h2.pool is None
    explicit = providers.build_providers(_models(http="1.1"), clients)["m"]
    assert isinstance(explicit, HTTPProvider) and explicit.pool is default.pool


def test_the_http2_client_gets_the_hooks_registered_before_it_is_made() -> None:
    clients = providers.UpstreamClients()
    seen: list[Any] = []
    clients.on_http2(seen.append)
    assert seen == []
    client = clients.http2
    assert seen == [client] and clients.http2 is client
    clients.on_http2(seen.append)  # registered after: called at once
    assert seen == [client, client]
    asyncio.run(clients.aclose())


def test_the_http_option_is_checked() -> None:
    with pytest.raises(gwconfig.ConfigError, match=r'models\[0\]\.http: must be "1.1" or "2"'):
        _models(http="3")
    with pytest.raises(gwconfig.ConfigError, match=r"models\[0\]\.http: only for provider"):
        gwconfig.parse({"models": [{"name": "d", "provider": "demo", "http": "2"}]})


def test_closing_the_upstream_clients_closes_the_pool_and_httpx() -> None:
    async def main() -> None:
        async with Server(answer(chunked(OPENAI_OK))) as server:
            clients = providers.UpstreamClients()
            client = clients.http2
            await generate(provider_for(server.url, clients.pool))
            assert clients.pool.stats()["idle"] == 1
            await clients.aclose()
            assert clients.pool.stats()["idle"] == 0 and client.is_closed
            await server.until(lambda: server.eofs == 1)

    run(main())
