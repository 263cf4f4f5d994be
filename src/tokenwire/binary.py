"""The binary binding (§6.2; docs/binary.md): length-prefixed frames, the same envelopes.

::

    frame   = type (1 byte) | length (4 bytes, big-endian, unsigned) | payload
    payload = [channel (4 bytes, big-endian)] body      ; channel iff type & 0x80

The head is Connect's and gRPC's five bytes, with a type byte where they have
flags. A parser reads the head and jumps to the next boundary (O(1) per frame)
instead of scanning for ``\\n\\n`` (§6.1). An ``EVENT`` frame's body is one
event envelope (§5.2), exactly the bytes an SSE ``data:`` line carries, or the
same envelope in MessagePack when ``payload=msgpack`` was negotiated.

Sans-I/O, like ``sse``: ``Decoder.feed(bytes) -> list[Frame]`` and
``Decoder.close()``; ``encode_event(event) -> bytes``; ``iter_events`` for a
whole body. Every refusal is a ``FramingError`` naming the byte offset.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator
from typing import Final, Literal, NamedTuple

import msgspec

from . import events
from ._buffer import PushBuffer
from .errors import EventDecodeError, FramingError, LocalProtocolError, RemoteProtocolError

__all__ = [
    "CHANNEL_BIT",
    "DEFAULT_MAX_FRAME_BYTES",
    "HEAD_BYTES",
    "MEDIA_TYPE",
    "PAYLOADS",
    "BindingError",
    "Decoder",
    "Frame",
    "FrameType",
    "Payload",
    "RESPONSE_TYPES",
    "aiter_events",
    "binding_error",
    "decode_event",
    "encode_error",
    "encode_event",
    "encode_frame",
    "iter_events",
    "looks_like_frames",
    "refusal_message",
    "refusal_of",
    "response_event",
]

#: The binding's media type (docs/binary.md, "Media type"); ``payload=`` picks the body encoding.
MEDIA_TYPE: Final = "application/llm-stream-frames"

Payload = Literal["json", "msgpack"]
PAYLOADS: Final[tuple[Payload, ...]] = ("json", "msgpack")

HEAD_BYTES: Final = 5
#: A frame's payload is at most this long unless the receiver says otherwise.
DEFAULT_MAX_FRAME_BYTES: Final = 1 << 20
#: The length field's ceiling: 4 bytes.
_MAX_LENGTH: Final = (1 << 32) - 1
#: Set on a frame type that carries a 4-byte channel id first (multiplexed transports).
CHANNEL_BIT: Final = 0x80
_CHANNEL_BYTES: Final = 4


class FrameType(enum.IntEnum):
    """The type byte's registry (docs/binary.md, "Frame types"), channel bit cleared.

    0x00 and 0x7F are reserved and never sent, so a run of zero bytes or a
    stray 0xFF is refused at once. 0x40-0x5F are extension types a receiver
    skips when it does not know them; any other unknown type is an error.
    """

    EVENT = 0x01  # server -> client: one event envelope (§5.2)
    ERROR = 0x02  # either way: a binding-level error {code, message}; the sender stops
    PING = 0x03  # either way: keep-alive; the body (at most 64 bytes) is ignored
    META = 0x04  # server -> client: {"resume_token"...}, what HTTP puts in headers
    REQUEST = 0x10  # client -> server: an application/llm-request+json body (§4)
    CANCEL = 0x11  # client -> server: stop this stream (body empty)
    RESUME = 0x12  # client -> server: {request_id, after, token}: replay after seq `after`


_KNOWN: Final = frozenset(int(t) for t in FrameType)
_EVENT: Final = int(FrameType.EVENT)
_PING: Final = int(FrameType.PING)
#: The head: the type byte and the big-endian length, read in one call.
_HEAD: Final = struct.Struct(">BI")
#: What a response may carry; a client's types (REQUEST, CANCEL, RESUME) in one are an error.
RESPONSE_TYPES: Final = frozenset(
    {FrameType.EVENT, FrameType.ERROR, FrameType.PING, FrameType.META}
)
_EXTENSION: Final = range(0x40, 0x60)
_MAX_PING_BYTES: Final = 64


class Frame(NamedTuple):
    """One decoded frame: its type (channel bit cleared), body and channel (or ``None``)."""

    type: int
    body: bytes
    channel: int | None = None


class BindingError(msgspec.Struct, frozen=True, kw_only=True):
    """The body of an ``ERROR`` frame: a §5.3.6 code and a sentence."""

    code: str
    message: str


_decode_binding_body = msgspec.json.Decoder(BindingError).decode
_encode_json = msgspec.json.Encoder().encode
_encode_msgpack = msgspec.msgpack.Encoder().encode
_decode_msgpack_known = msgspec.msgpack.Decoder(events.KnownEvent).decode
_decode_msgpack_any = msgspec.msgpack.Decoder().decode


def encode_frame(frame_type: int, body: bytes = b"", *, channel: int | None = None) -> bytes:
    """One frame. Raises ``LocalProtocolError`` for a reserved type or an over-long body."""
    if frame_type & CHANNEL_BIT or frame_type in (0x00, 0x7F) or not 0 < frame_type < 0x80:
        raise LocalProtocolError(f"frame type 0x{frame_type:02x} cannot be sent")
    if channel is not None:
        if not 0 <= channel <= _MAX_LENGTH:
            raise LocalProtocolError(f"channel {channel} does not fit 4 bytes")
        frame_type |= CHANNEL_BIT
        body = channel.to_bytes(_CHANNEL_BYTES, "big") + body
    if len(body) > _MAX_LENGTH:
        raise LocalProtocolError(f"a frame body of {len(body)} bytes does not fit 4 bytes")
    return bytes((frame_type,)) + len(body).to_bytes(4, "big") + body


def encode_event(
    event: events.Event, *, payload: Payload = "json", channel: int | None = None
) -> bytes:
    """The ``EVENT`` frame carrying ``event``'s envelope.

    With ``payload="json"`` the body is byte for byte what ``events.dump`` puts
    on the SSE ``data:`` line.
    """
    if isinstance(event, events.UnknownEvent):
        if not events.is_type_name(event.type):  # pragma: no cover - __post_init__ refuses it
            raise LocalProtocolError("an unknown event type must be a valid name")
        body = event.data.encode()
        if payload == "msgpack":
            body = _encode_msgpack(msgspec.json.decode(body))
    else:
        body = _encode_json(event) if payload == "json" else _encode_msgpack(event)
    return encode_frame(FrameType.EVENT, body, channel=channel)


def encode_error(code: str, message: str, *, channel: int | None = None) -> bytes:
    """An ``ERROR`` frame (always JSON: it may be all a peer can still read)."""
    body = _encode_json(BindingError(code=code, message=message))
    return encode_frame(FrameType.ERROR, body, channel=channel)


def decode_event(body: bytes, payload: Payload = "json") -> events.Event:
    """The event in an ``EVENT`` frame's body. Raises ``EventDecodeError`` as ``events.parse``."""
    if payload == "json":
        return events.parse_envelope(body)
    try:
        return _decode_msgpack_known(body)
    except (msgspec.DecodeError, RecursionError):
        pass
    try:
        obj = _decode_msgpack_any(body)
    except (msgspec.DecodeError, RecursionError) as exc:
        raise EventDecodeError(
            f"§5.1: body is not valid MessagePack: {exc}", rule="invalid-json"
        ) from None
    if type(obj) is not dict:
        raise EventDecodeError("§5.1: body is MessagePack but not a map", rule="invalid-json")
    try:
        text = _encode_json(obj)
    except (TypeError, msgspec.EncodeError) as exc:
        raise EventDecodeError(f"§5.1: body has no JSON form: {exc}", rule="invalid-json") from None
    return events.parse_envelope(text)


def looks_like_frames(head: bytes) -> bool:
    """Whether ``head``, the start of a body, reads as this binding rather than SSE text.

    True when it starts with a whole ``EVENT``, ``ERROR`` or ``PING`` head and,
    for an event, a JSON object or a MessagePack map. SSE text never starts
    with these control bytes; a Connect envelope with the compressed flag
    (0x01) could, so its body (gzip, 0x1f...) is what tells it apart.
    """
    if len(head) < HEAD_BYTES or head[0] not in (FrameType.EVENT, FrameType.ERROR, FrameType.PING):
        return False
    length = int.from_bytes(head[1:HEAD_BYTES], "big")
    if head[0] == FrameType.PING:
        return length <= _MAX_PING_BYTES
    if length == 0 or len(head) == HEAD_BYTES:
        return False
    first = head[HEAD_BYTES]
    return first == 0x7B or 0x80 <= first <= 0x8F or first in (0xDE, 0xDF)  # "{", fixmap, map16/32


class Decoder(PushBuffer):
    """Incremental frame decoder: ``feed(bytes) -> list[Frame]``, then ``close()``.

    ``max_frame_bytes`` bounds a frame's payload and is checked from the head,
    before the payload is buffered. ``channels`` says whether frames carry a
    channel id (a multiplexed transport) or must not. Frames come out in
    order before a later error is raised, so the result does not depend on how
    the input was split. Every refusal is a ``FramingError`` with the offset of
    the frame's first byte: a reserved or unknown type, a channel bit where
    none is allowed (or its absence where one is required), a body over the
    limit, a channel frame too short for its id, an over-long ``PING``.
    Frames of an unknown extension type (0x40-0x5F) are skipped (counted in
    ``skipped``).
    """

    def __init__(
        self, *, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES, channels: bool = False
    ) -> None:
        super().__init__()
        self.max_frame_bytes = max_frame_bytes
        self.channels = channels
        #: Frames of an unknown extension type skipped so far (read whole, not returned).
        self.skipped = 0
        self._error: FramingError | None = None

    def _refuse(self, message: str, pos: int) -> FramingError:
        return FramingError(f"binary frame: {message}", offset=self._offset + pos)

    def _check(self, raw: int, length: int, pos: int) -> None:
        """Raise for a head that breaks a rule; return for one that is fine."""
        kind = raw & ~CHANNEL_BIT
        has_channel = bool(raw & CHANNEL_BIT)
        if kind not in _KNOWN and kind not in _EXTENSION:
            what = "reserved" if kind in (0x00, 0x7F) else "unknown"
            raise self._refuse(f"{what} frame type 0x{raw:02x}", pos)
        if has_channel is not self.channels:
            need = "needs" if self.channels else "must not have"
            raise self._refuse(f"type 0x{raw:02x}: this transport {need} a channel id", pos)
        extra = _CHANNEL_BYTES if has_channel else 0
        if length > self.max_frame_bytes + extra:
            raise self._refuse(
                f"a payload of {length} bytes is over the {self.max_frame_bytes}-byte limit", pos
            )
        if has_channel and length < _CHANNEL_BYTES:
            raise self._refuse(f"a channel frame of {length} bytes has no channel id", pos)
        if kind == _PING and length > _MAX_PING_BYTES + extra:
            raise self._refuse(f"a PING of {length} bytes (at most {_MAX_PING_BYTES})", pos)

    def feed(self, data: bytes) -> list[Frame]:
        """Push ``data``; every frame now complete, in order.

        A refusal found after some frames of this call is raised by the next
        call (or ``close``), after those frames were returned, so the frames
        out do not depend on how the input was split; then every call raises it.
        """
        if self._error is not None:
            raise self._error
        self.push(data)
        buf, pos = self._buf, self._pos
        size = len(buf)
        limit = self.max_frame_bytes
        fast = _EVENT if not self.channels else -1  # the common head, checked in line
        out: list[Frame] = []
        append = out.append
        new = tuple.__new__
        while size - pos >= HEAD_BYTES:
            raw, length = _HEAD.unpack_from(buf, pos)
            if raw != fast or length > limit:
                try:
                    self._check(raw, length, pos)
                except FramingError as exc:
                    self._pos = pos
                    if not out:
                        raise
                    self._error = exc
                    return out
            end = pos + HEAD_BYTES + length
            if end > size:
                break
            start = pos + HEAD_BYTES
            kind = raw & ~CHANNEL_BIT
            channel = None
            if raw & CHANNEL_BIT:
                channel = int.from_bytes(buf[start : start + _CHANNEL_BYTES], "big")
                start += _CHANNEL_BYTES
            pos = end
            if kind in _EXTENSION and kind not in _KNOWN:
                self.skipped += 1
                continue  # an extension this receiver does not know: skipped by rule
            # tuple.__new__: a NamedTuple's own __new__ is Python code, ~0.3 us a frame.
            append(new(Frame, (kind, bytes(buf[start:end]), channel)))
        self._pos = pos
        return out

    def close(self) -> list[Frame]:
        """End of input. Raises ``FramingError`` when it cut a frame (head or payload)."""
        if self._error is not None:
            raise self._error
        if self.pending:
            part = "head" if self.pending < HEAD_BYTES else "payload"
            raise self._refuse(
                f"the input ended inside a frame's {part} ({self.pending} bytes)", self._pos
            )
        return []


def response_event(frame: Frame, payload: Payload) -> events.Event | None:
    """The event a response frame carries, or ``None`` for a ``PING`` or ``META``.

    Raises ``RemoteProtocolError`` for an ``ERROR`` frame (the binding ended),
    ``FramingError`` for a client's frame type in a response, and
    ``EventDecodeError`` for an envelope that does not decode.
    """
    if frame.type == FrameType.EVENT:
        return decode_event(frame.body, payload)
    if frame.type == FrameType.ERROR:
        raise binding_error(frame.body)
    if frame.type in (FrameType.PING, FrameType.META):
        return None
    raise FramingError(f"binary frame: a client's frame type 0x{frame.type:02x} in a response")


def _events_of(frames: list[Frame], payload: Payload) -> Iterator[events.Event]:
    decode = events.parse_envelope if payload == "json" else None
    for frame in frames:
        if decode is not None and frame[0] == _EVENT:
            yield decode(frame[1])  # the common frame, without response_event's checks
            continue
        event = response_event(frame, payload)
        if event is not None:
            yield event


def refusal_message(status: int, message: str) -> str:
    """An ``ERROR`` frame's message for a stream its route refused with HTTP ``status``.

    docs/binary.md section 6.2: ``"404: unknown model …"``; ``refusal_of`` reads it back.
    """
    return f"{status}: {message}"


def refusal_of(message: str) -> tuple[int, str] | None:
    """``(status, message)`` of a ``refusal_message``, or ``None`` for another ERROR."""
    head, sep, rest = message.partition(": ")
    if sep and len(head) == 3 and head.isdigit():
        return int(head), rest
    return None


def binding_error(body: bytes) -> RemoteProtocolError:
    """What a reader raises for an ``ERROR`` frame: the binding ended, not a stream event."""
    try:
        error = _decode_binding_body(body)
    except msgspec.DecodeError:
        return RemoteProtocolError("binary frame: an ERROR frame with no valid body")
    return RemoteProtocolError(f"the peer ended the binding: {error.code}: {error.message}")


def _whole(chunks: bytes | Iterable[bytes]) -> Iterable[bytes]:
    if isinstance(chunks, bytes | bytearray | memoryview):
        return (bytes(chunks),)
    return chunks


def iter_events(
    chunks: bytes | Iterable[bytes],
    *,
    payload: Payload = "json",
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
) -> Iterator[events.Event]:
    """Typed events from a binary-binding body, whole or in chunks.

    The twin of ``tokenwire.iter_events`` (SSE); lifecycle rules are not
    checked here (``tokenwire.validate(..., framing="binary")`` does).

    Raises ``FramingError`` for a bad frame or a cut one, ``EventDecodeError``
    for an envelope that does not decode, ``RemoteProtocolError`` for an
    ``ERROR`` frame.
    """
    decoder = Decoder(max_frame_bytes=max_frame_bytes)
    for chunk in _whole(chunks):
        yield from _events_of(decoder.feed(chunk), payload)
    decoder.close()


async def aiter_events(
    chunks: AsyncIterable[bytes],
    *,
    payload: Payload = "json",
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
) -> AsyncIterator[events.Event]:
    """The async twin of ``iter_events``."""
    decoder = Decoder(max_frame_bytes=max_frame_bytes)
    async for chunk in chunks:
        for event in _events_of(decoder.feed(chunk), payload):
            yield event
    decoder.close()
