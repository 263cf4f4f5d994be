"""What any serving path must do before it can be the default, on the h1 engine in memory.

Each request is replayed split at every byte boundary, closed by the client at
every byte, pipelined, chunked, with ``Expect: 100-continue`` and as ``HEAD``:
the app gets exactly the requests the client sent, whole, or none of a request
that did not arrive whole; nothing is left running after the client is gone.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from tests.server.hardening.recorder import Recorder
from tests.server.http1.wire import Wire, split_responses

POST = b"POST /p?q=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello"
CHUNKED = (
    b"POST /c HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"3;ext=1\r\nhel\r\n2\r\nlo\r\n0\r\nTrailer: x\r\n\r\n"
)
GET = b"GET /g HTTP/1.1\r\nHost: a\r\n\r\n"
EXPECTED = {
    POST: ("POST", b"/p?q=1", b"hello"),
    CHUNKED: ("POST", b"/c", b"hello"),
    GET: ("GET", b"/g", b""),
}


def run(coro: Any) -> Any:
    async def main() -> Any:
        return await coro

    return asyncio.run(main())


def served(pieces: list[bytes], responses: int) -> tuple[Recorder, list[Any], bool]:
    app = Recorder()

    async def main() -> tuple[list[Any], bool]:
        wire = Wire(app)
        for piece in pieces:
            wire.transport.feed(piece)
            await asyncio.sleep(0)  # a turn of the loop between segments, as on a socket
        await wire.until(lambda: wire.responses() >= responses)
        await wire.idle()
        return split_responses(bytes(wire.transport.written)), wire.transport.closed

    out, closed = run(main())
    return app, out, closed


@pytest.mark.parametrize("request_bytes", [POST, CHUNKED, GET], ids=["length", "chunked", "get"])
def test_split_at_every_byte_boundary(request_bytes: bytes) -> None:
    """Two requests on one connection, the pair split in two at every byte."""
    data = request_bytes + request_bytes
    method, target, body = EXPECTED[request_bytes]
    for cut in range(1, len(data)):
        app, responses, closed = served([data[:cut], data[cut:]], 2)
        assert [(m, t, b) for m, t, _, b in app.served] == [(method, target, body)] * 2, cut
        assert [s for s, _, _ in responses] == [200, 200] and not closed, cut


def test_pipelined_requests_answered_in_order() -> None:
    data = POST + GET + CHUNKED + GET
    app, responses, closed = served([data], 4)
    assert [t for _, t, _, _ in app.served] == [b"/p?q=1", b"/g", b"/c", b"/g"]
    assert [json.loads(b)["method"] for _, _, b in responses] == ["POST", "GET", "POST", "GET"]
    assert not closed


def test_expect_100_continue_once_before_the_body() -> None:
    app = Recorder()

    async def main() -> bytes:
        wire = Wire(app)
        wire.transport.feed(
            b"POST /e HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n"
        )
        await wire.until(lambda: b"100 Continue" in wire.transport.written)
        wire.transport.feed(b"body")
        await wire.until(lambda: wire.responses() == 1)
        return bytes(wire.transport.written)

    written = run(main())
    assert written.startswith(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n")
    assert written.count(b"100 Continue") == 1
    assert [b for _, _, _, b in app.served] == [b"body"]


def test_expect_100_continue_with_the_body_already_sent_gets_no_interim() -> None:
    """A client that sent its body without waiting (curl does, after a second) gets no
    100 at all, not one written into the middle of its response later."""

    async def streaming(scope: dict[str, Any], receive: Any, send: Any) -> None:
        while (await receive()).get("more_body", False):
            pass
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"event", "more_body": True})
        waiting = asyncio.ensure_future(receive())  # a hang-up watcher, as a stream has
        await send({"type": "http.response.body", "body": b""})
        assert (await waiting)["type"] == "http.disconnect"

    async def main() -> bytes:
        wire = Wire(streaming)
        wire.transport.feed(
            b"POST /e HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\nbody"
        )
        await wire.until(lambda: wire.responses() == 1)
        await wire.idle()
        return bytes(wire.transport.written)

    written = run(main())
    assert b"100 Continue" not in written
    assert written.endswith(b"5\r\nevent\r\n0\r\n\r\n")


def test_head_gets_the_head_only_and_the_connection_goes_on() -> None:
    app = Recorder()

    async def main() -> bytes:
        wire = Wire(app)
        wire.transport.feed(b"HEAD /h HTTP/1.1\r\nHost: a\r\n\r\n")
        await wire.until(lambda: wire.server.calls == 0 and wire.transport.written)
        wire.transport.feed(GET)
        await wire.until(lambda: wire.transport.written.count(b"HTTP/1.1 200") == 2)
        await wire.idle()
        return bytes(wire.transport.written)

    written = run(main())
    head, _, rest = written.partition(b"\r\n\r\n")
    assert b"content-length: " in head  # the length a GET would have had
    assert rest.startswith(b"HTTP/1.1 200 OK\r\n")  # no body bytes between the two
    assert [m for m, _, _, _ in app.served] == ["HEAD", "GET"]


@pytest.mark.parametrize("request_bytes", [POST, CHUNKED, GET], ids=["length", "chunked", "get"])
def test_client_closing_at_every_byte(request_bytes: bytes) -> None:
    """Gone after any prefix: no request reaches the app unless it came whole, every
    app started returns, and the connection is forgotten."""
    for cut in range(len(request_bytes) + 1):
        app = Recorder()

        async def main(cut: int = cut, app: Recorder = app) -> Wire:
            wire = Wire(app)
            if cut:
                wire.transport.feed(request_bytes[:cut])
            await asyncio.sleep(0)
            wire.transport.hang_up()
            await wire.until(lambda: wire.conn.lost)
            await wire.idle()
            return wire

        wire = run(main())
        assert not wire.server.connections, cut
        whole = cut == len(request_bytes)
        assert len(app.served) <= (1 if whole else 0), cut


def test_client_closing_mid_response_ends_the_app() -> None:
    """The app's next ``send`` fails, and its ``receive`` says the client left."""
    seen: dict[str, Any] = {}
    release = asyncio.Event

    async def stream(scope: dict[str, Any], receive: Any, send: Any) -> None:
        assert (await receive())["type"] == "http.request"  # the (empty) body
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"one", "more_body": True})
        await seen["gone"].wait()
        try:
            await send({"type": "http.response.body", "body": b"two", "more_body": True})
        except OSError as exc:
            seen["send"] = str(exc)
        seen["receive"] = (await receive())["type"]

    async def main() -> Wire:
        seen["gone"] = release()
        wire = Wire(stream)
        wire.transport.feed(GET)
        await wire.until(lambda: b"one" in wire.transport.written)
        wire.transport.hang_up()
        await wire.until(lambda: wire.conn.lost)
        seen["gone"].set()
        await wire.idle()
        return wire

    wire = run(main())
    assert seen["send"] == "the client went away"
    assert seen["receive"] == "http.disconnect"
    assert not wire.server.connections
