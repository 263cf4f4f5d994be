"""The seven event types of §5.3 as typed, immutable values.

Every class carries exactly the draft's fields, under the draft's names. The
JSON ``type`` is the msgspec tag, so it is written on every event and checked on
every decode. Fields the draft marks REQUIRED have no default: an envelope that
lacks one does not decode (the §4.8 example, which omits ``v``/``seq``/``index``,
is therefore not a conformant event; see ``docs/conformance.md``).

Decoding keys on the SSE ``event:`` name, the draft's TLV "T" (§5.2): ``parse``
rejects a JSON ``type`` that differs from it. Unknown JSON fields are ignored
(§5.2); unknown event types come back as ``UnknownEvent``.

Event type names follow one grammar (``TYPE_NAME``, docs/conformance.md ruling
13): dot-separated segments of ASCII letters, digits, ``_`` and ``-``, at most
64 characters. No CR, LF, NUL, colon or space can be in one, so no name, even
one an upstream chose, can add a line or a frame to the SSE output. It is
checked when an ``UnknownEvent`` is built, when ``parse`` meets an unregistered
name, and again by ``dump``.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar, Final, TypeAlias

import msgspec

from .errors import EventDecodeError, LocalProtocolError

__all__ = [
    "EVENT_TYPES",
    "ERROR_CODES",
    "STOP_REASONS",
    "TYPE_NAME",
    "VERSION",
    "ContentDelta",
    "ContentStop",
    "Delta",
    "ErrorEvent",
    "Event",
    "KnownEvent",
    "StreamEnd",
    "StreamStart",
    "ToolCall",
    "UnknownEvent",
    "Usage",
    "dump",
    "is_type_name",
    "parse",
    "parse_envelope",
    "to_json",
]

VERSION: Final = "1.0"

#: §5.3.3: the registered stop reasons.
STOP_REASONS: Final = frozenset({"end_turn", "max_tokens", "tool_use", "content_filter"})

#: §5.3.6: the registered error codes. ``cancelled`` is tokenwire's documented
#: extension code for a stream cancelled on request (docs/extensions.md).
ERROR_CODES: Final = frozenset(
    {"rate_limited", "context_length_exceeded", "content_filtered", "internal_error", "overloaded"}
)

#: The grammar of an event type name (docs/conformance.md ruling 13): the §9.2
#: registry's shape, ``segment *("." segment)``, each segment an ASCII letter or
#: digit then letters, digits, ``_`` or ``-``; 1 to 64 characters in all. It is
#: one SSE field value that no decoder can split (no CR, LF or NUL, fact 7) and
#: that reads back unchanged (no leading space, fact 16), and it keeps out the
#: colon, which §4.7 gives to extension keys (``vendor:name``).
TYPE_NAME: Final = re.compile(
    r"(?=.{1,64}\Z)[A-Za-z0-9][A-Za-z0-9_-]*(?:\.[A-Za-z0-9][A-Za-z0-9_-]*)*\Z"
)
_MAX_SHOWN: Final = 64


def is_type_name(name: object) -> bool:
    """Whether ``name`` is a string that matches ``TYPE_NAME``."""
    return type(name) is str and TYPE_NAME.match(name) is not None


def _shown(name: str) -> str:
    """``name`` for an error message: repr, cut to 64 characters."""
    return repr(name if len(name) <= _MAX_SHOWN else name[:_MAX_SHOWN] + "...")


Seq = Annotated[int, msgspec.Meta(ge=0)]
Count = Annotated[int, msgspec.Meta(ge=0)]


class _Envelope(
    msgspec.Struct, frozen=True, kw_only=True, tag_field="type", omit_defaults=True, gc=False
):
    """§5.2: the fields every event carries. ``type`` is the tag.

    ``gc=False``: an event holds only strings, numbers and a ``Delta``, so it can
    never be part of a reference cycle, and a client that keeps every event of
    a long stream (``Response.events``) no longer makes the collector walk them.
    """

    v: str
    seq: Seq

    #: The wire name of this event type (the same as the JSON ``type``).
    TYPE: ClassVar[str]

    @property
    def type(self) -> str:
        return self.TYPE


class StreamStart(_Envelope, tag="stream.start", frozen=True, kw_only=True):
    """§5.3.1: the first event (seq 0)."""

    TYPE: ClassVar[str] = "stream.start"
    model: str
    created: int
    request_id: str | None = None


class Delta(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """§5.3.2: the ``delta`` object; ``text`` is the canonical text field."""

    text: str


class ContentDelta(_Envelope, tag="content.delta", frozen=True, kw_only=True):
    """§5.3.2: an incremental text fragment of block ``index``.

    ``reasoning`` is tokenwire's namespaced extension (``"tokenwire:reasoning":
    true``) marking a block that carries the model's reasoning text, sent only
    when the request asked for it (docs/extensions.md). It is omitted otherwise.
    """

    TYPE: ClassVar[str] = "content.delta"
    index: Count
    role: str
    delta: Delta
    reasoning: bool = msgspec.field(default=False, name="tokenwire:reasoning")

    @property
    def text(self) -> str:
        return self.delta.text


class ContentStop(_Envelope, tag="content.stop", frozen=True, kw_only=True):
    """§5.3.3: the end of block ``index``."""

    TYPE: ClassVar[str] = "content.stop"
    index: Count
    stop_reason: str


class ToolCall(_Envelope, tag="tool.call", frozen=True, kw_only=True):
    """§5.3.4: a complete tool invocation; ``arguments`` is a JSON text."""

    TYPE: ClassVar[str] = "tool.call"
    index: Count
    id: str
    name: str
    arguments: str


class Usage(_Envelope, tag="usage", frozen=True, kw_only=True):
    """§5.3.5: token counts.

    ``input_tokens`` counts every input token, cache reads and writes included
    (docs/conformance.md ruling 18). ``estimated`` is tokenwire's namespaced
    extension (``"tokenwire:estimated": true``): the gateway had to estimate
    the counts (a stream cut or cancelled before the vendor reported them,
    docs/extensions.md). It is omitted otherwise.
    """

    TYPE: ClassVar[str] = "usage"
    input_tokens: Count
    output_tokens: Count
    estimated: bool = msgspec.field(default=False, name="tokenwire:estimated")


class ErrorEvent(_Envelope, tag="error", frozen=True, kw_only=True):
    """§5.3.6: a generation error. It is data: nothing raises on it."""

    TYPE: ClassVar[str] = "error"
    code: str
    message: str
    #: tokenwire's extension: the HTTP status the gateway's upstream answered, when
    #: the error is that answer (docs/extensions.md). Routing reads it, not the message.
    upstream_status: int | None = msgspec.field(default=None, name="tokenwire:upstream_status")


class StreamEnd(_Envelope, tag="stream.end", frozen=True, kw_only=True):
    """§5.3.7: the last event."""

    TYPE: ClassVar[str] = "stream.end"
    request_id: str | None = None


class UnknownEvent(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """An event type outside the §9.2 registry, kept for the caller.

    ``data`` is the raw JSON text; ``v`` and ``seq`` are read from it when
    present so that sequence checks still work across unknown events.
    Raises ``LocalProtocolError`` when ``type`` is not a valid name
    (``TYPE_NAME``): such an event could not be written as one SSE frame.
    """

    type: str
    data: str
    v: str | None = None
    seq: int | None = None

    def __post_init__(self) -> None:
        if not is_type_name(self.type):
            raise LocalProtocolError(
                f"event type {_shown(str(self.type))} is not a valid name "
                "(dot-separated ASCII letters, digits, _ and -, at most 64 characters)"
            )


KnownEvent: TypeAlias = (
    StreamStart | ContentDelta | ContentStop | ToolCall | Usage | ErrorEvent | StreamEnd
)
Event: TypeAlias = KnownEvent | UnknownEvent

#: Wire name -> class, the §9.2 registry.
EVENT_TYPES: Final[dict[str, type[KnownEvent]]] = {
    cls.TYPE: cls
    for cls in (StreamStart, ContentDelta, ContentStop, ToolCall, Usage, ErrorEvent, StreamEnd)
}

_decode_one = msgspec.json.Decoder(KnownEvent).decode
_decode_any = msgspec.json.Decoder().decode
_encode = msgspec.json.Encoder().encode


class _Probe(msgspec.Struct):
    """Just enough of an envelope to report a bad event precisely."""

    v: Any = None
    seq: Any = None
    type: Any = None


_decode_probe = msgspec.json.Decoder(_Probe).decode


def _diagnose(event_name: str, data: str | bytes) -> EventDecodeError:
    """Explain why ``data`` is not a valid ``event_name`` envelope."""
    try:
        _decode_any(data)
    except msgspec.DecodeError as exc:
        return EventDecodeError(f"§5.1: data is not valid JSON: {exc}", rule="invalid-json")
    except RecursionError:
        return EventDecodeError("§5.1: data is nested too deeply to decode", rule="invalid-json")
    try:
        probe = _decode_probe(data)
    except msgspec.DecodeError:
        return EventDecodeError("§5.1: data is JSON but not a JSON object", rule="invalid-json")
    seq = probe.seq if type(probe.seq) is int and probe.seq >= 0 else None
    if probe.type != event_name:
        return EventDecodeError(
            f"§5.2: JSON type {probe.type!r} does not match SSE event {event_name!r}",
            rule="type-mismatch",
            seq=seq,
        )
    try:
        _decode_one(data)
    except msgspec.ValidationError as exc:
        return EventDecodeError(f"{event_name}: {exc}", rule="invalid-field", seq=seq)
    raise AssertionError("unreachable: the envelope decodes")  # pragma: no cover


def _unknown(event_name: str, data: str | bytes) -> UnknownEvent:
    if not is_type_name(event_name):
        raise EventDecodeError(
            f"§5.1: event type {_shown(event_name)} is not a valid name "
            "(dot-separated ASCII letters, digits, _ and -, at most 64 characters)",
            rule="bad-type-name",
        )
    try:
        obj = _decode_any(data)
    except RecursionError:
        raise EventDecodeError(
            "§5.1: data is nested too deeply to decode", rule="invalid-json"
        ) from None
    except msgspec.DecodeError as exc:
        raise EventDecodeError(
            f"§5.1: data is not valid JSON: {exc}", rule="invalid-json"
        ) from None
    if type(obj) is not dict:
        raise EventDecodeError("§5.1: data is JSON but not a JSON object", rule="invalid-json")
    seq = obj.get("seq")
    if obj.get("type") != event_name:
        raise EventDecodeError(
            f"§5.2: JSON type {obj.get('type')!r} does not match SSE event {event_name!r}",
            rule="type-mismatch",
            seq=seq if type(seq) is int else None,
        )
    text = data if isinstance(data, str) else data.decode("utf-8", "replace")
    v = obj.get("v")
    return UnknownEvent(
        type=event_name,
        data=text,
        v=v if isinstance(v, str) else None,
        seq=seq if type(seq) is int else None,
    )


def parse(event_name: str, data: str | bytes) -> Event:
    """Decode one SSE event into a typed event.

    ``event_name`` is the SSE ``event:`` field and picks the decoder.
    Returns an ``UnknownEvent`` for a type outside the registry.
    Raises ``EventDecodeError`` (with ``.rule``) when the data is not one JSON
    object, its ``type`` differs from ``event_name``, a field is missing or
    of the wrong type, or an unregistered ``event_name`` is not a valid name
    (``bad-type-name``).
    """
    if event_name not in EVENT_TYPES:
        return _unknown(event_name, data)
    try:
        ev = _decode_one(data)
    except (msgspec.DecodeError, RecursionError):
        raise _diagnose(event_name, data) from None
    if ev.TYPE != event_name:
        raise EventDecodeError(
            f"§5.2: JSON type {ev.TYPE!r} does not match SSE event {event_name!r}",
            rule="type-mismatch",
            seq=ev.seq,
        )
    return ev


def parse_envelope(data: str | bytes) -> Event:
    """Decode one envelope whose type is read from its own JSON ``type`` field.

    For a binding with no separate type carrier (the binary binding's event
    frame, docs/binary.md): the same rules as ``parse``, with the JSON ``type``
    in place of the SSE ``event:`` name, so ``type-mismatch`` cannot occur.
    Raises ``EventDecodeError`` (``invalid-json``, ``invalid-field``,
    ``bad-type-name``) as ``parse`` does, and ``invalid-field`` when ``type``
    is missing or not a string.
    """
    try:
        return _decode_one(data)  # a tagged union: the tag picks the struct
    except (msgspec.DecodeError, RecursionError):
        pass
    try:
        probe = _decode_probe(data)
    except (msgspec.DecodeError, RecursionError):
        raise _diagnose("", data) from None
    if not isinstance(probe.type, str):
        seq = probe.seq if type(probe.seq) is int and probe.seq >= 0 else None
        raise EventDecodeError(
            "§5.2: the envelope has no string type field", rule="invalid-field", seq=seq
        )
    return parse(probe.type, data)


def to_json(event: KnownEvent) -> bytes:
    """The event's JSON envelope, as one line of UTF-8."""
    return _encode(event)


#: Per registered event class, its frame up to the seq: ``event: <type>\nid: ``.
_FRAME_HEADS: Final[dict[type, bytes]] = {
    cls: b"event: " + name.encode() + b"\nid: " for name, cls in EVENT_TYPES.items()
}


def dump(event: Event) -> bytes:
    """One SSE frame for ``event``: ``event:``, ``id:`` (the seq) and ``data:``.

    JSON never contains a raw CR or LF, so the envelope always fits one
    ``data:`` line (sse-parsing-rules fact 29). Raises ``LocalProtocolError``
    for an ``UnknownEvent`` whose type is not a valid name: checked again
    here, so that no way of building one can forge a frame.
    """
    head = _FRAME_HEADS.get(event.__class__)
    if head is not None:
        # A registered type (nearly every frame): the head of its frame is known.
        known: Any = event  # its seq is an int
        return b"%s%d\ndata: %s\n\n" % (head, known.seq, _encode(known))
    if not isinstance(event, UnknownEvent):  # a subclass of a registered type
        return b"event: %s\nid: %d\ndata: %s\n\n" % (event.TYPE.encode(), event.seq, _encode(event))
    if not is_type_name(event.type):
        raise LocalProtocolError(f"event type {_shown(str(event.type))} is not a valid name")
    data = event.data.encode()
    if b"\n" in data or b"\r" in data:
        data = _encode(_decode_any(data))
    seq = "" if event.seq is None else str(event.seq)
    return b"event: %s\nid: %s\ndata: %s\n\n" % (event.type.encode(), seq.encode(), data)
