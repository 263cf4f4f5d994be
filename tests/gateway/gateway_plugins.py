"""Provider plugins the test gateway loads with ``provider = "python"``.

They run inside the gateway's worker process, so what they observe is written
to files the tests read.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

from tokenwire import events as ev
from tokenwire.errors import ProtocolError
from tokenwire.request import Request


def _delta(text: str) -> ev.ContentDelta:
    return ev.ContentDelta(v="1.0", seq=0, index=0, role="assistant", delta=ev.Delta(text=text))


class Recorder:
    """A token every ``interval_ms`` (up to ``limit``); records when it was cancelled.

    The record is ``<record_dir>/<request_id>.json`` with ``cancelled_at`` or
    ``completed_at`` (``time.time()``, comparable with the test process's clock).
    """

    def __init__(self, record_dir: str, interval_ms: float = 20.0, limit: int = 10_000) -> None:
        self.record_dir = Path(record_dir)
        self.interval = interval_ms / 1000
        self.limit = limit

    def _write(self, request: Request, **fields: float) -> None:
        name = request.request_id or "anonymous"
        (self.record_dir / f"{name}.json").write_text(json.dumps(fields))

    async def generate(self, request: Request) -> AsyncIterator[ev.Event]:
        started = time.time()
        try:
            for i in range(self.limit):
                await asyncio.sleep(self.interval)  # a paced model: the pacing is the behaviour
                yield _delta(f" t{i}")
        except (asyncio.CancelledError, GeneratorExit):
            self._write(request, started=started, cancelled_at=time.time())
            raise
        self._write(request, started=started, completed_at=time.time())


class ContextTooLong(ProtocolError):
    code = "context_length_exceeded"


class Failing:
    """Yields one delta, then fails the way ``mode`` says."""

    def __init__(self, mode: str = "raise") -> None:
        self.mode = mode

    async def generate(self, request: Request) -> AsyncIterator[ev.Event]:
        yield _delta("partial")
        if self.mode == "timeout":
            raise TimeoutError("upstream took too long")
        if self.mode == "protocol":
            raise ContextTooLong("the conversation is too long for this model")
        # The message quotes the prompt: it must reach neither the wire nor the log.
        raise RuntimeError(f"boom while handling {request.messages[-1].text!r}")


class Stuck:
    """Yields one delta, then never ends: it refuses the drain's cancellation.

    ``mode = "ignore-cancel"`` keeps awaiting (the event loop still runs);
    ``mode = "block-loop"`` blocks the event loop once cancelled. Either way only
    the shutdown timeout ends the process.
    """

    def __init__(self, mode: str = "ignore-cancel") -> None:
        self.mode = mode

    async def generate(self, request: Request) -> AsyncIterator[ev.Event]:
        yield _delta("stuck")
        while True:
            try:
                await asyncio.sleep(3600)  # never ends by itself: what this provider is for
            except asyncio.CancelledError:
                if self.mode == "block-loop":
                    while True:
                        time.sleep(3600)  # blocks the event loop on purpose (the mode's point)
