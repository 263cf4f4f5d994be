"""Cohere v2 chat streaming <-> the standard (§7.1).

Request side: ``build_request`` turns a standard request into ``POST
{base}/v2/chat`` with ``Authorization: Bearer``: ``messages`` (assistant
``tool_calls``, ``tool`` role with ``tool_call_id``, images as ``image_url``
data URLs), tools ``{"type": "function", "function": {...}}``, ``max_tokens``,
``temperature``, ``p``, ``stop_sequences`` and ``stream: true``. The extension
``"vendor:cohere"`` is deep-merged into the body last.

Stream side: ``Translator`` reads ``event: <type>`` / ``data: <json>`` frames and
dispatches on the JSON ``type`` (the ``event:`` name is not needed, so a body
rebuilt with ``data:`` lines only reads the same). The mapping decisions
(published in ``docs/translation.md``):

* ``content-delta`` text goes to one block per Cohere content index;
  ``thinking`` content and ``tool-plan-delta`` (the model's plan before it calls
  tools) are reasoning: dropped unless ``reasoning=True``, then carried on
  their own block marked ``tokenwire:reasoning``;
* ``tool-call-start/delta/end`` are accumulated per index and emitted whole at
  ``tool-call-end`` (no argument text -> ``{}``);
* ``citation-start`` is a ``tokenwire.block`` with the citation on its text
  block; ``citation-end`` and ``debug`` carry nothing; unknown types are counted;
* ``message-end`` is the end marker: ``finish_reason`` maps through
  ``FINISH_REASONS`` (stop reasons) or ``FINISH_ERRORS`` (an ``error`` event,
  ``ERROR_TOXIC`` included, refined by ``ERROR_HINTS`` from the error text);
  usage is ``usage.tokens`` (what the model processed; what ``input_tokens``
  means in §5.3.5), falling back to ``usage.billed_units`` when ``tokens`` is
  absent, emitted after the ``content.stop`` events (or the error), right
  before ``stream.end``. A body without ``message-end`` is an error.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, ClassVar, Final

import msgspec

from .. import sse
from ..errors import InvalidRequest, TranslationError
from ..request import AudioPart, DocumentPart, ImagePart, Message, Request, TextPart
from . import _extensions as x
from ._base import BlockNumbers, SSETranslator, VendorRequest, event_type
from ._contract import VendorFormat
from ._request import (
    function_call,
    function_tool,
    merge_extensions,
    sse_headers,
    vendor_parameters,
    versioned_url,
)

__all__ = [
    "FORMAT",
    "ERROR_HINTS",
    "EXTENSION_KEYS",
    "FINISH_ERRORS",
    "FINISH_REASONS",
    "Translator",
    "build_request",
    "error_code",
    "http_error",
]

#: Extension keys merged into the body, in this order (§4.7).
EXTENSION_KEYS: Final = ("vendor:cohere",)

#: ``finish_reason`` -> standard stop reason (§5.3.3). Unknown values are ``end_turn``.
FINISH_REASONS: Final[dict[str, str]] = {
    "COMPLETE": "end_turn",
    "STOP_SEQUENCE": "end_turn",
    "MAX_TOKENS": "max_tokens",
    "TOOL_CALL": "tool_use",
}

#: ``finish_reason`` values that are failures: an ``error`` event with this code
#: (§5.3.6). Cohere names a toxic reply an error (``ERROR_TOXIC``), so it is
#: one here too, ``content_filtered``. For plain ``ERROR`` the code is refined
#: from the ``error`` text when it names a cause (``ERROR_HINTS``).
FINISH_ERRORS: Final[dict[str, str]] = {
    "ERROR": "internal_error",
    "ERROR_TOXIC": "content_filtered",
    "ERROR_LIMIT": "context_length_exceeded",
    "TIMEOUT": "internal_error",
    "USER_CANCEL": "internal_error",
}

#: Words in a ``message-end`` ``error`` text -> the §5.3.6 code they name, first match wins.
ERROR_HINTS: Final[tuple[tuple[re.Pattern[str], str], ...]] = (
    (re.compile(r"rate.?limit|too many requests", re.IGNORECASE), "rate_limited"),
    (re.compile(r"overload|capacity|unavailable", re.IGNORECASE), "overloaded"),
    (
        re.compile(r"context|too long|too many tokens|token limit", re.IGNORECASE),
        "context_length_exceeded",
    ),
    (re.compile(r"toxic|unsafe|content.?filter", re.IGNORECASE), "content_filtered"),
)


def error_code(finish_reason: str, error: str | None) -> str:
    """The §5.3.6 code for a failed ``message-end`` (``finish_reason``, ``error`` text)."""
    code = FINISH_ERRORS.get(finish_reason, "internal_error")
    if code == "internal_error" and error:
        for pattern, hinted in ERROR_HINTS:
            if pattern.search(error):
                return hinted
    return code


_STATUS_CODES: Final[dict[int, str]] = {429: "rate_limited", 503: "overloaded", 529: "overloaded"}


class _HTTPError(msgspec.Struct, frozen=True, gc=False):
    message: str | None = None


_decode_http_error = msgspec.json.Decoder(_HTTPError).decode


def http_error(status: int, body: bytes) -> tuple[str, str]:
    """The §5.3.6 ``(code, message)`` for a Cohere HTTP error answer (before any stream).

    429 is ``rate_limited``, 503/529 ``overloaded``; otherwise the ``message``
    text refines the code through ``ERROR_HINTS``. Never raises.
    """
    text = f"upstream answered HTTP {status}"
    code = _STATUS_CODES.get(status, "internal_error")
    try:
        detail = _decode_http_error(body).message
    except msgspec.DecodeError:
        return code, text
    if not detail:
        return code, text
    if code == "internal_error":
        code = error_code("ERROR", detail)
    return code, f"{text}: {detail}"


# --- Wire types: only the fields the translator reads ------------------------------
# (gc=False: decoded values never form cycles, and untracked structs decode faster.)


class _Function(msgspec.Struct, frozen=True, gc=False):
    name: str | None = None
    arguments: str | None = None


class _ToolCallDelta(msgspec.Struct, frozen=True, gc=False):
    id: str | None = None
    function: _Function | None = None


class _ContentDelta(msgspec.Struct, frozen=True, gc=False):
    type: str | None = None
    text: str | None = None
    thinking: str | None = None


class _MessageDelta(msgspec.Struct, frozen=True, gc=False):
    # The block events send one object in each; message-start sends arrays,
    # which do not decode here: message-start is skipped (see _TRANSLATED).
    content: _ContentDelta | None = None
    tool_calls: _ToolCallDelta | None = None
    tool_plan: str | None = None


class _Tokens(msgspec.Struct, frozen=True, gc=False):
    input_tokens: int | float = 0
    output_tokens: int | float = 0


class _Usage(msgspec.Struct, frozen=True, gc=False):
    tokens: _Tokens | None = None
    billed_units: _Tokens | None = None
    cached_tokens: float | None = None


class _Delta(msgspec.Struct, frozen=True, gc=False):
    message: _MessageDelta | None = None
    finish_reason: str | None = None
    usage: _Usage | None = None
    error: str | None = None


class _Event(msgspec.Struct, frozen=True, gc=False):
    type: str = ""
    index: int = 0
    delta: _Delta | None = None


_decode_event = msgspec.json.Decoder(_Event).decode
_encode = msgspec.json.Encoder().encode


_NO_MESSAGE: Final = _MessageDelta()


def _message(event: _Event) -> _MessageDelta:
    delta = event.delta
    message = delta.message if delta is not None else None
    return _NO_MESSAGE if message is None else message


class _Call:
    """A tool call being streamed: its id, name and argument fragments."""

    __slots__ = ("id", "name", "pieces")

    def __init__(self, call_id: str, name: str) -> None:
        self.id = call_id
        self.name = name
        self.pieces: list[str] = []


class Translator(SSETranslator):
    """Cohere v2 chat stream -> standard events. See the module docstring."""

    name: ClassVar[str] = "cohere"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # ("content"|"plan", cohere index) -> block
        self._blocks: BlockNumbers[tuple[str, int]] = BlockNumbers()
        self._text_blocks: dict[int, int] = {}  # Cohere text content index -> block
        self._thinking: set[int] = set()  # Cohere content indexes that hold thinking
        self._calls: dict[int, _Call] = {}
        self._called = False

    def _block(self, kind: str, index: int) -> int:
        return self._blocks.of((kind, index))

    def _on_frame(self, frame: sse.Message) -> None:
        data = frame.data
        try:
            event: _Event | None = _decode_event(data)
        except msgspec.DecodeError:
            event = None
        if event is not None and event.type == "content-delta":
            # The hot path, inlined: more answer text for a block already open.
            delta = event.delta
            message = delta.message if delta is not None else None
            content = message.content if message is not None else None
            if content is not None and content.text:
                block = self._text_blocks.get(event.index)
                if block is not None:
                    self.out += self.writer.text(content.text, block)
                    return
        self._translate(data, event)

    def _translate(self, data: str, event: _Event | None) -> None:
        if event is None:
            self._undecodable(data)
            return
        handler = _HANDLERS.get(event.type)
        if handler is not None:
            handler(self, event)
        elif event.type == "citation-start":
            self._on_citation(data, event.index)
        elif event.type not in _IGNORED:
            self.note_unknown(event.type)  # docs/extensions.md: counted, never silently dropped

    def _on_citation(self, data: str, index: int) -> None:
        """``citation-start``: the citation, as Cohere gave it, on its text block."""
        try:
            whole = msgspec.json.decode(data)
        except msgspec.DecodeError:
            raise TranslationError("cohere: citation-start is not valid JSON") from None
        delta = whole.get("delta") if isinstance(whole, dict) else None
        message = delta.get("message") if isinstance(delta, dict) else None
        citation = message.get("citations") if isinstance(message, dict) else None
        if not isinstance(citation, dict):
            return
        content = citation.get("content_index", 0)
        block = self._text_blocks.get(content if isinstance(content, int) else 0)
        if block is None:
            block = self._block("content", content if isinstance(content, int) else 0)
        body = {"index": block, x.CITATION: citation}
        self.out += self.writer.add(x.extension(x.BLOCK, body))

    def _undecodable(self, data: str) -> None:
        if not data.strip() or data == "[DONE]":
            # The SDK also stops on [DONE]; only message-end counts as the end.
            return
        # message-start and event types we do not translate may carry fields
        # of other shapes (arrays); only the types we read must decode.
        kind = event_type(data)
        if kind and kind not in _HANDLERS:
            return
        try:
            _decode_event(data)
        except msgspec.DecodeError as exc:
            raise TranslationError(f"cohere: upstream event is not valid: {exc}") from None

    def _on_content_start(self, event: _Event) -> None:
        content = _message(event).content
        if content is not None and content.type == "thinking":
            self._thinking.add(event.index)

    def _on_content_delta(self, event: _Event) -> None:
        # The first text of a block (later ones take the hot path in _on_frame), or
        # thinking content (reasoning).
        content = _message(event).content
        if content is None:
            return
        index = event.index
        thinking = index in self._thinking
        if content.text and not thinking:
            block = self._text_blocks[index] = self._block("content", index)
            self.out += self.writer.text(content.text, block)
            return
        reasoning = content.thinking or (content.text if thinking else None)
        if reasoning and self.reasoning:
            block = self._block("content", index)
            self.out += self.writer.text(reasoning, block, reasoning=True)

    def _on_tool_plan(self, event: _Event) -> None:
        # The plan the model writes before calling tools: reasoning, not answer text.
        plan = _message(event).tool_plan
        if plan and self.reasoning:
            self.out += self.writer.text(plan, self._block("plan", 0), reasoning=True)

    def _on_tool_start(self, event: _Event) -> None:
        call = _message(event).tool_calls
        if call is None:
            raise TranslationError("cohere: tool-call-start without a tool call")
        fn = call.function or _Function()
        if not fn.name:
            raise TranslationError("cohere: tool-call-start without a function name")
        state = self._calls[event.index] = _Call(call.id or f"call_{event.index}", fn.name)
        if fn.arguments:
            state.pieces.append(fn.arguments)

    def _on_tool_delta(self, event: _Event) -> None:
        call = _message(event).tool_calls
        state = self._calls.get(event.index)
        if state is None:
            raise TranslationError(f"cohere: tool-call-delta for unknown index {event.index}")
        if call is not None and call.function and call.function.arguments:
            state.pieces.append(call.function.arguments)

    def _on_tool_end(self, event: _Event) -> None:
        state = self._calls.pop(event.index, None)
        if state is not None:
            self._emit_call(state)

    def _emit_call(self, call: _Call) -> None:
        arguments = "".join(call.pieces).strip() or "{}"
        try:
            parsed = msgspec.json.decode(arguments)
        except msgspec.DecodeError:
            parsed = None
        if not isinstance(parsed, dict):
            raise TranslationError(
                f"cohere: tool call {call.name!r} arguments are not a JSON object"
            )
        # §5.3.4 / §4.8: the call is whole; its block stops with tool_use right away.
        index = self._blocks.new()
        self.out += self.writer.tool_call(
            id=call.id, name=call.name, arguments=arguments, index=index
        )
        self.out += self.writer.stop(index, "tool_use")
        self._called = True

    def _on_message_end(self, event: _Event) -> None:
        # The end marker. Calls still open are complete now.
        for index in sorted(self._calls):
            self._emit_call(self._calls.pop(index))
        delta = event.delta or _Delta()
        writer = self.writer
        out = self.out
        reason = delta.finish_reason or "COMPLETE"
        cached = delta.usage.cached_tokens if delta.usage is not None else None
        if cached:
            # docs/extensions.md: the cache reads inside input_tokens (ruling 18), before
            # the stops or the error (after an error only usage and stream.end may follow).
            body = {x.CACHE_READ: int(cached)}
            out += writer.add(x.extension(x.USAGE, body))
        if delta.finish_reason and reason not in FINISH_ERRORS:
            # docs/extensions.md: the vendor's own value, next to the mapped stop_reason.
            out += writer.add(x.extension(x.STOP, {x.RAW_STOP_REASON: delta.finish_reason}))
        if reason in FINISH_ERRORS:
            detail = f": {delta.error}" if delta.error else ""
            out += writer.error(error_code(reason, delta.error), f"cohere: {reason}{detail}")
        else:
            stop = FINISH_REASONS.get(reason, "end_turn")
            if stop == "end_turn" and self._called:
                stop = "tool_use"
            for index in sorted(writer.open_blocks):
                out += writer.stop(index, stop)
        # §5.3.5: the usage last, after the stops (or the error, §5.4), before stream.end.
        usage = delta.usage
        counts = None if usage is None else usage.tokens or usage.billed_units
        if counts is not None:
            out += writer.usage(int(counts.input_tokens), int(counts.output_tokens))
        out += writer.end()


_Handler = Callable[[Translator, _Event], None]

#: Cohere event ``type`` -> the method that translates it.
#: Event types with nothing to translate (``citation-end``: the citation went out at its start).
_IGNORED: Final = frozenset({"message-start", "content-end", "citation-end", "debug"})

_HANDLERS: Final[dict[str, _Handler]] = {
    "content-start": Translator._on_content_start,
    "content-delta": Translator._on_content_delta,
    "tool-plan-delta": Translator._on_tool_plan,
    "tool-call-start": Translator._on_tool_start,
    "tool-call-delta": Translator._on_tool_delta,
    "tool-call-end": Translator._on_tool_end,
    "message-end": Translator._on_message_end,
}


# --- Request side ------------------------------------------------------------------


def _content(message: Message, path: str, *, images: bool) -> str | list[dict[str, Any]]:
    content = message.content
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if all(isinstance(part, TextPart) for part in content):
        return message.text
    items: list[dict[str, Any]] = []
    for k, part in enumerate(content):
        if isinstance(part, TextPart):
            items.append({"type": "text", "text": part.text})
        elif isinstance(part, ImagePart) and images:
            url = f"data:{part.media_type};base64,{part.data}"
            items.append({"type": "image_url", "image_url": {"url": url}})
        else:
            kind = (
                "audio"
                if isinstance(part, AudioPart)
                else "document"
                if isinstance(part, DocumentPart)
                else "image"
            )
            raise InvalidRequest(
                f"cohere v2 chat cannot take {kind} parts in a {message.role} message",
                path=f"{path}.content[{k}]",
            )
    return items


def _messages(req: Request) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i, message in enumerate(req.messages):
        path = f"messages[{i}]"
        role = message.role
        if role == "assistant":
            item: dict[str, Any] = {"role": "assistant"}
            text = _content(message, path, images=False)
            if text:
                item["content"] = text
            if message.tool_calls:
                item["tool_calls"] = [function_call(call) for call in message.tool_calls]
            out.append(item)
        elif role == "tool":
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": message.tool_call_id,
                    "content": _content(message, path, images=False),
                }
            )
        else:
            out.append({"role": role, "content": _content(message, path, images=role == "user")})
    return out


#: Standard parameter -> Cohere v2 chat field.
_PARAMETERS: Final = {
    "max_tokens": "max_tokens",
    "temperature": "temperature",
    "top_p": "p",
    "stop_sequences": "stop_sequences",
}


# The signature is `_contract.RequestBuilder`, the same for every vendor.
def build_request(
    req: Request,
    *,
    base_url: str,
    api_key: str | None = None,
    upstream_model: str | None = None,
    headers: dict[str, str] | None = None,
) -> VendorRequest:
    """The Cohere v2 ``/v2/chat`` streaming request for ``req``.

    ``base_url`` is the API root (``https://api.cohere.com``); ``/v2`` is added
    unless it already ends with it. ``upstream_model`` replaces ``req.model``.
    The extension ``"vendor:cohere"`` is deep-merged into the body last.

    Returns the ``VendorRequest``. Raises ``InvalidRequest`` (with ``.path``)
    for audio or document parts, and images outside user messages, which the
    v2 chat API cannot take.
    """
    body: dict[str, Any] = {
        "model": upstream_model or req.model,
        "messages": _messages(req),
        "stream": True,
    }
    if req.tools:
        body["tools"] = [function_tool(t) for t in req.tools]
    body.update(vendor_parameters(req.parameters, _PARAMETERS))
    merge_extensions(body, req, EXTENSION_KEYS)
    head = sse_headers({"authorization": f"Bearer {api_key}"} if api_key else {}, headers)
    return VendorRequest(
        url=versioned_url(base_url, "v2", "chat"), headers=head, body=_encode(body)
    )


#: The Cohere v2 chat vendor format.
FORMAT = VendorFormat(
    name="cohere",
    title="Cohere v2 chat",
    transport="http-sse",
    media_type="text/event-stream",
    translator=Translator,
    build_request=build_request,
    http_error=http_error,
    endpoint="POST {base_url}/v2/chat",
    fake="tokenwire.testing.cohere",
)
