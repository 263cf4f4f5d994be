"""The fake upstream's OpenAI Responses API format (``FakeUpstream("openai-responses")``).

Rendered like the recordings in ``vendor-fixtures/openai-responses/``: ``event:
<type>`` / ``data: <json>`` frames whose ``type`` equals the event name, with
``sequence_number`` counting from 0 and no ``[DONE]``: ``response.created``,
``response.in_progress``; the text as a ``message`` output item
(``output_item.added``, ``content_part.added``, one ``output_text.delta`` per
word with ``logprobs`` and ``obfuscation`` padding, ``output_text.done``,
``content_part.done``, ``output_item.done``); each tool call as a
``function_call`` item (``call_id``, ``name``, empty ``arguments``) with
``function_call_arguments.delta`` fragments cut at token boundaries,
``function_call_arguments.done`` and ``output_item.done``; then the terminal
event with the full ``response`` and its ``usage``.

Stop reasons: ``end_turn`` and ``tool_use`` -> ``response.completed``;
``max_tokens`` -> ``response.incomplete`` with ``incomplete_details.reason:
"max_output_tokens"``, ``content_filter`` -> ``"content_filter"``. A scripted
error becomes the nested ``error`` event real streams send (``ERRORS`` gives
its code) followed by ``response.failed``. SDK setup:
``openai.OpenAI(base_url=fake.url + "/v1", api_key="x")``.
"""

from __future__ import annotations

import re
from typing import Any, Final

import msgspec

from .openai import error_body  # the same OpenAI platform, the same error bodies
from .upstream import RecordedRequest, Script, json_object

__all__ = [
    "CONTENT_TYPE",
    "ERRORS",
    "RESPONSE_HEADERS",
    "argument_fragments",
    "check_request",
    "error_body",
    "render",
]

CONTENT_TYPE: Final = "text/event-stream; charset=utf-8"
RESPONSE_HEADERS: Final = {"x-request-id": "req_fake", "openai-processing-ms": "1"}

#: Draft error code -> the OpenAI error ``type`` and ``code`` the fake sends.
ERRORS: Final[dict[str, tuple[str, str | None]]] = {
    "rate_limited": ("requests", "rate_limit_exceeded"),
    "context_length_exceeded": ("invalid_request_error", "context_length_exceeded"),
    "content_filtered": ("invalid_request_error", "content_filter"),
    "overloaded": ("server_error", "server_is_overloaded"),
    "internal_error": ("server_error", None),
}


_encode = msgspec.json.Encoder().encode
_TOKENS: Final = re.compile(r"\s*(?:\w+|[^\w\s]+)")
#: Stand-ins for the random ``obfuscation`` padding of real deltas.
_PADDING: Final = ("VLMdSoETMf5", "SdSOtFre", "y5ScOEy3kpvfM", "WfxTBX")


def argument_fragments(arguments: dict[str, Any]) -> list[str]:
    """The arguments as compact JSON text, cut at token boundaries."""
    text = _encode(arguments).decode()
    return _TOKENS.findall(text) if text != "{}" else []


def check_request(request: RecordedRequest) -> str | None:
    """The problem with a Responses API request, or ``None`` when it looks right."""
    if not request.path.split("?", 1)[0].endswith("/responses"):
        return f"expected POST .../responses, got {request.path}"
    body = json_object(request)
    if isinstance(body, str):
        return body
    if not isinstance(body.get("input"), str | list) or not body["input"]:
        return "input: a string or a non-empty array is required"
    if body.get("stream") is not True:
        return "the fake only streams: stream must be true"
    return None


class _Body:
    """The event list being built, stamping ``sequence_number``."""

    def __init__(self) -> None:
        self.frames: list[bytes] = []

    def add(self, kind: str, **fields: Any) -> None:
        obj = {"type": kind, "sequence_number": len(self.frames), **fields}
        self.frames.append(b"event: %s\ndata: %s\n\n" % (kind.encode(), _encode(obj)))


def render(script: Script, *, model: str, request: RecordedRequest) -> list[bytes]:
    """The Responses API stream for ``script``, one item per SSE frame."""

    def response(status: str, output: list[Any], **fields: Any) -> dict[str, Any]:
        return {
            "id": "resp_fake0001",
            "object": "response",
            "created_at": 1_700_000_000,
            "status": status,
            "background": False,
            "error": None,
            "incomplete_details": None,
            "instructions": None,
            "max_output_tokens": None,
            "model": model,
            "output": output,
            "parallel_tool_calls": True,
            "previous_response_id": None,
            "reasoning": {"effort": None, "summary": None},
            "store": True,
            "temperature": 1.0,
            "text": {"format": {"type": "text"}},
            "tool_choice": "auto",
            "tools": [],
            "top_p": 1.0,
            "truncation": "disabled",
            "usage": None,
            "user": None,
            "metadata": {},
            **fields,
        }

    body = _Body()
    body.add("response.created", response=response("in_progress", []))
    body.add("response.in_progress", response=response("in_progress", []))
    output: list[dict[str, Any]] = []
    pieces = script.pieces
    if pieces:
        item_id = "msg_fake0001"
        index = len(output)
        part = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
        opened = {
            "id": item_id,
            "type": "message",
            "status": "in_progress",
            "content": [],
            "role": "assistant",
        }
        body.add("response.output_item.added", output_index=index, item=opened)
        at = {"item_id": item_id, "output_index": index, "content_index": 0}
        body.add("response.content_part.added", **at, part=part)
        for k, piece in enumerate(pieces):
            pad = _PADDING[k % len(_PADDING)]
            body.add("response.output_text.delta", **at, delta=piece, logprobs=[], obfuscation=pad)
        text = "".join(pieces)
        body.add("response.output_text.done", **at, text=text, logprobs=[])
        done_part = {**part, "text": text}
        body.add("response.content_part.done", **at, part=done_part)
        item = {**opened, "status": "completed", "content": [done_part]}
        body.add("response.output_item.done", output_index=index, item=item)
        output.append(item)
    for i, call in enumerate(script.tool_calls):
        index = len(output)
        item_id = f"fc_fake{i:04d}"
        arguments = _encode(call.arguments).decode()
        opened = {
            "id": item_id,
            "type": "function_call",
            "status": "in_progress",
            "arguments": "",
            "call_id": call.id or f"call_fake{i:04d}",
            "name": call.name,
        }
        body.add("response.output_item.added", output_index=index, item=opened)
        for k, fragment in enumerate(argument_fragments(call.arguments)):
            pad = _PADDING[k % len(_PADDING)]
            body.add(
                "response.function_call_arguments.delta",
                item_id=item_id,
                output_index=index,
                delta=fragment,
                obfuscation=pad,
            )
        body.add(
            "response.function_call_arguments.done",
            item_id=item_id,
            output_index=index,
            arguments=arguments,
        )
        item = {**opened, "status": "completed", "arguments": arguments}
        body.add("response.output_item.done", output_index=index, item=item)
        output.append(item)
    if script.error is not None:
        code, message = script.error
        etype, ecode = ERRORS.get(code, ERRORS["internal_error"])
        error = {"type": etype, "code": ecode, "message": message, "param": None}
        body.add("error", error=error)
        failed = response("failed", output, error={"code": ecode, "message": message})
        body.add("response.failed", response=failed)
        return body.frames
    output_tokens = script.usage_output_tokens
    usage = {
        "input_tokens": script.input_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": script.input_tokens + output_tokens,
    }
    stop = script.final_stop_reason
    if stop in ("max_tokens", "content_filter"):
        reason = "max_output_tokens" if stop == "max_tokens" else "content_filter"
        final = response("incomplete", output, usage=usage, incomplete_details={"reason": reason})
        body.add("response.incomplete", response=final)
    else:
        body.add("response.completed", response=response("completed", output, usage=usage))
    return body.frames
