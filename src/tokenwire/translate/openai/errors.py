"""OpenAI-family finish reasons and error types, both ways, and its HTTP error bodies."""

from __future__ import annotations

from typing import Any, Final

import msgspec

from .._aggregate import error_status

# --- Mapping tables (published in docs/translation.md) --------------------------

#: OpenAI-family ``finish_reason`` -> §5.3.3 stop reason. ``model_length`` is
#: Mistral's, ``tool_use``/``end_turn``/``eos`` come from compatible servers.
FINISH_REASONS: Final[dict[str, str]] = {
    "stop": "end_turn",
    "eos": "end_turn",
    "eos_token": "end_turn",  # Hugging Face TGI
    "stop_sequence": "end_turn",  # Hugging Face TGI
    "end_turn": "end_turn",
    "length": "max_tokens",
    "model_length": "max_tokens",
    "max_tokens": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "tool_use": "tool_use",
    "content_filter": "content_filter",
}

#: ``finish_reason`` values that mean the generation failed: -> §5.3.6 error code.
ERROR_FINISH_REASONS: Final[dict[str, str]] = {
    "error": "internal_error",  # Mistral
    "insufficient_system_resource": "overloaded",  # DeepSeek
}

#: §5.3.3 stop reason -> ``finish_reason`` (the ``ChunkEncoder`` direction).
STOP_TO_FINISH: Final[dict[str, str]] = {
    "end_turn": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "content_filter": "content_filter",
}

#: §5.3.6 error code -> OpenAI error ``type`` and ``code`` (the ``ChunkEncoder``
#: direction; ``error_code`` maps every one of them back).
ERROR_TYPES: Final[dict[str, tuple[str, str | None]]] = {
    "rate_limited": ("requests", "rate_limit_exceeded"),
    "context_length_exceeded": ("invalid_request_error", "context_length_exceeded"),
    "content_filtered": ("invalid_request_error", "content_filter"),
    "overloaded": ("server_error", "overloaded"),
    "internal_error": ("server_error", None),
}

# Substrings of an error's type or code, checked in this order.
_ERROR_HINTS: Final = (
    ("context_length", "context_length_exceeded"),
    ("rate_limit", "rate_limited"),
    ("quota", "rate_limited"),
    ("content_filter", "content_filtered"),
    ("content_policy", "content_filtered"),
    ("moderation", "content_filtered"),
    ("safety", "content_filtered"),
    ("overload", "overloaded"),
    ("capacity", "overloaded"),
    ("unavailable", "overloaded"),
    ("insufficient_system_resource", "overloaded"),
)
_TYPE_CODES: Final = {"requests": "rate_limited", "tokens": "rate_limited"}
_MESSAGE_HINTS: Final = (
    ("maximum context length", "context_length_exceeded"),
    ("context window", "context_length_exceeded"),
    ("rate limit", "rate_limited"),
    ("overloaded", "overloaded"),
)


def error_code(type_: str | None, code: str | int | None, message: str | None = None) -> str:
    """The §5.3.6 code for an OpenAI-family error's ``type``, ``code`` and ``message``.

    The type and code decide first (``rate_limit_exceeded`` -> ``rate_limited``,
    ``context_length_exceeded``, ``content_filter`` -> ``content_filtered``,
    ``overloaded``/capacity -> ``overloaded``); the message is the fallback
    (an OpenAI 503 only says "overloaded" in its text). Anything else is
    ``internal_error``.
    """
    keys = [str(k).lower() for k in (code, type_) if k is not None]
    for key in keys:
        for hint, mapped in _ERROR_HINTS:
            if hint in key:
                return mapped
        if key in _TYPE_CODES:
            return _TYPE_CODES[key]
    text = (message or "").lower()
    for hint, mapped in _MESSAGE_HINTS:
        if hint in text:
            return mapped
    return "internal_error"


class _HTTPError(msgspec.Struct, gc=False):
    message: str | None = None
    type: str | None = None
    code: str | int | None = None


class _HTTPErrorBody(msgspec.Struct):
    error: _HTTPError | str | None = None
    # Mistral's flat shape: {"object": "error", "message", "type", "code"}.
    message: str | None = None
    type: str | None = None
    code: str | int | None = None
    detail: Any = None


_decode_http_error = msgspec.json.Decoder(_HTTPErrorBody).decode

#: HTTP status -> §5.3.6 code when the body says nothing more precise.
_STATUS_CODES: Final = {429: "rate_limited", 503: "overloaded", 529: "overloaded"}


def http_error(status: int, body: bytes) -> tuple[str, str]:
    """The §5.3.6 ``(code, message)`` for an OpenAI-family HTTP error answer.

    For a provider whose upstream answered ``status`` (not 2xx) before any
    stream: the JSON error body decides the code when it is specific
    (``error_code``), else the status does (429 -> ``rate_limited``, 503/529 ->
    ``overloaded``, anything else ``internal_error``). Never raises.
    """
    message = f"upstream answered HTTP {status}"
    code = _STATUS_CODES.get(status, "internal_error")
    try:
        parsed = _decode_http_error(body)
    except msgspec.DecodeError:
        return code, message
    err = parsed.error
    if isinstance(err, str):
        return code, f"{message}: {err}"
    etype, ecode, emsg = (
        (err.type, err.code, err.message)
        if err is not None
        else (parsed.type, parsed.code, parsed.message)
    )
    mapped = error_code(etype, ecode, emsg)
    if mapped != "internal_error" or code == "internal_error":
        code = mapped
    return code, f"{message}: {emsg}" if emsg else message


# --- Whole answers and refusals in OpenAI's error shape ----------------

#: HTTP status -> OpenAI error ``type`` (the openai SDK picks its exception by status).
_STATUS_TYPES: Final[dict[int, str]] = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "invalid_request_error",
    404: "invalid_request_error",
    405: "invalid_request_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    429: "rate_limit_error",
}


#: The standard's code -> OpenAI's own, where OpenAI names it differently
#: (the openai SDK's users read ``exc.code``: a bad key is ``invalid_api_key``).
_OWN_CODES: Final[dict[str, str]] = {
    "unauthorized": "invalid_api_key",
    "rate_limited": "rate_limit_exceeded",
    "overloaded": "service_unavailable",
}


def error_body(status: int, code: str, message: str, path: str | None = None) -> bytes:
    """An error answered before any stream (bad body, unknown model, a refused key...),
    as OpenAI writes it: ``{"error": {"message", "type", "param", "code"}}``."""
    etype = _STATUS_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    err = {
        "message": message,
        "type": etype,
        "param": path if path not in (None, "$") else None,
        # The standard's code where OpenAI has none of its own (model_not_found is both).
        "code": _OWN_CODES.get(code, code),
    }
    return msgspec.json.encode({"error": err})


def error_frame(code: str, message: str, seq: int = 0) -> bytes:
    """An in-stream error chunk as OpenAI's Chat Completions sends it (``seq`` unused:
    its chunks are not numbered)."""
    etype, ecode = ERROR_TYPES.get(code, ("server_error", code))
    err = {"message": message, "type": etype, "param": None, "code": ecode}
    return b"data: %s\n\n" % msgspec.json.encode({"error": err})


def error_answer(
    code: str, message: str, *, body: dict[str, Any] | None = None
) -> tuple[int, dict[str, Any]]:
    """``(status, body)`` of a whole answer whose stream failed with ``(code, message)``.

    ``body`` is the encoder's in-stream ``{"error": ...}`` when it wrote one.
    The status is the upstream's own when it answered one, else the code's.
    """
    status = error_status(code, message)
    if body is None:
        etype, ecode = ERROR_TYPES.get(code, ("server_error", code))
        body = {"error": {"message": message, "type": etype, "param": None, "code": ecode}}
    return status, body
