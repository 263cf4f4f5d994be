"""``GET /v1/responses`` with a WebSocket upgrade: the Responses API's WebSocket mode.

The openai SDK's ``client.responses.connect()`` opens it. Each accepted socket
is served by ``session.Socket``; every turn goes through ``target`` (the
gateway app itself), so it is checked and logged as an HTTP request.

A browser page may open the socket only from the gateway's own origin: a
WebSocket has no CORS preflight, and an open gateway spends the operator's
provider keys.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...server.asgi import Receive, Scope, Send
from ...server.frames.websocket import _same_origin
from ..config.responses_websocket import ResponsesWebSocketConfig
from .session import Socket

__all__ = ["ResponsesOverWebSocket"]


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
        draining: Callable[[], bool] = lambda: False,
    ) -> None:
        self.bounds = bounds
        self.write_timeout_s = write_timeout_s
        self.max_message_bytes = max_message_bytes
        self.target = target
        self.path = path
        #: Whether the gateway is draining (its sockets then close once idle).
        self.draining = draining

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "websocket":  # pragma: no cover - mounted as a WebSocket route
            return
        message = await receive()
        if message["type"] != "websocket.connect":
            return
        if not _same_origin(scope):
            await send({"type": "websocket.close", "code": 1008})
            return
        await send({"type": "websocket.accept"})
        socket = Socket(
            scope,
            send,
            target=self.target,
            path=self.path,
            bounds=self.bounds,
            write_timeout_s=self.write_timeout_s,
            max_message_bytes=self.max_message_bytes,
            draining=self.draining,
        )
        await socket.run(receive)
