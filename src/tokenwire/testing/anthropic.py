"""The fake upstream's Anthropic Messages wire format (``FakeUpstream("anthropic")``).

Rendered like the recordings in ``vendor-fixtures/anthropic/``: every event is
``event: <type>`` + ``data: <json>`` (the SDK dispatches on the ``event:``
line); ``message_start`` carries the input tokens (and a placeholder
``output_tokens: 1``); a ``ping`` follows the first ``content_block_start`` and
sits between blocks; text streams as one ``text_delta`` per word; each tool
call is a ``tool_use`` block whose input arrives as an empty ``input_json_delta``
and then fragments cut mid-token; ``message_delta`` carries the stop reason and
the cumulative ``output_tokens``; ``message_stop`` ends the body. A scripted
error becomes ``event: error`` after the blocks, with no ``message_stop``
(what Anthropic does on a mid-stream ``overloaded_error``). SDK base URL:
``fake.url`` (the SDK appends ``/v1/messages``).

Extended thinking, as strict as Anthropic on the next turn: ``Script.thinking``
streams a ``thinking`` block first (``thinking_delta`` per word, then a
``signature_delta``) and ``Script.redacted_thinking`` a ``redacted_thinking``
block. The signature signs the block's exact text, and the ids of the tool calls
made in that turn carry a digest of the turn's signed blocks. A later request is
refused with HTTP 400 and Anthropic's ``invalid_request_error`` body when an
assistant turn that made such a call does not start with the very same
thinking / redacted blocks, in order, or when any thinking block's signature
does not match its text: dropped, reordered or altered reasoning fails the way
it fails against the real API.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Iterator
from typing import Any, Final

import msgspec

from ..translate.anthropic import ERROR_TYPES, VENDOR_STOP_REASONS
from .upstream import (
    RecordedRequest,
    Script,
    count_answer,
    cut_text,
    json_object,
    padding,
    split_words,
)

__all__ = [
    "COUNT_FIELDS",
    "count_tokens",
    "CONTENT_TYPE",
    "RESPONSE_HEADERS",
    "STATUS_ERRORS",
    "argument_fragments",
    "bad_event",
    "check_request",
    "reasoning_blocks",
    "redacted_data",
    "refusal_body",
    "signature",
    "error_body",
    "error_event",
    "huge_event",
    "render",
]

CONTENT_TYPE: Final = "text/event-stream"
RESPONSE_HEADERS: Final = {"request-id": "req_fake0001", "anthropic-organization-id": "org_fake"}

#: HTTP status -> the Anthropic error ``type`` and message of its JSON error body.
STATUS_ERRORS: Final[dict[int, tuple[str, str]]] = {
    400: ("invalid_request_error", "Invalid request."),
    401: ("authentication_error", "invalid x-api-key"),
    403: ("permission_error", "Your API key does not have permission to use this resource."),
    404: ("not_found_error", "The requested resource could not be found."),
    405: ("invalid_request_error", "Method not allowed."),
    413: ("request_too_large", "Request exceeds the maximum allowed number of bytes."),
    429: ("rate_limit_error", "Number of requests has exceeded your rate limit."),
    500: ("api_error", "Internal server error"),
    504: ("timeout_error", "Request timed out."),
    529: ("overloaded_error", "Overloaded"),
}

_encode = msgspec.json.Encoder().encode
#: Fragment lengths cycled through: Anthropic cuts tool input anywhere.
_FRAGMENTS: Final = (7, 2, 5, 11, 3)


def _frame(payload: dict[str, Any]) -> bytes:
    return b"event: %s\ndata: %s\n\n" % (payload["type"].encode(), _encode(payload))


def error_event(code: str, message: str) -> bytes:
    """The in-stream ``event: error`` for a draft error code.

    ``context_length_exceeded`` is phrased the way Anthropic phrases it
    ("prompt is too long: ..."), so that a translator reading it back can tell.
    """
    if code == "context_length_exceeded" and "too long" not in message.lower():
        message = f"prompt is too long: {message}"
    error = {"type": ERROR_TYPES.get(code, "api_error"), "message": message}
    return _frame({"type": "error", "error": error})


def error_body(status: int) -> bytes:
    """Anthropic's JSON body for an HTTP error ``status``."""
    etype, message = STATUS_ERRORS.get(status, ("api_error", f"Upstream error {status}."))
    return _encode(
        {
            "type": "error",
            "error": {"type": etype, "message": message},
            "request_id": "req_fake0001",
        }
    )


# --- extended thinking: signed blocks, checked on the next turn -----------------

_SIGNING_KEY: Final = b"tokenwire-fake-anthropic"
#: ``toolu_fake0001_<digest>``: a call made in a turn whose reasoning was signed.
_SIGNED_CALL: Final = re.compile(r"toolu_fake\d{4}_([0-9a-f]{16})")


def signature(thinking: str) -> str:
    """The fake's signature of a thinking block's text (opaque, like Anthropic's)."""
    digest = hashlib.sha256(_SIGNING_KEY + thinking.encode("utf-8")).digest()
    return base64.b64encode(b"\x12\x01" + digest).decode("ascii")


def redacted_data(seed: str) -> str:
    """Opaque ``redacted_thinking`` data (what Anthropic encrypts)."""
    digest = hashlib.sha256(_SIGNING_KEY + b"redacted:" + seed.encode("utf-8")).digest()
    return base64.b64encode(b"\x0a\x02" + digest).decode("ascii")


def _turn_digest(blocks: list[dict[str, Any]]) -> str:
    """A digest of a turn's reasoning blocks, in order (what the tool ids carry)."""
    h = hashlib.sha256(_SIGNING_KEY)
    for block in blocks:
        h.update(_encode([block.get("type"), block.get("signature"), block.get("data")]))
    return h.hexdigest()[:16]


def reasoning_blocks(script: Script) -> list[dict[str, Any]]:
    """The complete thinking / redacted_thinking blocks ``script`` answers with."""
    blocks: list[dict[str, Any]] = []
    if script.thinking:
        blocks.append(
            {
                "type": "thinking",
                "thinking": script.thinking,
                "signature": signature(script.thinking),
            }
        )
    if script.redacted_thinking:
        blocks.append({"type": "redacted_thinking", "data": redacted_data(script.thinking)})
    return blocks


def _check_reasoning(messages: list[Any]) -> str | None:
    """Anthropic's next-turn rules for thinking blocks (see the module docstring)."""
    for i, message in enumerate(messages):
        content = message.get("content")
        if message.get("role") != "assistant" or not isinstance(content, list):
            continue
        lead: list[dict[str, Any]] = []
        for k, block in enumerate(content):
            if not isinstance(block, dict):
                return f"messages.{i}.content.{k}: Input should be an object"
            kind = block.get("type")
            if kind == "thinking":
                text, sig = block.get("thinking"), block.get("signature")
                if not isinstance(text, str) or not isinstance(sig, str) or sig != signature(text):
                    return f"messages.{i}.content.{k}: Invalid `signature` in `thinking` block"
            if kind in ("thinking", "redacted_thinking") and len(lead) == k:
                lead.append(block)
        for block in content:
            if block.get("type") != "tool_use":
                continue
            match = _SIGNED_CALL.fullmatch(str(block.get("id", "")))
            if match is None:
                continue
            if not lead:
                found = content[0].get("type") if isinstance(content[0], dict) else None
                return (
                    f"messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, "
                    f"but found `{found}`. When `thinking` is enabled, a final `assistant` "
                    "message must start with a thinking block (preceeding the lastmost set of "
                    "`tool_use` and `tool_result` blocks). We recommend you include thinking "
                    "blocks from previous turns."
                )
            if _turn_digest(lead) != match.group(1):
                return (
                    f"messages.{i}.content: thinking or redacted_thinking blocks in the latest "
                    "assistant message cannot be modified. These blocks must remain as they "
                    "were in the original response."
                )
    return None


def refusal_body(problem: str) -> bytes:
    """Anthropic's 400 body, ``invalid_request_error`` with the problem as its message."""
    return _encode(
        {
            "type": "error",
            "error": {"type": "invalid_request_error", "message": problem},
            "request_id": "req_fake0001",
        }
    )


def check_request(request: RecordedRequest) -> str | None:
    """The problem with a Messages request, or ``None`` when Anthropic would take it."""
    if not request.path.split("?", 1)[0].endswith("/v1/messages"):
        return f"expected POST .../v1/messages, got {request.path}"
    if "anthropic-version" not in request.headers:
        return "the anthropic-version header is required"
    body = json_object(request)
    if isinstance(body, str):
        return body
    max_tokens = body.get("max_tokens")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        return "max_tokens: required, an integer >= 1"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: a non-empty array is required"
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
            return f"messages.{i}.role: must be user or assistant"
    if body.get("stream") is not True:
        return "the fake only streams: stream must be true"
    return _check_reasoning(messages)


def argument_fragments(arguments: dict[str, Any]) -> list[str]:
    """Tool input as JSON text cut into ``input_json_delta`` fragments (mid-token).

    The first fragment is ``""``, as Anthropic sends it.
    """
    return ["", *cut_text(json.dumps(arguments), _FRAGMENTS)]


def bad_event(event: bytes) -> bytes:
    """One event with its JSON broken (the framing and ``event:`` line kept)."""
    i = event.find(b"data: ")
    if i < 0:
        return event + b"data: {\n\n"
    return event[: i + 6] + b"{" + event[i + 6 :]


def huge_event(size: int) -> Iterator[bytes]:
    """One ``ping`` of about ``size`` bytes (padded), in pieces of 1 MiB."""
    head, tail = b'event: ping\ndata: {"type":"ping","pad":"', b'"}\n\n'
    yield head
    yield from padding(size - len(head) - len(tail))
    yield tail


_PING: Final = _frame({"type": "ping"})


def render(script: Script, *, model: str, request: RecordedRequest) -> list[bytes]:
    """The Anthropic Messages stream for ``script``, one item per SSE event."""
    message: dict[str, Any] = {
        "id": "msg_fake0001",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {
            "input_tokens": script.input_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": 1,
            "service_tier": "standard",
        },
    }
    out = [_frame({"type": "message_start", "message": message})]
    index = 0

    def block(content_block: dict[str, Any], deltas: list[dict[str, Any]]) -> None:
        nonlocal index
        out.append(
            _frame({"type": "content_block_start", "index": index, "content_block": content_block})
        )
        if index == 0:
            out.append(_PING)
        for delta in deltas:
            out.append(_frame({"type": "content_block_delta", "index": index, "delta": delta}))
        out.append(_frame({"type": "content_block_stop", "index": index}))
        index += 1

    signed = reasoning_blocks(script)
    for signed_block in signed:
        if signed_block["type"] == "thinking":
            deltas: list[dict[str, Any]] = [
                {"type": "thinking_delta", "thinking": p} for p in split_words(script.thinking)
            ]
            deltas.append({"type": "signature_delta", "signature": signed_block["signature"]})
            block({"type": "thinking", "thinking": "", "signature": ""}, deltas)
        else:
            block(signed_block, [])
    digest = f"_{_turn_digest(signed)}" if signed else ""
    pieces = script.pieces
    if pieces:
        block({"type": "text", "text": ""}, [{"type": "text_delta", "text": p} for p in pieces])
    for i, call in enumerate(script.tool_calls):
        if index:
            out.append(_PING)
        fragments = argument_fragments(call.arguments)
        block(
            {
                "type": "tool_use",
                "id": call.id or f"toolu_fake{i:04d}{digest}",
                "name": call.name,
                "input": {},
            },
            [{"type": "input_json_delta", "partial_json": f} for f in fragments],
        )
    if script.error is not None:
        out.append(error_event(*script.error))
        return out
    delta = {
        "stop_reason": VENDOR_STOP_REASONS.get(script.final_stop_reason, "end_turn"),
        "stop_sequence": None,
    }
    out.append(
        _frame(
            {
                "type": "message_delta",
                "delta": delta,
                "usage": {"output_tokens": script.usage_output_tokens},
            }
        )
    )
    out.append(_frame({"type": "message_stop"}))
    return out


#: What ``POST /v1/messages/count_tokens`` takes (Anthropic refuses the rest).
COUNT_FIELDS: Final = frozenset(
    {"model", "messages", "system", "tools", "tool_choice", "thinking", "mcp_servers"}
)


def count_tokens(request: RecordedRequest) -> tuple[int, bytes] | None:
    """The answer of ``POST /v1/messages/count_tokens`` (``None``: another path)."""
    return count_answer(
        request,
        "/v1/messages/count_tokens",
        COUNT_FIELDS,
        ("model", "messages"),
        lambda n: {"input_tokens": n},
        refusal_body,
    )
