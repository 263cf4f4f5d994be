"""``GET /v1/responses`` with a WebSocket upgrade: the Responses API's WebSocket mode.

The openai SDK's ``client.responses.connect()`` opens it. Each accepted socket
is served by ``session.Socket``; every turn goes through ``target`` (the
gateway app itself), so it is checked and logged as an HTTP request.

A browser page may open the socket only from the gateway's own origin: a
WebSocket has no CORS preflight, and an open gateway spends the operator's
provider keys.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol

from ...server.asgi import Receive, Scope, Send
from ...server.frames.websocket import accept
from ..config.responses_websocket import ResponsesWebSocketConfig
from .session import Socket

__all__ = ["DrainHook", "ResponsesOverWebSocket"]


class DrainHook(Protocol):
    """What a socket needs of the gateway's drain (``policy.drain.Drain`` is one)."""

    draining: bool

    def track(self, task: asyncio.Task[Any]) -> None: ...

    def untrack(self, task: asyncio.Task[Any]) -> None: ...


class ResponsesOverWebSocket:
    """An ASGI app for ``websocket`` scopes; each turn is a ``POST path`` to ``target``.

    ``target`` may be set after building, when the app and this route refer to
    each other.
    """

    def __init__(
        self,
        bounds: ResponsesWebSocketConfig,
        *,
        write_timeout_s: float,
        max_message_bytes: int,
        target: Any = None,
        path: str = "/v1/responses",
        drain: Callable[[], DrainHook | None] = lambda: None,
    ) -> None:
        self.bounds = bounds
        self.write_timeout_s = write_timeout_s
        self.max_message_bytes = max_message_bytes
        self.target = target
        self.path = path
        #: The gateway's drain: a socket holds it open while it lives, and closes
        #: once idle when it drains.
        self.drain = drain

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "websocket":  # pragma: no cover - mounted as a WebSocket route
            return
        if not await accept(scope, receive, send, subprotocol=None):
            return
        socket = Socket(
            scope,
            send,
            target=self.target,
            path=self.path,
            bounds=self.bounds,
            write_timeout_s=self.write_timeout_s,
            max_message_bytes=self.max_message_bytes,
            draining=self._draining,
        )
        # A socket is in flight for the drain as a stream is: the drain waits for
        # its response to end and for it to tell its client (1001), or cuts it at
        # drain_s; without this a drain that saw no streams stopped the worker
        # under a socket's feet.
        drain, task = self.drain(), asyncio.current_task()
        if drain is not None and task is not None:
            drain.track(task)
        try:
            await socket.run(receive)
        finally:
            if drain is not None and task is not None:
                drain.untrack(task)

    def _draining(self) -> bool:
        drain = self.drain()
        return drain is not None and drain.draining
