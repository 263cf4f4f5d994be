"""An Anthropic Messages SSE body -> the standard (§7.1).

Each data payload is decoded once into typed msgspec Structs (a tagged union
on ``type``); nothing walks dicts on the hot path. The rulings where Anthropic
and the draft do not line up one to one are in ``docs/translation.md``.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Final, TypeAlias

import msgspec

from ... import events as ev
from ... import sse
from ...errors import FramingError
from .. import _extensions as x
from .._base import SSETranslator
from .errors import error_code, stop_reason

# --- the vendor stream, as typed structs --------------------------------------------

_Count = Annotated[int, msgspec.Meta(ge=0)]


class _Usage(msgspec.Struct, frozen=True, gc=False):
    """``usage`` of ``message_start.message`` and of ``message_delta``."""

    input_tokens: _Count | None = None
    output_tokens: _Count | None = None
    cache_creation_input_tokens: _Count | None = None
    cache_read_input_tokens: _Count | None = None


class _Message(msgspec.Struct, frozen=True, gc=False):
    id: str = ""
    model: str = ""
    usage: _Usage | None = None


class _ContentBlock(msgspec.Struct, frozen=True, gc=False):
    """A ``content_block``: one struct for every block type (unknown types included)."""

    type: str
    text: str = ""
    thinking: str = ""
    signature: str = ""
    data: str = ""
    id: str = ""
    name: str = ""
    input: msgspec.Raw = msgspec.Raw(b"")


class _Delta(msgspec.Struct, frozen=True, gc=False):
    """A ``content_block_delta.delta``: text_delta, input_json_delta, thinking_delta..."""

    type: str
    text: str = ""
    partial_json: str = ""
    thinking: str = ""
    signature: str = ""
    citation: msgspec.Raw = msgspec.Raw(b"")
    # compaction_delta (tokenwire extensions 1.1)
    content: str | None = None
    encrypted_content: str | None = None


class _MessageDeltaBody(msgspec.Struct, frozen=True, gc=False):
    stop_reason: str | None = None
    #: 1.1: ``{"id", "expires_at"}``, the container a pause_turn continuation names.
    container: dict[str, Any] | None = None


class _ErrorBody(msgspec.Struct, frozen=True, gc=False):
    type: str = "api_error"
    message: str = ""


class _Event(msgspec.Struct, frozen=True, gc=False, tag_field="type"):
    """Base of the tagged union: the JSON ``type`` picks the struct.

    ``gc=False``: decoded payloads hold no cycles, so the collector can skip them.
    """


class MessageStart(_Event, frozen=True, tag="message_start"):
    """The first event: the message id, model and input usage."""

    message: _Message


class ContentBlockStart(_Event, frozen=True, tag="content_block_start"):
    """A content block opens at ``index``."""

    index: _Count
    content_block: _ContentBlock


class ContentBlockDelta(_Event, frozen=True, tag="content_block_delta"):
    """A fragment of block ``index``: text, tool input JSON, thinking..."""

    index: _Count
    delta: _Delta


class ContentBlockStop(_Event, frozen=True, tag="content_block_stop"):
    """Block ``index`` is complete."""

    index: _Count


class MessageDelta(_Event, frozen=True, tag="message_delta"):
    """The stop reason and cumulative usage, near the end."""

    delta: _MessageDeltaBody = _MessageDeltaBody()
    usage: _Usage | None = None


class MessageStop(_Event, frozen=True, tag="message_stop"):
    """The end marker: the message is complete."""


class Ping(_Event, frozen=True, tag="ping"):
    """A keep-alive; it may come anywhere."""


class InStreamError(_Event, frozen=True, tag="error"):
    """``event: error``: a failure after HTTP 200."""

    error: _ErrorBody = _ErrorBody()


VendorEvent: TypeAlias = (
    MessageStart
    | ContentBlockStart
    | ContentBlockDelta
    | ContentBlockStop
    | MessageDelta
    | MessageStop
    | Ping
    | InStreamError
)

_decode_event = msgspec.json.Decoder(VendorEvent).decode
#: Every event type of the Messages stream (also read by ``tokenwire convert``'s detection).
EVENT_TYPES: Final = frozenset(
    {
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
        "ping",
        "error",
    }
)


#: The delta types the translator reads; any other, in a block it knows, is counted
#: as unknown (docs/extensions.md, "Unknown vendor event types").
_KNOWN_DELTAS: Final = frozenset(
    {
        "text_delta",
        "input_json_delta",
        "thinking_delta",
        "signature_delta",
        "citations_delta",
        "compaction_delta",
    }
)


class _Probe(msgspec.Struct):
    type: Any = None


_decode_probe = msgspec.json.Decoder(_Probe).decode
_decode_any = msgspec.json.Decoder().decode
_encode = msgspec.json.Encoder().encode


# --- stream side ------------------------------------------------------------------

# What an Anthropic content block becomes.
_TEXT: Final = 0  # text -> the answer's one text block
_THINKING: Final = 1  # thinking -> a reasoning block of its own, or dropped
_TOOL: Final = 2  # tool_use -> one tool.call on its own block
_SKIP: Final = 3  # an unknown block type: dropped
_SERVER: Final = 4  # server_tool_use -> a tokenwire:server_tool block, never executed
_MCP: Final = 5  # mcp_tool_use -> a tokenwire:mcp call block (1.1), never executed
_COMPACTION: Final = 6  # compaction -> a tokenwire:compaction block (1.1), sent back as is

#: Block types that ran on Anthropic's side; their results come whole in the start.
_SERVER_RESULTS: Final = ("_tool_result",)


class _Block:
    """The state of one Anthropic content block (by its ``index``)."""

    __slots__ = ("kind", "id", "name", "parts", "start_input", "done", "index", "whole")

    def __init__(self, kind: int, id: str = "", name: str = "", start_input: bytes = b"") -> None:
        self.kind = kind
        self.id = id
        self.name = name
        self.parts: list[str] = []
        self.start_input = start_input
        self.done = False
        self.index = -1  # the standard block it became (thinking, server tools)
        #: 1.1: the block as it started (MCP, compaction), completed by its deltas.
        self.whole: dict[str, Any] = {}


def _tool_arguments(block: _Block) -> str | None:
    """The block's complete input as a JSON object text, or ``None`` if it is not one.

    No fragments (or only ``""``) means no arguments: ``{}``, unless the
    ``content_block_start`` already carried a non-empty ``input``.
    """
    text = "".join(block.parts).strip()
    if not text:
        start = block.start_input.strip()
        text = start.decode("utf-8", "replace") if start else "{}"
    try:
        value = _decode_any(text)
    except msgspec.DecodeError:
        return None
    return text if isinstance(value, dict) else None


class Translator(SSETranslator):
    """Anthropic Messages SSE -> standard events (see the module docstring).

    ``model`` is the model ``stream.start`` names; ``upstream_model`` is the
    one ``message_start`` named (``None`` before it). ``reasoning=True``
    carries thinking text on its own block, marked ``tokenwire:reasoning``.
    """

    name: ClassVar[str] = "anthropic"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.upstream_model: str | None = None
        self._blocks: dict[int, _Block] = {}
        self._message_started = False
        self._visible = False  # anything but stream.start emitted (cannot be taken back)
        self._next_index = 0
        self._text_index = -1
        self._tool_indexes: set[int] = set()
        self._tool_ids: set[str] = set()
        self._vendor_stop: str | None = None
        self._usage_seen = False
        self._usage_sent = False
        self._input = 0
        self._cache_creation = 0
        self._cache_read = 0
        self._cache_seen = False
        self._output = 0
        self._output_reported = False  # message_delta's output count came (not the placeholder)
        self._payload = ""  # the JSON of the event being dispatched (slow path only)
        self._container: dict[str, Any] | None = None

    # -- dispatch ----------------------------------------------------------

    def _on_frame(self, frame: sse.Message) -> None:
        # The hot path: the text delta of an open text block is handled
        # inline (one decode, one lookup, one writer call).
        payload = frame.data
        if not payload:
            return  # an empty data: field carries nothing (the SDK skips it too)
        try:
            event = _decode_event(payload)
        except msgspec.DecodeError as exc:
            self.out += self._on_undecodable(payload, exc)
            return
        if type(event) is ContentBlockDelta:
            block = self._blocks.get(event.index)
            piece = event.delta.text
            if piece and block is not None and block.kind == _TEXT:
                index = self._text_index
                if index >= 0:
                    self.out += self.writer.text(piece, index)
                    return
        self._payload = payload
        self.out += self._dispatch(event)

    def _dispatch(self, event: VendorEvent) -> list[ev.Event]:
        kind = type(event)
        if kind is ContentBlockDelta:
            return self._on_delta(event)  # type: ignore[arg-type]
        if kind is Ping:
            return []  # keep-alive, may come anywhere
        if kind is ContentBlockStart:
            return self._on_block_start(event)  # type: ignore[arg-type]
        if kind is ContentBlockStop:
            return self._on_block_stop(event)  # type: ignore[arg-type]
        if kind is MessageStart:
            return self._on_message_start(event)  # type: ignore[arg-type]
        if kind is MessageDelta:
            return self._on_message_delta(event)  # type: ignore[arg-type]
        if kind is MessageStop:
            return self._finish()
        assert isinstance(event, InStreamError)
        body = event.error
        return self._failure(
            error_code(body.type, body.message), f"anthropic {body.type}: {body.message}"
        )

    def _on_undecodable(self, data: str, exc: msgspec.DecodeError) -> list[ev.Event]:
        if not isinstance(exc, msgspec.ValidationError):
            return self._failure("internal_error", "anthropic sent an event whose data is not JSON")
        try:
            kind = _decode_probe(data).type
        except msgspec.DecodeError:
            kind = None
        if isinstance(kind, str) and kind not in EVENT_TYPES:
            # Forward compatibility: an event type Anthropic added later is
            # skipped, never silently (docs/extensions.md: /metrics and the log).
            self.note_unknown(kind)
            return []
        return self._failure("internal_error", f"anthropic sent an invalid {kind!r} event: {exc}")

    # -- events ------------------------------------------------------------

    def _on_message_start(self, event: MessageStart) -> list[ev.Event]:
        message = event.message
        if self._message_started:
            # A second message_start: a duplicate, or a proxy that retried and
            # spliced the new attempt in. What was emitted cannot be taken back,
            # so it is an error once anything visible went out; otherwise the
            # first attempt is discarded and the stream goes on with the second.
            if self._visible:
                return self._failure(
                    "internal_error",
                    "anthropic restarted the message (a second message_start) "
                    "after content was sent",
                )
            self._blocks.clear()
            self._next_index = 0  # nothing visible went out: no block index is taken
            self._vendor_stop = None
            self._usage_seen = False
            self._input = self._cache_creation = self._cache_read = self._output = 0
            self._cache_seen = self._output_reported = False
        self._message_started = True
        if message.usage is not None:
            self._merge_usage(message.usage)
        if message.model:
            self.upstream_model = message.model
        # stream.start names the model the caller asked for (the gateway's name
        # for it), like every translator; the upstream's name is upstream_model.
        return [] if self.writer.started else self.writer.start()

    def _on_block_start(self, event: ContentBlockStart) -> list[ev.Event]:
        index = event.index
        if index in self._blocks:
            return self._failure("internal_error", f"anthropic started content block {index} twice")
        cb = event.content_block
        kind = cb.type
        if kind == "text":
            self._blocks[index] = _Block(_TEXT)
            return self._text(cb.text) if cb.text else []
        if kind == "thinking":
            block = self._blocks[index] = _Block(_THINKING)
            if not self.reasoning:
                return []
            out = self._thinking(block, cb.thinking) if cb.thinking else []
            return out + self._signature(block, cb.signature) if cb.signature else out
        if kind == "tool_use":
            block = self._blocks[index] = _Block(
                _TOOL, cb.id or f"toolu_{index}", cb.name, bytes(cb.input)
            )
            if self.tool_deltas:
                # docs/extensions.md: a tool_delta names the block its tool.call
                # will carry, so that block is reserved now.
                block.index = self._new_index()
            return []
        if kind == "redacted_thinking":
            # docs/extensions.md: the encrypted reasoning, kept for the next turn.
            self._blocks[index] = _Block(_SKIP)
            if not self.reasoning:
                return []
            return self._block_event(
                self._new_index(), {x.REASONING: True, x.REDACTED: cb.data, x.VENDOR: self.name}
            )
        if kind == "server_tool_use":
            # Ran on Anthropic's side: shown (tokenwire:server_tool), never executed.
            self._blocks[index] = _Block(_SERVER, cb.id, cb.name, bytes(cb.input))
            return []
        if kind in ("mcp_tool_use", "compaction"):
            # 1.1: kept whole (the next turn sends them back byte-identical).
            block = _Block(
                _MCP if kind == "mcp_tool_use" else _COMPACTION, cb.id, cb.name, bytes(cb.input)
            )
            block.whole = _decode_any(self._payload).get("content_block", {})
            self._blocks[index] = block
            return []
        if kind == "mcp_tool_result":
            # 1.1: the result of an MCP call, linked to it by call_id; never executed.
            start = _decode_any(self._payload).get("content_block", {})
            content = start.get("content")
            if isinstance(content, list):
                content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
            mcp: dict[str, Any] = {"kind": "result", "call_id": start.get("tool_use_id")}
            mcp["error" if start.get("is_error") else "output"] = content
            return self._closed_block({x.MCP: mcp, x.RAW: start, x.VENDOR: self.name})
        if kind.endswith(_SERVER_RESULTS):
            # web_search_tool_result, code_execution_tool_result...: whole in the start.
            start = _decode_any(self._payload).get("content_block", {})
            return self._closed_block({x.SERVER_TOOL: start})
        self._blocks[index] = _Block(_SKIP)  # a block type Anthropic added later
        self.note_unknown("content_block." + kind)
        return []

    def _on_delta(self, event: ContentBlockDelta) -> list[ev.Event]:
        block = self._blocks.get(event.index)
        if block is None:
            return self._failure(
                "internal_error",
                f"anthropic sent a delta for content block {event.index} that was never started",
            )
        out = self._block_delta(block, event.delta)
        if not out and block.kind != _SKIP and event.delta.type not in _KNOWN_DELTAS:
            # A delta type Anthropic added later, skipped: counted (the deltas
            # of an unknown block are that block's, already counted).
            self.note_unknown("content_block_delta." + event.delta.type)
        return out

    def _block_delta(self, block: _Block, delta: _Delta) -> list[ev.Event]:
        kind = block.kind
        if kind == _TEXT:
            if delta.text:
                return self._text(delta.text)
            if delta.type == "citations_delta" and delta.citation:
                # docs/extensions.md: a citation, attached to the answer's text block.
                if self._text_index < 0:
                    self._text_index = self._new_index()
                citation = _decode_any(bytes(delta.citation))
                return self._block_event(self._text_index, {x.CITATION: citation})
            return []
        if kind == _COMPACTION:
            if delta.type == "compaction_delta":
                for key in ("content", "encrypted_content"):
                    value = getattr(delta, key)
                    if value is not None:
                        block.whole[key] = value  # whole, as the SDK reads it (not a fragment)
            elif delta.signature:
                block.whole["signature"] = (block.whole.get("signature") or "") + delta.signature
            return []
        if kind == _TOOL or kind == _SERVER or kind == _MCP:
            if delta.type == "input_json_delta":
                block.parts.append(delta.partial_json)
                if kind == _TOOL and self.tool_deltas and delta.partial_json:
                    return self._tool_input_delta(block, delta.partial_json)
            return []
        if kind == _THINKING and self.reasoning:
            if delta.thinking:
                return self._thinking(block, delta.thinking)
            if delta.signature:
                return self._signature(block, delta.signature)
        return []

    def _tool_input_delta(self, block: _Block, fragment: str) -> list[ev.Event]:
        """``tokenwire.tool_delta`` (opt-in): a fragment of a tool call's input, for display."""
        if block.id in self._tool_ids:
            # §5.3.4: ids are unique within a stream (the same ruling as _tool_call).
            return self._failure("internal_error", f"anthropic used tool_use id {block.id!r} twice")
        out = self._tool_delta(block.index, block.id, block.name, fragment)
        self._visible = self._visible or bool(out)
        return out

    def _text(self, text: str) -> list[ev.Event]:
        # All of the message's text blocks are one standard block: Anthropic
        # splits one answer into many blocks around citations (the web-search
        # recording has 11), and §5.3.2 puts the primary text on one index.
        index = self._text_index
        if index < 0:
            index = self._text_index = self._next_index
            self._next_index += 1
        self._visible = True
        return self.writer.text(text, index)

    def _new_index(self) -> int:
        index = self._next_index
        self._next_index += 1
        return index

    def _thinking(self, block: _Block, text: str) -> list[ev.Event]:
        # docs/extensions.md: reasoning on its own block, never in the answer's
        # text; each thinking block is a block of its own, so that its signature
        # signs exactly its text on the next turn.
        if block.index < 0:
            block.index = self._new_index()
        self._visible = True
        return self.writer.text(text, block.index, reasoning=True)

    def _signature(self, block: _Block, signature: str) -> list[ev.Event]:
        # Sent as soon as it arrives, so that a stream cut later still has it.
        if block.index < 0:
            block.index = self._new_index()  # a thinking block without text
        return self._block_event(
            block.index, {x.REASONING: True, x.SIGNATURE: signature, x.VENDOR: self.name}
        )

    def _block_event(self, index: int, body: dict[str, Any]) -> list[ev.Event]:
        """A ``tokenwire.block`` extension event for standard block ``index``."""
        self._visible = True
        return self.writer.add(x.extension(x.BLOCK, {"index": index, **body}))

    def _closed_block(self, body: dict[str, Any]) -> list[ev.Event]:
        """A block that only carries ``tokenwire.block``, closed at once (1.1, rule 9)."""
        index = self._new_index()
        return self._block_event(index, body) + self.writer.stop(index, "end_turn")

    def _on_block_stop(self, event: ContentBlockStop) -> list[ev.Event]:
        block = self._blocks.get(event.index)
        if block is not None and block.kind == _SERVER and not block.done:
            block.done = True
            arguments = _tool_arguments(block)
            server_tool = {
                "type": "server_tool_use",
                "id": block.id,
                "name": block.name,
                "input": _decode_any(arguments) if arguments is not None else {},
            }
            return self._closed_block({x.SERVER_TOOL: server_tool})
        if block is not None and block.kind == _MCP and not block.done:
            block.done = True
            arguments = _tool_arguments(block) or "{}"
            raw = {**block.whole, "input": _decode_any(arguments)}
            mcp = {
                "kind": "call",
                "id": block.id,
                "name": block.name,
                "server_label": raw.get("server_name"),
                "arguments": arguments,
            }
            return self._closed_block({x.MCP: mcp, x.RAW: raw, x.VENDOR: self.name})
        if block is not None and block.kind == _COMPACTION and not block.done:
            block.done = True
            compaction = {k: v for k, v in block.whole.items() if k != "type"}
            return self._closed_block({x.COMPACTION: compaction, x.VENDOR: self.name})
        if block is None or block.kind != _TOOL or block.done:
            return []
        # §5.3.4 / DESIGN: a tool call is emitted whole, once its input is complete.
        # Input that is not a JSON object is judged at message end (it is
        # expected when the message stops for max_tokens).
        return self._tool_call(block)

    def _tool_call(self, block: _Block) -> list[ev.Event]:
        arguments = _tool_arguments(block)
        if arguments is None:
            return []
        block.done = True
        if block.id in self._tool_ids:
            # §5.3.4: ids are unique within a stream.
            return self._failure("internal_error", f"anthropic used tool_use id {block.id!r} twice")
        self._tool_ids.add(block.id)
        index = block.index if block.index >= 0 else self._new_index()
        self._tool_indexes.add(index)
        self._visible = True
        return self.writer.tool_call(id=block.id, name=block.name, arguments=arguments, index=index)

    def _on_message_delta(self, event: MessageDelta) -> list[ev.Event]:
        if event.delta.stop_reason is not None:
            self._vendor_stop = event.delta.stop_reason
        if event.delta.container is not None:
            self._container = event.delta.container
        if event.usage is not None:
            self._merge_usage(event.usage)
            self._output_reported = self._output_reported or event.usage.output_tokens is not None
        return []

    def _merge_usage(self, usage: _Usage) -> None:
        # message_delta usage is cumulative: each reported field replaces the
        # last value (some servers repeat input_tokens there, with a new value).
        if usage.input_tokens is not None:
            self._input = usage.input_tokens
            self._usage_seen = True
        if usage.cache_creation_input_tokens is not None:
            self._cache_creation = usage.cache_creation_input_tokens
            self._cache_seen = True
        if usage.cache_read_input_tokens is not None:
            self._cache_read = usage.cache_read_input_tokens
            self._cache_seen = True
        if usage.output_tokens is not None:
            self._output = usage.output_tokens
            self._usage_seen = True

    def _usage(self) -> list[ev.Event]:
        """The one ``usage`` event (§5.3.5), when Anthropic reported any."""
        if not self._usage_seen or self._usage_sent:
            return []
        self._usage_sent = True
        # Anthropic's input_tokens leaves out cached tokens; the draft counts
        # every token of the request.
        total_input = self._input + self._cache_creation + self._cache_read
        if self._output_reported:
            return self.writer.usage(total_input, self._output)
        # No message_delta count came (a cut stream): message_start's output
        # count is a placeholder (often 1), so the output sent is estimated and
        # the event marked (docs/extensions.md, "Usage on every exit path").
        output = max(self._output, self.writer.estimated_output_tokens)
        return self.writer.usage(total_input, output, estimated=True)

    def _usage_details(self) -> list[ev.Event]:
        """``tokenwire.usage``: the cache counts inside ``input_tokens`` (docs/extensions.md).

        Sent before ``usage`` and before any ``error``: nothing but ``usage``
        and ``stream.end`` may follow an error (§5.4).
        """
        if not self._cache_seen or self._usage_sent or self.writer.errored:
            return []
        self._cache_seen = False
        body = {x.CACHE_READ: self._cache_read, x.CACHE_CREATION: self._cache_creation}
        return self.writer.add(x.extension(x.USAGE, body))

    def _fail(self, code: str, message: str) -> None:
        self.out += self._failure(code, message)

    def _failure(self, code: str, message: str) -> list[ev.Event]:
        """``error``, the usage reported so far (allowed after an error, §5.4), ``stream.end``."""
        writer = self.writer
        if writer.ended:
            return []
        out = [] if writer.errored else self._usage_details() + writer.error(code, message)
        return out + self._usage() + writer.end()

    def _finish(self) -> list[ev.Event]:
        """``message_stop``: pending tool calls, content.stop per block, usage, stream.end."""
        out: list[ev.Event] = []
        vendor = self._vendor_stop
        truncated = vendor in ("max_tokens", "model_context_window_exceeded")
        for index in sorted(self._blocks):
            block = self._blocks[index]
            if block.kind != _TOOL or block.done:
                continue
            emitted = self._tool_call(block)  # complete input without content_block_stop
            out += emitted
            if self.writer.ended:
                return out
            if not emitted and not truncated:
                return out + self._failure(
                    "internal_error",
                    f"anthropic tool_use block {index} ({block.name}) ended without "
                    "a complete JSON object as input",
                )
            # else: the input was cut by max_tokens. An invalid tool.call is never
            # sent (§5.3.4); the call is dropped and the stop reason says why.
        reason = stop_reason(vendor, has_tool_calls=bool(self._tool_indexes))
        writer = self.writer
        if vendor is not None:
            # docs/extensions.md: the vendor's own value, next to the mapped stop_reason;
            # 1.1: the container a pause_turn continuation must name.
            stop: dict[str, Any] = {x.RAW_STOP_REASON: vendor}
            if self._container is not None:
                stop[x.CONTAINER] = self._container
            out += writer.add(x.extension(x.STOP, stop))
        if vendor == "refusal":
            # 1.1: one refusal carrier for every vendor, on the block it concerns
            # (the answer's text block, reserved when no text came).
            if self._text_index < 0:
                self._text_index = self._new_index()
            out += self._block_event(self._text_index, {x.REFUSAL: True})
        if not writer.open_blocks:
            # No block carried anything (a refusal often has none): one
            # content.stop still tells the client why generation stopped.
            index = self._text_index
            if index < 0:
                # A call cut by max_tokens may have a reserved block (its tool
                # deltas went there): it stops there, as it would without deltas.
                dropped = [
                    b.index for b in self._blocks.values() if b.kind == _TOOL and b.index >= 0
                ]
                index = min(dropped, default=0 if self._next_index == 0 else -1)
                index = index if index >= 0 else self._new_index()
            out += writer.stop(index, reason)
        else:
            for index in sorted(writer.open_blocks):
                # §4.8: a block that carried a tool.call stops with tool_use.
                out += writer.stop(index, "tool_use" if index in self._tool_indexes else reason)
        out += self._usage_details() + self._usage()
        return out + writer.end()

    def _final_frames(self) -> list[sse.Message]:
        # Four of the five bodies recorded from the SDK's tests end without
        # the blank line after message_stop, and the SDK reads them as
        # complete. A last event whose JSON payload arrived whole is read too;
        # a payload cut short is not valid JSON and is dropped as WHATWG says,
        # so the stream still ends as truncated (_on_eof).
        frames: list[sse.Message] = []
        try:
            pending = self._decoder.feed(b"\n\n")
        except FramingError:
            pending = []
        for msg in pending:
            try:
                _decode_any(msg.data)
            except msgspec.DecodeError:
                continue
            frames.append(msg)
        return frames + list(super()._final_frames())

    def _on_eof(self) -> None:
        # No message_stop: the body was cut. Never a clean finish.
        self._fail("internal_error", "anthropic stream ended before message_stop (truncated)")
