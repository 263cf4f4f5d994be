"""The codes a Responses WebSocket's client gets past each bound (``[responses_websocket]``).

The bounds themselves are config (``gateway.config.responses_websocket``); the
messages name the key that sets each one.
"""

from __future__ import annotations

from typing import Final

__all__ = ["BOUND_CODES"]

#: The ``error.code`` a client gets past each bound.
BOUND_CODES: Final = {
    "max_turns": "socket_turn_limit_reached",
    "max_chain_bytes": "chain_size_limit_reached",
    "idle_timeout_s": "socket_idle_timeout",
    "max_in_flight": "too_many_responses_in_flight",
    "chain_ttl_s": "previous_response_not_found",
}
