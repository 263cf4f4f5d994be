"""The Responses API's WebSocket mode (docs/responses-websocket.md), for every upstream.

``endpoint`` (the route), ``session`` (one socket: lanes, steering, bounds),
``turn`` (one turn as an in-process ``POST /v1/responses``), ``chain`` (the
socket's responses, for ``previous_response_id``), ``protocol`` (the mode's
messages), ``bounds`` (``[responses_websocket]``).
"""

from __future__ import annotations

from .bounds import BOUND_CODES, Bounds
from .endpoint import ResponsesOverWebSocket

__all__ = ["BOUND_CODES", "Bounds", "ResponsesOverWebSocket"]
