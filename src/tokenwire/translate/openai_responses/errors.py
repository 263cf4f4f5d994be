"""OpenAI Responses API error codes and stop reasons, both ways (§5.3.3, §5.3.6)."""

from __future__ import annotations

from typing import Final

import msgspec

__all__ = ["ERROR_CODES", "INCOMPLETE_REASONS", "error_code", "error_frame", "http_error"]

#: ``incomplete_details.reason`` -> standard stop reason (§5.3.3). Others: ``max_tokens``.
INCOMPLETE_REASONS: Final[dict[str, str]] = {
    "max_output_tokens": "max_tokens",
    "content_filter": "content_filter",
}

#: OpenAI error ``code`` (or ``type`` when the code is null) -> §5.3.6 code.
#: Anything else, and a null code, is ``internal_error``.
ERROR_CODES: Final[dict[str, str]] = {
    "rate_limit_exceeded": "rate_limited",
    "insufficient_quota": "rate_limited",
    "rate_limit_error": "rate_limited",
    "requests": "rate_limited",
    "tokens": "rate_limited",
    "context_length_exceeded": "context_length_exceeded",
    "string_above_max_length": "context_length_exceeded",
    "content_filter": "content_filtered",
    "content_policy_violation": "content_filtered",
    "invalid_prompt": "content_filtered",
    "overloaded": "overloaded",
    "server_is_overloaded": "overloaded",
    "slow_down": "overloaded",
    "engine_overloaded": "overloaded",
    "server_error": "internal_error",
}


def error_code(code: str | None, kind: str | None = None) -> str:
    """The §5.3.6 code for an OpenAI error ``code`` (falling back on its ``type``)."""
    for key in (code, kind):
        if key and key in ERROR_CODES:
            return ERROR_CODES[key]
    return "internal_error"


class ErrorBody(msgspec.Struct, frozen=True, gc=False):
    code: str | None = None
    message: str | None = None
    type: str | None = None


class _HTTPError(msgspec.Struct, frozen=True, gc=False):
    error: ErrorBody | None = None


_decode_http_error = msgspec.json.Decoder(_HTTPError).decode
_STATUS_CODES: Final[dict[int, str]] = {429: "rate_limited", 503: "overloaded", 529: "overloaded"}


def http_error(status: int, body: bytes) -> tuple[str, str]:
    """The §5.3.6 ``(code, message)`` for an OpenAI HTTP error answer (before any stream).

    The error's ``code``/``type`` decide when they are specific
    (``error_code``), else the HTTP status does. Never raises.
    """
    text = f"upstream answered HTTP {status}"
    code = _STATUS_CODES.get(status, "internal_error")
    try:
        err = _decode_http_error(body).error
    except msgspec.DecodeError:
        return code, text
    if err is None:
        return code, text
    mapped = error_code(err.code, err.type)
    if mapped != "internal_error":
        code = mapped
    return code, f"{text}: {err.message}" if err.message else text


def error_frame(code: str, message: str, seq: int = 0) -> bytes:
    """An in-stream ``error`` event as the Responses API sends it; ``seq`` is its
    ``sequence_number`` (the events sent before it)."""
    from ..openai.errors import ERROR_TYPES

    _etype, ecode = ERROR_TYPES.get(code, ("server_error", code))
    payload = {
        "type": "error",
        "sequence_number": seq,
        "code": ecode,
        "message": message,
        "param": None,
    }
    return b"event: error\ndata: %s\n\n" % msgspec.json.encode(payload)
