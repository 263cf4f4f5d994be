"""The lifecycle validator: every MUST and SHOULD of §5 and §8.4, one event at a time.

The stream's states and legal moves are one table, ``TRANSITIONS``. Anything
not in it is a violation, named by ``REFUSALS``. The few rules a table cannot
express (seq arithmetic, open blocks, tool calls against the request) sit in
``Validator.feed`` right beside it.

Each ``Violation`` carries a stable ``rule`` code (see ``RULES``), the seq of
the offending event, the draft section and a sentence. ``level`` is ``"must"``
for a broken MUST (the stream is not conformant) and ``"should"`` for a
broken SHOULD (a warning). ``docs/conformance.md`` lists every rule and the
rulings taken where the draft is ambiguous.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, Final, Literal, NamedTuple

import msgspec

from . import binary, schemas, sse, toolschema
from . import events as ev
from .errors import EventDecodeError, FramingError, InvalidRequest, RemoteProtocolError

if TYPE_CHECKING:
    from .request import Request

__all__ = [
    "REFUSALS",
    "RULES",
    "TRANSITIONS",
    "Report",
    "Rule",
    "State",
    "Validator",
    "Violation",
    "diagram",
    "validate",
]

Level = Literal["must", "should"]


class Rule(NamedTuple):
    section: str
    level: Level
    summary: str


#: Every rule the validator knows, by stable code.
RULES: Final[dict[str, Rule]] = {
    # §5.1 / §5.2: one event, one JSON envelope
    "framing": Rule("5.1", "must", "the SSE framing could not be read (size limit exceeded)"),
    "invalid-json": Rule("5.1", "must", "data is not exactly one complete JSON object"),
    "type-mismatch": Rule("5.2", "must", "the JSON type differs from the SSE event: field"),
    "bad-type-name": Rule(
        "5.1", "must", "the SSE event: name is not a valid type name (docs/conformance.md)"
    ),
    "invalid-field": Rule("5.3", "must", "a required field is missing or has the wrong type"),
    "bad-version": Rule("5.2", "must", 'v is not "1.0"'),
    # §5.2.1: sequence numbers
    "start-seq-not-zero": Rule("5.2.1", "must", "stream.start does not have seq 0"),
    "seq-gap": Rule("5.2.1", "must", "seq skipped values: events were lost"),
    "seq-regression": Rule("5.2.1", "must", "seq did not increase (duplicate or reordered event)"),
    "seq-exhausted": Rule("8.4", "should", "seq passed 2^53; the stream should be terminated"),
    # §5.3 / §5.4: lifecycle
    "missing-start": Rule("5.3.1", "must", "the stream has no events at all"),
    "start-not-first": Rule("5.3.1", "must", "the first event is not stream.start"),
    "duplicate-start": Rule("5.4", "must", "a second stream.start"),
    "bad-role": Rule("5.3.2", "must", 'content.delta role is not "assistant"'),
    "block-already-stopped": Rule("5.3.3", "must", "an event for a block after its content.stop"),
    "unknown-stop-reason": Rule("5.3.3", "must", "stop_reason is not a registered value"),
    "block-not-stopped": Rule("5.4", "must", "stream.end while a block has no content.stop"),
    "bad-arguments-json": Rule("5.3.4", "must", "tool.call arguments are not a JSON object"),
    "duplicate-tool-id": Rule("5.3.4", "must", "two tool.call events share an id"),
    "tool-use-not-signalled": Rule(
        "4.8", "should", "a tool.call block stopped with a stop_reason other than tool_use"
    ),
    "missing-usage": Rule("5.3.5", "should", "no usage event in the stream"),
    "unknown-error-code": Rule("5.3.6", "should", "error code is not a registered value"),
    "duplicate-error": Rule("5.3", "must", "more than one error event"),
    "after-error": Rule("5.4", "must", "content after an error: only usage, stream.end may follow"),
    "after-end": Rule("5.3.7", "must", "an event after stream.end"),
    "missing-end": Rule("5.3.7", "must", "the stream ended without stream.end"),
    # §4.6 / §8.2: checks against the request
    "request-id-not-echoed": Rule(
        "4.6", "should", "metadata.request_id is not echoed in stream.start/stream.end"
    ),
    "undeclared-tool": Rule("8.2", "must", "tool.call names a tool the request did not declare"),
    "invalid-arguments": Rule(
        "8.2", "must", "tool.call arguments do not match the tool's JSON Schema"
    ),
    # tokenwire extensions 1.0 (docs/extensions.md). A conforming parser ignores
    # extension events (§5.2), so breaking these leaves the draft verdict alone:
    # they are SHOULDs here, and fail `tokenwire validate --strict`.
    "bad-extension": Rule(
        "5.2", "should", "a tokenwire.* extension event does not match its JSON Schema"
    ),
    "tool-delta-after-call": Rule(
        "5.3.4", "should", "a tokenwire.tool_delta for a call whose tool.call was already sent"
    ),
    "tool-delta-mismatch": Rule(
        "5.3.4",
        "should",
        "a call's tokenwire.tool_delta fragments do not add up to its tool.call",
    ),
}


class Violation(msgspec.Struct, frozen=True, kw_only=True):
    """One broken rule: its code, the event's seq, the section and a sentence."""

    rule: str
    seq: int | None
    section: str
    level: Level
    message: str

    def __str__(self) -> str:
        seq = "-" if self.seq is None else str(self.seq)
        return f"seq {seq}: {self.rule} (§{self.section}, {self.level.upper()}): {self.message}"


class State(enum.Enum):
    IDLE = "idle"  # nothing received yet
    STREAMING = "streaming"  # after stream.start
    ERRORED = "errored"  # after an error event: only usage and stream.end may follow
    CLOSED = "closed"  # after stream.end


_ALL = tuple(ev.EVENT_TYPES)
_UNKNOWN = "*"  # any event type outside the registry

#: (state, event type) -> next state. Anything missing is a violation (REFUSALS).
TRANSITIONS: Final[dict[tuple[State, str], State]] = {
    (State.IDLE, "stream.start"): State.STREAMING,
    (State.STREAMING, "content.delta"): State.STREAMING,
    (State.STREAMING, "tool.call"): State.STREAMING,
    (State.STREAMING, "usage"): State.STREAMING,
    (State.STREAMING, "content.stop"): State.STREAMING,
    (State.STREAMING, _UNKNOWN): State.STREAMING,
    (State.STREAMING, "error"): State.ERRORED,  # §5.4: error may stand for open blocks' stops
    (State.STREAMING, "stream.end"): State.CLOSED,
    (State.ERRORED, "usage"): State.ERRORED,
    (State.ERRORED, _UNKNOWN): State.ERRORED,
    (State.ERRORED, "stream.end"): State.CLOSED,
}

#: The violation for a move the table does not allow: (state, type) first, then (state, "*").
REFUSALS: Final[dict[tuple[State, str], str]] = {
    (State.IDLE, "*"): "start-not-first",
    (State.STREAMING, "stream.start"): "duplicate-start",
    (State.ERRORED, "stream.start"): "duplicate-start",
    (State.ERRORED, "error"): "duplicate-error",
    (State.ERRORED, "*"): "after-error",
    (State.CLOSED, "*"): "after-end",
}

_SAFE_SEQ: Final = 2**53


def diagram() -> str:
    """The lifecycle as a Mermaid state diagram, generated from ``TRANSITIONS``."""
    lines = ["stateDiagram-v2", "    [*] --> idle"]
    for (state, kind), nxt in TRANSITIONS.items():
        label = "unknown type" if kind == _UNKNOWN else kind
        lines.append(f"    {state.value} --> {nxt.value}: {label}")
    lines.append("    closed --> [*]")
    return "\n".join(lines) + "\n"


class Validator:
    """Feed events one at a time; collect ``violations``.

    ``request`` (optional) enables the §4.6 and §8.2 checks: request_id echo,
    declared tool names and arguments against each tool's JSON Schema.
    """

    def __init__(self, request: Request | None = None) -> None:
        self.state = State.IDLE
        self.violations: list[Violation] = []
        self.events = 0
        self._expected_seq = 0
        self._last_seq: int | None = None
        self._open: set[int] = set()
        self._stopped: set[int] = set()
        self._tool_blocks: set[int] = set()
        self._tool_ids: set[str] = set()
        self._usage = False
        self._error_seen = False
        self._decoded = 0  # events that decoded into a typed event
        self._request_id = request.request_id if request is not None else None
        # §8.2: with the request at hand, only the tools it declared may be
        # called; a request without tools declares none.
        self._tools: dict[str, dict[str, Any]] | None = None
        if request is not None:
            self._tools = {t.name: t.parameters for t in request.tools or ()}
        self._schema_checkers: dict[str, toolschema.Checker] = {}
        # tokenwire.tool_delta: call id -> (block index, name, fragments so far)
        self._tool_deltas: dict[str, tuple[int, str | None, list[str]]] = {}

    # -- reporting ---------------------------------------------------------

    def _report(self, rule: str, seq: int | None, message: str) -> Violation:
        r = RULES[rule]
        # One rendering of the citation: a decoder's "§5.2: ..." already sits in
        # ``section``, so ``str(v)`` is "type-mismatch (§5.2, MUST): ...".
        message = message.removeprefix(f"§{r.section}: ")
        v = Violation(rule=rule, seq=seq, section=r.section, level=r.level, message=message)
        self.violations.append(v)
        return v

    @property
    def ok(self) -> bool:
        """True when no MUST has been broken so far."""
        return not any(v.level == "must" for v in self.violations)

    # -- input -------------------------------------------------------------

    def _check_seq(self, seq: int) -> None:
        expected = self._expected_seq
        if seq == expected:
            self._expected_seq = seq + 1
        elif seq > expected:
            self._report(
                "seq-gap", seq, f"expected seq {expected}, got {seq}: {seq - expected} lost"
            )
            self._expected_seq = seq + 1
        else:
            self._report("seq-regression", seq, f"seq {seq} after seq {self._last_seq}")
        self._last_seq = seq
        if seq >= _SAFE_SEQ:
            self._report("seq-exhausted", seq, f"seq {seq} is past 2^53")

    def feed_invalid(self, error: EventDecodeError) -> list[Violation]:
        """Record an event that could not be decoded (``events.parse`` raised)."""
        before = len(self.violations)
        self.events += 1
        self._report(error.rule, error.seq, error.message)
        if error.seq is not None:
            self._check_seq(error.seq)
        elif self.state is not State.IDLE:
            self._expected_seq += 1  # assume it took the next seq; avoid a cascade of gaps
        if self.state is State.IDLE:
            self.state = State.STREAMING
        return self.violations[before:]

    def feed(self, event: ev.Event) -> list[Violation]:
        """Check one event. Returns the violations it caused (also kept in ``violations``)."""
        self.events += 1
        self._decoded += 1
        seq = event.seq
        if (
            type(event) is ev.ContentDelta
            and self.state is State.STREAMING
            and seq == self._expected_seq
            and seq < _SAFE_SEQ
            and event.v == ev.VERSION
            and event.role == "assistant"
            and event.index not in self._stopped
        ):
            # The common case, most of every stream: an in-order text delta on
            # an open block. It breaks no rule; this is what the general path
            # below would conclude, in a fraction of the time.
            self._expected_seq = seq + 1
            self._last_seq = seq
            self._open.add(event.index)
            return []
        before = len(self.violations)
        kind = event.type
        registered = kind in ev.EVENT_TYPES
        key = kind if registered else _UNKNOWN

        if event.v != ev.VERSION:
            self._report("bad-version", seq, f"v is {event.v!r}, not {ev.VERSION!r}")
        if seq is None:
            self._report("invalid-field", None, f"{kind}: the required field seq is missing")
        else:
            if kind == "stream.start" and self.state is State.IDLE and seq != 0:
                self._report("start-seq-not-zero", seq, f"stream.start has seq {seq}")
                self._expected_seq = seq + 1
                self._last_seq = seq
            else:
                self._check_seq(seq)

        nxt = TRANSITIONS.get((self.state, key))
        if nxt is None:
            rule = REFUSALS.get((self.state, kind)) or REFUSALS[(self.state, "*")]
            self._report(rule, seq, f"{kind} in state {self.state.value}")
            if self.state is State.IDLE:
                # Recover as if stream.start had come, so later rules still run.
                self.state = State.STREAMING
                nxt = TRANSITIONS.get((self.state, key), State.STREAMING)
            else:
                return self.violations[before:]
        self.state = nxt

        if registered:
            self._check_event(event)  # type: ignore[arg-type]
        elif kind in schemas.EXTENSION_EVENTS:
            self._check_extension(event)  # type: ignore[arg-type]
        return self.violations[before:]

    def _check_extension(self, event: ev.UnknownEvent) -> None:
        # Only extension events reach a schema: the validator's hot path stays
        # a few comparisons, and each schema is compiled once, on first use.
        seq = event.seq
        try:
            obj = msgspec.json.decode(event.data)
        except (msgspec.DecodeError, RecursionError):  # parse checked it; a hand-built event
            self._report("bad-extension", seq, f"{event.type}: data is not a JSON object")
            return
        if not isinstance(obj, dict):
            self._report("bad-extension", seq, f"{event.type}: data is not a JSON object")
            return
        error = schemas.extension_error(event.type, obj)
        if error is not None:
            self._report("bad-extension", seq, f"{event.type}: {error}")
            return
        if event.type == "tokenwire.tool_delta":
            self._check_tool_delta(obj, seq)

    def _check_tool_delta(self, obj: dict[str, Any], seq: int | None) -> None:
        fragment: str = obj["delta"]
        if not fragment:
            return  # docs/extensions.md: an empty delta is a no-op, wherever it comes
        call_id: str = obj["id"]
        index: int = obj["index"]
        if call_id in self._tool_ids:
            self._report(
                "tool-delta-after-call", seq, f"delta for call {call_id!r} after its tool.call"
            )
            return
        name = obj.get("name")
        known = self._tool_deltas.get(call_id)
        if known is None:
            self._tool_deltas[call_id] = (index, name if isinstance(name, str) else None, [])
            known = self._tool_deltas[call_id]
        elif known[0] != index:
            self._report(
                "tool-delta-mismatch",
                seq,
                f"call {call_id!r} moved from block {known[0]} to block {index}",
            )
            return
        elif isinstance(name, str) and known[1] is None:
            self._tool_deltas[call_id] = known = (index, name, known[2])
        known[2].append(fragment)

    def _check_event(self, event: ev.KnownEvent) -> None:
        seq = event.seq
        match event:
            case ev.ContentDelta(index=index, role=role):
                if role != "assistant":
                    self._report("bad-role", seq, f"role is {role!r}")
                self._use_block(index, seq, "content.delta")
            case ev.ToolCall():
                self._use_block(event.index, seq, "tool.call")
                self._tool_blocks.add(event.index)
                self._check_tool_call(event)
            case ev.ContentStop(index=index, stop_reason=reason):
                if reason not in ev.STOP_REASONS:
                    self._report(
                        "unknown-stop-reason",
                        seq,
                        f"stop_reason {reason!r} is not one of {sorted(ev.STOP_REASONS)}",
                    )
                if index in self._stopped:
                    self._report("block-already-stopped", seq, f"block {index} stopped twice")
                elif index in self._tool_blocks and reason != "tool_use":
                    self._report(
                        "tool-use-not-signalled",
                        seq,
                        f"block {index} carried a tool.call but stopped with {reason!r}",
                    )
                self._open.discard(index)
                self._stopped.add(index)
            case ev.Usage():
                self._usage = True
            case ev.ErrorEvent(code=code):
                self._error_seen = True
                if code not in ev.ERROR_CODES and code != "cancelled":
                    self._report("unknown-error-code", seq, f"error code {code!r}")
            case ev.StreamStart(request_id=rid):
                self._check_echo(rid, seq, "stream.start")
            case ev.StreamEnd(request_id=rid):
                self._check_echo(rid, seq, "stream.end")
                if self._open and not self._error_seen:
                    blocks = ", ".join(map(str, sorted(self._open)))
                    self._report("block-not-stopped", seq, f"block(s) {blocks} never stopped")

    def _use_block(self, index: int, seq: int, kind: str) -> None:
        if index in self._stopped:
            self._report("block-already-stopped", seq, f"{kind} for block {index} after its stop")
        else:
            self._open.add(index)

    def _check_echo(self, rid: str | None, seq: int, where: str) -> None:
        if self._request_id is not None and rid != self._request_id:
            self._report(
                "request-id-not-echoed",
                seq,
                f"{where} request_id is {rid!r}, the request's is {self._request_id!r}",
            )

    def _check_deltas_of(self, call: ev.ToolCall) -> None:
        """docs/extensions.md: a call's deltas concatenate to its arguments (as JSON)."""
        index, name, parts = self._tool_deltas.pop(call.id)
        seq = call.seq
        if index != call.index or (name is not None and name != call.name):
            self._report(
                "tool-delta-mismatch",
                seq,
                f"call {call.id!r}: deltas named block {index} / {name!r}, "
                f"the tool.call block {call.index} / {call.name!r}",
            )
            return
        text = "".join(parts)
        if text == call.arguments:
            return
        try:
            same = msgspec.json.decode(text) == msgspec.json.decode(call.arguments)
        except (msgspec.DecodeError, RecursionError):
            same = False
        if not same:
            self._report(
                "tool-delta-mismatch",
                seq,
                f"call {call.id!r}: the deltas ({len(text)} characters) do not add up to "
                "its arguments",
            )

    def _check_tool_call(self, call: ev.ToolCall) -> None:
        seq = call.seq
        if call.id in self._tool_deltas:
            self._check_deltas_of(call)
        if call.id in self._tool_ids:
            self._report("duplicate-tool-id", seq, f"tool call id {call.id!r} used twice")
        self._tool_ids.add(call.id)
        try:
            args = msgspec.json.decode(call.arguments)
        except (msgspec.DecodeError, RecursionError):
            self._report("bad-arguments-json", seq, f"arguments of {call.name!r} are not JSON")
            return
        if not isinstance(args, dict):
            self._report(
                "bad-arguments-json", seq, f"arguments of {call.name!r} are not a JSON object"
            )
            return
        if self._tools is None:
            return
        if call.name not in self._tools:
            declared = ", ".join(sorted(self._tools)) or "none"
            message = f"tool {call.name!r} was not declared (declared: {declared})"
            self._report("undeclared-tool", seq, message)
            return
        error = self._schema_error(call.name, args)
        if error is not None:
            self._report("invalid-arguments", seq, f"arguments of {call.name!r}: {error}")

    def _schema_error(self, name: str, args: dict[str, Any]) -> str | None:
        assert self._tools is not None
        checker = self._schema_checkers.get(name)
        if checker is None:
            try:
                checker = toolschema.compile_checker(self._tools[name])
            except InvalidRequest as exc:
                # §8.2 fails closed: a schema that cannot be used rejects the
                # call; it never turns argument checking off.
                return f"the tool's schema is unusable, so no call can pass: {exc.message}"
            self._schema_checkers[name] = checker
        return checker.first_error(args)

    def close(self) -> list[Violation]:
        """End of input: report what never came. Returns the new violations."""
        before = len(self.violations)
        if self.events == 0:
            self._report("missing-start", None, "no events were received")
        elif self._decoded == 0:
            pass  # nothing was an event at all: the decode violations say it all
        elif self.state is not State.CLOSED:
            self._report(
                "missing-end", self._last_seq, "the input ended before stream.end: truncated stream"
            )
        elif not self._usage and not self._error_seen:
            self._report("missing-usage", None, "at least one usage event should be sent")
        return self.violations[before:]


class Report(msgspec.Struct, frozen=True, kw_only=True):
    """The outcome of ``validate``: ``ok`` is True when no MUST was broken."""

    ok: bool
    events: int
    violations: list[Violation]

    @property
    def errors(self) -> list[Violation]:
        return [v for v in self.violations if v.level == "must"]

    @property
    def warnings(self) -> list[Violation]:
        return [v for v in self.violations if v.level == "should"]


def _chunks(source: bytes | Iterable[bytes]) -> Iterator[bytes]:
    if isinstance(source, bytes | bytearray | memoryview):
        yield bytes(source)
    else:
        yield from source


def validate(
    chunks: bytes | Iterable[bytes],
    request: Request | None = None,
    *,
    max_event_bytes: int = 1 << 20,
    framing: Literal["sse", "binary"] = "sse",
    payload: Literal["json", "msgpack"] = "json",
) -> Report:
    """Decode a response body and check it against every rule of the draft.

    ``chunks`` is the raw body, whole or in pieces, in the SSE binding (§5.1)
    or, with ``framing="binary"``, the binary binding (§6.2, docs/binary.md;
    ``payload`` is its negotiated body encoding). The same events give the
    same report either way. Never raises for bad input: framing errors,
    undecodable events and lifecycle breaks all come back as violations in
    the ``Report``.
    """
    validator = Validator(request)
    try:
        if framing == "binary":
            _feed_frames(validator, _chunks(chunks), max_event_bytes, payload)
        else:
            _feed_sse(validator, _chunks(chunks), max_event_bytes)
    except FramingError as exc:
        # The rest of the input cannot be read: report that alone, not the
        # missing events it hides.
        validator._report("framing", validator._last_seq, exc.message)
    else:
        validator.close()
    return Report(ok=validator.ok, events=validator.events, violations=validator.violations)


def _feed_sse(validator: Validator, chunks: Iterable[bytes], max_event_bytes: int) -> None:
    decoder = sse.Decoder(max_event_bytes=max_event_bytes)
    parse = ev.parse
    for chunk in chunks:
        for msg in decoder.feed(chunk):
            _feed_message(validator, parse, msg)
    for msg in decoder.close():
        _feed_message(validator, parse, msg)


def _feed_frames(
    validator: Validator,
    chunks: Iterable[bytes],
    max_event_bytes: int,
    payload: Literal["json", "msgpack"],
) -> None:
    decoder = binary.Decoder(max_frame_bytes=max_event_bytes)
    for chunk in chunks:
        for frame in decoder.feed(chunk):
            try:
                event = binary.response_event(frame, payload)
            except EventDecodeError as exc:
                validator.feed_invalid(exc)
                continue
            except RemoteProtocolError as exc:  # an ERROR frame: the binding ended
                if isinstance(exc, FramingError):
                    raise
                raise FramingError(str(exc)) from None
            if event is not None:  # None: a PING
                validator.feed(event)
    decoder.close()


def _feed_message(validator: Validator, parse: Any, msg: sse.Message) -> None:
    try:
        event = parse(msg.event, msg.data)
    except EventDecodeError as exc:
        validator.feed_invalid(exc)
        return
    validator.feed(event)
