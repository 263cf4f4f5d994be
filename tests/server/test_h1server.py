"""tokenwire's own HTTP/1.1 server (``tokenwire.server.http1``), in this process, on 127.0.0.1.

What a client relies on: requests reach the app whole (Content-Length, chunked,
``Expect: 100-continue``, keep-alive, pipelining); every request whose framing
could be read two ways is refused before the app sees it (request smuggling:
``tests/vectors/h1server/refusals.json``, one test each), and so are oversized
heads and chunk-size lines; the response head leaves with the first body bytes
in one write; a client that stops reading makes ``send`` wait, so the request
guard's write deadline ends the stream and the connection is cut.

Every wait is on a condition, bounded by ``asyncio.timeout``; nothing sleeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from tokenwire.server.guard import Guard, Limits
from tokenwire.server.http1 import MAX_CHUNK_LINE, MAX_HEAD, MAX_HEADERS, H1Server, Settings

VECTORS = json.loads(
    (Path(__file__).parents[1] / "vectors" / "h1server" / "refusals.json").read_text()
)["vectors"]
WAIT_S = 30.0  # a bound on every wait, never a measured threshold

App = Callable[[dict[str, Any], Any, Any], Awaitable[None]]


class Recorder:
    """An app that answers with what it got: the method, path and whole body.

    ``calls`` holds the requests it got whole (a body that ended in a disconnect,
    as a refused chunked body does, is not one)."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        body = b""
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # the body never came whole: nothing was served
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        self.calls.append({"method": scope["method"], "path": scope["path"], "body": body})
        answer = json.dumps({"path": scope["path"], "body": body.decode()}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": answer})


@contextlib.asynccontextmanager
async def serving(
    app: App, settings: Settings | None = None
) -> AsyncIterator[tuple[H1Server, int]]:
    server = H1Server(app, settings)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    sock.setblocking(False)
    port = sock.getsockname()[1]
    await server.startup()
    await server.start(sock)
    try:
        yield server, port
    finally:
        server.close()
        server.abort_all()
        await server.shutdown()


async def read_response(reader: asyncio.StreamReader) -> tuple[int, dict[bytes, bytes], bytes]:
    """One response: status, headers (lower-cased names), body (Content-Length or chunked)."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split(b" ", 2)[1])
    headers: dict[bytes, bytes] = {}
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(b":")
            headers[name.strip().lower()] = value.strip()
    if b"content-length" in headers:
        body = await reader.readexactly(int(headers[b"content-length"]))
    elif headers.get(b"transfer-encoding") == b"chunked":
        parts = []
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            if size == 0:
                await reader.readuntil(b"\r\n")
                break
            parts.append((await reader.readexactly(size + 2))[:-2])
        body = b"".join(parts)
    else:
        body = await reader.read()
    return status, headers, body


async def exchange(port: int, data: bytes, responses: int = 1) -> list[tuple[int, dict, bytes]]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(data)
        async with asyncio.timeout(WAIT_S):
            return [await read_response(reader) for _ in range(responses)]
    finally:
        writer.close()


async def refused(port: int, pieces: list[bytes]) -> tuple[int, dict, bytes, bytes]:
    """Send ``pieces`` (each its own write), then read the answer and what follows it."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        async with asyncio.timeout(WAIT_S):
            for piece in pieces:
                writer.write(piece)
                with contextlib.suppress(ConnectionError):
                    await writer.drain()
            status, headers, body = await read_response(reader)
            rest = await reader.read()  # the server closes: EOF, nothing after the answer
        return status, headers, body, rest
    finally:
        writer.close()


def run(coro: Awaitable[Any]) -> Any:
    async def main() -> Any:
        return await coro

    return asyncio.run(main())


# --- refusals ---------------------------------------------------------------------------


@pytest.mark.parametrize("vector", VECTORS, ids=[v["name"] for v in VECTORS])
def test_refused_before_the_app(vector: dict[str, Any]) -> None:
    app = Recorder()

    async def main() -> tuple[int, dict, bytes, bytes]:
        async with serving(app) as (_, port):
            return await refused(port, [vector["request"].encode("latin-1")])

    status, headers, body, rest = run(main())
    assert status == vector["status"], vector["why"]
    assert headers[b"connection"] == b"close"
    assert vector["says"].lower() in json.loads(body)["error"]["message"].lower()
    assert rest == b""  # nothing but the refusal, then the close
    assert app.calls == []  # the app never saw it


def test_oversized_head_refused_at_once() -> None:
    app = Recorder()
    request = b"GET / HTTP/1.1\r\nHost: a\r\nX-Big: " + b"a" * MAX_HEAD + b"\r\n\r\n"

    async def main() -> tuple[int, dict, bytes, bytes]:
        async with serving(app) as (_, port):
            return await refused(port, [request])

    status, _, body, _ = run(main())
    assert status == 431
    assert f"over {MAX_HEAD} bytes" in json.loads(body)["error"]["message"]
    assert app.calls == []


def test_oversized_head_refused_while_it_arrives() -> None:
    """A field that never ends is refused once the head is over the limit, not buffered."""
    app = Recorder()
    pieces = [b"GET / HTTP/1.1\r\nHost: a\r\nX-Big: "] + [b"a" * 8192] * (MAX_HEAD // 8192 + 2)

    async def main() -> tuple[int, dict, bytes, bytes]:
        async with serving(app) as (_, port):
            return await refused(port, pieces)

    status, _, body, _ = run(main())
    assert status == 431
    assert app.calls == []


def test_too_many_header_fields_refused() -> None:
    app = Recorder()
    fields = b"".join(b"X-%d: 1\r\n" % i for i in range(MAX_HEADERS + 1))
    request = b"GET / HTTP/1.1\r\nHost: a\r\n" + fields + b"\r\n"

    async def main() -> tuple[int, dict, bytes, bytes]:
        async with serving(app) as (_, port):
            return await refused(port, [request])

    status, _, body, _ = run(main())
    assert status == 431
    assert f"more than {MAX_HEADERS}" in json.loads(body)["error"]["message"]
    assert app.calls == []


@pytest.mark.parametrize("split", [False, True], ids=["at-once", "in-pieces"])
def test_oversized_chunk_size_line_refused(split: bool) -> None:
    """Chunk extensions past the limit (the chunk-ext smuggling vector) end the request."""
    app = Recorder()
    head = b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
    line = b"5;ext=" + b"x" * (MAX_CHUNK_LINE + 10)
    pieces = [head, line[:3000], line[3000:]] if split else [head + line]

    async def main() -> tuple[int, dict, bytes, bytes]:
        async with serving(app) as (_, port):
            return await refused(port, pieces)

    status, _, body, _ = run(main())
    assert status == 400
    assert "chunk-size line" in json.loads(body)["error"]["message"]
    assert app.calls == []


def test_chunk_extensions_within_the_limit_are_read() -> None:
    app = Recorder()
    request = (
        b"POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5;name=value\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
    )

    async def main() -> list[tuple[int, dict, bytes]]:
        async with serving(app) as (_, port):
            return await exchange(port, request)

    [(status, _, body)] = run(main())
    assert status == 200
    assert json.loads(body) == {"path": "/x", "body": "hello world"}


# --- serving ----------------------------------------------------------------------------


def test_keep_alive_and_pipelining() -> None:
    app = Recorder()
    one = b"POST /a HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc"
    two = b"POST /b HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nde"
    three = b"GET /c HTTP/1.1\r\nHost: a\r\n\r\n"

    async def main() -> tuple[list[Any], list[Any]]:
        async with serving(app) as (_, port):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            try:
                async with asyncio.timeout(WAIT_S):
                    writer.write(one)
                    first = [await read_response(reader)]
                    writer.write(two + three)  # pipelined: answered in order
                    rest = [await read_response(reader), await read_response(reader)]
            finally:
                writer.close()
            return first, rest

    first, rest = run(main())
    bodies = [json.loads(r[2]) for r in first + rest]
    assert bodies == [
        {"path": "/a", "body": "abc"},
        {"path": "/b", "body": "de"},
        {"path": "/c", "body": ""},
    ]
    assert all(r[1].get(b"connection") != b"close" for r in first + rest)


def test_expect_100_continue() -> None:
    app = Recorder()

    async def main() -> tuple[bytes, tuple[int, dict, bytes]]:
        async with serving(app) as (_, port):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            try:
                async with asyncio.timeout(WAIT_S):
                    writer.write(
                        b"POST /e HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n"
                        b"Expect: 100-continue\r\n\r\n"
                    )
                    interim = await reader.readuntil(b"\r\n\r\n")
                    writer.write(b"body")
                    return interim, await read_response(reader)
            finally:
                writer.close()

    interim, (status, _, body) = run(main())
    assert interim == b"HTTP/1.1 100 Continue\r\n\r\n"
    assert status == 200 and json.loads(body)["body"] == "body"


def test_app_error_before_the_response_is_a_500() -> None:
    async def broken(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            raise RuntimeError("boom")

    async def main() -> list[tuple[int, dict, bytes]]:
        async with serving(broken) as (_, port):
            return await exchange(port, b"GET / HTTP/1.1\r\nHost: a\r\n\r\n")

    [(status, headers, body)] = run(main())
    assert status == 500
    assert json.loads(body)["error"]["code"] == "internal_error"
    assert "boom" not in body.decode()  # nothing internal leaks


def test_response_cut_mid_stream_is_not_a_clean_end() -> None:
    """An app that fails after its first chunk: the client sees no terminating chunk."""

    async def half(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"part", "more_body": True})
        raise RuntimeError("cut")

    async def main() -> bytes:
        async with serving(half) as (_, port):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            try:
                writer.write(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n")
                async with asyncio.timeout(WAIT_S):
                    return await reader.read()  # to EOF
            finally:
                writer.close()

    raw = run(main())
    assert raw.startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"4\r\npart\r\n" in raw
    assert not raw.endswith(b"0\r\n\r\n")


def test_head_and_first_body_leave_in_one_write() -> None:
    """Write coalescing: ``http.response.start`` is held for the first body message."""
    writes: list[bytes] = []

    async def stream(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"event: a\n\n", "more_body": True})
        await send({"type": "http.response.body", "body": b"event: b\n\n", "more_body": False})

    async def main() -> None:
        async with serving(stream) as (server, port):
            real = H1Server.start  # noqa: F841 - the server is already listening
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            try:
                # Wrap the one server-side transport's write once it exists.
                writer.write(b"GET / HTTP/1.1\r\nHost: a\r\n")
                await writer.drain()
                async with asyncio.timeout(WAIT_S):
                    while not server.connections:
                        await asyncio.sleep(0)
                [conn] = server.connections
                assert conn.transport is not None
                original = conn.transport.write

                def record(data: bytes) -> None:
                    writes.append(bytes(data))
                    original(data)

                conn.transport.write = record  # type: ignore[method-assign]
                writer.write(b"\r\n")
                async with asyncio.timeout(WAIT_S):
                    await read_response(reader)
            finally:
                writer.close()

    run(main())
    assert writes[0].startswith(b"HTTP/1.1 200 OK\r\n")
    assert writes[0].endswith(b"\r\n\r\na\r\nevent: a\n\n\r\n")  # head + first chunk
    assert b"".join(writes[1:]) == b"a\r\nevent: b\n\n\r\n0\r\n\r\n"


def test_lifespan_runs_around_serving() -> None:
    seen: list[str] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                seen.append(message["type"])
                if message["type"] == "lifespan.startup":
                    scope["state"]["ready"] = True
                    await send({"type": "lifespan.startup.complete"})
                else:
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        body = json.dumps({"ready": scope["state"]["ready"]}).encode()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": body})

    async def main() -> list[tuple[int, dict, bytes]]:
        async with serving(app) as (_, port):
            return await exchange(port, b"GET / HTTP/1.1\r\nHost: a\r\n\r\n")

    [(status, _, body)] = run(main())
    assert (status, json.loads(body)) == (200, {"ready": True})
    assert seen == ["lifespan.startup", "lifespan.shutdown"]


# --- backpressure -----------------------------------------------------------------------


def test_never_reading_client_is_ended_by_the_write_deadline() -> None:
    """``send`` waits while the client reads nothing; the guard's deadline ends the stream,
    the server cuts the connection, and what was produced for it stays bounded."""
    chunk = b"data: " + b"x" * 4090 + b"\n\n"
    sent = [0]
    failed = asyncio.Event
    outcome: dict[str, Any] = {}

    async def endless(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await send({"type": "http.response.start", "status": 200, "headers": []})
        try:
            while True:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
                sent[0] += len(chunk)
        except OSError as exc:
            outcome["error"] = str(exc)
            outcome["event"].set()

    async def main() -> int:
        outcome["event"] = failed()
        app = Guard(endless, Limits(write_timeout_s=0.5))
        settings = Settings(write_timeout_s=5.0, send_buffer_bytes=16 * 1024)
        async with serving(app, settings) as (server, port):
            client = socket.socket()
            client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            client.setblocking(False)
            loop = asyncio.get_running_loop()
            await loop.sock_connect(client, ("127.0.0.1", port))
            try:
                await loop.sock_sendall(client, b"GET / HTTP/1.1\r\nHost: a\r\n\r\n")
                async with asyncio.timeout(WAIT_S):
                    await outcome["event"].wait()  # the app's send failed
                    while server.connections:  # and the connection was cut
                        await asyncio.sleep(0.01)
            finally:
                client.close()
            return len(server.connections)

    assert run(main()) == 0
    assert "read nothing" in outcome["error"]
    # Bounded by the kernel's buffers and the transport's high-water mark, not by time.
    assert sent[0] < 4 << 20


class _Marker:
    """Held by a stream's provider for the stream's life: freed when the stream is."""


def test_a_cut_stream_is_freed_while_the_worker_idles() -> None:
    """A stream cut by the write deadline leaves reference cycles (its cancel's traceback
    holds its frames); the guard collects them once it has ended, so an idle worker
    gets the memory back without waiting for allocations to trigger the collector."""
    import gc
    import weakref

    from tokenwire import events as ev
    from tokenwire.request import MEDIA_TYPE
    from tokenwire.server import StreamEndpoint

    refs: list[weakref.ref[_Marker]] = []

    class Endless:
        async def generate(self, request: Any) -> Any:
            marker = _Marker()
            refs.append(weakref.ref(marker))
            text = "x" * 2000
            while marker is not None:
                yield ev.ContentDelta(
                    v=ev.VERSION, seq=0, index=0, role="assistant", delta=ev.Delta(text=text)
                )

    body = json.dumps(
        {
            "version": "1.0",
            "stream": True,
            "model": "m",
            "messages": [{"role": "user", "content": "x"}],
        }
    ).encode()
    request = (
        b"POST /v1/stream HTTP/1.1\r\nHost: a\r\nContent-Type: "
        + MEDIA_TYPE.encode()
        + b"\r\nContent-Length: %d\r\n\r\n" % len(body)
        + body
    )

    async def main() -> bool:
        app = Guard(StreamEndpoint(Endless()), Limits(write_timeout_s=0.3))
        async with serving(app, Settings(send_buffer_bytes=16 * 1024)) as (server, port):
            client = socket.socket()
            client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            client.setblocking(False)
            loop = asyncio.get_running_loop()
            await loop.sock_connect(client, ("127.0.0.1", port))
            try:
                await loop.sock_sendall(client, request)
                async with asyncio.timeout(WAIT_S):
                    while not refs or not server.connections:
                        await asyncio.sleep(0.01)
                    conn = weakref.ref(next(iter(server.connections)))
                    while refs[0]() is not None or conn() is not None:  # the collector is off
                        await asyncio.sleep(0.05)
            finally:
                client.close()
            return not server.connections

    enabled = gc.isenabled()
    gc.disable()  # only an explicit collection frees cycles: as in an idle worker
    try:
        assert run(main())
    finally:
        if enabled:
            gc.enable()


# --- Nagle: small frames leave at once, on both sides of the gateway -------------------------


def test_no_nagle_on_the_client_side_or_the_upstream_side() -> None:
    """TCP_NODELAY on the connection the h1 server accepted and on the upstream pool's:
    with Nagle on, a small SSE frame written while the previous one is unacknowledged
    waits for the peer's delayed ACK (up to 40 ms on Linux)."""
    from tokenwire.gateway.upstream.pool import Pool

    async def main() -> tuple[int, int]:
        async with serving(Recorder()) as (server, port):
            pool = Pool()
            try:
                async with pool.stream(
                    "POST",
                    f"http://127.0.0.1:{port}/up",
                    {"content-type": "application/json"},
                    b"{}",
                    read_timeout=WAIT_S,
                    connect_timeout=WAIT_S,
                    pool_timeout=WAIT_S,
                ) as response:
                    transport = response._connection.transport
                    assert transport is not None
                    upstream = transport.get_extra_info("socket")
                    upstream_nodelay = upstream.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
                    [conn] = server.connections
                    assert conn.transport is not None
                    accepted = conn.transport.get_extra_info("socket")
                    served_nodelay = accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
                    while await response.read():
                        pass
            finally:
                await pool.aclose()
            return served_nodelay, upstream_nodelay

    served, upstream = run(main())
    assert served and upstream
