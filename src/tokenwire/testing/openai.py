"""The fake upstream's OpenAI Chat Completions wire format (``FakeUpstream("openai")``).

Rendered like the recordings in ``vendor-fixtures/openai-chat/`` (2025 fields):
``data: <chat.completion.chunk>`` frames, a first chunk with ``role``, one
``content`` delta per word, tool calls opened with ``id``/``name`` and empty
arguments then argument fragments cut mid-token, a finish chunk with an empty
delta, the usage chunk with ``choices: []`` only when the request asked for it
(``stream_options.include_usage``; every other chunk then has ``"usage":
null``), and ``data: [DONE]``. A scripted error becomes the in-stream
``data: {"error": {...}}`` frame, then ``[DONE]``. SDK base URL: ``fake.url + "/v1"``.
``Script.thinking`` streams first as ``delta.reasoning_content`` word by word
(DeepSeek's shape, which vLLM shares), counted in
``completion_tokens_details.reasoning_tokens``.
"""

from __future__ import annotations

import json
from typing import Any, Final

import msgspec

from . import loops
from .upstream import (
    RecordedRequest,
    Script,
    choice_count,
    choice_text,
    cut_text,
    json_object,
    split_words,
)

__all__ = [
    "wants_whole",
    "whole",
    "CONTENT_TYPE",
    "ERRORS",
    "FINISH_REASONS",
    "RESPONSE_HEADERS",
    "argument_fragments",
    "check_request",
    "error_body",
    "error_object",
    "render",
]

CONTENT_TYPE: Final = "text/event-stream; charset=utf-8"
RESPONSE_HEADERS: Final = {"x-request-id": "req_fake", "openai-processing-ms": "1"}

#: Standard stop reason -> OpenAI ``finish_reason``.
FINISH_REASONS: Final = {
    "end_turn": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "content_filter": "content_filter",
}

#: Draft error code -> the OpenAI error ``type`` and ``code`` the fake sends.
#: ``overloaded`` has no documented code at OpenAI (a 503 says "overloaded" in
#: its message); the fake marks it with ``code: "overloaded"`` so it round-trips.
ERRORS: Final[dict[str, tuple[str, str | None]]] = {
    "rate_limited": ("requests", "rate_limit_exceeded"),
    "context_length_exceeded": ("invalid_request_error", "context_length_exceeded"),
    "content_filtered": ("invalid_request_error", "content_filter"),
    "overloaded": ("server_error", "overloaded"),
    "internal_error": ("server_error", None),
}

_STATUS_ERRORS: Final[dict[int, tuple[str, str, str | None]]] = {
    400: ("Invalid request.", "invalid_request_error", None),
    401: ("Incorrect API key provided.", "invalid_request_error", "invalid_api_key"),
    403: ("You are not allowed to use this model.", "invalid_request_error", None),
    404: ("The model does not exist.", "invalid_request_error", "model_not_found"),
    405: ("Method not allowed.", "invalid_request_error", None),
    429: ("Rate limit reached for requests.", "requests", "rate_limit_exceeded"),
    500: ("The server had an error while processing your request.", "server_error", None),
    503: ("The engine is currently overloaded, please try again later.", "server_error", None),
    529: ("The engine is currently overloaded, please try again later.", "server_error", None),
}

_encode = msgspec.json.Encoder().encode
#: Fragment lengths cycled through: arguments are cut anywhere, as OpenAI does.
_FRAGMENTS: Final = (3, 1, 4, 2, 5)


def error_object(code: str, message: str) -> dict[str, Any]:
    """The OpenAI ``error`` object for a draft error code."""
    etype, ecode = ERRORS.get(code, ("server_error", None))
    return {"message": message, "type": etype, "param": None, "code": ecode}


def error_body(status: int) -> bytes:
    """OpenAI's JSON body for an HTTP error ``status``."""
    message, etype, ecode = _STATUS_ERRORS.get(
        status, (f"Upstream error {status}.", "server_error", None)
    )
    return _encode({"error": {"message": message, "type": etype, "param": None, "code": ecode}})


def check_request(request: RecordedRequest) -> str | None:
    """The problem with a Chat Completions request, or ``None`` when it looks right."""
    if not request.path.split("?", 1)[0].endswith("/chat/completions"):
        return f"expected POST .../chat/completions, got {request.path}"
    body = json_object(request)
    if isinstance(body, str):
        return body
    if not isinstance(body.get("messages"), list) or not body["messages"]:
        return "messages: a non-empty array is required"
    if body.get("stream") not in (None, True, False):
        return "stream: must be a boolean"
    return loops.chat_results(body["messages"])


def wants_whole(request: RecordedRequest) -> bool:
    """Whether ``request`` asks for a whole ``chat.completion`` (no ``"stream": true``)."""
    try:
        body = request.json()
    except msgspec.DecodeError:
        return False
    return isinstance(body, dict) and body.get("stream") is not True


def whole(script: Script, *, model: str, request: RecordedRequest) -> bytes:
    """The non-streaming ``chat.completion`` for ``script``, as OpenAI answers
    it: choice ``c`` of ``n`` answers ``choice_text(script, c)``."""
    calls = [
        {
            "id": call.id or f"call_fake{i:04d}",
            "type": "function",
            "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
        }
        for i, call in enumerate(script.tool_calls)
    ]
    choices = []
    for c in range(_choices(request)):
        message: dict[str, Any] = {
            "role": "assistant",
            "content": choice_text(script, c) if (c or script.text) else None,
            "refusal": None,
            "annotations": [],
        }
        if calls and c == 0:
            message["tool_calls"] = calls
        finish = FINISH_REASONS[script.final_stop_reason] if c == 0 else "stop"
        choices.append({"index": c, "message": message, "logprobs": None, "finish_reason": finish})
    output_tokens = script.usage_output_tokens
    answer = {
        "id": "chatcmpl-fake0001",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "system_fingerprint": "fp_fake",
        "choices": choices,
        "usage": {
            "prompt_tokens": script.input_tokens,
            "completion_tokens": output_tokens,
            "total_tokens": script.input_tokens + output_tokens,
        },
    }
    return _encode(answer)


def argument_fragments(arguments: dict[str, Any]) -> list[str]:
    """The tool arguments as JSON text, cut into short fragments (mid-token)."""
    return cut_text(json.dumps(arguments), _FRAGMENTS)


def _frame(obj: Any) -> bytes:
    return b"data: " + _encode(obj) + b"\n\n"


def _include_usage(request: RecordedRequest) -> bool:
    try:
        body = request.json()
    except msgspec.DecodeError:
        return False
    options = body.get("stream_options") if isinstance(body, dict) else None
    return isinstance(options, dict) and options.get("include_usage") is True


def _choices(request: RecordedRequest) -> int:
    try:
        body = request.json()
    except msgspec.DecodeError:
        return 1
    return choice_count(body.get("n") if isinstance(body, dict) else None)


def render(script: Script, *, model: str, request: RecordedRequest) -> list[bytes]:
    """The OpenAI Chat Completions stream for ``script``, one item per SSE frame
    (``n`` choices: choice ``c`` > 0 answers ``choice_text(script, c)``)."""
    include_usage = _include_usage(request)
    base: dict[str, Any] = {
        "id": "chatcmpl-fake0001",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": model,
        "system_fingerprint": "fp_fake",
    }

    def chunk(delta: dict[str, Any], finish: str | None = None, choice: int = 0) -> bytes:
        obj = dict(base)
        obj["choices"] = [
            {"index": choice, "delta": delta, "logprobs": None, "finish_reason": finish}
        ]
        if include_usage:
            obj["usage"] = None
        return _frame(obj)

    pieces = script.pieces
    out = [chunk({"role": "assistant", "content": "" if pieces else None, "refusal": None})]
    thoughts = split_words(script.thinking) if script.thinking else []
    out += [chunk({"content": None, "reasoning_content": piece}) for piece in thoughts]
    out += [chunk({"content": piece}) for piece in pieces]
    for i, call in enumerate(script.tool_calls):
        opener = {
            "index": i,
            "id": call.id or f"call_fake{i:04d}",
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        out.append(chunk({"tool_calls": [opener]}))
        for fragment in argument_fragments(call.arguments):
            out.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": fragment}}]}))
    if script.error is not None:
        out.append(_frame({"error": error_object(*script.error)}))
        out.append(b"data: [DONE]\n\n")
        return out
    # n > 1: each further choice answers in turn, text only, under its own index.
    extra = range(1, _choices(request))
    for c in extra:
        opener = {"role": "assistant", "content": "", "refusal": None}
        out.append(chunk(opener, choice=c))
        out += [
            chunk({"content": piece}, choice=c) for piece in split_words(choice_text(script, c))
        ]
    out.append(chunk({}, FINISH_REASONS[script.final_stop_reason]))
    out += [chunk({}, "stop", choice=c) for c in extra]
    if include_usage:
        usage_chunk = dict(base)
        usage_chunk["choices"] = []
        output_tokens = script.usage_output_tokens
        usage_chunk["usage"] = {
            "prompt_tokens": script.input_tokens,
            "completion_tokens": output_tokens,
            "total_tokens": script.input_tokens + output_tokens,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": len(thoughts), "audio_tokens": 0},
        }
        out.append(_frame(usage_chunk))
    out.append(b"data: [DONE]\n\n")
    return out
