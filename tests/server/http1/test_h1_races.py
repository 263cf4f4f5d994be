"""Requests racing the connection's own timing, played in a fixed order in memory.

Each race is written out step by step (``wire.Wire``: a fake transport, timers
the test fires), so the order that once lost a request is replayed every run.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from tests.server.hardening.recorder import read_body
from tests.server.http1.wire import Wire, split_responses


class Echo:
    """Answers each request with its path and whole body; ``hold`` keeps the app
    running after its response's last byte (a stream's cleanup, say) until set."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, bytes]] = []
        self.hold: asyncio.Event | None = None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        body = await read_body(receive)
        if body is None:
            return
        self.seen.append((scope["path"], body))
        answer = json.dumps({"path": scope["path"], "body": body.decode()}).encode()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": answer})
        if self.hold is not None:
            await self.hold.wait()


def run(coro: Any) -> Any:
    async def main() -> Any:
        return await coro

    return asyncio.run(main())


def test_next_request_sent_before_the_previous_app_returned_gets_its_body() -> None:
    """The keep-alive race behind a 408 after 30 s: the client, having read the whole
    response, sends the next head while the app is still returning, and the body in a
    segment of its own. The head is queued (reading stops behind a queued request); once
    it starts, reading must resume, or its body never arrives."""
    app = Echo()

    async def main() -> list[Any]:
        app.hold = asyncio.Event()
        wire = Wire(app)
        wire.transport.feed(b"POST /a HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc")
        await wire.until(lambda: wire.responses() == 1)
        wire.transport.feed(b"POST /b HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\n")
        wire.transport.feed(b"xyz")
        app.hold.set()
        await wire.until(lambda: wire.responses() == 2)
        await wire.idle()
        assert not wire.transport.closed
        return split_responses(bytes(wire.transport.written))

    responses = run(main())
    assert [(s, json.loads(b)) for s, _, b in responses] == [
        (200, {"path": "/a", "body": "abc"}),
        (200, {"path": "/b", "body": "xyz"}),
    ]


def test_request_arriving_as_the_idle_timer_fires_is_served() -> None:
    """The idle keep-alive timer was due in the same loop turn as the next request's
    first bytes: the bytes came first, so the request is served, not cut."""
    app = Echo()

    async def main() -> tuple[list[Any], bool]:
        wire = Wire(app)
        wire.transport.feed(b"GET /a HTTP/1.1\r\nHost: a\r\n\r\n")
        await wire.until(lambda: wire.responses() == 1)
        await wire.idle()
        [idle] = wire.loop.armed()  # the keep-alive timer, armed when /a ended
        wire.transport.feed(b"GET /b HTTP/1.1\r\n")  # the next head, begun
        idle.callback(*idle.args)  # ...and the timer's callback, already due, runs anyway
        wire.transport.feed(b"Host: a\r\n\r\n")
        await wire.until(lambda: wire.responses() == 2)
        return split_responses(bytes(wire.transport.written)), wire.transport.closed

    responses, closed = run(main())
    assert [json.loads(b)["path"] for _, _, b in responses] == ["/a", "/b"]
    assert not closed


def test_idle_timer_closes_a_quiet_connection() -> None:
    app = Echo()

    async def main() -> bool:
        wire = Wire(app)
        wire.transport.feed(b"GET /a HTTP/1.1\r\nHost: a\r\n\r\n")
        await wire.until(lambda: wire.responses() == 1)
        await wire.idle()
        [idle] = wire.loop.armed()
        assert idle.delay == wire.server.settings.idle_timeout_s
        idle.fire()
        await wire.until(lambda: wire.conn.lost)
        return wire.transport.closed

    assert run(main())


def test_header_timer_closes_a_head_that_never_ends() -> None:
    """Slowloris: a head still incomplete when its deadline fires is closed."""
    app = Echo()

    async def main() -> tuple[bool, list[Any]]:
        wire = Wire(app)
        wire.transport.feed(b"GET /a HTTP/1.1\r\nHost: a\r\nX-Slow: ")
        [header] = wire.loop.armed()
        assert header.delay == wire.server.settings.header_timeout_s
        header.fire()
        await wire.until(lambda: wire.conn.lost)
        return wire.transport.closed, app.seen

    closed, seen = run(main())
    assert closed and seen == []
