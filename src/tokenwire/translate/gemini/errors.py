"""Gemini's finish reasons and error statuses, both ways, and its HTTP error bodies."""

from __future__ import annotations

import re
from typing import Any, Final

import msgspec

from .._aggregate import error_status

#: ``finishReason`` -> standard stop reason (§5.3.3). ``STOP`` on a candidate
#: that called a tool becomes ``tool_use``. ``OTHER``, ``FINISH_REASON_UNSPECIFIED``
#: and any value not listed here or in ``FINISH_ERRORS`` (a future one) become
#: ``content_filter`` (``UNNAMED_STOP``): the endpoint, not the model, ended the
#: answer, and a cut answer must never look complete. The raw value travels
#: beside it (``tokenwire:raw_stop_reason``).
FINISH_REASONS: Final[dict[str, str]] = {
    "STOP": "end_turn",
    "MAX_TOKENS": "max_tokens",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
    "LANGUAGE": "content_filter",
    "BLOCKLIST": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "SPII": "content_filter",
    "IMAGE_SAFETY": "content_filter",
    "IMAGE_PROHIBITED_CONTENT": "content_filter",
    "IMAGE_RECITATION": "content_filter",
    "OTHER": "content_filter",
    "FINISH_REASON_UNSPECIFIED": "content_filter",
}

#: The stop reason of a ``finishReason`` that names no reason the standard has.
UNNAMED_STOP: Final = "content_filter"

#: ``finishReason`` values that mean the model's output is unusable: an
#: ``error`` event with this code (§5.3.6), not a stop reason. The model
#: produced a call that cannot be executed, which no stop reason describes.
FINISH_ERRORS: Final[dict[str, str]] = {
    "MALFORMED_FUNCTION_CALL": "internal_error",
    "UNEXPECTED_TOOL_CALL": "internal_error",
    "TOO_MANY_TOOL_CALLS": "internal_error",
}

#: Every ``finishReason`` the API documents (google-genai ``types.FinishReason``);
#: another value is counted in ``Translator.unknown_types``.
KNOWN_FINISH_REASONS: Final = frozenset(
    {
        *FINISH_REASONS,
        *FINISH_ERRORS,
        "FINISH_REASON_UNSPECIFIED",
        "OTHER",
        "NO_IMAGE",
        "IMAGE_OTHER",
        "CONTINUATION",
    }
)

#: Finish reasons that are a refusal by the safety system (``tokenwire:refusal``);
#: ``RECITATION`` and ``LANGUAGE`` stop for other reasons and are not marked.
REFUSAL_REASONS: Final = frozenset(
    {
        "SAFETY",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "IMAGE_SAFETY",
        "IMAGE_PROHIBITED_CONTENT",
    }
)

#: §5.3.3 stop reason -> ``finishReason`` (the reverse direction).
VENDOR_FINISH_REASONS: Final[dict[str, str]] = {
    "end_turn": "STOP",
    "tool_use": "STOP",
    "max_tokens": "MAX_TOKENS",
    "content_filter": "SAFETY",
}

#: Google RPC ``status`` of an error object -> §5.3.6 code. ``INVALID_ARGUMENT``
#: about the input's token count is ``context_length_exceeded`` (see ``error_code``).
ERROR_STATUSES: Final[dict[str, str]] = {
    "RESOURCE_EXHAUSTED": "rate_limited",
    "UNAVAILABLE": "overloaded",
    "DEADLINE_EXCEEDED": "overloaded",
    "INTERNAL": "internal_error",
}

#: §5.3.6 code -> ``(HTTP code, Google RPC status)`` of the error object (reverse).
VENDOR_ERRORS: Final[dict[str, tuple[int, str]]] = {
    "rate_limited": (429, "RESOURCE_EXHAUSTED"),
    "overloaded": (503, "UNAVAILABLE"),
    "context_length_exceeded": (400, "INVALID_ARGUMENT"),
    "content_filtered": (400, "INVALID_ARGUMENT"),
    "internal_error": (500, "INTERNAL"),
}

#: An HTTP status -> its Google RPC status (the reverse of an upstream's 4xx).
RPC_STATUSES: Final[dict[int, str]] = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ABORTED",
    413: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}

_HTTP_CODES: Final[dict[int, str]] = {
    429: "rate_limited",
    503: "overloaded",
    504: "overloaded",
    529: "overloaded",
}
_TOO_LONG: Final = re.compile(r"token.*exceed|exceed.*token|too long|context", re.IGNORECASE)


def error_code(status: str | None, http_code: int | None = None, message: str = "") -> str:
    """The §5.3.6 code for a Gemini error object (``status``, ``code``, ``message``)."""
    if status == "INVALID_ARGUMENT" and _TOO_LONG.search(message):
        return "context_length_exceeded"
    if status in ERROR_STATUSES:
        return ERROR_STATUSES[status]
    return _HTTP_CODES.get(http_code or 0, "internal_error")


class _Error(msgspec.Struct, frozen=True, gc=False):
    code: int | None = None
    message: str = ""
    status: str | None = None


class _ErrorBody(msgspec.Struct, frozen=True, gc=False):
    error: _Error | None = None


# The non-SSE form wraps the body in an array; an error answer may come either way.
_decode_http_error = msgspec.json.Decoder(_ErrorBody | list[_ErrorBody]).decode


def http_error(status: int, body: bytes) -> tuple[str, str]:
    """The §5.3.6 ``(code, message)`` for a Gemini HTTP error answer (before any stream).

    The error object's ``status`` decides the code when it is specific
    (``error_code``), else the HTTP status does. The message starts with
    ``upstream answered HTTP <status>``, which the ingress's encoder reads back
    so that a client of the Gemini route gets the upstream's own 4xx. Never raises.
    """
    message = f"upstream answered HTTP {status}"
    fallback = _HTTP_CODES.get(status, "internal_error")
    try:
        parsed = _decode_http_error(body)
    except msgspec.DecodeError:
        return fallback, message
    if isinstance(parsed, list):
        parsed = parsed[0] if parsed else _ErrorBody()
    err = parsed.error
    if err is None:
        return fallback, message
    code = error_code(err.status, err.code or status, err.message)
    if err.status:
        message += f" {err.status}"
    return code, f"{message}: {err.message}" if err.message else message


# --- Whole answers and refusals in Google's error shape ----------------


def error_body(status: int, code: str, message: str, path: str | None = None) -> bytes:
    """An error answered before any stream, as Google writes it:
    ``{"error": {"code", "message", "status"}}`` (google-genai's ``ClientError``
    and ``ServerError`` read it; 404 is ``NOT_FOUND``)."""
    if path not in (None, "$"):
        message = f"{path}: {message}"
    rpc = RPC_STATUSES.get(status, "INTERNAL" if status >= 500 else "INVALID_ARGUMENT")
    return msgspec.json.encode({"error": {"code": status, "message": message, "status": rpc}})


def error_answer(
    code: str, message: str, *, body: dict[str, Any] | None = None
) -> tuple[int, dict[str, Any]]:
    """``(status, body)`` of a whole answer whose stream failed with ``(code, message)``:
    the encoder's ``{"error": ...}`` chunk (its ``code`` is the status) when it wrote one."""
    error = body.get("error") if body is not None else None
    if isinstance(error, dict) and isinstance(error.get("code"), int):
        return error["code"], {"error": error}
    status, rpc = VENDOR_ERRORS.get(code, (500, "INTERNAL"))
    upstream = error_status(code, message)
    if upstream != status and upstream >= 400:
        status, rpc = upstream, RPC_STATUSES.get(upstream, rpc)
    return status, {"error": {"code": status, "message": message, "status": rpc}}
