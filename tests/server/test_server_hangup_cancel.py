"""A hang-up cancels the provider even when a library has raised its task's cancel count.

The gateway's ``HTTPProvider`` connects through httpx, whose anyio
happy-eyeballs connect (``anyio.connect_tcp``) cancels its own task group once
an attempt wins: anyio cancels the host task (the endpoint's producer) and
uncancels it when the group's scope exits. A client that hangs up in that
window (after the request, before the first upstream read: the ``request``,
``head`` and ``start`` points of tests/faults/test_disconnects.py) finds the
producer with ``Task.cancelling() == 2`` although the endpoint never cancelled
it. The endpoint once read that count as "already cancelled" and skipped its
cancel: the upstream stream then ran to its end for nobody.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import msgspec
import pytest
from tests.server.server_asgi import Exchange

from tokenwire import events as ev
from tokenwire import request as rq
from tokenwire import server
from tokenwire.server import StreamEndpoint, StreamRecord

#: A bound on the whole exchange, far above what it takes (it is over at once
#: when the hang-up cancels the provider); hit only when the cancel never comes.
DEADLINE_S = 30.0


class ConnectingUpstream:
    """A provider that is hung up on while its library's own cancel is in flight.

    It does what anyio's connect does to the task it runs in: cancels it,
    catches that cancel inside its scope, and uncancels it when the scope
    exits, which here is never before the client's cancel arrives (the
    connect "finishes" only when ``connected`` is set, and nothing sets it).
    """

    def __init__(self) -> None:
        self.connecting = asyncio.Event()
        self.connected = asyncio.Event()
        self.cancelling_seen: int | None = None
        self.cancelled = False
        self.closed = False

    async def generate(self, request: rq.Request) -> AsyncIterator[ev.Event]:
        task = asyncio.current_task()
        assert task is not None
        try:
            task.cancel()  # the library cancels its own scope's host task...
            try:
                await asyncio.sleep(0)  # one loop turn: where the pending cancel lands
            except asyncio.CancelledError:
                pass  # ...and catches that cancel within the scope
            self.cancelling_seen = task.cancelling()
            self.connecting.set()
            try:
                await self.connected.wait()
            finally:
                task.uncancel()  # the scope exits
            yield ev.ContentDelta(
                v="1.0", seq=0, index=0, role="assistant", delta=ev.Delta(text="late")
            )
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        finally:
            self.closed = True


def _body() -> bytes:
    return msgspec.json.encode(
        {
            "version": "1.0",
            "stream": True,
            "model": "m",
            "messages": [{"role": "user", "content": "hi"}],
        }
    )


def test_a_hang_up_during_the_upstream_connect_cancels_the_provider(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The endpoint's second cancel, after the cleanup grace, would hide the
    # missing first one: push it out of reach.
    monkeypatch.setattr(server, "CLEANUP_S", 3600.0)
    provider = ConnectingUpstream()
    records: list[StreamRecord] = []

    class Keep:
        def opened(self, record: StreamRecord) -> None:
            return None

        def closed(self, record: StreamRecord) -> None:
            records.append(record)

    async def go() -> tuple[bool, bool]:
        x = Exchange(_body())
        app = StreamEndpoint(provider, observers=[Keep()])
        request = asyncio.ensure_future(app(x.scope, x.receive, x.send))
        await provider.connecting.wait()
        x.hang_up()  # the client leaves while the connect is finishing
        done, _pending = await asyncio.wait([request], timeout=DEADLINE_S)
        cancelled = provider.cancelled  # before anything below cancels it
        if not done:
            request.cancel()
            await asyncio.wait([request])
        return cancelled, bool(done)

    cancelled, returned = asyncio.run(go())
    assert provider.cancelling_seen == 1  # the count the endpoint must not trust
    assert cancelled, "the hang-up reached the provider as a cancellation"
    assert returned and provider.closed, "the request was over once the provider was cancelled"
    assert records[0].disconnected and records[0].status == 200
