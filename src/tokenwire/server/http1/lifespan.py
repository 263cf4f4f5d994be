"""The ASGI lifespan protocol, run as one task for the server's life."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from ..asgi import Message
from .protocol import _ASGI

_log = logging.getLogger("tokenwire.h1server")


class Lifespan:
    """The ASGI lifespan protocol, run as one task for the server's life."""

    def __init__(self, app: Callable[..., Awaitable[None]], state: dict[str, Any]) -> None:
        self.app = app
        self.state = state
        self.inbox: asyncio.Queue[Message] = asyncio.Queue()
        self.started = asyncio.Event()
        self.stopped = asyncio.Event()
        self.failed: str | None = None
        self.unsupported = False
        self.task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        scope = {"type": "lifespan", "asgi": _ASGI, "state": self.state}
        try:
            await self.app(scope, self.inbox.get, self._send)
        except Exception as exc:
            if not self.started.is_set():
                self.unsupported = True  # as uvicorn's "auto": serve without lifespan
                _log.debug("the app has no lifespan support: %r", exc)
        finally:
            self.started.set()
            self.stopped.set()

    async def _send(self, message: Message) -> None:
        kind = message["type"]
        if kind == "lifespan.startup.complete":
            self.started.set()
        elif kind == "lifespan.startup.failed":
            self.failed = str(message.get("message", "")) or "lifespan startup failed"
            self.started.set()
        elif kind in ("lifespan.shutdown.complete", "lifespan.shutdown.failed"):
            self.stopped.set()

    async def startup(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._run())
        await self.inbox.put({"type": "lifespan.startup"})
        await self.started.wait()
        if self.failed is not None:
            raise RuntimeError(self.failed)

    async def shutdown(self) -> None:
        if self.task is None or self.unsupported or self.task.done():
            return
        await self.inbox.put({"type": "lifespan.shutdown"})
        await self.stopped.wait()
