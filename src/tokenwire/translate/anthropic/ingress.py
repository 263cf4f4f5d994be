"""The ``/v1/messages`` ingress (§7.3): an Anthropic request body -> the standard,
and standard events -> Anthropic's own SSE (``EventEncoder``), so that an
Anthropic client (the real ``anthropic`` SDK) can read any upstream.
"""

from __future__ import annotations

import base64
import secrets
from collections.abc import Mapping
from typing import Any, Final

import msgspec

from ... import events as ev
from ... import request as rq
from ...errors import InvalidRequest
from .. import _extensions as x
from .._contract import EncodeEvent
from .._ingress import json_kind
from .errors import ERROR_TYPES, STOP_REASONS, VENDOR_STOP_REASONS

VENDOR: Final = "anthropic"

_encode = msgspec.json.Encoder().encode


# --- reverse: an Anthropic request body -> the standard ----------------------------

#: Anthropic request fields with a standard home; the others go to ``vendor:anthropic``.
_STANDARD_FIELDS: Final = frozenset(
    {
        "model",
        "messages",
        "system",
        "tools",
        "max_tokens",
        "temperature",
        "top_p",
        "stop_sequences",
        "stream",
        "metadata",
    }
)


def _want_str(obj: Mapping[str, Any], key: str, path: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str):
        where = f"{path}.{key}" if path else key
        raise InvalidRequest(f"required: a string, got {json_kind(value)}", path=where)
    return value


def _vendor_source(block: Mapping[str, Any], path: str) -> tuple[str, str]:
    """``(media_type, base64 data)`` of an image/document block's ``source``."""
    source = block.get("source")
    if not isinstance(source, dict):
        raise InvalidRequest(f"required: an object, got {json_kind(source)}", path=f"{path}.source")
    kind = source.get("type")
    if kind == "base64":
        return _want_str(source, "media_type", f"{path}.source"), _want_str(
            source, "data", f"{path}.source"
        )
    if kind == "text" and block.get("type") == "document":
        text = _want_str(source, "data", f"{path}.source")
        media_type = source.get("media_type")
        return (
            media_type if isinstance(media_type, str) else "text/plain",
            base64.b64encode(text.encode("utf-8")).decode("ascii"),
        )
    raise InvalidRequest(
        f"source type {kind!r} is not supported: send the data as base64",
        path=f"{path}.source.type",
    )


def _vendor_part(block: Mapping[str, Any], path: str) -> dict[str, Any] | None:
    """An Anthropic text/image/document block as a standard part (``None``: dropped)."""
    kind = block.get("type")
    if kind == "text":
        return {"type": "text", "text": _want_str(block, "text", path)}
    if kind in ("image", "document"):
        media_type, data = _vendor_source(block, path)
        return {"type": kind, "media_type": media_type, "data": data}
    if kind in ("thinking", "redacted_thinking"):
        return None  # a user turn's reasoning: nothing Anthropic sends (assistant: see below)
    raise InvalidRequest(f"content block type {kind!r} is not supported here", path=f"{path}.type")


def _vendor_content(content: object, path: str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise InvalidRequest(
            f"must be a string or an array of content blocks, got {json_kind(content)}", path=path
        )
    out = []
    for k, block in enumerate(content):
        where = f"{path}[{k}]"
        if not isinstance(block, dict):
            raise InvalidRequest(
                f"a content block must be an object, got {json_kind(block)}", path=where
            )
        part = _vendor_part(block, where)
        if part is not None:
            out.append(part)
    return out


def _plain(parts: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """Parts as the standard's string form when they are one text (§4.3.1)."""
    if not parts:
        return ""
    if len(parts) == 1 and parts[0]["type"] == "text":
        text: str = parts[0]["text"]
        return text
    return parts


def _reasoning_part(block: Mapping[str, Any], path: str) -> dict[str, Any]:
    """A thinking / redacted_thinking block as a ``tokenwire:reasoning`` part (docs/extensions.md).

    The strings are kept exactly: Anthropic checks the signature against the text.
    """
    if block.get("type") == "redacted_thinking":
        return {
            "type": x.REASONING,
            x.REDACTED: _want_str(block, "data", path),
            x.VENDOR: "anthropic",
        }
    return {
        "type": x.REASONING,
        "text": _want_str(block, "thinking", path),
        x.SIGNATURE: _want_str(block, "signature", path),
        x.VENDOR: "anthropic",
    }


def _kept_part(block: dict[str, Any]) -> dict[str, Any] | None:
    """1.1: an assistant block kept whole for the next turn, as a block history part."""
    kind = block.get("type")
    if kind == "compaction":
        fields = {k: v for k, v in block.items() if k != "type"}
        return {"type": x.COMPACTION, x.COMPACTION: fields, x.VENDOR: VENDOR}
    if kind == "mcp_tool_use":
        mcp = {
            "kind": "call",
            "id": block.get("id"),
            "name": block.get("name"),
            "server_label": block.get("server_name"),
            "arguments": _encode(block.get("input", {})).decode(),
        }
        return {"type": x.MCP, x.MCP: mcp, x.RAW: block, x.VENDOR: VENDOR}
    if kind == "mcp_tool_result":
        mcp = {"kind": "result", "call_id": block.get("tool_use_id")}
        return {"type": x.MCP, x.MCP: mcp, x.RAW: block, x.VENDOR: VENDOR}
    if kind == "server_tool_use" or (isinstance(kind, str) and kind.endswith("_tool_result")):
        return {"type": x.SERVER_TOOL, x.SERVER_TOOL: block}
    return None


def _vendor_message(
    message: object,
    path: str,
    reasoning: list[dict[str, Any]] | None = None,
    kept: list[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """One Anthropic message as standard messages (a user turn's tool results split off).

    An assistant message's thinking and redacted_thinking blocks are appended,
    in order, to ``reasoning`` as ``tokenwire:reasoning`` parts.
    """
    if not isinstance(message, dict):
        raise InvalidRequest(f"a message must be an object, got {json_kind(message)}", path=path)
    role = message.get("role")
    if role == "system":
        # A system message in mid-conversation (Claude Code sends them to models
        # it does not know): the standard's system message, where it stands.
        said = _vendor_content(message.get("content"), f"{path}.content")
        if any(part["type"] != "text" for part in said):
            raise InvalidRequest("a system message takes text blocks only", path=f"{path}.content")
        return [{"role": "system", "content": _plain(said)}]
    if role not in ("user", "assistant"):
        raise InvalidRequest(
            f'must be "user", "assistant" or "system", got {role!r}'
            if isinstance(role, str)
            else f'must be "user", "assistant" or "system", got {json_kind(role)}',
            path=f"{path}.role",
        )
    content = message.get("content")
    if isinstance(content, str):
        return [{"role": role, "content": content}]
    if not isinstance(content, list):
        raise InvalidRequest(
            f"must be a string or an array of content blocks, got {json_kind(content)}",
            path=f"{path}.content",
        )
    out: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    for k, block in enumerate(content):
        where = f"{path}.content[{k}]"
        if not isinstance(block, dict):
            raise InvalidRequest(
                f"a content block must be an object, got {json_kind(block)}", path=where
            )
        kind = block.get("type")
        if kind == "tool_use" and role == "assistant":
            tool_input = block.get("input", {})
            if not isinstance(tool_input, dict):
                raise InvalidRequest(
                    f"must be an object, got {json_kind(tool_input)}", path=f"{where}.input"
                )
            calls.append(
                {
                    "id": _want_str(block, "id", where),
                    "name": _want_str(block, "name", where),
                    "arguments": _encode(tool_input).decode(),
                }
            )
        elif kind in ("thinking", "redacted_thinking") and role == "assistant":
            if reasoning is not None:
                reasoning.append(_reasoning_part(block, where))
        elif role == "assistant" and kept is not None and (part := _kept_part(block)):
            kept.append(part)
        elif kind == "tool_result" and role == "user":
            result = block.get("content", "")
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": _want_str(block, "tool_use_id", where),
                    "content": _plain(_vendor_content(result, f"{where}.content")),
                }
            )
        else:
            part = _vendor_part(block, where)
            if part is not None:
                parts.append(part)
    if role == "assistant":
        if calls:
            out.append({"role": "assistant", "content": _plain(parts) or None, "tool_calls": calls})
        else:
            out.append({"role": "assistant", "content": _plain(parts)})
    elif parts or not out:
        out.append({"role": "user", "content": _plain(parts)})
    return out


def _vendor_tools(tools: object) -> list[dict[str, Any]]:
    if not isinstance(tools, list):
        raise InvalidRequest(f"must be an array, got {json_kind(tools)}", path="tools")
    out = []
    for i, tool in enumerate(tools):
        path = f"tools[{i}]"
        if not isinstance(tool, dict):
            raise InvalidRequest(f"a tool must be an object, got {json_kind(tool)}", path=path)
        if tool.get("type", "custom") != "custom":
            raise InvalidRequest(
                f"server tool {tool.get('type')!r} is not supported: only client tools "
                "(name, description, input_schema) can be translated",
                path=f"{path}.type",
            )
        schema = tool.get("input_schema")
        if not isinstance(schema, dict):
            raise InvalidRequest(
                f"required: a JSON Schema object, got {json_kind(schema)}",
                path=f"{path}.input_schema",
            )
        description = tool.get("description", "")
        if not isinstance(description, str):
            raise InvalidRequest(
                f"must be a string, got {json_kind(description)}", path=f"{path}.description"
            )
        out.append(
            {
                "name": _want_str(tool, "name", path),
                "description": description,
                "parameters": schema,
            }
        )
    return out


def request_from_vendor(body: dict[str, Any]) -> rq.Request:
    """The standard request for an Anthropic Messages request body (§7.3 ingress).

    ``system`` becomes a system message, a user turn's ``tool_result`` blocks
    become ``tool`` messages, ``tool_use`` blocks become ``tool_calls``;
    an assistant turn's ``thinking`` and ``redacted_thinking`` blocks are kept,
    exactly, in ``extensions["tokenwire:reasoning_history"]`` (docs/extensions.md;
    ``build_request`` sends them back first). Fields without a standard
    home (``thinking``, ``tool_choice``, ``top_k``...) are kept under
    ``extensions["vendor:anthropic"]``, so that ``build_request`` sends them
    on; a ``thinking`` config also sets ``"tokenwire:reasoning": true``. The
    body's ``stream`` flag is the caller's business: the result always streams.

    Returns the ``Request``. Raises ``InvalidRequest`` whose ``.path`` names the
    offending value in the Anthropic body (``messages[1].content[0].source``).
    """
    if not isinstance(body, dict):
        raise InvalidRequest(f"the body must be a JSON object, got {json_kind(body)}", path="$")
    model = _want_str(body, "model", "").strip()
    if not model:
        raise InvalidRequest("must not be empty", path="model")
    messages: list[dict[str, Any]] = []
    system = body.get("system")
    if system is not None:
        parts = _vendor_content(system, "system")
        if any(part["type"] != "text" for part in parts):
            raise InvalidRequest("the system prompt takes text blocks only", path="system")
        if parts:
            messages.append({"role": "system", "content": _plain(parts)})
    history = body.get("messages")
    if not isinstance(history, list) or not history:
        raise InvalidRequest(
            f"required: a non-empty array of messages, got {json_kind(history)}", path="messages"
        )
    history_reasoning: list[dict[str, Any]] = []
    history_blocks: list[dict[str, Any]] = []
    for i, message in enumerate(history):
        reasoning: list[dict[str, Any]] = []
        kept: list[dict[str, Any]] = []
        messages.extend(_vendor_message(message, f"messages[{i}]", reasoning, kept))
        if reasoning:
            # The assistant message is the last one _vendor_message produced.
            history_reasoning.append({"message": len(messages) - 1, "parts": reasoning})
        if kept:
            history_blocks.append({"message": len(messages) - 1, "parts": kept})
    tools = _vendor_tools(body["tools"]) if body.get("tools") is not None else None
    parameters = {
        key: body[key]
        for key in ("max_tokens", "temperature", "top_p", "stop_sequences")
        if body.get(key) is not None
    }
    metadata = body.get("metadata")
    extras = {k: v for k, v in body.items() if k not in _STANDARD_FIELDS}
    extensions: dict[str, Any] = {}
    if isinstance(extras.get("container"), str):
        # 1.1: the container of a pause_turn continuation has a standard home.
        extensions[x.CONTAINER] = {"id": extras.pop("container")}
    if history_blocks:
        extensions[x.BLOCK_HISTORY] = history_blocks
    if extras:
        extensions["vendor:anthropic"] = extras
        thinking = extras.get("thinking")
        if isinstance(thinking, dict) and thinking.get("type") not in (None, "disabled"):
            extensions["tokenwire:reasoning"] = True
    if history_reasoning:
        # docs/extensions.md: the earlier turns' reasoning, for the next request
        # (request.py has no reasoning part type yet; see extensions.md).
        extensions[x.REASONING_HISTORY] = history_reasoning
    try:
        return rq.build(
            model=model,
            messages=messages,
            tools=tools,
            parameters=parameters or None,
            metadata=metadata if isinstance(metadata, dict) else None,
            extensions=extensions or None,
        )
    except InvalidRequest as exc:
        # Name the value in the caller's (Anthropic) body where the paths differ.
        path = exc.path
        if path.startswith("parameters."):
            path = path.removeprefix("parameters.")
        elif path.startswith("tools[") and path.endswith(".parameters"):
            path = path.removesuffix(".parameters") + ".input_schema"
        raise InvalidRequest(exc.reason, path=path) from None


# --- reverse: standard events -> Anthropic's SSE -------------------------------------

#: When blocks stop for different reasons, the message's stop_reason is the
#: most telling one.
_STOP_RANK: Final = {"end_turn": 0, "tool_use": 1, "max_tokens": 2, "content_filter": 3}


def _frame(name: str, payload: dict[str, Any]) -> bytes:
    # The SDK dispatches on the event: line, so it is always written.
    return b"event: %s\ndata: %s\n\n" % (name.encode(), _encode(payload))


class EventEncoder:
    """Standard events -> Anthropic Messages SSE, event by event.

    ``encode(event)`` returns the bytes to send for one standard event (often
    ``b""``, sometimes several Anthropic events). Standard blocks become
    Anthropic content blocks numbered 0, 1, 2... in the order they open; a
    block that resumes after another one opened gets a new Anthropic block.
    ``usage`` is held until ``stream.end``, which sends ``message_delta``
    (stop_reason, input and output tokens) and ``message_stop``. An ``error``
    becomes ``event: error`` and ends the Anthropic stream.
    """

    def __init__(self, *, model: str, id: str | None = None) -> None:
        self.model = model
        self.id = id or f"msg_{secrets.token_hex(12)}"
        self._started = False
        self._ended = False
        self._open: tuple[bool, int] | None = None  # (reasoning, standard index) of the open block
        self._next_block = 0
        self._stop: str | None = None
        self._tool_calls = False
        self._usage: tuple[int, int] | None = None
        self._cache: tuple[int, int] | None = None  # (read, creation), tokenwire.usage
        self._raw_stop: str | None = None  # tokenwire.stop
        self._citing = False  # the open text block was opened for citations, no text yet
        self._container: dict[str, Any] | None = None  # 1.1: tokenwire.stop's container

    @property
    def ended(self) -> bool:
        """True once ``message_stop`` or ``error`` has been written."""
        return self._ended

    def _start(self) -> bytes:
        if self._started:
            return b""
        self._started = True
        message: dict[str, Any] = {
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            # The standard reports usage at the end; message_delta carries it.
            "usage": {"input_tokens": 0, "output_tokens": 0},
        }
        return _frame("message_start", {"type": "message_start", "message": message})

    def _close(self) -> bytes:
        if self._open is None:
            return b""
        self._open = None
        index = self._next_block - 1
        return _frame("content_block_stop", {"type": "content_block_stop", "index": index})

    def _open_block(self, content_block: dict[str, Any]) -> bytes:
        index = self._next_block
        self._next_block += 1
        return _frame(
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": content_block},
        )

    def encode(self, event: ev.Event) -> bytes:
        """The Anthropic SSE bytes for one standard event (``b""`` when none)."""
        if self._ended:
            return b""
        out = self._start()
        if isinstance(event, ev.ContentDelta):
            key = (event.reasoning, event.index)
            if self._open != key:
                out += self._close()
                if event.reasoning:
                    out += self._open_block({"type": "thinking", "thinking": "", "signature": ""})
                else:
                    out += self._open_block({"type": "text", "text": ""})
                self._open = key
            delta = (
                {"type": "thinking_delta", "thinking": event.delta.text}
                if event.reasoning
                else {"type": "text_delta", "text": event.delta.text}
            )
            index = self._next_block - 1
            self._citing = False
            out += _frame(
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            )
        elif isinstance(event, ev.ToolCall):
            out += self._close()
            index = self._next_block
            out += self._open_block(
                {"type": "tool_use", "id": event.id, "name": event.name, "input": {}}
            )
            delta = {"type": "input_json_delta", "partial_json": event.arguments}
            out += _frame(
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            )
            out += _frame("content_block_stop", {"type": "content_block_stop", "index": index})
            self._tool_calls = True
        elif isinstance(event, ev.ContentStop):
            if self._open is not None and self._open[1] == event.index:
                out += self._close()
            if _STOP_RANK.get(event.stop_reason, 0) >= _STOP_RANK.get(self._stop or "", -1):
                self._stop = event.stop_reason
        elif isinstance(event, ev.Usage):
            self._usage = (event.input_tokens, event.output_tokens)
        elif isinstance(event, ev.ErrorEvent):
            self._ended = True
            error = {"type": ERROR_TYPES.get(event.code, "api_error"), "message": event.message}
            out += _frame("error", {"type": "error", "error": error})
        elif isinstance(event, ev.StreamEnd):
            out += self._close()
            self._ended = True
            reason = self._stop or ("tool_use" if self._tool_calls else "end_turn")
            usage: dict[str, int] = {"output_tokens": 0}
            if self._usage is not None:
                usage = {"input_tokens": self._usage[0], "output_tokens": self._usage[1]}
                if self._cache is not None:
                    # Anthropic's input_tokens leaves the cached tokens out.
                    read, creation = self._cache
                    usage["input_tokens"] = max(self._usage[0] - read - creation, 0)
                    usage["cache_read_input_tokens"] = read
                    usage["cache_creation_input_tokens"] = creation
            vendor_stop = VENDOR_STOP_REASONS.get(reason, "end_turn")
            if self._raw_stop is not None and STOP_REASONS[self._raw_stop] == reason:
                vendor_stop = self._raw_stop  # the vendor's own value (tokenwire.stop)
            out += _frame(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {
                        "stop_reason": vendor_stop,
                        "stop_sequence": None,
                        **({"container": self._container} if self._container else {}),
                    },
                    "usage": usage,
                },
            )
            out += _frame("message_stop", {"type": "message_stop"})
        elif isinstance(event, ev.UnknownEvent):
            out += self._extension(event)
        # stream.start only opens the message; other event types have no Anthropic form.
        return out

    def _delta(self, index: int, delta: dict[str, Any]) -> bytes:
        return _frame(
            "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
        )

    def _whole_block(self, content_block: dict[str, Any], delta: dict[str, Any] | None) -> bytes:
        """A block opened, given at most one delta and stopped, after the open block closes."""
        out = self._close()
        index = self._next_block
        out += self._open_block(content_block)
        if delta is not None:
            out += self._delta(index, delta)
        return out + _frame("content_block_stop", {"type": "content_block_stop", "index": index})

    # Each encoder renders the extension events in its own vendor's form; what they
    # share (reading the fields) is `_extensions.fields` already.
    def _extension(self, event: ev.UnknownEvent) -> bytes:
        """docs/extensions.md: the tokenwire extension events in Anthropic's own form."""
        body = x.fields(event)
        if body is None:
            return b""
        kind = event.type
        if kind == x.USAGE:
            read, creation = body.get(x.CACHE_READ), body.get(x.CACHE_CREATION)
            # Chat, Responses and Gemini report cache reads only: a missing count is 0.
            if isinstance(read, int) or isinstance(creation, int):
                self._cache = (
                    read if isinstance(read, int) else 0,
                    creation if isinstance(creation, int) else 0,
                )
            return b""
        if kind == x.STOP:
            raw = body.get(x.RAW_STOP_REASON)
            self._raw_stop = raw if isinstance(raw, str) and raw in STOP_REASONS else None
            container = body.get(x.CONTAINER)
            self._container = container if isinstance(container, dict) else None
            return b""
        if kind != x.BLOCK:
            return b""
        if body.get(x.VENDOR, "anthropic") != "anthropic":
            return b""  # bound to another vendor: Anthropic cannot check it (dropped)
        signature = body.get(x.SIGNATURE)
        if isinstance(signature, str):
            index = body.get("index")
            if self._open == (True, index):
                return self._delta(
                    self._next_block - 1, {"type": "signature_delta", "signature": signature}
                )
            # A thinking block whose text was never streamed (or is no longer open).
            thinking = {"type": "thinking", "thinking": "", "signature": ""}
            return self._whole_block(thinking, {"type": "signature_delta", "signature": signature})
        redacted = body.get(x.REDACTED)
        if isinstance(redacted, str):
            return self._whole_block({"type": "redacted_thinking", "data": redacted}, None)
        compaction = body.get(x.COMPACTION)
        if isinstance(compaction, dict) and body.get(x.VENDOR) == VENDOR:
            # 1.1: streamed as Anthropic does: an empty start, one compaction_delta.
            delta: dict[str, Any] = {"type": "compaction_delta"}
            delta.update((k, compaction.get(k)) for k in ("content", "encrypted_content"))
            extra = {k: v for k, v in compaction.items() if k not in delta}
            return self._whole_block({"type": "compaction", "content": None, **extra}, delta)
        raw = body.get(x.RAW)
        if isinstance(body.get(x.MCP), dict) and isinstance(raw, dict):
            if raw.get("type") == "mcp_tool_use":
                partial = _encode(raw.get("input") or {}).decode()
                return self._whole_block(
                    {**raw, "input": {}}, {"type": "input_json_delta", "partial_json": partial}
                )
            return self._whole_block(raw, None)
        server = body.get(x.SERVER_TOOL)
        if isinstance(server, dict) and isinstance(server.get("type"), str):
            if server["type"] == "server_tool_use":
                start = {**server, "input": {}}
                partial = _encode(server.get("input") or {}).decode()
                return self._whole_block(
                    start, {"type": "input_json_delta", "partial_json": partial}
                )
            return self._whole_block(server, None)
        citation = body.get(x.CITATION)
        if isinstance(citation, dict):
            index = body.get("index")
            out = b""
            if not (self._citing and self._open == (False, index)):
                # Anthropic cites at the start of a text block of its own.
                out += self._close()
                out += self._open_block({"type": "text", "text": "", "citations": []})
                self._open = (False, index) if isinstance(index, int) else None
                self._citing = True
            return out + self._delta(
                self._next_block - 1, {"type": "citations_delta", "citation": citation}
            )
        return b""


def parse_ingress(body: dict[str, Any]) -> tuple[rq.Request, EncodeEvent]:
    """The ``/v1/messages`` ingress: the standard request and a fresh ``EventEncoder``."""
    request = request_from_vendor(body)
    return request, EventEncoder(model=request.model).encode
