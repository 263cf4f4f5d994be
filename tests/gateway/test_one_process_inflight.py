"""``cli._one_process.InFlight``: shutdown waits for the HTTP calls still answering.

It finds them among the event loop's tasks by the app's coroutine (no wrapper
frame per request), also under a wrapping coroutine such as granian's access log.
"""

from __future__ import annotations

import asyncio
from typing import Any

from tokenwire.cli._one_process import InFlight


class App:
    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.finished = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.release.wait()
        self.finished += 1


async def logged(app: App) -> None:
    await app({}, None, None)  # what granian's access-log wrapper does


def test_idle_waits_for_every_call_of_the_app() -> None:
    async def run() -> None:
        app = App()
        tracked = InFlight(app)  # type: ignore[arg-type]
        other = asyncio.ensure_future(asyncio.sleep(3600))  # not a call: never waited for
        calls = [asyncio.ensure_future(app({}, None, None)), asyncio.ensure_future(logged(app))]
        # One loop turn each, not a pause: the tasks start (InFlight reads their frames).
        await asyncio.sleep(0)
        assert set(tracked.calls()) == set(calls)
        idle = asyncio.ensure_future(tracked.idle())
        await asyncio.sleep(0)
        assert not idle.done()
        app.release.set()
        await asyncio.wait_for(idle, 10)
        assert app.finished == 2 and tracked.calls() == []
        other.cancel()

    asyncio.run(run())


def test_an_async_function_app_is_found_too() -> None:
    async def run() -> None:
        release = asyncio.Event()

        async def app(scope: Any, receive: Any, send: Any) -> None:
            await release.wait()

        tracked = InFlight(app)  # type: ignore[arg-type]
        call = asyncio.ensure_future(app({}, None, None))
        await asyncio.sleep(0)  # one loop turn: the call starts
        assert tracked.calls() == [call]
        release.set()
        await asyncio.wait_for(tracked.idle(), 10)

    asyncio.run(run())
