"""The fake upstream's Cohere v2 chat stream format (``FakeUpstream("cohere")``).

Rendered like the recordings in ``vendor-fixtures/cohere/``: ``event: <type>`` /
``data: <json>`` frames, ``message-start``; the text as ``content-start``, one
``content-delta`` per word, ``content-end``; each tool call as
``tool-call-start`` (``tool_calls`` is one object, with empty ``arguments``),
``tool-call-delta`` fragments cut at token boundaries the way Cohere cuts them
(``{"``, ``location``, ``":``, `` "``...), ``tool-call-end`` (a call without
arguments gets no delta at all); then ``message-end`` with the
``finish_reason`` and ``usage`` (``billed_units`` and ``tokens``, both the
script's counts).

Stop reasons: ``end_turn`` -> ``COMPLETE``, ``max_tokens`` -> ``MAX_TOKENS``,
``tool_use`` -> ``TOOL_CALL``, ``content_filter`` -> ``ERROR_TOXIC`` (Cohere's
only filter outcome, which the translator reads as an error
``content_filtered``). A scripted error ends the stream with ``message-end``
``finish_reason: "ERROR"`` (``ERROR_TOXIC`` for ``content_filtered``) and an
``error`` text that names the cause, so the code survives the round trip.
SDK setup: ``cohere.ClientV2(api_key="x", base_url=fake.url)``.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

import msgspec

from .upstream import RecordedRequest, Script, json_object, streamed_messages

__all__ = [
    "CONTENT_TYPE",
    "ERRORS",
    "FINISH_REASONS",
    "argument_fragments",
    "check_request",
    "error_body",
    "render",
]

CONTENT_TYPE: Final = "text/event-stream"

#: Standard stop reason -> Cohere ``finish_reason``.
FINISH_REASONS: Final = {
    "end_turn": "COMPLETE",
    "max_tokens": "MAX_TOKENS",
    "tool_use": "TOOL_CALL",
    "content_filter": "ERROR_TOXIC",
}

#: Draft error code -> (``finish_reason``, prefix of the ``error`` text).
ERRORS: Final[dict[str, tuple[str, str]]] = {
    "rate_limited": ("ERROR", "rate limit exceeded: "),
    "overloaded": ("ERROR", "model overloaded: "),
    "context_length_exceeded": ("ERROR", "context length exceeded: "),
    "content_filtered": ("ERROR_TOXIC", "toxic content: "),
    "internal_error": ("ERROR", "internal error: "),
}

_STATUS_MESSAGES: Final[dict[int, str]] = {
    400: "invalid request: messages must not be empty",
    401: "invalid api token",
    403: "forbidden",
    404: "model not found",
    405: "method not allowed",
    429: "You are using a Trial key, which is limited to 10 API calls / minute.",
    500: "internal server error, this has been reported to our developers",
    503: "service unavailable",
    529: "model is overloaded",
}

_encode = msgspec.json.Encoder().encode
_TOKENS: Final = re.compile(r"\s*(?:\w+|[^\w\s]+)")


def argument_fragments(arguments: dict[str, Any]) -> list[str]:
    """The arguments as JSON text (``": "`` spacing), cut at token boundaries."""
    text = json.dumps(arguments, ensure_ascii=False)
    return _TOKENS.findall(text) if text != "{}" else []


def error_body(status: int) -> bytes:
    """Cohere's JSON body for an HTTP error ``status``."""
    message = _STATUS_MESSAGES.get(status, f"upstream error {status}")
    return _encode({"id": "fake-error-0001", "message": message})


def check_request(request: RecordedRequest) -> str | None:
    """The problem with a v2 chat request, or ``None`` when it looks right."""
    if not request.path.split("?", 1)[0].endswith("/v2/chat"):
        return f"expected POST /v2/chat, got {request.path}"
    body = json_object(request)
    return body if isinstance(body, str) else streamed_messages(body)


def _frame(obj: dict[str, Any]) -> bytes:
    return b"event: %s\ndata: %s\n\n" % (obj["type"].encode(), _encode(obj))


def render(script: Script, *, model: str, request: RecordedRequest) -> list[bytes]:
    """The Cohere v2 chat stream for ``script``, one item per SSE frame."""
    start = {
        "role": "assistant",
        "content": [],
        "tool_plan": "",
        "tool_calls": [],
        "citations": [],
    }
    out = [
        _frame(
            {
                "id": "00000000-fake-4000-8000-000000000001",
                "type": "message-start",
                "delta": {"message": start},
            }
        )
    ]
    pieces = script.pieces
    if pieces:
        opener = {"content": {"type": "text", "text": ""}}
        out.append(_frame({"type": "content-start", "index": 0, "delta": {"message": opener}}))
        for piece in pieces:
            delta = {"message": {"content": {"text": piece}}}
            out.append(_frame({"type": "content-delta", "index": 0, "delta": delta}))
        out.append(_frame({"type": "content-end", "index": 0}))
    for i, call in enumerate(script.tool_calls):
        call_id = call.id or f"{call.name}_fake{i:08d}"
        function = {"name": call.name, "arguments": ""}
        opened = {
            "message": {"tool_calls": {"id": call_id, "type": "function", "function": function}}
        }
        out.append(_frame({"type": "tool-call-start", "index": i, "delta": opened}))
        for fragment in argument_fragments(call.arguments):
            more = {"message": {"tool_calls": {"function": {"arguments": fragment}}}}
            out.append(_frame({"type": "tool-call-delta", "index": i, "delta": more}))
        out.append(_frame({"type": "tool-call-end", "index": i}))
    counts = {"input_tokens": script.input_tokens, "output_tokens": script.usage_output_tokens}
    usage = {"billed_units": counts, "tokens": counts, "cached_tokens": 0}
    end: dict[str, Any]
    if script.error is not None:
        code, message = script.error
        reason, prefix = ERRORS.get(code, ERRORS["internal_error"])
        end = {"finish_reason": reason, "error": prefix + message, "usage": usage}
    else:
        end = {"finish_reason": FINISH_REASONS[script.final_stop_reason], "usage": usage}
    out.append(_frame({"type": "message-end", "delta": end}))
    return out
