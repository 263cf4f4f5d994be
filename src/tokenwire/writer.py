"""A sans-I/O stream builder for producers (servers, translators, gateways).

The writer stamps ``v`` and ``seq``, opens with ``stream.start``, echoes the
``request_id``, closes open blocks with ``content.stop`` and turns a failure
into ``error`` + ``stream.end``. It refuses (``LocalProtocolError``) anything
that would make the stream invalid, so what it emits always passes
``tokenwire.lifecycle``::

    w = Writer(model="demo", request_id="r1")
    out = w.text("Hello")            # [stream.start, content.delta]
    out += w.end()                   # [content.stop end_turn, stream.end]
    wire = b"".join(map(events.dump, out))
"""

from __future__ import annotations

import time
from collections.abc import Callable

import msgspec

from . import events as ev
from .errors import LocalProtocolError, ProtocolError

__all__ = ["MAX_SEQ", "TOOL_DELTA", "Writer", "estimate_tokens"]

_NONE: frozenset[int] = frozenset()
_NO_IDS: frozenset[str] = frozenset()

#: §8.4: a stream past 2^53 events is pathological and SHOULD be terminated.
#: The writer keeps the last two seqs free for ``error`` and ``stream.end``.
MAX_SEQ = 2**53

#: The extension event type of a tool call's argument fragment (docs/extensions.md).
TOOL_DELTA = "tokenwire.tool_delta"

#: docs/extensions.md: an estimate counts one token per this many characters.
_CHARS_PER_TOKEN = 4


def estimate_tokens(text: str | int) -> int:
    """A token count estimated from ``text`` (or a number of characters): 1 per 4, rounded up.

    What the gateway reports, marked ``tokenwire:estimated``, when the vendor's
    own count never arrived (docs/extensions.md, "Usage on every exit path").
    """
    chars = text if isinstance(text, int) else len(text)
    return -(-chars // _CHARS_PER_TOKEN)


class Writer:
    """Builds one conformant LLM-Stream, event by event.

    Every method returns the list of events to send, in order (a call may
    emit more than one event: the implicit ``stream.start``, or the
    ``content.stop`` events that ``end()`` adds for open blocks).
    """

    def __init__(
        self,
        *,
        model: str,
        request_id: str | None = None,
        created: int | None = None,
        clock: Callable[[], float] = time.time,
        estimate_usage: bool = False,
    ) -> None:
        self.model = model
        self.request_id = request_id
        self._created = created
        self._clock = clock
        self._seq = 0
        self.started = False
        self.ended = False
        self.errored = False
        # Small and rarely changed (a few blocks a stream): frozensets, replaced on
        # change, so that a stream holds no set of its own until it needs one
        # (memory per open stream; an empty set is 216 bytes).
        self._open: frozenset[int] = _NONE
        self._stopped: frozenset[int] = _NONE
        self._tool_ids: frozenset[str] = _NO_IDS
        # Usage on every exit path (docs/extensions.md): what was sent, what is
        # known without having been sent, and how much output went out.
        self.estimate_usage = estimate_usage
        self.usage_sent = False
        self._noted_input: int | None = None
        self._noted_output: int | None = None
        self._noted_estimated = False
        self._noted_reported = False  # a count the vendor reported (not an estimate)
        self._chars = 0
        # tokenwire.tool_delta: call id -> (block index, fragments so far)
        self._tool_deltas: dict[str, tuple[int, list[str]]] = {}

    # -- state -------------------------------------------------------------

    @property
    def next_seq(self) -> int:
        """The seq the next event will carry."""
        return self._seq

    @property
    def open_blocks(self) -> frozenset[int]:
        """Indexes of blocks that have content but no ``content.stop`` yet."""
        return self._open

    @property
    def estimated_output_tokens(self) -> int:
        """The output sent so far (text, reasoning, tool arguments), estimated in tokens.

        What a translator reports, marked ``tokenwire:estimated``, when the
        vendor's own output count never came (docs/extensions.md).
        """
        return estimate_tokens(self._chars)

    def _stamp(self) -> int:
        seq = self._seq
        self._seq = seq + 1
        return seq

    def _check_open(self) -> None:
        if self.ended:
            raise LocalProtocolError("§5.3.7: no event may follow stream.end")
        if self.errored:
            raise LocalProtocolError("§5.4: after an error only usage and stream.end may follow")

    def _prelude(self) -> list[ev.Event]:
        """The implicit stream.start, and §8.4 termination when seq runs out."""
        out: list[ev.Event] = [] if self.started else self.start()
        if self._seq >= MAX_SEQ - 2:
            # The caller's usual failure path, fail(exc), still fits in the two
            # seqs left: error + stream.end.
            raise LocalProtocolError("§8.4: sequence exhausted; the stream must be terminated")
        return out

    def _use_block(self, index: int) -> None:
        if index in self._stopped:
            raise LocalProtocolError(f"§5.3.3: block {index} was already stopped")
        if index not in self._open:
            self._open = self._open | {index}

    # -- events ------------------------------------------------------------

    def start(self) -> list[ev.Event]:
        """``stream.start`` (seq 0). Called implicitly by the first event."""
        if self.started:
            raise LocalProtocolError("§5.4: a stream has exactly one stream.start")
        self.started = True
        created = int(self._clock()) if self._created is None else self._created
        return [
            ev.StreamStart(
                v=ev.VERSION,
                seq=self._stamp(),
                model=self.model,
                created=created,
                request_id=self.request_id,
            )
        ]

    def text(self, text: str, index: int = 0, *, reasoning: bool = False) -> list[ev.Event]:
        """A ``content.delta`` with ``text`` for block ``index``."""
        seq = self._seq
        if index in self._open and not (self.errored or self.ended) and seq < MAX_SEQ - 2:
            # The hot path: more text for an open block (most events of every
            # stream). Every check below holds; skip straight to the event.
            self._seq = seq + 1
            self._chars += len(text)
            return [
                ev.ContentDelta(
                    v=ev.VERSION,
                    seq=seq,
                    index=index,
                    role="assistant",
                    delta=ev.Delta(text=text),
                    reasoning=reasoning,
                )
            ]
        self._check_open()
        out = self._prelude()
        self._use_block(index)
        self._chars += len(text)
        out.append(
            ev.ContentDelta(
                v=ev.VERSION,
                seq=self._stamp(),
                index=index,
                role="assistant",
                delta=ev.Delta(text=text),
                reasoning=reasoning,
            )
        )
        return out

    def tool_call(
        self, *, id: str, name: str, arguments: str | dict[str, object], index: int
    ) -> list[ev.Event]:
        """A complete ``tool.call``; ``arguments`` must be a JSON object."""
        self._check_open()
        if isinstance(arguments, str):
            try:
                parsed = msgspec.json.decode(arguments)
            except (msgspec.DecodeError, RecursionError):
                raise LocalProtocolError(
                    f"§5.3.4: tool {name!r} arguments are not valid JSON"
                ) from None
            if not isinstance(parsed, dict):
                raise LocalProtocolError(f"§5.3.4: tool {name!r} arguments are not a JSON object")
        else:
            arguments = msgspec.json.encode(arguments).decode()
        if id in self._tool_ids:
            raise LocalProtocolError(f"§5.3.4: tool call id {id!r} was already used")
        pending = self._tool_deltas.get(id)
        tail = "" if pending is None else self._delta_tail(id, index, pending, arguments)
        out = self._prelude()
        if pending is not None:
            # docs/extensions.md: the deltas of a call add up to its arguments.
            del self._tool_deltas[id]
            if tail:
                out += self._tool_delta_event(index, id, None, tail)
        self._use_block(index)
        self._tool_ids = self._tool_ids | {id}
        # The fragments already sent were counted (tool_delta): only the rest is new output.
        self._chars += len(arguments) if pending is None else len(tail)
        out.append(
            ev.ToolCall(
                v=ev.VERSION, seq=self._stamp(), index=index, id=id, name=name, arguments=arguments
            )
        )
        return out

    def stop(self, index: int, stop_reason: str) -> list[ev.Event]:
        """``content.stop`` for block ``index`` with a registered stop reason."""
        self._check_open()
        if stop_reason not in ev.STOP_REASONS:
            raise LocalProtocolError(f"§5.3.3: {stop_reason!r} is not a registered stop_reason")
        if index in self._stopped:
            raise LocalProtocolError(f"§5.3.3: block {index} was already stopped")
        out = self._prelude()
        self._open = self._open - {index}
        self._stopped = self._stopped | {index}
        out.append(
            ev.ContentStop(v=ev.VERSION, seq=self._stamp(), index=index, stop_reason=stop_reason)
        )
        return out

    def tool_delta(self, index: int, id: str, name: str | None, fragment: str) -> list[ev.Event]:
        """A ``tokenwire.tool_delta``: the next ``fragment`` of call ``id``'s arguments.

        For live display only (docs/extensions.md, opt-in with the request
        extension ``tokenwire:tool_deltas``): ``tool.call`` stays the one event
        a client may execute. ``index`` is the block the ``tool.call`` will
        carry; ``name`` goes out on the call's first delta only. An empty
        ``fragment`` is a no-op (``[]``). The later ``tool_call(id=...)``
        sends whatever its arguments add to the fragments sent, so that they
        always concatenate to the arguments; it refuses arguments the
        fragments cannot add up to. Raises ``LocalProtocolError`` for a delta
        after its call, or on a stopped block.
        """
        self._check_open()
        if id in self._tool_ids:
            raise LocalProtocolError(f"no tool delta may follow tool call {id!r}")
        if index in self._stopped:
            raise LocalProtocolError(f"§5.3.3: block {index} was already stopped")
        if not fragment:
            return []
        pending = self._tool_deltas.get(id)
        if pending is None:
            pending = self._tool_deltas[id] = (index, [])
        elif pending[0] != index:
            raise LocalProtocolError(f"tool call {id!r} is on block {pending[0]}, not {index}")
        else:
            name = None  # the name goes on the first delta only
        out = self._prelude()
        pending[1].append(fragment)
        self._chars += len(fragment)
        return out + self._tool_delta_event(index, id, name, fragment)

    def _tool_delta_event(
        self, index: int, id: str, name: str | None, fragment: str
    ) -> list[ev.Event]:
        seq = self._stamp()
        body: dict[str, object] = {"type": TOOL_DELTA, "v": ev.VERSION, "seq": seq}
        body.update(index=index, id=id)
        if name is not None:
            body["name"] = name
        body["delta"] = fragment
        data = msgspec.json.encode(body).decode()
        return [ev.UnknownEvent(type=TOOL_DELTA, data=data, v=ev.VERSION, seq=seq)]

    @staticmethod
    def _delta_tail(id: str, index: int, pending: tuple[int, list[str]], arguments: str) -> str:
        """What ``arguments`` adds to the fragments already sent for call ``id``."""
        if pending[0] != index:
            raise LocalProtocolError(f"tool call {id!r} is on block {pending[0]}, not {index}")
        sent = "".join(pending[1])
        if arguments.startswith(sent):
            return arguments[len(sent) :]
        try:
            if msgspec.json.decode(sent) == msgspec.json.decode(arguments):
                return ""  # the same JSON value, spaced differently: they add up
        except (msgspec.DecodeError, RecursionError):
            pass
        raise LocalProtocolError(
            f"tool call {id!r}: the arguments do not continue the deltas already sent"
        )

    def usage(
        self, input_tokens: int, output_tokens: int, *, estimated: bool = False
    ) -> list[ev.Event]:
        """A ``usage`` event; allowed after an ``error`` too.

        ``estimated`` marks counts the gateway estimated (``tokenwire:estimated``).
        """
        if self.ended:
            raise LocalProtocolError("§5.3.7: no event may follow stream.end")
        if input_tokens < 0 or output_tokens < 0:
            raise LocalProtocolError("§5.3.5: token counts are non-negative")
        out = self._prelude()
        out.append(self._usage_event(input_tokens, output_tokens, estimated))
        return out

    def _usage_event(self, input_tokens: int, output_tokens: int, estimated: bool) -> ev.Usage:
        """The stamped ``usage`` event (reported by ``usage`` or owed at the end)."""
        self.usage_sent = True
        return ev.Usage(
            v=ev.VERSION,
            seq=self._stamp(),
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            estimated=estimated,
        )

    def note_usage(
        self,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
        *,
        estimated: bool = False,
    ) -> None:
        """Record counts known so far without sending them (each given count replaces the last).

        If the stream reaches ``stream.end`` (an error, a cancel, a cut) before
        any ``usage`` was sent, ``end`` sends one from these counts (when one
        was reported, or output went out with ``estimate_usage``); a count
        not noted is estimated from the output sent (with ``estimate_usage``)
        or 0, and the event is then marked ``tokenwire:estimated``, as it is
        when ``estimated`` is given here (docs/extensions.md).
        """
        if (input_tokens is not None and input_tokens < 0) or (
            output_tokens is not None and output_tokens < 0
        ):
            raise LocalProtocolError("§5.3.5: token counts are non-negative")
        if input_tokens is not None:
            self._noted_input = input_tokens
        if output_tokens is not None:
            self._noted_output = output_tokens
        self._noted_estimated = self._noted_estimated or estimated
        if not estimated and (input_tokens is not None or output_tokens is not None):
            self._noted_reported = True

    def _fallback_usage(self) -> list[ev.Event]:
        """docs/extensions.md: the ``usage`` owed at ``stream.end`` when none was sent.

        Owed when a count was reported (noted, not estimated) or, with
        ``estimate_usage``, when output went out: an estimate alone (say, of the
        prompt) invents no usage for a stream that generated nothing.
        """
        if self.usage_sent or not (self._noted_reported or (self.estimate_usage and self._chars)):
            return []
        if self._seq >= MAX_SEQ - 1:
            return []  # only stream.end still fits (§8.4)
        estimated = self._noted_estimated
        input_tokens = self._noted_input
        if input_tokens is None:
            input_tokens, estimated = 0, True
        output_tokens = self._noted_output
        if output_tokens is None:
            output_tokens, estimated = estimate_tokens(self._chars), True
        return [self._usage_event(input_tokens, output_tokens, estimated)]

    def error(self, code: str, message: str, upstream_status: int | None = None) -> list[ev.Event]:
        """An ``error`` event. Open blocks need no ``content.stop`` after it (§5.4)."""
        self._check_open()
        out: list[ev.Event] = [] if self.started else self.start()
        self.errored = True
        out.append(
            ev.ErrorEvent(
                v=ev.VERSION,
                seq=self._stamp(),
                code=code,
                message=message,
                upstream_status=upstream_status,
            )
        )
        return out

    def end(self, stop_reason: str = "end_turn") -> list[ev.Event]:
        """Close open blocks with ``stop_reason`` (unless an error came), then ``stream.end``."""
        if self.ended:
            raise LocalProtocolError("§5.4: a stream has exactly one stream.end")
        out: list[ev.Event] = [] if self.started else self.start()
        if not self.errored:
            for index in sorted(self._open):
                out += self.stop(index, stop_reason)
        out += self._fallback_usage()
        self.ended = True
        out.append(ev.StreamEnd(v=ev.VERSION, seq=self._stamp(), request_id=self.request_id))
        return out

    def fail(self, code: str | BaseException, message: str | None = None) -> list[ev.Event]:
        """End the stream after a failure: ``error`` + ``stream.end``.

        ``code`` may be an exception: a ``ProtocolError`` keeps its wire code,
        anything else becomes ``internal_error`` (its text is not leaked).
        Returns ``[]`` when the stream has already ended.
        """
        if self.ended:
            return []
        if isinstance(code, BaseException):
            exc = code
            if isinstance(exc, ProtocolError):
                code, message = exc.code, message or exc.message
            else:
                code, message = "internal_error", message or "internal error"
        out: list[ev.Event] = []
        if not self.errored:
            out += self.error(code, message or code)
        return out + self.end()

    def add(self, event: ev.Event) -> list[ev.Event]:
        """Take an event built by a provider; its ``v`` and ``seq`` are restamped.

        This is how ``generate(request) -> AsyncIterator[Event]`` providers
        are served: they may pass any ``seq`` (0 is fine).
        """
        if event.__class__ is ev.ContentDelta:
            delta = event
            seq = self._seq
            if (
                delta.seq == seq
                and delta.index in self._open
                and delta.v == ev.VERSION
                and delta.role == "assistant"
                and not (self.errored or self.ended)
                and seq < MAX_SEQ - 2
            ):
                # The hot path: a translator's event already stamped as this
                # writer would stamp it (its own Writer counted the same seqs),
                # for an open block: it goes out as it is, not rebuilt.
                self._seq = seq + 1
                self._chars += len(delta.delta.text)
                return [delta]
            return self.text(delta.delta.text, delta.index, reasoning=delta.reasoning)
        match event:
            case ev.ToolCall():
                return self.tool_call(
                    id=event.id, name=event.name, arguments=event.arguments, index=event.index
                )
            case ev.ContentStop():
                return self.stop(event.index, event.stop_reason)
            case ev.Usage():
                return self.usage(
                    event.input_tokens, event.output_tokens, estimated=event.estimated
                )
            case ev.ErrorEvent():
                return self.error(event.code, event.message, event.upstream_status)
            case ev.StreamEnd():
                return self.end()
            case ev.StreamStart():
                if not self.started:
                    self.model = event.model
                    self._created = event.created
                    self.request_id = self.request_id or event.request_id
                return self.start()
            case ev.UnknownEvent():
                # Forward compatibility: an unregistered type passes through,
                # restamped. Its JSON is rewritten with the new seq.
                self._check_open()
                out = self._prelude()
                obj = msgspec.json.decode(event.data)
                seq = self._stamp()
                obj["seq"] = seq
                obj["v"] = ev.VERSION
                data = msgspec.json.encode(obj).decode()
                out.append(ev.UnknownEvent(type=event.type, data=data, v=ev.VERSION, seq=seq))
                return out
        raise LocalProtocolError(f"not an event: {event!r}")  # pragma: no cover
