"""The client's protocol state for one stream, with no I/O.

``Receiver`` takes the response body's bytes (or, after a §7.2 fallback, the
events a vendor translator made), decodes them with the core's ``sse.Decoder``
and ``events.parse``, runs the lifecycle ``Validator`` on every event and
decides what reaches the caller:

* a violation is logged, or raised as ``RemoteProtocolError`` when ``strict``;
* a ``tool.call`` that breaks a §8.2 rule is never delivered (it goes to
  ``rejected_tool_calls``); one for a tool marked with side effects is held
  until the I/O layer has asked the ``confirm`` callback;
* an event whose seq repeats or goes backwards is never delivered: after a
  resume that is the replayed overlap, dropped silently; anywhere else a
  ``seq-regression``, raised when ``strict`` and otherwise logged.

The sync and async clients only move bytes and time; every decision is here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Final, NamedTuple, TypeAlias

import msgspec

from .. import binary, sse
from .. import events as ev
from ..errors import EventDecodeError, InvalidRequest, RemoteProtocolError, StreamTruncated
from ..lifecycle import RULES, Validator, Violation
from ..request import Request
from ._response import ParsedToolCall, RejectedToolCall, Response, ResponseBuilder

__all__ = ["SIDE_EFFECTS_EXTENSION", "Receiver", "side_effect_tools"]

logger: Final = logging.getLogger("tokenwire.client")

#: §8.2 / docs/extensions.md: the request extension naming tools with side effects.
SIDE_EFFECTS_EXTENSION: Final = "tokenwire:side_effects"

#: Rules that make a tool.call unsafe to pass on (§8.2, §5.3.4).
_TOOL_RULES: Final = frozenset(
    {"undeclared-tool", "invalid-arguments", "bad-arguments-json", "duplicate-tool-id"}
)

_Parse: TypeAlias = Callable[[str, str], ev.Event]

#: §8.4: the one violation after which the client stops reading, strict or not.
_FATAL_RULES: Final = frozenset({"seq-exhausted"})


def side_effect_tools(request: Request) -> frozenset[str]:
    """The tool names listed in the request's ``tokenwire:side_effects`` extension.

    Raises ``InvalidRequest`` when the value is not a list of strings.
    """
    value = request.extension(SIDE_EFFECTS_EXTENSION, None)
    if value is None:
        return frozenset()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidRequest(
            "must be a list of tool names", path=f'extensions["{SIDE_EFFECTS_EXTENSION}"]'
        )
    return frozenset(value)


class Receiver:
    """Decode, validate and filter one stream, possibly over several connections.

    Call ``connect()`` before the bytes of each HTTP response (the first one
    and every resume), then ``feed()`` for each chunk and ``eof()`` at its end.
    Each returns events to consider; the caller passes each one through
    ``needs_confirmation`` / ``confirm`` and then ``deliver``. ``done`` turns
    True once ``stream.end`` has been delivered.
    """

    def __init__(
        self, request: Request, *, strict: bool = False, max_event_bytes: int = 1 << 20
    ) -> None:
        self.request = request
        self.strict = strict
        self.max_event_bytes = max_event_bytes
        # §8.2: the Validator checks every tool.call against the declared tools
        # (none declared: every call is undeclared).
        if request.tools:
            # The Validator imports jsonschema at the first tool.call; paying that
            # here, before the request is sent, keeps it out of the stream's timing.
            import jsonschema  # noqa: F401
        self.validator = Validator(request)
        self.side_effects = side_effect_tools(request)
        self.builder = ResponseBuilder()
        self.messages = 0  # SSE events decoded so far, duplicates included
        self.last_seq: int | None = None
        self.done = False
        self.finished = False
        self.connections = 0
        self._decoder: sse.Decoder | None = None
        self._frames: _FrameReader | None = None
        self._replaying = False
        self._started = False
        self._error: RemoteProtocolError | None = None

    # -- input -------------------------------------------------------------

    def connect(self, framing: binary.Payload | None = None) -> None:
        """A new response body begins (the first, or a resume).

        ``framing`` is the binary binding's payload encoding when the response
        is in that binding (docs/binary.md), ``None`` for SSE.
        """
        self._decoder = sse.Decoder(max_event_bytes=self.max_event_bytes)
        self._frames = (
            None
            if framing is None
            else _FrameReader(binary.Decoder(max_frame_bytes=self.max_event_bytes), framing)
        )
        # A resumed body may replay what was delivered, up to the first new seq.
        self._replaying = self.connections > 0
        self.connections += 1

    def feed(self, chunk: bytes) -> list[ev.Event]:
        """Decode ``chunk``; return the events that passed the checks so far.

        Raises ``FramingError`` for an event over ``max_event_bytes``, and
        ``RemoteProtocolError`` for a violation when ``strict`` (and, always,
        when the first event is not ``stream.start`` or seq passes 2^53).
        Events before the offending one are returned first; the error is then
        raised by ``raise_pending`` or the next call, so the outcome does not
        depend on how the body was chunked.
        """
        self.raise_pending()
        if self.done:
            return []
        assert self._decoder is not None, "connect() first"
        if self._frames is not None:
            return self._take_frames(self._frames.decoder.feed(chunk))
        messages = self._decoder.feed(chunk)
        if not messages:
            return []
        self.messages += len(messages)
        return self._take(messages, ev.parse)

    def feed_events(self, events: list[ev.Event]) -> list[ev.Event]:
        """Take events made by a vendor translator (§7.2 fallback) instead of bytes."""
        self.raise_pending()
        if self.done:
            return []
        self.messages += len(events)
        return self._take(events, None)

    def _take(
        self, items: list[Any], parse: Callable[[str, Any], ev.Event] | None
    ) -> list[ev.Event]:
        """The events among ``items`` (SSE messages to ``parse``, or events when
        ``parse`` is ``None``) that pass, up to ``stream.end``; an error after
        some of them is kept for ``raise_pending``."""
        out: list[ev.Event] = []
        append = out.append
        admit = self._admit
        validate = self.validator.feed
        delta = ev.ContentDelta
        try:
            for item in items:
                if parse is None:
                    event = item
                else:
                    try:
                        event = parse(item.event, item.data)
                    except EventDecodeError as exc:
                        self._check(self.validator.feed_invalid(exc))
                        continue
                seq = event.seq
                last = self.last_seq
                if type(event) is delta and last is not None and seq is not None and seq > last:
                    # The common case, most of every stream: a text delta after a
                    # started stream, seq growing. What _admit concludes, sooner.
                    self.last_seq = seq
                    self._replaying = False
                    violations = validate(event)
                    if violations:
                        self._check(violations)
                    append(event)
                elif admit(event):
                    append(event)
                    if type(event) is ev.StreamEnd:
                        break
        except RemoteProtocolError as exc:
            if not out:
                raise
            self._error = exc
        return out

    def _take_frames(self, frames: list[binary.Frame]) -> list[ev.Event]:
        """``_take`` for the binary binding: its EVENT frames, PINGs skipped; an
        ERROR frame (the binding ended) is raised after the events before it."""
        reader = self._frames
        assert reader is not None
        items: list[_FrameItem] = []
        error: RemoteProtocolError | None = None
        for frame in frames:
            if frame.type == binary.FrameType.EVENT:
                items.append(_FrameItem("", frame.body))
            elif frame.type not in (binary.FrameType.PING, binary.FrameType.META):
                try:
                    binary.response_event(frame, reader.payload)
                except RemoteProtocolError as exc:
                    error = exc
                    break
        self.messages += len(items)
        out = self._take(items, reader.parse) if items else []
        if error is not None:
            if not out:
                raise error
            self._error = self._error or error
        return out

    def raise_pending(self) -> None:
        """Raise the error found after the events last returned, if any."""
        if self._error is not None:
            raise self._error

    def eof(self) -> list[ev.Event]:
        """The current response body ended; an unterminated event is dropped (WHATWG)."""
        self.raise_pending()
        if self._frames is not None and not self.done:
            self._frames.decoder.close()  # a cut frame: FramingError
        elif self._decoder is not None and not self.done:
            self._decoder.close()
        return []

    def _admit(self, event: ev.Event) -> bool:
        seq = event.seq
        last = self.last_seq
        if seq is not None and last is not None and seq <= last:
            # §5.2.1: seq only grows, so this event was seen (or skipped) already.
            return self._stale(seq, last)
        if not self._started:
            self._started = True
            if type(event) is not ev.StreamStart:
                # §4.9: a first event other than stream.start means the endpoint
                # does not speak the standard at all.
                self._check(self.validator.feed(event))
                raise RemoteProtocolError(
                    f"§4.9: the first event is {event.type!r}, not stream.start: "
                    "the endpoint does not speak LLM-Stream"
                )
        if seq is not None:
            self.last_seq = seq
            self._replaying = False
        violations = self.validator.feed(event)
        if type(event) is ev.ToolCall:
            assert isinstance(event, ev.ToolCall)
            tool_rules = [v for v in violations if v.rule in _TOOL_RULES]
            self._check([v for v in violations if v.rule not in _TOOL_RULES])
            if tool_rules:
                # §8.2: never passed on; recorded first so a strict caller can see it too.
                self._reject(event, tool_rules[0].rule, tool_rules[0].message)
                self._check(tool_rules)
                return False
        elif violations:
            self._check(violations)
        return True

    def _stale(self, seq: int, last: int) -> bool:
        """Never deliver a seq that repeats or goes backwards; returns False.

        Right after a resume the endpoint replays from ``Last-Event-ID`` (maybe
        earlier): dropping that overlap is routine. Anywhere else it is a
        ``seq-regression`` (§5.2.1): raised when ``strict``, else logged and dropped.
        """
        if self._replaying:
            logger.debug("dropping seq %d after resume: already delivered", seq)
            return False
        rule = RULES["seq-regression"]
        violation = Violation(
            rule="seq-regression",
            seq=seq,
            section=rule.section,
            level=rule.level,
            message=f"seq {seq} after seq {last}: dropped, not delivered",
        )
        self.validator.violations.append(violation)
        self._check([violation])
        return False

    def _check(self, violations: list[Violation]) -> None:
        for v in violations:
            if self.strict or v.rule in _FATAL_RULES:
                raise RemoteProtocolError(str(v))
            logger.warning("stream %s: %s", self.request.request_id, v)

    def _reject(self, event: ev.ToolCall, rule: str, reason: str) -> None:
        logger.warning(
            "stream %s: tool call %r (%s) rejected: %s",
            self.request.request_id,
            event.id,
            event.name,
            reason,
        )
        self.builder.reject(
            RejectedToolCall(
                id=event.id,
                name=event.name,
                raw=event.arguments,
                index=event.index,
                rule=rule,
                reason=reason,
            )
        )

    # -- delivery ----------------------------------------------------------

    def needs_confirmation(self, event: ev.Event) -> ParsedToolCall | None:
        """The parsed call when ``event`` is a tool call marked with side effects."""
        if not isinstance(event, ev.ToolCall) or event.name not in self.side_effects:
            return None
        return _parsed(event)

    def confirm(self, event: ev.Event, approved: bool | None) -> bool:
        """Record the ``confirm`` callback's answer; returns whether to deliver.

        ``approved`` is ``None`` when there was no callback: a tool marked with
        side effects is then refused (§8.2: confirmation is required).
        """
        if approved:
            return True
        assert isinstance(event, ev.ToolCall)
        reason = (
            "the confirm callback refused it"
            if approved is not None
            else "tool has side effects and no confirm callback was given"
        )
        self._reject(event, "not-confirmed", reason)
        return False

    def deliver(self, event: ev.Event) -> None:
        """Record ``event`` as delivered to the caller."""
        kind = type(event)
        if kind is ev.ContentDelta:  # the hot path
            self.builder.events.append(event)
        elif kind is ev.ToolCall:
            assert isinstance(event, ev.ToolCall)
            self.builder.add(event, _parsed(event))
        else:
            self.builder.add(event)
            if kind is ev.StreamEnd:
                self.done = True

    # -- end ---------------------------------------------------------------

    def finish(self) -> None:
        """After ``stream.end``: report what never came (e.g. ``missing-usage``)."""
        self.raise_pending()
        if not self.finished:
            self.finished = True
            self._check(self.validator.close())

    def truncated(self, why: str) -> StreamTruncated:
        """The exception for a stream that ended before ``stream.end``."""
        if not self.finished:
            self.finished = True
            self.validator.close()  # records missing-end / missing-start
        last = "none" if self.last_seq is None else str(self.last_seq)
        return StreamTruncated(
            f"stream {self.request.request_id} ended before stream.end (last seq {last}): {why}",
            last_seq=self.last_seq,
        )

    @property
    def violations(self) -> list[Violation]:
        """Every violation seen so far."""
        return list(self.validator.violations)

    def response(self) -> Response:
        """The ``Response`` for what has been delivered."""
        return self.builder.build(self.validator.violations)


def _parsed(event: ev.ToolCall) -> ParsedToolCall:
    # The Validator already checked the arguments are a JSON object.
    arguments: Any = msgspec.json.decode(event.arguments)
    return ParsedToolCall(
        id=event.id, name=event.name, arguments=arguments, raw=event.arguments, index=event.index
    )


class _FrameItem(NamedTuple):
    """An EVENT frame's body where ``_take`` reads an SSE message (its name unused)."""

    event: str
    data: bytes


class _FrameReader:
    """The binary binding's decoder and the parse of its payload encoding."""

    __slots__ = ("decoder", "payload", "parse")

    def __init__(self, decoder: binary.Decoder, payload: binary.Payload) -> None:
        self.decoder = decoder
        self.payload = payload

        def parse(_name: str, data: bytes) -> ev.Event:
            return binary.decode_event(data, payload)

        self.parse = parse
