"""Anthropic's stop reasons and error types, both ways, and its HTTP error bodies."""

from __future__ import annotations

import re
from typing import Any, Final

import msgspec

from .._aggregate import error_status

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
    made tool calls, else ``end_turn``; an unknown value gives ``content_filter``:
    the endpoint ended the answer for a reason the standard has no name for, and
    a cut answer must never look complete (the raw value goes in ``tokenwire.stop``).
    """
    if vendor_reason is None:
        return "tool_use" if has_tool_calls else "end_turn"
    return STOP_REASONS.get(vendor_reason, "content_filter")


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
        # The status stays in the message: an ingress of another vendor answers a
        # client error as one (a 500 would make its client retry the same request).
        return error_code(error["type"], text), f"anthropic {error['type']} (HTTP {status}): {text}"
    code = {429: "rate_limited", 503: "overloaded", 529: "overloaded"}.get(status, "internal_error")
    return code, f"anthropic answered HTTP {status}"


# --- Whole answers and refusals in Anthropic's error shape -------------

#: HTTP status -> Anthropic error ``type`` (the anthropic SDK picks its exception
#: by status: 404 ``NotFoundError``, 413 ``RequestTooLargeError``, 529 ``OverloadedError``...).
STATUS_TYPES: Final[dict[int, str]] = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    413: "request_too_large",
    415: "invalid_request_error",
    429: "rate_limit_error",
    500: "api_error",
    502: "api_error",
    503: "overloaded_error",
    504: "timeout_error",
    529: "overloaded_error",
}

#: §5.3.6 code -> status, where Anthropic's differs from the common one.
_CODE_STATUS: Final = {"overloaded": 529}


def error_frame(code: str, message: str, seq: int = 0) -> bytes:
    """An in-stream ``error`` event as Anthropic sends it, for the §5.3.6 ``code``."""
    error = {"type": ERROR_TYPES.get(code, "api_error"), "message": message}
    return b"event: error\ndata: %s\n\n" % msgspec.json.encode({"type": "error", "error": error})


def error_body(status: int, code: str, message: str, path: str | None = None) -> bytes:
    """An error answered before any stream, as Anthropic writes it:
    ``{"type": "error", "error": {"type", "message"}}``."""
    etype = STATUS_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    if path not in (None, "$"):
        message = f"{path}: {message}"  # Anthropic names the field in the message
    return msgspec.json.encode({"type": "error", "error": {"type": etype, "message": message}})


def error_answer(
    code: str, message: str, *, body: dict[str, Any] | None = None
) -> tuple[int, dict[str, Any]]:
    """``(status, body)`` of a whole answer whose stream failed with ``(code, message)``.

    The upstream's own status when it answered one (its error ``type`` then
    follows the status), else the code's; ``body`` is the encoder's
    in-stream ``error`` event when it wrote one.
    """
    status = error_status(code, message, _CODE_STATUS)
    etype = ERROR_TYPES.get(code, "api_error")
    if code == "internal_error" and status != 500:
        etype = STATUS_TYPES.get(status, etype)
    if body is None or etype != ERROR_TYPES.get(code, "api_error"):
        body = {"type": "error", "error": {"type": etype, "message": message}}
    return status, body
