"""Anthropic Messages <-> the standard (§7.1 gateway translation, §7.3 dual format).

Four parts, all sans-I/O:

* ``Translator``: an Anthropic Messages SSE body (``message_start`` …
  ``message_stop``) becomes one standard stream. Each data payload is decoded
  once into typed msgspec Structs (a tagged union on ``type``); nothing walks
  dicts on the hot path.
* ``build_request``: a standard request becomes ``POST {base_url}/v1/messages``.
* ``request_from_vendor``: an Anthropic Messages request body becomes a
  standard ``Request`` (the gateway's ``/v1/messages`` ingress).
* ``EventEncoder``: standard events become Anthropic's own SSE, so that an
  Anthropic client (the real ``anthropic`` SDK) can read any upstream.

The rulings where Anthropic and the draft do not line up one to one (merged
text blocks, dropped server-tool blocks, a second ``message_start``, truncated
tool input, ``pause_turn``...) are listed in ``docs/translation.md``
("Anthropic") and restated next to the code that applies them.
"""

from __future__ import annotations

import base64
import binascii
import re
import secrets
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Final, TypeAlias

import msgspec

from .. import events as ev
from .. import request as rq
from .. import sse
from ..errors import FramingError, InvalidRequest
from ._base import SSETranslator, VendorRequest

__all__ = [
    "ANTHROPIC_VERSION",
    "ContentBlockDelta",
    "ContentBlockStart",
    "ContentBlockStop",
    "InStreamError",
    "MessageDelta",
    "MessageStart",
    "MessageStop",
    "Ping",
    "VendorEvent",
    "DEFAULT_MAX_TOKENS",
    "ERROR_CODES",
    "ERROR_TYPES",
    "STOP_REASONS",
    "VENDOR_STOP_REASONS",
    "EventEncoder",
    "Translator",
    "build_request",
    "error_code",
    "http_error",
    "request_body",
    "request_from_vendor",
    "stop_reason",
]

#: The ``anthropic-version`` header sent upstream.
ANTHROPIC_VERSION: Final = "2023-06-01"

#: Anthropic requires ``max_tokens``; used when the standard request has none (§4.5).
DEFAULT_MAX_TOKENS: Final = 4096

#: Anthropic ``stop_reason`` -> §5.3.3 stop reason. Anything else -> ``end_turn``.
STOP_REASONS: Final[dict[str, str]] = {
    "end_turn": "end_turn",
    "stop_sequence": "end_turn",
    "max_tokens": "max_tokens",
    # The context window filled up: generation was cut short, like max_tokens.
    "model_context_window_exceeded": "max_tokens",
    "tool_use": "tool_use",
    "refusal": "content_filter",
    # The server paused a long server-tool turn; the client may continue it by
    # sending the answer back. The draft has no "paused": this turn ended.
    "pause_turn": "end_turn",
}

#: Anthropic error ``type`` -> §5.3.6 error code (``invalid_request_error`` is
#: ``context_length_exceeded`` when its message says so; see ``error_code``).
ERROR_CODES: Final[dict[str, str]] = {
    "overloaded_error": "overloaded",
    "rate_limit_error": "rate_limited",
    "api_error": "internal_error",
    "timeout_error": "internal_error",
    "invalid_request_error": "internal_error",
    "authentication_error": "internal_error",
    "permission_error": "internal_error",
    "not_found_error": "internal_error",
    "billing_error": "internal_error",
    "request_too_large": "internal_error",
}

#: §5.3.3 stop reason -> Anthropic ``stop_reason`` (the reverse direction).
VENDOR_STOP_REASONS: Final[dict[str, str]] = {
    "end_turn": "end_turn",
    "max_tokens": "max_tokens",
    "tool_use": "tool_use",
    "content_filter": "refusal",
}

#: §5.3.6 error code -> Anthropic error ``type`` (the reverse direction).
ERROR_TYPES: Final[dict[str, str]] = {
    "overloaded": "overloaded_error",
    "rate_limited": "rate_limit_error",
    "context_length_exceeded": "invalid_request_error",
    "content_filtered": "invalid_request_error",
    "internal_error": "api_error",
}

_CONTEXT_LENGTH: Final = re.compile(
    r"prompt is too long|context (?:length|window)|too many (?:input )?tokens"
    r"|exceeds? the (?:maximum|model)",
    re.IGNORECASE,
)


def stop_reason(vendor_reason: str | None, *, has_tool_calls: bool = False) -> str:
    """The §5.3.3 stop reason for an Anthropic ``stop_reason``.

    ``None`` (no ``message_delta`` said) gives ``tool_use`` when the message
    made tool calls, else ``end_turn``; an unknown value gives ``end_turn``.
    """
    if vendor_reason is None:
        return "tool_use" if has_tool_calls else "end_turn"
    return STOP_REASONS.get(vendor_reason, "end_turn")


def error_code(error_type: str, message: str = "") -> str:
    """The §5.3.6 error code for an Anthropic error ``type`` and its message."""
    if error_type == "invalid_request_error" and _CONTEXT_LENGTH.search(message):
        return "context_length_exceeded"
    return ERROR_CODES.get(error_type, "internal_error")


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
    id: str = ""
    name: str = ""
    input: msgspec.Raw = msgspec.Raw(b"")


class _Delta(msgspec.Struct, frozen=True, gc=False):
    """A ``content_block_delta.delta``: text_delta, input_json_delta, thinking_delta..."""

    type: str
    text: str = ""
    partial_json: str = ""
    thinking: str = ""


class _MessageDeltaBody(msgspec.Struct, frozen=True, gc=False):
    stop_reason: str | None = None


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
_KNOWN_TYPES: Final = frozenset(
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


class _Probe(msgspec.Struct):
    type: Any = None


_decode_probe = msgspec.json.Decoder(_Probe).decode
_decode_any = msgspec.json.Decoder().decode
_encode = msgspec.json.Encoder().encode


# --- stream side ------------------------------------------------------------------

# What an Anthropic content block becomes.
_TEXT: Final = 0  # text -> the answer's one text block
_THINKING: Final = 1  # thinking -> the reasoning block, or dropped
_TOOL: Final = 2  # tool_use -> one tool.call on its own block
_SKIP: Final = 3  # server_tool_use, *_tool_result, redacted_thinking, unknown: dropped


class _Block:
    """The state of one Anthropic content block (by its ``index``)."""

    __slots__ = ("kind", "id", "name", "parts", "start_input", "done")

    def __init__(self, kind: int, id: str = "", name: str = "", start_input: bytes = b"") -> None:
        self.kind = kind
        self.id = id
        self.name = name
        self.parts: list[str] = []
        self.start_input = start_input
        self.done = False


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

    def __init__(
        self,
        *,
        model: str,
        request_id: str | None = None,
        reasoning: bool = False,
        created: int | None = None,
    ) -> None:
        super().__init__(model=model, request_id=request_id, reasoning=reasoning, created=created)
        self.upstream_model: str | None = None
        self._blocks: dict[int, _Block] = {}
        self._message_started = False
        self._visible = False  # anything but stream.start emitted (cannot be taken back)
        self._next_index = 0
        self._text_index = -1
        self._reasoning_index = -1
        self._tool_indexes: set[int] = set()
        self._tool_ids: set[str] = set()
        self._vendor_stop: str | None = None
        self._usage_seen = False
        self._usage_sent = False
        self._input = 0
        self._cache_creation = 0
        self._cache_read = 0
        self._output = 0

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
        if isinstance(kind, str) and kind not in _KNOWN_TYPES:
            return []  # forward compatibility: an event type Anthropic added later
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
            self._vendor_stop = None
            self._usage_seen = False
            self._input = self._cache_creation = self._cache_read = self._output = 0
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
            self._blocks[index] = _Block(_THINKING)
            return self._thinking(cb.thinking) if cb.thinking and self.reasoning else []
        if kind == "tool_use":
            self._blocks[index] = _Block(_TOOL, cb.id or f"toolu_{index}", cb.name, bytes(cb.input))
            return []
        # Server tools (server_tool_use, web_search_tool_result, ...) ran on
        # Anthropic's side: the client has nothing to execute. redacted_thinking
        # has no text. Their deltas are dropped; the answer's text blocks stay.
        self._blocks[index] = _Block(_SKIP)
        return []

    def _on_delta(self, event: ContentBlockDelta) -> list[ev.Event]:
        block = self._blocks.get(event.index)
        if block is None:
            return self._failure(
                "internal_error",
                f"anthropic sent a delta for content block {event.index} that was never started",
            )
        delta = event.delta
        kind = block.kind
        if kind == _TEXT:
            # text_delta; citations_delta carries no text and is dropped.
            return self._text(delta.text) if delta.text else []
        if kind == _TOOL:
            if delta.type == "input_json_delta":
                block.parts.append(delta.partial_json)
            return []
        if kind == _THINKING and self.reasoning and delta.thinking:
            return self._thinking(delta.thinking)  # signature_delta is always dropped
        return []

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

    def _thinking(self, text: str) -> list[ev.Event]:
        # docs/extensions.md: reasoning on its own block, never in the answer's text.
        index = self._reasoning_index
        if index < 0:
            index = self._reasoning_index = self._next_index
            self._next_index += 1
        self._visible = True
        return self.writer.text(text, index, reasoning=True)

    def _on_block_stop(self, event: ContentBlockStop) -> list[ev.Event]:
        block = self._blocks.get(event.index)
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
        index = self._next_index
        self._next_index += 1
        self._tool_indexes.add(index)
        self._visible = True
        return self.writer.tool_call(id=block.id, name=block.name, arguments=arguments, index=index)

    def _on_message_delta(self, event: MessageDelta) -> list[ev.Event]:
        if event.delta.stop_reason is not None:
            self._vendor_stop = event.delta.stop_reason
        if event.usage is not None:
            self._merge_usage(event.usage)
        return []

    def _merge_usage(self, usage: _Usage) -> None:
        # message_delta usage is cumulative: each reported field replaces the
        # last value (some servers repeat input_tokens there, with a new value).
        if usage.input_tokens is not None:
            self._input = usage.input_tokens
            self._usage_seen = True
        if usage.cache_creation_input_tokens is not None:
            self._cache_creation = usage.cache_creation_input_tokens
        if usage.cache_read_input_tokens is not None:
            self._cache_read = usage.cache_read_input_tokens
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
        return self.writer.usage(total_input, self._output)

    def _fail(self, code: str, message: str) -> None:
        self.out += self._failure(code, message)

    def _failure(self, code: str, message: str) -> list[ev.Event]:
        """``error``, the usage reported so far (allowed after an error, §5.4), ``stream.end``."""
        writer = self.writer
        if writer.ended:
            return []
        out = [] if writer.errored else writer.error(code, message)
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
        if self._next_index == 0:
            # No block carried anything (a refusal often has none): one
            # content.stop still tells the client why generation stopped.
            out += writer.stop(0, reason)
        else:
            for index in sorted(writer.open_blocks):
                # §4.8: a block that carried a tool.call stops with tool_use.
                out += writer.stop(index, "tool_use" if index in self._tool_indexes else reason)
        out += self._usage()
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


# --- request side -----------------------------------------------------------------


def _messages_url(base_url: str) -> str:
    base = base_url.rstrip("/")
    # The SDK convention is a base URL without /v1; accept one with it too.
    return f"{base}/messages" if base.endswith("/v1") else f"{base}/v1/messages"


def _source(part: rq.ImagePart | rq.DocumentPart, path: str) -> dict[str, Any]:
    if isinstance(part, rq.DocumentPart) and part.media_type.split(";")[0].strip() == "text/plain":
        # Anthropic takes base64 documents as PDF only; plain text goes as text.
        try:
            text = base64.b64decode(part.data, validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            raise InvalidRequest(
                "a text/plain document must be base64 of UTF-8 text", path=f"{path}.data"
            ) from None
        return {"type": "text", "media_type": "text/plain", "data": text}
    return {"type": "base64", "media_type": part.media_type, "data": part.data}


def _part(part: rq.Part, path: str) -> dict[str, Any] | None:
    """One standard part as an Anthropic content block (``None``: nothing to send)."""
    if isinstance(part, rq.TextPart):
        # Anthropic rejects empty text blocks.
        return {"type": "text", "text": part.text} if part.text else None
    if isinstance(part, rq.ImagePart):
        return {"type": "image", "source": _source(part, path)}
    if isinstance(part, rq.DocumentPart):
        return {"type": "document", "source": _source(part, path)}
    raise InvalidRequest("audio parts are not supported by Anthropic Messages", path=path)


def _blocks(content: str | list[rq.Part] | None, path: str) -> list[dict[str, Any]]:
    if content is None or content == "":
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    blocks = (_part(part, f"{path}.content[{k}]") for k, part in enumerate(content))
    return [b for b in blocks if b is not None]


def _tool_input(arguments: str, path: str) -> dict[str, Any]:
    if not arguments.strip():
        return {}
    try:
        value = _decode_any(arguments)
    except msgspec.DecodeError:
        raise InvalidRequest("tool call arguments are not valid JSON", path=path) from None
    if not isinstance(value, dict):
        raise InvalidRequest("tool call arguments must be a JSON object", path=path)
    return value


def _system_text(message: rq.Message, path: str) -> str:
    if isinstance(message.content, list):
        for k, part in enumerate(message.content):
            if not isinstance(part, rq.TextPart):
                raise InvalidRequest(
                    "Anthropic's system prompt takes text only", path=f"{path}.content[{k}]"
                )
    return message.text


def _turns(messages: list[rq.Message]) -> tuple[list[str], list[dict[str, Any]]]:
    """System texts, and user/assistant turns with same-role neighbours merged."""
    system: list[str] = []
    turns: list[tuple[str, list[dict[str, Any]]]] = []
    for i, message in enumerate(messages):
        path = f"messages[{i}]"
        role: str = message.role
        if role == "system":
            # Anthropic has no system role in messages: every system message,
            # wherever it stands, goes to the top-level system prompt.
            text = _system_text(message, path)
            if text:
                system.append(text)
            continue
        if role == "tool":
            result: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.tool_call_id}
            content = message.content
            if isinstance(content, list):
                result["content"] = _blocks(content, path)
            elif content:
                result["content"] = content
            role, blocks = "user", [result]
        else:
            blocks = _blocks(message.content, path)
            for k, call in enumerate(message.tool_calls or ()):
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": call.id,
                        "name": call.name,
                        "input": _tool_input(call.arguments, f"{path}.tool_calls[{k}].arguments"),
                    }
                )
        if not blocks:
            continue
        if turns and turns[-1][0] == role:
            turns[-1][1].extend(blocks)  # Anthropic wants user/assistant alternating
        else:
            turns.append((role, blocks))
    out: list[dict[str, Any]] = []
    for role, blocks in turns:
        if role == "user":
            # Anthropic wants a user turn's tool_result blocks before its other blocks.
            blocks.sort(key=lambda b: b["type"] != "tool_result")
        if len(blocks) == 1 and blocks[0]["type"] == "text":
            out.append({"role": role, "content": blocks[0]["text"]})
        else:
            out.append({"role": role, "content": blocks})
    return system, out


def request_body(req: rq.Request, *, upstream_model: str | None = None) -> dict[str, Any]:
    """The Anthropic Messages JSON body for the standard request ``req``.

    Returns a dict ready to encode. Raises ``InvalidRequest`` (``.path`` in the
    standard request) for what Anthropic cannot take: an audio part, tool
    call arguments that are not a JSON object, a non-text system part, a
    ``vendor:anthropic`` extension that is not an object.
    """
    system, messages = _turns(req.messages)
    body: dict[str, Any] = {"model": upstream_model or req.model}
    params = req.parameters or rq.Parameters()
    body["max_tokens"] = params.max_tokens or DEFAULT_MAX_TOKENS
    if system:
        body["system"] = "\n\n".join(system)
    body["messages"] = messages
    if req.tools:
        tools = []
        for tool in req.tools:
            entry: dict[str, Any] = {"name": tool.name}
            if tool.description:
                entry["description"] = tool.description
            entry["input_schema"] = tool.parameters
            tools.append(entry)
        body["tools"] = tools
    if params.temperature is not None:
        body["temperature"] = params.temperature
    if params.top_p is not None:
        body["top_p"] = params.top_p
    if params.stop_sequences:
        body["stop_sequences"] = params.stop_sequences
    extension = req.extension("vendor:anthropic")
    if extension is not None:
        if not isinstance(extension, dict):
            raise InvalidRequest("must be an object", path='extensions["vendor:anthropic"]')
        body.update(extension)  # §4.7: vendor fields (thinking, tool_choice, top_k...)
    body["stream"] = True
    return body


def build_request(
    req: rq.Request,
    *,
    base_url: str,
    api_key: str | None = None,
    upstream_model: str | None = None,
    headers: dict[str, str] | None = None,
) -> VendorRequest:
    """The ``POST {base_url}/v1/messages`` request for the standard request ``req``.

    ``upstream_model`` replaces ``req.model``; ``headers`` are added last (they
    win). Raises ``InvalidRequest`` as ``request_body`` does.
    """
    body = request_body(req, upstream_model=upstream_model)
    out = {
        "content-type": "application/json",
        "accept": "text/event-stream",
        "anthropic-version": ANTHROPIC_VERSION,
    }
    if api_key:
        out["x-api-key"] = api_key
    if headers:
        out.update(headers)
    return VendorRequest(url=_messages_url(base_url), headers=out, body=_encode(body))


def http_error(status: int, body: bytes) -> tuple[str, str]:
    """``(draft code, message)`` for an Anthropic HTTP error answer (before streaming).

    Reads Anthropic's ``{"type":"error","error":{"type","message"}}`` body; a
    body that is not one falls back on the status (429 -> ``rate_limited``,
    529/503 -> ``overloaded``, else ``internal_error``).
    """
    try:
        obj = _decode_any(body)
    except msgspec.DecodeError:
        obj = None
    error = obj.get("error") if isinstance(obj, dict) else None
    if isinstance(error, dict) and isinstance(error.get("type"), str):
        message = error.get("message")
        text = message if isinstance(message, str) else ""
        return error_code(error["type"], text), f"anthropic {error['type']}: {text}"
    code = {429: "rate_limited", 503: "overloaded", 529: "overloaded"}.get(status, "internal_error")
    return code, f"anthropic answered HTTP {status}"


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


def _kind(value: object) -> str:
    if value is None:
        return "null"
    for types, name in (
        (bool, "a boolean"),
        ((int, float), "a number"),
        (str, "a string"),
        (list, "an array"),
        (dict, "an object"),
    ):
        if isinstance(value, types):
            return name
    return type(value).__name__  # pragma: no cover - JSON values only


def _want_str(obj: Mapping[str, Any], key: str, path: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str):
        where = f"{path}.{key}" if path else key
        raise InvalidRequest(f"required: a string, got {_kind(value)}", path=where)
    return value


def _vendor_source(block: Mapping[str, Any], path: str) -> tuple[str, str]:
    """``(media_type, base64 data)`` of an image/document block's ``source``."""
    source = block.get("source")
    if not isinstance(source, dict):
        raise InvalidRequest(f"required: an object, got {_kind(source)}", path=f"{path}.source")
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
        return None  # the model's earlier reasoning: nothing the standard can carry
    raise InvalidRequest(f"content block type {kind!r} is not supported here", path=f"{path}.type")


def _vendor_content(content: object, path: str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise InvalidRequest(
            f"must be a string or an array of content blocks, got {_kind(content)}", path=path
        )
    out = []
    for k, block in enumerate(content):
        where = f"{path}[{k}]"
        if not isinstance(block, dict):
            raise InvalidRequest(
                f"a content block must be an object, got {_kind(block)}", path=where
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


def _vendor_message(message: object, path: str) -> list[dict[str, Any]]:
    """One Anthropic message as standard messages (a user turn's tool results split off)."""
    if not isinstance(message, dict):
        raise InvalidRequest(f"a message must be an object, got {_kind(message)}", path=path)
    role = message.get("role")
    if role not in ("user", "assistant"):
        raise InvalidRequest(
            f'must be "user" or "assistant", got {role!r}'
            if isinstance(role, str)
            else f'must be "user" or "assistant", got {_kind(role)}',
            path=f"{path}.role",
        )
    content = message.get("content")
    if isinstance(content, str):
        return [{"role": role, "content": content}]
    if not isinstance(content, list):
        raise InvalidRequest(
            f"must be a string or an array of content blocks, got {_kind(content)}",
            path=f"{path}.content",
        )
    out: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    for k, block in enumerate(content):
        where = f"{path}.content[{k}]"
        if not isinstance(block, dict):
            raise InvalidRequest(
                f"a content block must be an object, got {_kind(block)}", path=where
            )
        kind = block.get("type")
        if kind == "tool_use" and role == "assistant":
            tool_input = block.get("input", {})
            if not isinstance(tool_input, dict):
                raise InvalidRequest(
                    f"must be an object, got {_kind(tool_input)}", path=f"{where}.input"
                )
            calls.append(
                {
                    "id": _want_str(block, "id", where),
                    "name": _want_str(block, "name", where),
                    "arguments": _encode(tool_input).decode(),
                }
            )
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
        raise InvalidRequest(f"must be an array, got {_kind(tools)}", path="tools")
    out = []
    for i, tool in enumerate(tools):
        path = f"tools[{i}]"
        if not isinstance(tool, dict):
            raise InvalidRequest(f"a tool must be an object, got {_kind(tool)}", path=path)
        if tool.get("type", "custom") != "custom":
            raise InvalidRequest(
                f"server tool {tool.get('type')!r} is not supported: only client tools "
                "(name, description, input_schema) can be translated",
                path=f"{path}.type",
            )
        schema = tool.get("input_schema")
        if not isinstance(schema, dict):
            raise InvalidRequest(
                f"required: a JSON Schema object, got {_kind(schema)}", path=f"{path}.input_schema"
            )
        description = tool.get("description", "")
        if not isinstance(description, str):
            raise InvalidRequest(
                f"must be a string, got {_kind(description)}", path=f"{path}.description"
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
    ``thinking`` blocks of earlier turns are dropped. Fields without a standard
    home (``thinking``, ``tool_choice``, ``top_k``...) are kept under
    ``extensions["vendor:anthropic"]``, so that ``build_request`` sends them
    on; a ``thinking`` config also sets ``"tokenwire:reasoning": true``. The
    body's ``stream`` flag is the caller's business: the result always streams.

    Returns the ``Request``. Raises ``InvalidRequest`` whose ``.path`` names the
    offending value in the Anthropic body (``messages[1].content[0].source``).
    """
    if not isinstance(body, dict):
        raise InvalidRequest(f"the body must be a JSON object, got {_kind(body)}", path="$")
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
            f"required: a non-empty array of messages, got {_kind(history)}", path="messages"
        )
    for i, message in enumerate(history):
        messages.extend(_vendor_message(message, f"messages[{i}]"))
    tools = _vendor_tools(body["tools"]) if body.get("tools") is not None else None
    parameters = {
        key: body[key]
        for key in ("max_tokens", "temperature", "top_p", "stop_sequences")
        if body.get(key) is not None
    }
    metadata = body.get("metadata")
    extras = {k: v for k, v in body.items() if k not in _STANDARD_FIELDS}
    extensions: dict[str, Any] = {}
    if extras:
        extensions["vendor:anthropic"] = extras
        thinking = extras.get("thinking")
        if isinstance(thinking, dict) and thinking.get("type") not in (None, "disabled"):
            extensions["tokenwire:reasoning"] = True
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
            out += _frame(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {
                        "stop_reason": VENDOR_STOP_REASONS.get(reason, "end_turn"),
                        "stop_sequence": None,
                    },
                    "usage": usage,
                },
            )
            out += _frame("message_stop", {"type": "message_stop"})
        # stream.start only opens the message; unknown event types have no Anthropic form.
        return out
