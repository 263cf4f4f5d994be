"""The ``/v1/responses`` ingress (§7.3): a Responses API request body -> the
standard, and standard events -> the Responses event stream
(``ResponsesEncoder``), so that Codex-style agents get their own format back.
"""

from __future__ import annotations

import re
import time
import uuid
from typing import Any, Final

import msgspec

from ... import events as ev
from ... import request as rq
from ...errors import InvalidRequest
from .. import _extensions as x
from .. import _lossless
from .._contract import EncodeEvent
from .._ingress import want
from .items import (
    CLIENT_CALLS,
    CLIENT_TOOLS,
    KEPT_ITEMS,
    client_call,
    flat_name,
    kept_part,
    namespaces,
    tools_11,
)
from .request import VENDOR
from .resource import response_fields

__all__ = ["ResponsesEncoder", "parse_ingress", "request_from_vendor"]

_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder().decode

# --- Request side: Responses body -> standard (§7.3 ingress) -----------------------

#: Body fields ``request_from_vendor`` maps; the others (``include``,
#: ``reasoning``, ``store``, ``tool_choice``...) travel on in
#: ``extensions["vendor:openai-responses"]``, which only a Responses upstream reads.
#: Not shared with the Chat Completions ingress's list: the names differ where
#: the settings are the same (``input``, ``max_output_tokens``), and each list is
#: what its own parser reads.
_MAPPED_FIELDS: Final = frozenset(
    {
        "model",
        "input",
        "instructions",
        "tools",
        "max_output_tokens",
        "temperature",
        "top_p",
        "stream",
        "metadata",
    }
)
_DATA_URL: Final = re.compile(r"data:([^;,]+)(?:;[^;,]*)*;base64,(.*)", re.DOTALL)
_ROLES: Final = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
}


def _data_url(url: Any, path: str) -> tuple[str, str]:
    match = _DATA_URL.fullmatch(want(url, str, path, "a string"))
    if match is None:
        raise InvalidRequest(
            "only base64 data: URLs can be carried by the standard (§4.3.1)", path=path
        )
    return match[1], match[2]


def _content(content: Any, path: str) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    want(content, list, path, "a string or an array of content parts")
    parts: list[dict[str, Any]] = []
    for k, part in enumerate(content):
        where = f"{path}[{k}]"
        want(part, dict, where, "a content part object")
        kind = part.get("type")
        if kind in ("input_text", "output_text"):
            parts.append(
                {"type": "text", "text": want(part.get("text"), str, f"{where}.text", "a string")}
            )
        elif kind == "refusal":
            text = want(part.get("refusal"), str, f"{where}.refusal", "a string")
            parts.append({"type": "text", "text": text})
        elif kind == "input_image":
            media_type, data = _data_url(part.get("image_url"), f"{where}.image_url")
            parts.append({"type": "image", "media_type": media_type, "data": data})
        elif kind == "input_file":
            media_type, data = _data_url(part.get("file_data"), f"{where}.file_data")
            parts.append({"type": "document", "media_type": media_type, "data": data})
        else:
            raise InvalidRequest(f"unsupported content part type {kind!r}", path=f"{where}.type")
    if all(p["type"] == "text" for p in parts):
        return "".join(p["text"] for p in parts)
    return parts


def _reasoning_part(item: dict[str, Any], path: str) -> dict[str, Any]:
    """A Responses reasoning item -> a ``tokenwire:reasoning`` part (docs/extensions.md)."""
    part: dict[str, Any] = {"type": x.REASONING, x.VENDOR: VENDOR}
    part[x.ITEM_ID] = want(item.get("id"), str, f"{path}.id", "a string")
    summary = item.get("summary") or []
    want(summary, list, f"{path}.summary", "an array")
    texts: list[str] = []
    for entry in summary:
        text = entry.get("text") if isinstance(entry, dict) else None
        if isinstance(text, str):
            texts.append(text)
    part["text"] = "\n\n".join(texts)
    encrypted = item.get("encrypted_content")
    if encrypted is not None:
        part[x.REDACTED] = want(encrypted, str, f"{path}.encrypted_content", "a string")
    return part


def _messages(items: Any, instructions: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(standard messages, reasoning history)`` for ``input``."""
    messages, history, _, _ = _messages_11(items, instructions)
    return messages, history


def _messages_11(
    items: Any, instructions: Any
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """``(standard messages, reasoning history, block history, approvals)`` for ``input``."""
    messages: list[dict[str, Any]] = []
    history: list[dict[str, Any]] = []
    blocks: list[dict[str, Any]] = []
    answers: list[dict[str, Any]] = []

    def keep(at: int, part: dict[str, Any]) -> None:
        if blocks and blocks[-1]["message"] == at:
            blocks[-1]["parts"].append(part)
        else:
            blocks.append({"message": at, "parts": [part]})

    if instructions is not None:
        messages.append(
            {"role": "system", "content": want(instructions, str, "instructions", "a string")}
        )
    if isinstance(items, str):
        messages.append({"role": "user", "content": items})
        return messages, history, blocks, answers
    want(items, list, "input", "a string or an array of items")
    # The assistant message the following reasoning / function_call items join.
    open_turn: dict[str, Any] | None = None
    for i, item in enumerate(items):
        path = f"input[{i}]"
        want(item, dict, path, "an input item object")
        kind = item.get("type", "message" if "role" in item else None)
        if kind == "message":
            role = _ROLES.get(item.get("role")) if isinstance(item.get("role"), str) else None
            if role is None:
                raise InvalidRequest(f"unsupported role {item.get('role')!r}", path=f"{path}.role")
            content = _content(item.get("content"), f"{path}.content")
            if role == "assistant" and open_turn is not None and not open_turn["tool_calls"]:
                text = content if isinstance(content, str) else ""
                open_turn["content"] = (open_turn["content"] or "") + text
                continue
            open_turn = None
            message = {"role": role, "content": content}
            messages.append(message)
            if role == "assistant":
                open_turn = message
                message["tool_calls"] = []
            continue
        if kind == "mcp_approval_response":
            answer = {
                "id": want(
                    item.get("approval_request_id"),
                    str,
                    f"{path}.approval_request_id",
                    "a string",
                ),
                "approve": want(item.get("approve"), bool, f"{path}.approve", "true or false"),
            }
            if item.get("reason") is not None:
                answer["reason"] = want(item["reason"], str, f"{path}.reason", "a string")
            answers.append(answer)
            continue
        foreign = _foreign_server_tool(kind)
        if foreign or kind in ("reasoning", "function_call", *KEPT_ITEMS, *CLIENT_CALLS):
            if open_turn is None or (
                kind not in ("function_call", *CLIENT_CALLS) and open_turn["tool_calls"]
            ):
                open_turn = {"role": "assistant", "content": "", "tool_calls": []}
                messages.append(open_turn)
            at = len(messages) - 1
            if foreign:
                # Another vendor's server tool step, shown as it came (an Anthropic
                # web search run for this client): it goes back to that vendor whole.
                keep(at, {"type": x.SERVER_TOOL, x.SERVER_TOOL: item})
            elif kind in KEPT_ITEMS:
                keep(at, kept_part(item, path))
            elif kind in CLIENT_CALLS:
                call, part = client_call(item, path)
                open_turn["tool_calls"].append(call)
                keep(at, part)
            elif kind == "reasoning":
                part = _reasoning_part(item, path)
                if history and history[-1]["message"] == at:
                    history[-1]["parts"].append(part)
                else:
                    history.append({"message": at, "parts": [part]})
            else:
                name = want(item.get("name"), str, f"{path}.name", "a string")
                namespace = item.get("namespace")
                if isinstance(namespace, str) and namespace:
                    name = flat_name(namespace, name)  # as the tool was declared
                open_turn["tool_calls"].append(
                    {
                        "id": want(item.get("call_id"), str, f"{path}.call_id", "a string"),
                        "name": name,
                        "arguments": want(
                            item.get("arguments", "{}"), str, f"{path}.arguments", "a JSON text"
                        ),
                    }
                )
            continue
        if kind in ("function_call_output", "custom_tool_call_output", "apply_patch_call_output"):
            open_turn = None
            output = item.get("output")
            if isinstance(output, list):
                output = _content(output, f"{path}.output")
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": want(item.get("call_id"), str, f"{path}.call_id", "a string"),
                    "content": want(output, (str, list), f"{path}.output", "a string"),
                }
            )
            continue
        raise InvalidRequest(f"unsupported input item type {kind!r}", path=f"{path}.type")
    for message in messages:
        if message.get("tool_calls") == []:
            del message["tool_calls"]
    return messages, history, blocks, answers


def _foreign_server_tool(kind: Any) -> bool:
    """An item the encoder showed from another vendor's server tool (Anthropic's
    ``server_tool_use`` and ``*_tool_result`` blocks), sent back as it came."""
    return isinstance(kind, str) and (kind == "server_tool_use" or kind.endswith("_tool_result"))


def request_from_vendor(body: Any) -> rq.Request:
    """A standard request from a Responses API request body (a decoded JSON object).

    ``input`` items: messages (``developer`` -> ``system``), ``function_call``
    items as the assistant message's ``tool_calls``, ``function_call_output``
    items as ``tool`` messages, and ``reasoning`` items (id, summary,
    ``encrypted_content``) kept exactly in
    ``extensions["tokenwire:reasoning_history"]`` for the assistant message
    they precede. ``instructions`` is a system message. Function tools become
    standard tools; when hosted tools are listed too, the whole ``tools`` list
    also travels in the extension (only a Responses upstream can run them). A ``reasoning`` config
    or ``include: ["reasoning.encrypted_content"]`` sets
    ``"tokenwire:reasoning": true``. Other fields travel in
    ``extensions["vendor:openai-responses"]``. Raises ``InvalidRequest`` whose
    ``path`` names the field of ``body``.
    """
    want(body, dict, "$", "a JSON object")
    model = want(body.get("model"), str, "model", "a string")
    messages, history, blocks, answers = _messages_11(body.get("input"), body.get("instructions"))
    tools_out, kinds = tools_11(body.get("tools"))
    params = {
        name: body[key]
        for name, key in (
            ("max_tokens", "max_output_tokens"),
            ("temperature", "temperature"),
            ("top_p", "top_p"),
        )
        if body.get(key) is not None
    }
    rest = {k: v for k, v in body.items() if k not in _MAPPED_FIELDS}
    tools = body.get("tools")
    if isinstance(tools, list) and any(
        not isinstance(t, dict) or t.get("type") not in CLIENT_TOOLS for t in tools
    ):
        # Hosted tools (web_search, file_search, code_interpreter...) run at
        # OpenAI: a Responses upstream gets the caller's whole list back; the
        # standard, and so any other upstream, has the function tools only.
        rest["tools"] = tools
    extensions: dict[str, Any] = {}
    if rest:
        extensions[f"vendor:{VENDOR}"] = rest
    include = rest.get("include")
    if isinstance(rest.get("reasoning"), dict) or (
        isinstance(include, list) and "reasoning.encrypted_content" in include
    ):
        extensions[x.REASONING] = True
    if history:
        extensions[x.REASONING_HISTORY] = history
    if kinds:
        extensions[x.TOOLS] = kinds
    if blocks:
        extensions[x.BLOCK_HISTORY] = blocks
    if answers:
        extensions[x.APPROVALS] = answers
    metadata = body.get("metadata")
    return rq.build(
        model=model,
        messages=messages,
        tools=tools_out,
        parameters=params or None,
        metadata=metadata if isinstance(metadata, dict) else None,
        extensions=extensions or None,
    )


# --- Reverse stream side: standard events -> the Responses event stream -------------

#: Standard error code -> the OpenAI error ``code`` the encoder sends.
_ERROR_CODES: Final = {
    "rate_limited": "rate_limit_exceeded",
    "context_length_exceeded": "context_length_exceeded",
    "content_filtered": "content_filter",
    "overloaded": "server_is_overloaded",
}


class _Out:
    """One output item being written (``item`` is what ``output_item.done`` carries)."""

    __slots__ = ("item", "index", "kind", "text", "done")

    def __init__(self, item: dict[str, Any], index: int, kind: str) -> None:
        self.item = item
        self.index = index
        self.kind = kind  # "message", "refusal", "reasoning"
        self.text: list[str] = []
        self.done = False


class ResponsesEncoder:
    """Standard events -> Responses API SSE frames (§7.3 ingress).

    Each standard block becomes an output item: text a ``message`` item
    (``output_text``; a block marked ``tokenwire:refusal`` a ``refusal`` part),
    reasoning a ``reasoning`` item (summary text, with the id and
    ``encrypted_content`` of its ``tokenwire.block``), each ``tool.call`` a
    ``function_call`` item (its arguments in one delta), a
    ``tokenwire:server_tool`` block the hosted tool item it carries.
    ``tokenwire:citation`` becomes ``output_text.annotation.added``.
    ``stream.end`` closes what is open and sends ``response.completed`` (or
    ``response.incomplete`` for ``max_tokens``/``content_filter``) with the
    output and the usage (cached and reasoning token details from
    ``tokenwire.usage``); an ``error`` event becomes Responses' ``error`` event
    and ``response.failed``.
    """

    def __init__(
        self,
        *,
        model: str,
        id: str | None = None,
        created: int | None = None,
        fields: dict[str, Any] | None = None,
    ) -> None:
        self.model = model
        self.id = id or f"resp_{uuid.uuid4().hex}"
        self.created = created
        #: The response object's request-given fields (``response_fields``).
        self.fields = fields if fields is not None else response_fields({})
        #: Flat tool name -> (namespace, name): the request's namespace tools.
        self._namespaces = namespaces(self.fields.get("tools"))
        self._seq = 0
        self._items: dict[int, _Out] = {}  # standard block -> its item
        self._output: list[_Out] = []
        self._refusals: set[int] = set()
        self._sealed: dict[int, dict[str, Any]] = {}  # reasoning block -> id/encrypted
        self._kinds: dict[int, dict[str, Any]] = {}  # 1.1: tool.call block -> its tool kind
        self._code: dict[str, Any] | None = None  # 1.1: another vendor's code, awaiting its result
        self._usage: dict[str, Any] | None = None
        self._cached: int | None = None
        self._reasoning_tokens: int | None = None
        self._stop: str | None = None
        self._raw_stop: str | None = None
        self._error: dict[str, Any] | None = None
        self._done = False
        self._count = 0

    def _frame(self, kind: str, **fields: Any) -> bytes:
        obj = {"type": kind, "sequence_number": self._seq, **fields}
        self._seq += 1
        return b"event: %s\ndata: %s\n\n" % (kind.encode(), _encode(obj))

    def _response(self, status: str, **fields: Any) -> dict[str, Any]:
        # Open Responses: every field its ResponseResource requires, on every snapshot.
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created if self.created is not None else int(time.time()),
            "completed_at": int(time.time()) if status == "completed" else None,
            "status": status,
            "error": None,
            "incomplete_details": None,
            "model": self.model,
            "output": [o.item for o in self._output if o.done],
            **self.fields,
            "usage": None,
            **fields,
        }

    def _new_id(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}_{self.id.removeprefix('resp_')[:24]}{self._count:04d}"

    def _open(self, block: int, kind: str) -> tuple[_Out, bytes]:
        found = self._items.get(block)
        if found is not None:
            return found, b""
        index = len(self._output)
        if kind == "reasoning":
            sealed = self._sealed.get(block, {})
            item: dict[str, Any] = {
                "id": sealed.get("id") or self._new_id("rs"),
                "type": "reasoning",
                "summary": [],
            }
            if "encrypted_content" in sealed:
                item["encrypted_content"] = sealed["encrypted_content"]
        else:
            item = {
                "id": self._new_id("msg"),
                "type": "message",
                "status": "in_progress",
                "role": "assistant",
                "content": [],
            }
        out = _Out(item, index, kind)
        self._items[block] = out
        self._output.append(out)
        frames = self._frame("response.output_item.added", output_index=index, item=dict(item))
        if kind == "message":
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            item["content"].append(part)
            frames += self._part("added", out, part)
        elif kind == "refusal":
            part = {"type": "refusal", "refusal": ""}
            item["content"].append(part)
            frames += self._part("added", out, part)
        return out, frames

    def _part(self, what: str, out: _Out, part: dict[str, Any]) -> bytes:
        return self._frame(
            f"response.content_part.{what}",
            item_id=out.item["id"],
            output_index=out.index,
            content_index=0,
            part=dict(part),
        )

    def _close(self, out: _Out) -> bytes:
        if out.done:
            return b""
        out.done = True
        item, text = out.item, "".join(out.text)
        at = {"item_id": item["id"], "output_index": out.index}
        frames = b""
        if out.kind == "message":
            part = item["content"][0]
            part["text"] = text
            frames += self._frame(
                "response.output_text.done", **at, content_index=0, text=text, logprobs=[]
            )
            frames += self._part("done", out, part)
            item["status"] = "completed"
        elif out.kind == "refusal":
            part = item["content"][0]
            part["refusal"] = text
            frames += self._frame("response.refusal.done", **at, content_index=0, refusal=text)
            frames += self._part("done", out, part)
            item["status"] = "completed"
        elif item["summary"]:
            summary = item["summary"][0]
            summary["text"] = text
            frames += self._frame(
                "response.reasoning_summary_text.done", **at, summary_index=0, text=text
            )
            frames += self._frame(
                "response.reasoning_summary_part.done", **at, summary_index=0, part=dict(summary)
            )
        return frames + self._frame("response.output_item.done", output_index=out.index, item=item)

    def encode(self, event: ev.Event) -> bytes:
        """The Responses bytes for ``event``; ``b""`` when it has none of its own."""
        if self._done:
            return b""
        match event:
            case ev.StreamStart():
                if self.created is None:
                    self.created = event.created
                created = self._response("in_progress")
                return self._frame("response.created", response=created) + self._frame(
                    "response.in_progress", response=created
                )
            case ev.ContentDelta():
                return self._delta(event)
            case ev.ToolCall():
                return self._tool_call(event)
            case ev.ContentStop():
                if event.stop_reason != "tool_use" or self._stop is None:
                    self._stop = event.stop_reason
                out = self._items.get(event.index)
                return self._close(out) if out is not None else b""
            case ev.Usage():
                self._usage = {"input": event.input_tokens, "output": event.output_tokens}
                return b""
            case ev.ErrorEvent():
                code = _ERROR_CODES.get(event.code)
                self._error = {"code": code or "server_error", "message": event.message}
                error = {
                    "type": "server_error" if code is None else "invalid_request_error",
                    "code": code,
                    "message": event.message,
                    "param": None,
                }
                return self._frame("error", error=error)
            case ev.StreamEnd():
                return self._end()
            case ev.UnknownEvent():
                return self._extension(event)
        return b""

    def _delta(self, event: ev.ContentDelta) -> bytes:
        block = event.index
        if event.reasoning:
            out, frames = self._open(block, "reasoning")
            item = out.item
            at = {"item_id": item["id"], "output_index": out.index, "summary_index": 0}
            if not item["summary"]:
                summary = {"type": "summary_text", "text": ""}
                item["summary"].append(summary)
                frames += self._frame(
                    "response.reasoning_summary_part.added", **at, part=dict(summary)
                )
            out.text.append(event.text)
            return frames + self._frame(
                "response.reasoning_summary_text.delta", **at, delta=event.text
            )
        kind = "refusal" if block in self._refusals else "message"
        out, frames = self._open(block, kind)
        out.text.append(event.text)
        at = {"item_id": out.item["id"], "output_index": out.index, "content_index": 0}
        if out.kind == "refusal":
            return frames + self._frame("response.refusal.delta", **at, delta=event.text)
        return frames + self._frame(
            "response.output_text.delta", **at, delta=event.text, logprobs=[]
        )

    def _client_tool(self, event: ev.ToolCall, marker: dict[str, Any]) -> bytes:
        """1.1: a custom tool or apply_patch ``tool.call`` as the item it came as."""
        index = len(self._output)
        kind = marker.get(x.TOOL_KIND)
        given = marker.get(x.ITEM_ID)
        item: dict[str, Any]
        if kind == "custom":
            item = {
                "id": given if isinstance(given, str) else self._new_id("ctc"),
                "type": "custom_tool_call",
                "call_id": event.id,
                "name": event.name,
                "input": "",
            }
        else:
            item = {
                "id": given if isinstance(given, str) else self._new_id("apc"),
                "type": "apply_patch_call",
                "status": "in_progress",
                "call_id": event.id,
                "operation": _decode(event.arguments),
            }
        out = _Out(item, index, item["type"])
        out.done = True
        self._output.append(out)
        frames = self._frame("response.output_item.added", output_index=index, item=dict(item))
        if kind == "custom":
            raw = _lossless.custom_input(event.arguments)
            at = {"item_id": item["id"], "output_index": index}
            frames += self._frame("response.custom_tool_call_input.delta", **at, delta=raw)
            frames += self._frame("response.custom_tool_call_input.done", **at, input=raw)
            item["input"] = raw
        else:
            status = marker.get(x.STATUS)
            item["status"] = status if isinstance(status, str) else "completed"
        return frames + self._frame("response.output_item.done", output_index=index, item=item)

    def _foreign_code(self, code: dict[str, Any]) -> bytes:
        """1.1, cross-vendor: Gemini's code execution as a ``code_interpreter_call``
        (the code, then its result, which completes the item)."""
        frames = b""
        if isinstance(code.get("code"), str):
            frames = self._flush_code()
            self._code = {
                "id": self._new_id("ci"),
                "type": "code_interpreter_call",
                "status": "completed",
                "code": code["code"],
                "container_id": "",
                "outputs": [],
            }
        if "output" in code:
            item = self._code or {
                "id": self._new_id("ci"),
                "type": "code_interpreter_call",
                "status": "completed",
                "code": None,
                "container_id": "",
                "outputs": [],
            }
            item["outputs"] = [{"type": "logs", "logs": str(code.get("output") or "")}]
            if code.get("outcome") == "error":
                item["status"] = "failed"
            self._code = item
            frames += self._flush_code()
        return frames

    def _flush_code(self) -> bytes:
        item, self._code = self._code, None
        return self._whole_item(item) if item is not None else b""

    def _whole_item(self, item: dict[str, Any]) -> bytes:
        """An item sent whole (``output_item.added`` and ``.done``): hosted tools, MCP..."""
        index = len(self._output)
        out = _Out(dict(item), index, "server_tool")
        out.done = True
        self._output.append(out)
        return self._frame("response.output_item.added", output_index=index, item=item) + (
            self._frame("response.output_item.done", output_index=index, item=item)
        )

    def _tool_call(self, event: ev.ToolCall) -> bytes:
        marker = self._kinds.get(event.index)
        if marker is not None and marker.get(x.TOOL_KIND) in _lossless.KINDS:
            return self._client_tool(event, marker)
        index = len(self._output)
        item: dict[str, Any] = {
            "id": self._new_id("fc"),
            "type": "function_call",
            "status": "in_progress",
            "arguments": "",
            "call_id": event.id,
            "name": event.name,
        }
        owner = self._namespaces.get(event.name)
        if owner is not None:
            # A namespace's function, declared flat: the client sees its own names.
            item["namespace"], item["name"] = owner
        out = _Out(item, index, "function_call")
        out.done = True
        self._output.append(out)
        at = {"item_id": item["id"], "output_index": index}
        frames = self._frame("response.output_item.added", output_index=index, item=dict(item))
        frames += self._frame("response.function_call_arguments.delta", **at, delta=event.arguments)
        frames += self._frame(
            "response.function_call_arguments.done", **at, arguments=event.arguments
        )
        item.update(status="completed", arguments=event.arguments)
        return frames + self._frame("response.output_item.done", output_index=index, item=item)

    def _extension(self, event: ev.UnknownEvent) -> bytes:
        body = x.fields(event)
        if body is None:
            return b""
        if event.type == x.USAGE:
            if isinstance(body.get(x.CACHE_READ), int):
                self._cached = body[x.CACHE_READ]
            if isinstance(body.get(x.REASONING_TOKENS), int):
                self._reasoning_tokens = body[x.REASONING_TOKENS]
            return b""
        if event.type == x.STOP:
            raw = body.get(x.RAW_STOP_REASON)
            self._raw_stop = raw if isinstance(raw, str) else None
            return b""
        block = body.get("index")
        if event.type != x.BLOCK or not isinstance(block, int):
            return b""
        if body.get(x.REFUSAL) is True:
            self._refusals.add(block)
        if x.TOOL_KIND in body:
            self._kinds[block] = body
            return b""
        code = body.get(x.CODE)
        if isinstance(code, dict) and body.get(x.VENDOR) not in (None, VENDOR):
            return self._foreign_code(code)
        approval = body.get(x.APPROVAL)
        if isinstance(approval, dict) and isinstance(approval.get("id"), str):
            return self._whole_item({"type": "mcp_approval_request", **approval})
        mcp = body.get(x.MCP)
        if isinstance(mcp, dict) and mcp.get("kind") in ("list_tools", "call"):
            kind = "mcp_list_tools" if mcp["kind"] == "list_tools" else "mcp_call"
            fields = {k: v for k, v in mcp.items() if k not in ("kind", "call_id")}
            return self._whole_item({"type": kind, **fields})
        compaction = body.get(x.COMPACTION)
        if isinstance(compaction, dict) and body.get(x.VENDOR) == VENDOR:
            # Another vendor's compaction cannot be checked by OpenAI: dropped
            # (docs/translation.md); its summary text, if any, is not an answer.
            return self._whole_item({"type": "compaction", **compaction})
        if body.get(x.VENDOR) == VENDOR and (x.ITEM_ID in body or x.REDACTED in body):
            sealed = self._sealed.setdefault(block, {})
            if isinstance(body.get(x.ITEM_ID), str):
                sealed["id"] = body[x.ITEM_ID]
            if isinstance(body.get(x.REDACTED), str):
                sealed["encrypted_content"] = body[x.REDACTED]
            found = self._items.get(block)
            if found is None:
                return self._open(block, "reasoning")[1]
            found.item.update(sealed)
            return b""
        citation = body.get(x.CITATION)
        if isinstance(citation, dict) and isinstance(citation.get("url_citation"), dict):
            # Chat Completions' nested shape -> the Responses API's flat one.
            citation = {"type": "url_citation", **citation["url_citation"]}
        if isinstance(citation, dict):
            out, frames = self._open(block, "message")
            if out.kind != "message":
                return frames
            annotations = out.item["content"][0]["annotations"]
            annotations.append(citation)
            return frames + self._frame(
                "response.output_text.annotation.added",
                item_id=out.item["id"],
                output_index=out.index,
                content_index=0,
                annotation_index=len(annotations) - 1,
                annotation=citation,
            )
        tool = body.get(x.SERVER_TOOL)
        if isinstance(tool, dict) and isinstance(tool.get("type"), str) and "id" in tool:
            index = len(self._output)
            out = _Out(dict(tool), index, "server_tool")
            out.done = True
            self._output.append(out)
            return self._frame(
                "response.output_item.added", output_index=index, item=tool
            ) + self._frame("response.output_item.done", output_index=index, item=tool)
        return b""

    def _usage_object(self) -> dict[str, Any] | None:
        if self._usage is None:
            return None
        i, o = self._usage["input"], self._usage["output"]
        return {
            "input_tokens": i,
            "input_tokens_details": {"cached_tokens": self._cached or 0},
            "output_tokens": o,
            "output_tokens_details": {"reasoning_tokens": self._reasoning_tokens or 0},
            "total_tokens": i + o,
        }

    def _end(self) -> bytes:
        self._done = True
        frames = self._flush_code()
        frames += b"".join(self._close(out) for out in self._output)
        usage = self._usage_object()
        if self._error is not None:
            failed = self._response("failed", error=self._error, usage=usage)
            return frames + self._frame("response.failed", response=failed)
        raw = self._raw_stop
        reason = raw if raw in ("max_output_tokens", "content_filter") else None
        if reason is None and self._stop == "max_tokens":
            reason = "max_output_tokens"
        elif reason is None and self._stop == "content_filter" and not self._refusals:
            reason = "content_filter"
        if reason is not None:
            final = self._response("incomplete", usage=usage, incomplete_details={"reason": reason})
            return frames + self._frame("response.incomplete", response=final)
        final = self._response("completed", usage=usage)
        return frames + self._frame("response.completed", response=final)


def parse_ingress(body: dict[str, Any]) -> tuple[rq.Request, EncodeEvent]:
    """The ``/v1/responses`` ingress: the standard request and a fresh ``ResponsesEncoder``."""
    request = request_from_vendor(body)
    return request, ResponsesEncoder(model=request.model, fields=response_fields(body)).encode
