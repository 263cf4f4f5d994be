"""``[responses_websocket]``: what one Responses WebSocket may hold (docs/responses-websocket.md).

A socket is a long-lived client of the gateway: it holds a chain of responses
in the gateway's memory and may start many turns. Each bound caps one thing
the socket holds; past it the client gets the mode's ``error`` event
(``gateway.responses_ws.bounds`` has the codes), and the socket stays usable
where it can be.
"""

from __future__ import annotations

import math

import msgspec

__all__ = ["ResponsesWebSocketConfig"]


class ResponsesWebSocketConfig(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True
):
    """``[responses_websocket]``: what one socket may hold."""

    #: ``response.create`` events served per socket; the next is refused.
    max_turns: int = 1000
    #: Bytes of the chain (every response's input and output items, as JSON) per
    #: socket; a turn that would go past it is refused. A turn's whole request
    #: (its history included) is also bounded by ``[server] max_body_bytes``,
    #: whose default this is.
    max_chain_bytes: int = 4 << 20
    #: A socket with no message from the client and no response in flight for
    #: this long is closed (code 1000, after an ``error`` event saying why).
    idle_timeout_s: float = 300.0
    #: Responses generating at once on one socket (``stream_id`` lanes).
    max_in_flight: int = 8
    #: How long a completed response stays usable as ``previous_response_id``.
    chain_ttl_s: float = 3600.0
    #: ``response.steer`` inputs queued per response.
    max_pending_steers: int = 16

    def problem(self) -> tuple[str, str] | None:
        """``(key, message)`` of the first invalid bound, or ``None``."""
        for key in ("max_turns", "max_chain_bytes", "max_in_flight", "max_pending_steers"):
            if getattr(self, key) < 1:
                return key, "must be >= 1"
        for key in ("idle_timeout_s", "chain_ttl_s"):
            value = getattr(self, key)
            if not (math.isfinite(value) and value > 0):
                return key, "must be a number > 0"
        return None
