"""Keep-alive comments (``_outbox.KeepAlive``) and what an idle stream holds.

The timer is driven by a fake loop clock: which comments go out, and when,
follows from the clock alone, never from sleeping.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import msgspec
from tests.server.server_asgi import Exchange

import tokenwire
from tokenwire import events as ev
from tokenwire import request as rq
from tokenwire.server import StreamEndpoint, StreamRecord
from tokenwire.server.outbox import KEEPALIVE, KeepAlive, Outbox
from tokenwire.testing import async_wait_until


class _Handle:
    def __init__(self, when: float, callback: Callable[[], None]) -> None:
        self.when = when
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class _Clock:
    """The two loop methods ``KeepAlive`` uses, on a clock the test moves."""

    def __init__(self) -> None:
        self.now = 0.0
        self.timers: list[_Handle] = []

    def time(self) -> float:
        return self.now

    def call_at(self, when: float, callback: Callable[[], None]) -> _Handle:
        handle = _Handle(when, callback)
        self.timers.append(handle)
        return handle

    def fire(self) -> float:
        """Move the clock to the one pending timer and run it; return its time."""
        pending = [t for t in self.timers if not t.cancelled]
        assert len(pending) == 1, pending  # one timer per stream, never more
        handle = pending[0]
        self.timers.remove(handle)
        self.now = handle.when
        handle.callback()
        return handle.when


def _keepalive(interval: float = 15.0) -> tuple[_Clock, KeepAlive]:
    clock = _Clock()
    return clock, KeepAlive(interval, clock)  # type: ignore[arg-type]


def _comments(clock: _Clock, outboxes: list[Outbox], until: float) -> list[list[float]]:
    """Run the timer up to ``until``; when each outbox got a keep-alive (its sender
    takes everything at once)."""
    times: list[list[float]] = [[] for _ in outboxes]
    while any(not t.cancelled and t.when <= until for t in clock.timers):
        clock.fire()
        for i, outbox in enumerate(outboxes):
            data = outbox.take()
            if KEEPALIVE in data:
                times[i].append(clock.now)
    return times


def test_a_quiet_stream_gets_a_comment_every_interval() -> None:
    clock, keepalive = _keepalive(15.0)
    outbox = Outbox(clock.now)
    keepalive.add(outbox)
    assert _comments(clock, [outbox], 50.0) == [[15.0, 30.0, 45.0]]


def test_a_send_pushes_the_next_comment_back() -> None:
    clock, keepalive = _keepalive(15.0)
    outbox = Outbox(clock.now)
    keepalive.add(outbox)
    outbox.last_sent = 10.0  # an event went out at 10 s
    [times] = _comments(clock, [outbox], 45.0)
    # None at 15 s (quiet for 5 s only); the next within a tick of 15 s after the send.
    assert 25.0 <= times[0] <= 25.0 + keepalive.tick
    assert len(times) == 2


def test_streams_share_one_timer_and_each_gets_its_own_comments() -> None:
    clock, keepalive = _keepalive(15.0)
    first, second = Outbox(0.0), Outbox(7.5)
    keepalive.add(first)
    keepalive.add(second)  # _Clock.fire asserts a single pending timer
    assert _comments(clock, [first, second], 40.0) == [[15.0, 30.0], [22.5, 37.5]]


def test_no_comment_on_top_of_frames_waiting_to_go() -> None:
    clock, keepalive = _keepalive(15.0)
    outbox = Outbox(clock.now)
    keepalive.add(outbox)
    outbox.push(b"data: x\n\n")  # queued, the sender has not taken it yet
    while clock.now < 15.0:
        clock.fire()
    assert outbox.take() == b"data: x\n\n"


def test_the_timer_stops_with_the_last_stream_and_restarts_with_the_next() -> None:
    clock, keepalive = _keepalive(15.0)
    outbox = Outbox(clock.now)
    keepalive.add(outbox)
    keepalive.discard(outbox)
    assert all(t.cancelled for t in clock.timers)
    closed = Outbox(clock.now)
    keepalive.add(closed)
    closed.close()
    assert _comments(clock, [closed], 20.0) == [[]]  # a stream that is over gets none
    keepalive.discard(closed)
    assert all(t.cancelled for t in clock.timers)


class _Idle:
    """A provider that yields nothing until ``go`` is set (an upstream thinking)."""

    def __init__(self) -> None:
        self.go = asyncio.Event()
        self.cancelled = False

    async def generate(self, request: rq.Request) -> AsyncIterator[ev.Event]:
        try:
            await self.go.wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        yield ev.ContentDelta(
            v="1.0", seq=0, index=0, role="assistant", delta=ev.Delta(text="late")
        )


def _body() -> bytes:
    return msgspec.json.encode(
        {
            "version": "1.0",
            "stream": True,
            "model": "m",
            "messages": [{"role": "user", "content": "hi"}],
        }
    )


async def _until(condition: Callable[[], bool]) -> None:
    await async_wait_until(condition)


def test_an_idle_stream_gets_repeated_keepalives_then_its_events() -> None:
    provider = _Idle()
    x = Exchange(_body())

    async def go() -> None:
        serving = asyncio.ensure_future(
            StreamEndpoint(provider, keepalive_s=0.005)(x.scope, x.receive, x.send)
        )
        await _until(lambda: x.bodies.count(KEEPALIVE) >= 3)
        provider.go.set()
        await serving

    asyncio.run(go())
    assert not provider.cancelled
    events = x.events()
    assert [e.type for e in events][-1] == "stream.end"
    assert any(isinstance(e, ev.ContentDelta) and e.delta.text == "late" for e in events)
    assert tokenwire.validate(x.body).ok


def test_a_hang_up_on_an_idle_stream_cancels_its_provider_and_leaves_nothing() -> None:
    provider = _Idle()
    x = Exchange(_body())
    records: list[StreamRecord] = []
    left: list[set[asyncio.Task[Any]]] = []

    class Seen:
        def opened(self, record: StreamRecord) -> None:
            return None

        def closed(self, record: StreamRecord) -> None:
            records.append(record)

    async def go() -> None:
        endpoint = StreamEndpoint(provider, keepalive_s=3600, observers=[Seen()])
        serving = asyncio.ensure_future(endpoint(x.scope, x.receive, x.send))
        await _until(lambda: len(x.bodies) >= 1)  # stream.start is out
        x.hang_up()
        await serving
        left.append(asyncio.all_tasks() - {asyncio.current_task()})  # type: ignore[operator]

    asyncio.run(go())
    assert provider.cancelled
    assert records[0].disconnected
    assert left == [set()]
