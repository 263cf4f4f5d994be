"""Connect error codes and HTTP statuses -> the draft's §5.3.6 codes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import msgspec

_decode_json = msgspec.json.Decoder().decode


#: Connect error code -> the draft's §5.3.6 code. The registry has five codes
#: (plus tokenwire's ``cancelled`` extension), so most Connect codes, which
#: describe the gateway's own request or configuration, become
#: ``internal_error``; the retry-later family maps to ``rate_limited`` /
#: ``overloaded``. docs/bindings.md has the table and the reasons.
ERROR_CODES: Final[dict[str, str]] = {
    "canceled": "cancelled",
    "unknown": "internal_error",
    "invalid_argument": "internal_error",
    "deadline_exceeded": "overloaded",
    "not_found": "internal_error",
    "already_exists": "internal_error",
    "permission_denied": "internal_error",
    "resource_exhausted": "rate_limited",
    "failed_precondition": "internal_error",
    "aborted": "overloaded",
    "out_of_range": "internal_error",
    "unimplemented": "internal_error",
    "internal": "internal_error",
    "unavailable": "overloaded",
    "data_loss": "internal_error",
    "unauthenticated": "internal_error",
}

#: Connect protocol: the code to infer from an HTTP status that has no Connect code.
_HTTP_STATUS_CODES: Final[dict[int, str]] = {
    400: "internal",
    401: "unauthenticated",
    403: "permission_denied",
    404: "unimplemented",
    429: "unavailable",
    502: "unavailable",
    503: "unavailable",
    504: "unavailable",
}


def error_code(connect_code: object) -> str:
    """The §5.3.6 code for a Connect error code (``internal_error`` when unknown)."""
    if isinstance(connect_code, str):
        return ERROR_CODES.get(connect_code, "internal_error")
    return "internal_error"


def http_status_code(status: int) -> str:
    """The Connect code a client infers from an HTTP status without a Connect body."""
    return _HTTP_STATUS_CODES.get(status, "unknown")


def _describe(error: Mapping[str, Any]) -> str:
    """A human-readable message for an end-stream or unary error object.

    Cursor puts the useful reason in ``details[].debug`` rather than in
    ``message``, so a debug title/detail is appended when present.
    """
    code = error.get("code")
    message = error.get("message")
    text = message if isinstance(message, str) and message else str(code or "error")
    details = error.get("details")
    if isinstance(details, list):
        for detail in details:
            debug = detail.get("debug") if isinstance(detail, dict) else None
            if not isinstance(debug, dict):
                continue
            parts = [debug.get("error")]
            inner = debug.get("details")
            if isinstance(inner, dict):
                parts += [inner.get("title"), inner.get("detail")]
            extra = [p for p in parts if isinstance(p, str) and p]
            if extra:
                text = f"{text} ({': '.join(extra)})"
                break
    return text


def error_from_http(status: int, body: bytes) -> tuple[str, str]:
    """``(draft code, message)`` for a non-200 Connect answer.

    A unary-style JSON body ``{"code", "message", "details"}`` gives the code;
    otherwise it is inferred from the HTTP status (Connect protocol table).
    """
    try:
        obj = msgspec.json.decode(body) if body else None
    except msgspec.DecodeError:
        obj = None
    if isinstance(obj, dict) and isinstance(obj.get("code"), str):
        return error_code(obj["code"]), f"upstream HTTP {status}: {_describe(obj)}"
    connect_code = http_status_code(status)
    return error_code(connect_code), f"upstream HTTP {status} ({connect_code})"
