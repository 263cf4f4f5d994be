"""Anthropic's stop reasons and error types, both ways, and its HTTP error bodies."""

from __future__ import annotations

import re
from typing import Final

import msgspec

_decode_any = msgspec.json.Decoder().decode


#: Anthropic ``stop_reason`` -> §5.3.3 stop reason. Anything else -> ``end_turn``.
STOP_REASONS: Final[dict[str, str]] = {
    "end_turn": "end_turn",
    "stop_sequence": "end_turn",
    "max_tokens": "max_tokens",
    # The context window filled up: generation was cut short, like max_tokens.
    "model_context_window_exceeded": "max_tokens",
    "tool_use": "tool_use",
    "refusal": "content_filter",
    # The server paused a long server-tool turn; the client may continue it by
    # sending the answer back. The draft has no "paused": this turn ended.
    "pause_turn": "end_turn",
}

#: Anthropic error ``type`` -> §5.3.6 error code (``invalid_request_error`` is
#: ``context_length_exceeded`` when its message says so; see ``error_code``).
ERROR_CODES: Final[dict[str, str]] = {
    "overloaded_error": "overloaded",
    "rate_limit_error": "rate_limited",
    "api_error": "internal_error",
    "timeout_error": "internal_error",
    "invalid_request_error": "internal_error",
    "authentication_error": "internal_error",
    "permission_error": "internal_error",
    "not_found_error": "internal_error",
    "billing_error": "internal_error",
    "request_too_large": "internal_error",
}

#: §5.3.3 stop reason -> Anthropic ``stop_reason`` (the reverse direction).
VENDOR_STOP_REASONS: Final[dict[str, str]] = {
    "end_turn": "end_turn",
    "max_tokens": "max_tokens",
    "tool_use": "tool_use",
    "content_filter": "refusal",
}

#: §5.3.6 error code -> Anthropic error ``type`` (the reverse direction).
ERROR_TYPES: Final[dict[str, str]] = {
    "overloaded": "overloaded_error",
    "rate_limited": "rate_limit_error",
    "context_length_exceeded": "invalid_request_error",
    "content_filtered": "invalid_request_error",
    "internal_error": "api_error",
}

_CONTEXT_LENGTH: Final = re.compile(
    r"prompt is too long|context (?:length|window)|too many (?:input )?tokens"
    r"|exceeds? the (?:maximum|model)",
    re.IGNORECASE,
)


def stop_reason(vendor_reason: str | None, *, has_tool_calls: bool = False) -> str:
    """The §5.3.3 stop reason for an Anthropic ``stop_reason``.

    ``None`` (no ``message_delta`` said) gives ``tool_use`` when the message
    made tool calls, else ``end_turn``; an unknown value gives ``end_turn``.
    """
    if vendor_reason is None:
        return "tool_use" if has_tool_calls else "end_turn"
    return STOP_REASONS.get(vendor_reason, "end_turn")


def error_code(error_type: str, message: str = "") -> str:
    """The §5.3.6 error code for an Anthropic error ``type`` and its message."""
    if error_type == "invalid_request_error" and _CONTEXT_LENGTH.search(message):
        return "context_length_exceeded"
    return ERROR_CODES.get(error_type, "internal_error")


def http_error(status: int, body: bytes) -> tuple[str, str]:
    """``(draft code, message)`` for an Anthropic HTTP error answer (before streaming).

    Reads Anthropic's ``{"type":"error","error":{"type","message"}}`` body; a
    body that is not one falls back on the status (429 -> ``rate_limited``,
    529/503 -> ``overloaded``, else ``internal_error``).
    """
    try:
        obj = _decode_any(body)
    except msgspec.DecodeError:
        obj = None
    error = obj.get("error") if isinstance(obj, dict) else None
    if isinstance(error, dict) and isinstance(error.get("type"), str):
        message = error.get("message")
        text = message if isinstance(message, str) else ""
        return error_code(error["type"], text), f"anthropic {error['type']}: {text}"
    code = {429: "rate_limited", 503: "overloaded", 529: "overloaded"}.get(status, "internal_error")
    return code, f"anthropic answered HTTP {status}"
