"""An OpenAI Responses API SSE body -> standard events (§7.1).

``Translator`` reads ``event: <type>`` / ``data: <json>`` frames and
dispatches on the JSON ``type``. The mapping (published in ``docs/translation.md``):

* ``response.output_text.delta`` is text, one block per output item;
  ``response.output_text.annotation.added`` is a ``tokenwire.block`` with
  ``tokenwire:citation`` on that text block;
* ``response.refusal.delta`` (the model declining) is text on a block of its
  own, marked by a ``tokenwire.block`` with ``tokenwire:refusal`` before its
  first delta, and the stream then stops with ``content_filter``;
* a ``reasoning`` item is a block of its own: its
  ``response.reasoning_summary_text.delta`` / ``response.reasoning_text.delta``
  text is carried when ``reasoning=True`` (marked ``tokenwire:reasoning``;
  summary parts after the first are joined with a blank line), and its id and
  ``encrypted_content`` are always carried, as soon as they arrive, in a
  ``tokenwire.block`` (``tokenwire:id``, ``tokenwire:redacted``,
  ``tokenwire:vendor: "openai-responses"``), so that a stream cut later still
  has what the next turn needs (the content is only there when the caller
  asked for it with ``include: ["reasoning.encrypted_content"]``);
* a ``function_call`` item is keyed by its ``output_index`` (GitHub Copilot
  changes ``item_id`` on every event); its ``function_call_arguments.delta``
  fragments are accumulated and the call is emitted once, at
  ``function_call_arguments.done`` or ``output_item.done``, with the item's
  ``call_id`` as its id (empty arguments -> ``{}``);
* a hosted tool item (``web_search_call``, ``file_search_call``,
  ``code_interpreter_call``, ``image_generation_call``, ``mcp_call``...) is a
  ``tokenwire.block`` with ``tokenwire:server_tool`` (the whole item at
  ``output_item.done``), never a ``tool.call``;
* the terminal event ends the stream: ``response.completed`` (``tool_use`` when
  a call was made, else ``end_turn``), ``response.incomplete``
  (``INCOMPLETE_REASONS``), ``response.failed`` or ``error``. The raw status
  (``completed``, or the ``incomplete_details.reason``) goes in ``tokenwire.stop``.
  Usage is ``response.usage``; its ``input_tokens_details.cached_tokens`` and
  ``output_tokens_details.reasoning_tokens`` (both inside the totals) go in
  ``tokenwire.usage`` right before it (before the error on a failure);
* an event type not read here and not known to carry nothing new is counted
  in ``unknown_types`` and its first payload kept in ``unknown_events``;
* a body that holds several responses back to back (an agent loop captured
  whole) is read up to the first terminal event; a body without a terminal
  event is an error.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, ClassVar, Final

import msgspec

from ... import events as ev
from ... import sse
from ...errors import TranslationError
from .. import _extensions as x
from .. import _lossless
from .._base import BlockNumbers, SSETranslator, event_type
from .errors import INCOMPLETE_REASONS, ErrorBody, error_code

__all__ = ["Translator"]

# --- Wire types: only the fields the translator reads ------------------------------
# (gc=False: decoded values never form cycles, and untracked structs decode faster.)


class _Item(msgspec.Struct, frozen=True, gc=False):
    type: str = ""
    id: str | None = None
    call_id: str | None = None
    name: str | None = None
    arguments: str | None = None
    encrypted_content: str | None = None
    input: str | None = None
    status: str | None = None


class _Details(msgspec.Struct, frozen=True, gc=False):
    cached_tokens: int | None = None
    reasoning_tokens: int | None = None


class _Usage(msgspec.Struct, frozen=True, gc=False):
    input_tokens: int = 0
    output_tokens: int = 0
    input_tokens_details: _Details | None = None
    output_tokens_details: _Details | None = None


class _Incomplete(msgspec.Struct, frozen=True, gc=False):
    reason: str | None = None


class _Response(msgspec.Struct, frozen=True, gc=False):
    status: str | None = None
    usage: _Usage | None = None
    incomplete_details: _Incomplete | None = None
    error: ErrorBody | None = None


class _Event(msgspec.Struct, frozen=True, gc=False):
    type: str = ""
    output_index: int = 0
    summary_index: int = 0
    delta: str | None = None
    arguments: str | None = None
    input: str | None = None
    name: str | None = None
    item: _Item | None = None
    response: _Response | None = None
    annotation: msgspec.Raw = msgspec.Raw(b"")
    # The ``error`` event: nested on the wire, flat in the SDK's types.
    error: ErrorBody | None = None
    code: str | None = None
    message: str | None = None


class _ItemOf(msgspec.Struct, frozen=True, gc=False):
    item: dict[str, Any] | None = None


_decode_event = msgspec.json.Decoder(_Event).decode
_decode_item = msgspec.json.Decoder(_ItemOf).decode
_decode_any = msgspec.json.Decoder().decode

#: The event types this translator reads.
_TRANSLATED: Final = frozenset(
    {
        "response.output_text.delta",
        "response.output_text.annotation.added",
        "response.refusal.delta",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.reasoning_summary_text.delta",
        "response.reasoning_text.delta",
        "response.custom_tool_call_input.delta",
        "response.custom_tool_call_input.done",
        "response.output_item.added",
        "response.output_item.done",
        "response.completed",
        "response.incomplete",
        "response.failed",
        "error",
    }
)
#: Event types that carry nothing the events above do not (lifecycle, the
#: ``*.done`` repeats, hosted tools' progress: their item comes whole at
#: ``output_item.done``). Any other type is counted in ``unknown_types``.
_NOTHING_NEW: Final = frozenset(
    {
        "response.created",
        "response.in_progress",
        "response.queued",
        "response.content_part.added",
        "response.content_part.done",
        "response.output_text.done",
        "response.refusal.done",
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_part.done",
        "response.reasoning_summary_text.done",
        "response.reasoning_text.done",
        "response.web_search_call.in_progress",
        "response.web_search_call.searching",
        "response.web_search_call.completed",
        "response.file_search_call.in_progress",
        "response.file_search_call.searching",
        "response.file_search_call.completed",
        "response.code_interpreter_call.in_progress",
        "response.code_interpreter_call.interpreting",
        "response.code_interpreter_call.completed",
        "response.code_interpreter_call_code.delta",
        "response.code_interpreter_call_code.done",
        "response.image_generation_call.in_progress",
        "response.image_generation_call.generating",
        "response.image_generation_call.completed",
        "response.mcp_call.in_progress",
        "response.mcp_call.completed",
        "response.mcp_call.failed",
        "response.mcp_call_arguments.delta",
        "response.mcp_call_arguments.done",
    }
)
#: Output item types the translator reads; any other is a hosted (server) tool.
_OWN_ITEMS: Final = frozenset({"message", "function_call", "reasoning"})
#: tokenwire extensions 1.1: client-run tools that are not JSON functions, as
#: ``tool.call`` (docs/extensions.md); the item type -> the tool kind.
_CLIENT_TOOLS: Final = {"custom_tool_call": "custom", "apply_patch_call": "apply_patch"}
#: MCP items the vendor ran (shown, never executed) -> the ``tokenwire:mcp`` kind.
_MCP_ITEMS: Final = {"mcp_list_tools": "list_tools", "mcp_call": "call"}
#: At most this many unknown payloads are kept per stream (one per type).
_MAX_KEPT: Final = 16

_REFUSAL_KEY: Final = 2  # block key kinds: 0 text, 1 reasoning, 2 refusal


def _code(item: dict[str, Any]) -> dict[str, Any]:
    """1.1 ``tokenwire:code`` of a ``code_interpreter_call``: its code and its logs."""
    outputs = item.get("outputs")
    logs = [
        o.get("logs", "")
        for o in (outputs if isinstance(outputs, list) else ())
        if isinstance(o, dict) and o.get("type") == "logs"
    ]
    return {
        "language": "python",
        "code": item.get("code"),
        "outcome": "error" if item.get("status") == "failed" else "ok",
        "output": "".join(str(log) for log in logs),
    }


class _Call:
    """A function_call item being streamed, keyed by its output_index."""

    __slots__ = ("block", "call_id", "done", "item_id", "kind", "name", "pieces")

    def __init__(self, call_id: str | None, name: str | None) -> None:
        self.call_id = call_id
        self.name = name
        #: ``None`` for a function call, else the 1.1 tool kind (``_CLIENT_TOOLS``).
        self.kind: str | None = None
        self.item_id: str | None = None
        self.pieces: list[str] = []
        self.done = False
        #: With tool deltas on: the block its tool.call will carry, reserved at
        #: its first argument delta (docs/extensions.md).
        self.block: int | None = None


class Translator(SSETranslator):
    """Responses API stream -> standard events. See the module docstring.

    ``unknown_types`` counts the vendor event types neither read nor known to
    carry nothing new (for ``/metrics``); ``unknown_events`` keeps the first
    payload of each (for a log line per stream).
    """

    name: ClassVar[str] = "openai-responses"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._blocks: BlockNumbers[tuple[int, int]] = BlockNumbers()  # (output_index, kind)
        self._text_blocks: dict[int, int] = {}  # output_index -> its text block
        self._calls: dict[int, _Call] = {}
        self._called = False
        self._refused = False  # the model sent refusal text
        self._summary: dict[int, int] = {}  # reasoning block -> its last summary_index
        self._sealed: dict[int, tuple[str | None, str | None]] = {}  # block -> (id, content)
        self.unknown_types: Counter[str] = Counter()
        self.unknown_events: dict[str, str] = {}

    def _block(self, output_index: int, kind: int) -> int:
        return self._blocks.of((output_index, kind))

    def _on_frame(self, frame: sse.Message) -> None:
        data = frame.data
        try:
            event = _decode_event(data)
        except msgspec.DecodeError as exc:
            self._undecodable(data, exc)
            return
        kind = event.type
        out = self.out
        if kind == "response.output_text.delta":
            # The hot path: one fragment of answer text.
            if not event.delta:
                return
            block = self._text_blocks.get(event.output_index)
            if block is None:
                block = self._block(event.output_index, 0)
                self._text_blocks[event.output_index] = block
            out += self.writer.text(event.delta, block)
        elif kind == "response.function_call_arguments.delta":
            call = self._calls.get(event.output_index)
            if call is None:
                call = self._calls[event.output_index] = _Call(None, None)
            if event.delta:
                call.pieces.append(event.delta)
                if self.tool_deltas:
                    if call.block is None:
                        call.block = self._new_block()
                    call_id = call.call_id or f"call_{event.output_index}"
                    out += self._tool_delta(call.block, call_id, call.name, event.delta)
        elif kind == "response.custom_tool_call_input.delta":
            # A custom tool's raw input: not JSON, so no tool delta (those add up to JSON).
            call = self._calls.setdefault(event.output_index, _Call(None, None))
            call.kind = "custom"
            if event.delta:
                call.pieces.append(event.delta)
        elif kind == "response.custom_tool_call_input.done":
            call = self._calls.setdefault(event.output_index, _Call(None, None))
            call.kind = "custom"
            if event.input is not None:
                call.pieces = [event.input]
        elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            if event.delta and self.reasoning:
                block = self._block(event.output_index, 1)
                text = event.delta
                last = self._summary.get(block)
                if last is not None and event.summary_index != last:
                    text = "\n\n" + text  # a new summary part
                self._summary[block] = event.summary_index
                out += self.writer.text(text, block, reasoning=True)
        elif kind == "response.refusal.delta":
            if event.delta:
                self._refusal(event.output_index, event.delta)
        elif kind == "response.output_text.annotation.added":
            if event.annotation:
                block = self._text_blocks.get(event.output_index)
                if block is None:
                    block = self._block(event.output_index, 0)
                    self._text_blocks[event.output_index] = block
                citation = _decode_any(bytes(event.annotation))
                self._block_event(block, {x.CITATION: citation})
        elif kind == "response.output_item.added":
            item = event.item
            if item is None:
                return
            if item.type == "function_call":
                call = self._calls.setdefault(event.output_index, _Call(None, None))
                call.call_id = call.call_id or item.call_id
                call.name = call.name or item.name
                if self.tool_deltas and call.block is None:
                    call.block = self._new_block()  # in item order, as the calls began
            elif item.type == "reasoning":
                self._seal(event.output_index, item)
            elif item.type == "custom_tool_call":
                call = self._calls.setdefault(event.output_index, _Call(None, None))
                call.kind = "custom"
                call.call_id = call.call_id or item.call_id
                call.name = call.name or item.name
                call.item_id = call.item_id or item.id
        elif kind == "response.function_call_arguments.done":
            self._finish_call(event.output_index, event.arguments, event.name, None)
        elif kind == "response.output_item.done":
            item = event.item
            if item is None:
                return
            if item.type == "function_call":
                self._finish_call(event.output_index, item.arguments, item.name, item.call_id)
            elif item.type == "reasoning":
                self._seal(event.output_index, item)
            elif item.type == "custom_tool_call":
                self._finish_client_tool(event.output_index, item, None)
            elif item.type == "apply_patch_call":
                whole = _decode_item(data).item or {}
                self._finish_client_tool(event.output_index, item, whole.get("operation"))
            elif item.type and item.type not in _OWN_ITEMS:
                self._hosted_item(item, _decode_item(data).item or {})
        elif kind == "response.completed" or kind == "response.incomplete":
            self._on_terminal(event.response, kind)
        elif kind == "response.failed":
            response = event.response
            err = response.error if response is not None else None
            code = error_code(err.code, err.type) if err is not None else "internal_error"
            text = (err.message if err is not None else None) or "response failed"
            out += self._usage_details(response)
            out += self.writer.error(code, f"openai-responses: {text}")
            out += self._usage(response) + self.writer.end()
        elif kind == "error":
            err = event.error or ErrorBody(code=event.code, message=event.message)
            text = err.message or err.code or "error"
            out += self.writer.fail(error_code(err.code, err.type), f"openai-responses: {text}")
        elif kind not in _NOTHING_NEW:
            self._unknown(kind, data)

    def _unknown(self, kind: str, data: str) -> None:
        # Never silently dropped: counted, and the first payload of a type kept.
        self.unknown_types[kind] += 1
        if kind not in self.unknown_events and len(self.unknown_events) < _MAX_KEPT:
            self.unknown_events[kind] = data

    def _undecodable(self, data: str, exc: msgspec.DecodeError) -> None:
        if not data.strip() or data == "[DONE]":
            return  # not a Responses end marker; only a terminal event ends the stream
        # Forward compatibility: an event type we do not translate may carry
        # fields of other shapes; only the types we read must decode.
        kind = event_type(data)
        if kind and kind not in _TRANSLATED:
            if kind not in _NOTHING_NEW:
                self._unknown(kind, data)
            return
        raise TranslationError(f"openai-responses: upstream event is not valid: {exc}")

    def _new_block(self) -> int:
        return self._blocks.new()

    def _block_event(self, index: int, body: dict[str, Any]) -> None:
        """A ``tokenwire.block`` extension event for standard block ``index``."""
        self.out += self.writer.add(x.extension(x.BLOCK, {"index": index, **body}))

    def _seal(self, output_index: int, item: _Item) -> None:
        # The reasoning item's id and encrypted content, sent once each time
        # they change (added usually has both; done repeats them).
        # Without encrypted content the id alone matters only to a caller
        # that reads the reasoning (with ``store``, the id finds it again).
        if not item.encrypted_content and not (item.id and self.reasoning):
            return
        block = self._block(output_index, 1)
        sealed = (item.id, item.encrypted_content)
        if self._sealed.get(block) == sealed:
            return
        self._sealed[block] = sealed
        body: dict[str, Any] = {x.REASONING: True}
        if item.id:
            body[x.ITEM_ID] = item.id
        if item.encrypted_content:
            body[x.REDACTED] = item.encrypted_content
        body[x.VENDOR] = self.name
        self._block_event(block, body)

    def _hosted_item(self, item: _Item, whole: dict[str, Any]) -> None:
        """An item OpenAI ran or asks about: a block of its own, closed at once.

        1.1: an approval request is ``tokenwire:approval`` (consent, not a
        result); MCP items are ``tokenwire:mcp``; a compaction item
        ``tokenwire:compaction``; any other hosted tool ``tokenwire:server_tool``.
        Each carries the item's own status, and ends with ``content.stop``.
        """
        kind = item.type
        body: dict[str, Any]
        if kind == "mcp_approval_request":
            approval = {
                k: whole[k] for k in ("id", "name", "arguments", "server_label") if k in whole
            }
            body = {x.APPROVAL: approval}
        elif kind in _MCP_ITEMS:
            mcp = {"kind": _MCP_ITEMS[kind], **{k: v for k, v in whole.items() if k != "type"}}
            body = {x.MCP: mcp, x.VENDOR: self.name}
        elif kind == "compaction":
            compaction = {k: v for k, v in whole.items() if k != "type"}
            body = {x.COMPACTION: compaction, x.VENDOR: self.name}
        else:
            # A hosted tool ran on OpenAI's side: shown, never executed.
            body = {x.SERVER_TOOL: whole}
            if kind == "code_interpreter_call":
                body[x.CODE] = _code(whole)  # 1.1: the cross-vendor shape (Gemini's)
        if item.status:
            body[x.STATUS] = item.status
        block = self._new_block()
        self._block_event(block, body)
        # 1.1, rule 9: every block ends with content.stop, metadata-only blocks too.
        self.out += self.writer.stop(block, "end_turn")

    def _finish_client_tool(self, output_index: int, item: _Item, operation: Any) -> None:
        """A custom tool or apply_patch call: a ``tool.call`` the client runs (1.1)."""
        call = self._calls.setdefault(output_index, _Call(None, None))
        if call.done:
            return
        kind = _CLIENT_TOOLS[item.type]
        call.kind = kind
        call.call_id = call.call_id or item.call_id
        call.item_id = call.item_id or item.id
        if kind == "custom":
            call.name = call.name or item.name
            raw = item.input if item.input is not None else "".join(call.pieces)
            arguments = _lossless.custom_arguments(raw)
        else:
            call.name = "apply_patch"
            if not isinstance(operation, dict):
                raise TranslationError(
                    f"openai-responses: apply_patch_call {output_index} has no operation"
                )
            arguments = msgspec.json.encode(operation).decode()
        if not call.name:
            raise TranslationError(f"openai-responses: {item.type} {output_index} has no name")
        call.done = True
        index = call.block if call.block is not None else self._new_block()
        call_id = call.call_id or f"call_{output_index}"
        body: dict[str, Any] = {x.TOOL_KIND: kind, x.TOOL_CALL_ID: call_id}
        if call.item_id:
            body[x.ITEM_ID] = call.item_id
        if item.status:
            body[x.STATUS] = item.status
        body[x.VENDOR] = self.name
        self._block_event(index, body)
        self.out += self.writer.tool_call(
            id=call_id, name=call.name, arguments=arguments, index=index
        )
        self.out += self.writer.stop(index, "tool_use")
        self._called = True

    def _refusal(self, output_index: int, text: str) -> None:
        key = (output_index, _REFUSAL_KEY)
        block = self._blocks.get(key)
        if block is None:
            block = self._block(output_index, _REFUSAL_KEY)
            self._block_event(block, {x.REFUSAL: True})
        self._refused = True
        self.out += self.writer.text(text, block)

    def _finish_call(
        self, output_index: int, arguments: str | None, name: str | None, call_id: str | None
    ) -> None:
        call = self._calls.get(output_index)
        if call is None:
            call = self._calls[output_index] = _Call(call_id, name)
        if call.done:
            return
        call.call_id = call.call_id or call_id
        call.name = call.name or name
        if not call.name:
            raise TranslationError(f"openai-responses: function call {output_index} has no name")
        # The done events repeat the whole text; the fragments are the fallback.
        text = (arguments if arguments is not None else "".join(call.pieces)).strip() or "{}"
        call.done = True
        # §5.3.4 / §4.8: the call is whole; its block stops with tool_use right away.
        index = call.block if call.block is not None else self._new_block()
        call_id = call.call_id or f"call_{output_index}"
        self.out += self.writer.tool_call(id=call_id, name=call.name, arguments=text, index=index)
        self.out += self.writer.stop(index, "tool_use")
        self._called = True

    def _usage(self, response: _Response | None) -> list[ev.Event]:
        usage = response.usage if response is not None else None
        if usage is None:
            return []
        return self.writer.usage(usage.input_tokens, usage.output_tokens)

    def _usage_details(self, response: _Response | None) -> list[ev.Event]:
        """``tokenwire.usage``: cached and reasoning tokens (inside the totals), when reported."""
        usage = response.usage if response is not None else None
        if usage is None or self.writer.errored:
            return []
        body: dict[str, Any] = {}
        details = usage.input_tokens_details
        if details is not None and details.cached_tokens is not None:
            body[x.CACHE_READ] = details.cached_tokens
        details = usage.output_tokens_details
        if details is not None and details.reasoning_tokens is not None:
            body[x.REASONING_TOKENS] = details.reasoning_tokens
        return self.writer.add(x.extension(x.USAGE, body)) if body else []

    def _on_terminal(self, response: _Response | None, kind: str) -> None:
        # Calls whose done events never came are complete now.
        for index in sorted(self._calls):
            call = self._calls[index]
            if not call.done and call.name and call.kind is None:
                self._finish_call(index, None, None, None)
            elif not call.done and call.name and call.kind == "custom":
                self._finish_client_tool(index, _Item(type="custom_tool_call"), None)
        raw = (response.status if response is not None else None) or kind.rpartition(".")[2]
        if kind == "response.incomplete":
            details = response.incomplete_details if response is not None else None
            reason = details.reason if details is not None else None
            stop = INCOMPLETE_REASONS.get(reason or "", "max_tokens")
            raw = reason or raw
        else:
            stop = "tool_use" if self._called else "end_turn"
        if stop == "end_turn" and self._refused:
            stop = "content_filter"  # the model declined (as the OpenAI Chat translator reads it)
        out = self.out
        out += self.writer.add(x.extension(x.STOP, {x.RAW_STOP_REASON: raw}))
        for index in sorted(self.writer.open_blocks):
            out += self.writer.stop(index, stop)
        # §5.3.5: the usage last, after the stops, before stream.end.
        out += self._usage_details(response) + self._usage(response) + self.writer.end()
