"""The fake upstream's Mistral chat wire format (``FakeUpstream("mistral")``).

Rendered like ``vendor-fixtures/mistral/*.jsonl``: OpenAI-like ``data:``
chunks without ``system_fingerprint``; every tool call whole in one delta,
without ``index`` (as Mistral sends them); ``usage`` on the finish chunk
without being asked; the finish chunk's delta is ``{"content": ""}``; then
``data: [DONE]``. A scripted error is Mistral's flat error object
(``{"object": "error", "message", "type", "param", "code"}``, the shape of its
HTTP error bodies; no in-stream recording exists), then ``[DONE]``.
SDK base URL: ``fake.url + "/v1"`` for openai-compatible clients, ``fake.url``
as ``server_url`` for ``mistralai``.
"""

from __future__ import annotations

import json
from typing import Any, Final

import msgspec

from .openai import FINISH_REASONS
from .openai import check_request as check_request
from .upstream import RecordedRequest, Script

__all__ = ["CONTENT_TYPE", "ERRORS", "check_request", "error_body", "error_object", "render"]

CONTENT_TYPE: Final = "text/event-stream; charset=utf-8"

#: Draft error code -> the Mistral error ``type`` and ``code`` the fake sends.
ERRORS: Final[dict[str, tuple[str, str | None]]] = {
    "rate_limited": ("rate_limited", "1300"),
    "context_length_exceeded": ("invalid_request_error", "context_length_exceeded"),
    "content_filtered": ("invalid_request_error", "content_filter"),
    "overloaded": ("service_tier_capacity_exceeded", "3505"),
    "internal_error": ("internal_server_error", None),
}

_STATUS_ERRORS: Final[dict[int, tuple[str, str, str | None]]] = {
    400: ("Invalid request", "invalid_request_error", None),
    401: ("Unauthorized", "unauthorized", None),
    404: ("Invalid model", "invalid_model", "1500"),
    429: ("Requests rate limit exceeded", "rate_limited", "1300"),
    500: ("Internal server error", "internal_server_error", None),
    503: ("Service unavailable", "service_unavailable", None),
    529: (
        "Service tier capacity exceeded for this model.",
        "service_tier_capacity_exceeded",
        "3505",
    ),
}

_encode = msgspec.json.Encoder().encode


def error_object(code: str, message: str) -> dict[str, Any]:
    """Mistral's flat error object for a draft error code."""
    etype, ecode = ERRORS.get(code, ("internal_server_error", None))
    return {"object": "error", "message": message, "type": etype, "param": None, "code": ecode}


def error_body(status: int) -> bytes:
    """Mistral's JSON body for an HTTP error ``status``."""
    message, etype, ecode = _STATUS_ERRORS.get(
        status, (f"Upstream error {status}", "internal_server_error", None)
    )
    return _encode(
        {"object": "error", "message": message, "type": etype, "param": None, "code": ecode}
    )


def _frame(obj: Any) -> bytes:
    return b"data: " + _encode(obj) + b"\n\n"


def render(script: Script, *, model: str, request: RecordedRequest) -> list[bytes]:
    """The Mistral stream for ``script``, one item per SSE frame."""
    base: dict[str, Any] = {
        "id": "5319bd0299614c679a0068a4f2c8ffd0",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": model,
    }

    def chunk(
        delta: dict[str, Any], finish: str | None = None, usage: dict[str, int] | None = None
    ) -> bytes:
        obj = dict(base)
        obj["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]
        if usage is not None:
            obj["usage"] = usage
        return _frame(obj)

    output_tokens = script.usage_output_tokens
    usage = {
        "prompt_tokens": script.input_tokens,
        "total_tokens": script.input_tokens + output_tokens,
        "completion_tokens": output_tokens,
    }
    finish = FINISH_REASONS[script.final_stop_reason]
    out = [chunk({"role": "assistant", "content": ""})]
    out += [chunk({"content": piece}) for piece in script.pieces]
    if script.error is not None:
        out.append(_frame(error_object(*script.error)))
        out.append(b"data: [DONE]\n\n")
        return out
    if script.tool_calls:
        calls = [
            {
                "id": call.id or f"fakeCall{i}",
                "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
            }
            for i, call in enumerate(script.tool_calls)
        ]
        out.append(chunk({"content": None, "tool_calls": calls}, finish, usage))
    else:
        out.append(chunk({"content": ""}, finish, usage))
    out.append(b"data: [DONE]\n\n")
    return out
