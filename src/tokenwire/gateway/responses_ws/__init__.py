"""The Responses API's WebSocket mode (docs/responses-websocket.md), for every upstream.

``endpoint`` (the route), ``session`` (one socket: lanes, bounds, I/O), ``steering``
(what becomes of ``response.steer`` input, pure),
``turn`` (one turn as an in-process ``POST /v1/responses``), ``chain`` (the
socket's responses, for ``previous_response_id``), ``protocol`` (the mode's
messages), ``bounds`` (the codes past each ``[responses_websocket]`` bound).

May import: the core, ``tokenwire.server`` (``asgi`` and the frames' handshake
helpers), and of the gateway ``config`` and ``telemetry``; never ``policy``,
``providers`` or the app: every turn reaches them through the app's own route.
"""

from __future__ import annotations

from .bounds import BOUND_CODES
from .endpoint import ResponsesOverWebSocket

__all__ = ["BOUND_CODES", "ResponsesOverWebSocket"]
