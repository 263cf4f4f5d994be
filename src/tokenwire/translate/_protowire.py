"""A minimal protobuf wire codec for the few fixed message shapes the Connect
binding uses (``proto/llm_stream.proto`` and Cursor-style ``{text, done}``
chunks).

Only what those shapes need: varints (wire type 0), length-delimited fields
(wire type 2) and skipping fixed32/fixed64 fields (wire types 5 and 1) of
unknown numbers. Groups (wire types 3 and 4) are deprecated and never used by
these messages, so they are refused. The protobuf runtime is deliberately not
a dependency: a message here is a flat list of ``(number, wire type, value)``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from ..errors import TranslationError

__all__ = [
    "LEN",
    "VARINT",
    "decode_fields",
    "field_bool",
    "field_bytes",
    "field_string",
    "field_varint",
    "to_int64",
    "varint",
]

VARINT: Final = 0
I64: Final = 1
LEN: Final = 2
I32: Final = 5

_MAX_VARINT_BYTES: Final = 10
_UINT64: Final = 1 << 64


def varint(value: int) -> bytes:
    """The base-128 varint encoding of ``value``.

    A negative value is written as its 64-bit two's complement (ten bytes), as
    protobuf does for ``int64``. Raises ``ValueError`` outside the 64-bit range.
    """
    if value < 0:
        value += _UINT64
    if not 0 <= value < _UINT64:
        raise ValueError(f"{value} does not fit a 64-bit varint")
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _key(number: int, wire_type: int) -> bytes:
    return varint((number << 3) | wire_type)


def field_varint(number: int, value: int) -> bytes:
    """A varint field; proto3 omits the default, so ``0`` gives ``b""``."""
    return _key(number, VARINT) + varint(value) if value else b""


def field_bool(number: int, value: bool) -> bytes:
    """A bool field; ``False`` (the default) gives ``b""``."""
    return _key(number, VARINT) + b"\x01" if value else b""


def field_bytes(number: int, value: bytes, *, always: bool = False) -> bytes:
    """A length-delimited field. Empty is omitted unless ``always`` (message presence)."""
    if not value and not always:
        return b""
    return _key(number, LEN) + varint(len(value)) + value


def field_string(number: int, value: str | None, *, always: bool = False) -> bytes:
    """A UTF-8 string field; ``None`` is absent, ``""`` is omitted unless ``always``."""
    if value is None:
        return b""
    return field_bytes(number, value.encode("utf-8"), always=always)


def to_int64(value: int) -> int:
    """Reinterpret a decoded varint as a signed ``int64``."""
    return value - _UINT64 if value >= 1 << 63 else value


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    end = min(len(buf), pos + _MAX_VARINT_BYTES)
    while pos < end:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            if result >= _UINT64:
                raise TranslationError("protobuf: varint is over 64 bits")
            return result, pos
        shift += 7
    if pos >= len(buf):
        raise TranslationError("protobuf: truncated varint")
    raise TranslationError("protobuf: varint is longer than 10 bytes")


def decode_fields(buf: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """Yield ``(number, wire_type, value)`` for each field of one message.

    ``value`` is an ``int`` for varint and fixed-width fields, ``bytes`` for
    length-delimited ones. Raises ``TranslationError`` for malformed input
    (a truncated field, a field number 0, a group).
    """
    pos = 0
    size = len(buf)
    while pos < size:
        key, pos = _read_varint(buf, pos)
        number, wire_type = key >> 3, key & 7
        if number == 0:
            raise TranslationError("protobuf: field number 0")
        if wire_type == VARINT:
            value, pos = _read_varint(buf, pos)
            yield number, wire_type, value
        elif wire_type == LEN:
            length, pos = _read_varint(buf, pos)
            if length > size - pos:
                raise TranslationError("protobuf: length-delimited field runs past the message")
            yield number, wire_type, buf[pos : pos + length]
            pos += length
        elif wire_type in (I64, I32):
            width = 8 if wire_type == I64 else 4
            if width > size - pos:
                raise TranslationError("protobuf: truncated fixed-width field")
            yield number, wire_type, int.from_bytes(buf[pos : pos + width], "little")
            pos += width
        else:
            raise TranslationError(f"protobuf: unsupported wire type {wire_type}")
