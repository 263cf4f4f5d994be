"""What a finished stream amounts to: ``Response``, its tool calls, and the §4.8 follow-up.

Pure values and functions, no I/O: the sync and async clients fill a
``ResponseBuilder`` event by event and hand out the ``Response`` it builds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import msgspec

from .. import events as ev
from ..errors import StreamError
from ..lifecycle import Violation
from ..request import Message, Request, ToolCallRef
from ..translate import _extensions as x
from ..translate._lossless import block_parts

__all__ = [
    "ParsedToolCall",
    "RejectedToolCall",
    "Response",
    "ResponseBuilder",
    "reasoning_parts",
    "tool_results_request",
]

#: Block metadata that only the vendor can check, which its next turn needs back.
_BOUND: Final = (x.SIGNATURE, x.REDACTED, x.ENCRYPTED)


class ParsedToolCall(msgspec.Struct, frozen=True, kw_only=True):
    """A ``tool.call`` that passed every §8.2 check; ``arguments`` is already parsed.

    ``raw`` is the JSON text exactly as received, for the follow-up request.
    """

    id: str
    name: str
    arguments: dict[str, Any]
    raw: str
    index: int


class RejectedToolCall(msgspec.Struct, frozen=True, kw_only=True):
    """A ``tool.call`` that must not be executed, and why.

    ``rule`` is the lifecycle rule it broke (``undeclared-tool``,
    ``invalid-arguments``, ``bad-arguments-json``, ``duplicate-tool-id``) or
    ``not-confirmed`` when the ``confirm`` callback (or its absence) refused a
    tool marked as having side effects. ``reason`` is a sentence.
    """

    id: str
    name: str
    raw: str
    index: int
    rule: str
    reason: str


class Response(msgspec.Struct, frozen=True, kw_only=True):
    """The whole answer of one stream.

    ``text`` is the answer: the text of every non-reasoning block joined in
    block order (for the usual one-block answer, block 0). ``blocks`` has the
    text of each block by index, reasoning blocks included; ``reasoning`` joins
    the reasoning blocks (``tokenwire:reasoning``, docs/extensions.md).
    ``tool_calls`` holds only calls that passed the §8.2 checks; the others are
    in ``rejected_tool_calls``. ``stop_reason`` is that of the last
    ``content.stop``. ``error`` is the stream's ``error`` event, if any: it is
    data, and only ``raise_for_error()`` turns it into an exception.
    ``violations`` lists every lifecycle rule the stream broke.
    """

    text: str
    blocks: dict[int, str]
    reasoning: str
    tool_calls: list[ParsedToolCall]
    rejected_tool_calls: list[RejectedToolCall]
    usage: ev.Usage | None
    stop_reason: str | None
    stop_reasons: dict[int, str]
    error: ev.ErrorEvent | None
    model: str | None
    request_id: str | None
    created: int | None
    events: list[ev.Event]
    violations: list[Violation]

    def raise_for_error(self) -> Response:
        """Raise ``StreamError(code, message)`` if the stream carried an ``error``.

        Returns the response itself otherwise, so calls can be chained.
        """
        if self.error is not None:
            raise StreamError(self.error.code, self.error.message)
        return self

    def to_message(self) -> Message:
        """This answer as the assistant message of a conversation history (§4.3).

        Carries the accepted ``tool_calls`` (§4.8); ``content`` is ``None`` when
        the turn was tool calls only.
        """
        calls = [ToolCallRef(id=c.id, name=c.name, arguments=c.raw) for c in self.tool_calls]
        if calls:
            return Message(role="assistant", content=self.text or None, tool_calls=calls)
        return Message(role="assistant", content=self.text)

    def follow_up(self, request: Request, results: Mapping[str, object]) -> Request:
        """The §4.8 follow-up of ``request``: see ``tool_results_request``."""
        return tool_results_request(request, self, results)


def tool_results_request(
    request: Request, response: Response, results: Mapping[str, object]
) -> Request:
    """Build the §4.8 step 4 request: history + the assistant's calls + their results.

    ``results`` maps each accepted call id (``response.tool_calls``) to the
    tool's result: a string, or any JSON value (written as JSON text). The new
    request keeps the model, tools, parameters, extensions and metadata,
    except ``metadata.request_id``: a new request gets a new id, which the
    client generates when it is sent.

    Returns the new ``Request``. Raises ``ValueError`` when a result is missing
    for an accepted call or given for an id that is not one (a rejected call
    has no result: it was never run).
    """
    accepted = {call.id for call in response.tool_calls}
    unknown = sorted(set(results) - accepted)
    if unknown:
        raise ValueError(f"results for ids that are not accepted tool calls: {unknown}")
    missing = [call.id for call in response.tool_calls if call.id not in results]
    if missing:
        raise ValueError(f"no result for tool call(s) {missing}")
    history = list(request.messages)
    extensions = request.extensions
    parts = reasoning_parts(response.events)
    if parts:
        # docs/extensions.md: the reasoning of this assistant message goes back
        # with it, as the vendor requires (signatures, redacted data).
        previous = (extensions or {}).get(x.REASONING_HISTORY)
        entries = list(previous) if isinstance(previous, list) else []
        entries.append({"message": len(history), "parts": parts})
        extensions = {**(extensions or {}), x.REASONING_HISTORY: entries}
    blocks = block_parts(response.events)
    if blocks:
        # tokenwire extensions 1.1: compaction, MCP items, approval requests, tool
        # kinds... go back with this assistant message, byte-identical.
        previous = (extensions or {}).get(x.BLOCK_HISTORY)
        entries = list(previous) if isinstance(previous, list) else []
        entries.append({"message": len(history), "parts": blocks})
        extensions = {**(extensions or {}), x.BLOCK_HISTORY: entries}
    history.append(response.to_message())
    for call in response.tool_calls:
        result = results[call.id]
        content = result if isinstance(result, str) else msgspec.json.encode(result).decode()
        history.append(Message(role="tool", tool_call_id=call.id, content=content))
    metadata = dict(request.metadata or {})
    metadata.pop("request_id", None)
    return msgspec.structs.replace(
        request, messages=history, metadata=metadata or None, extensions=extensions
    )


def reasoning_parts(events: list[ev.Event]) -> list[dict[str, Any]]:
    """The ``tokenwire:reasoning`` parts of a response, for ``tokenwire:reasoning_history``.

    One part per reasoning block, in block order: its text (``content.delta``
    marked ``tokenwire:reasoning``) and the ``tokenwire:`` metadata of its
    ``tokenwire.block`` events (signature, redacted or encrypted data, vendor).
    ``[]`` unless some block carries vendor-bound data (a signature, redacted
    or encrypted reasoning): plain reasoning text needs no round trip.
    """
    texts: dict[int, list[str]] = {}
    meta: dict[int, dict[str, Any]] = {}
    for event in events:
        if type(event) is ev.ContentDelta:
            if event.reasoning:
                texts.setdefault(event.index, []).append(event.delta.text)
            continue
        body = x.fields(event, x.BLOCK)
        if body is None:
            continue
        index = body.get("index")
        if type(index) is not int or not (
            body.get(x.REASONING) is True or any(k in body for k in _BOUND)
        ):
            continue
        entry = meta.setdefault(index, {})
        entry.update((k, v) for k, v in body.items() if k.startswith("tokenwire:"))
    if not any(k in entry for entry in meta.values() for k in _BOUND):
        return []
    parts: list[dict[str, Any]] = []
    for index in sorted(set(texts) | set(meta)):
        part: dict[str, Any] = {"type": x.REASONING}
        if index in texts:
            part["text"] = "".join(texts[index])
        part.update((k, v) for k, v in meta.get(index, {}).items() if k != x.REASONING)
        parts.append(part)
    return parts


class ResponseBuilder:
    """Collects delivered events; ``build`` derives the ``Response`` from them once.

    Recording is one append per event (the hot path); the text of each block,
    the stop reasons and the rest are worked out in ``build``.
    """

    def __init__(self) -> None:
        self.events: list[ev.Event] = []
        self.tool_calls: list[ParsedToolCall] = []
        self.rejected: list[RejectedToolCall] = []

    def add(self, event: ev.Event, call: ParsedToolCall | None = None) -> None:
        """Record one delivered event; ``call`` is the parsed form of a ``tool.call``."""
        self.events.append(event)
        if call is not None:
            self.tool_calls.append(call)

    def reject(self, call: RejectedToolCall) -> None:
        """Record a tool call that is not passed on."""
        self.rejected.append(call)

    def build(self, violations: list[Violation]) -> Response:
        """The ``Response`` for everything recorded so far."""
        text: dict[int, list[str]] = {}
        reasoning: set[int] = set()
        stop_reasons: dict[int, str] = {}
        stop_reason: str | None = None
        usage: ev.Usage | None = None
        error: ev.ErrorEvent | None = None
        start: ev.StreamStart | None = None
        current: int | None = None  # the block ``parts`` belongs to: deltas come in runs
        parts: list[str] = []
        for event in self.events:
            if type(event) is ev.ContentDelta:
                if event.index != current:
                    current = event.index
                    parts = text.setdefault(current, [])
                parts.append(event.delta.text)
                if event.reasoning:
                    reasoning.add(current)
            elif isinstance(event, ev.ContentStop):
                stop_reasons[event.index] = stop_reason = event.stop_reason
            elif isinstance(event, ev.Usage):
                usage = event
            elif isinstance(event, ev.ErrorEvent):
                error = event
            elif isinstance(event, ev.StreamStart):
                start = event
        blocks = {i: "".join(parts) for i, parts in sorted(text.items())}
        return Response(
            text="".join(t for i, t in blocks.items() if i not in reasoning),
            blocks=blocks,
            reasoning="".join(t for i, t in blocks.items() if i in reasoning),
            tool_calls=list(self.tool_calls),
            rejected_tool_calls=list(self.rejected),
            usage=usage,
            stop_reason=stop_reason,
            stop_reasons=stop_reasons,
            error=error,
            model=start.model if start else None,
            request_id=start.request_id if start else None,
            created=start.created if start else None,
            events=list(self.events),
            violations=list(violations),
        )
