"""Media types and Accept per RFC 9110: pure parsing, no I/O.

``parse`` reads one ``Content-Type`` value (RFC 9110 §8.3.1, §5.6.6): a
``type/subtype`` of tokens and ``;`` parameters whose names are
case-insensitive and whose values are tokens or quoted strings (with
``\\``-escapes, §5.6.4); whitespace around ``;`` and ``=``-less empty
parameters are allowed. ``parse_accept`` reads an ``Accept`` list (§12.5.1)
into media ranges with their weight; ``q=0`` means "not acceptable".

Both are bounded (``MAX_FIELD_BYTES``) and raise ``MediaTypeError`` with the
character offset of the first byte they could not read.
"""

from __future__ import annotations

import functools
from typing import Final

import msgspec

from .errors import TokenwireError

__all__ = [
    "LLM_REQUEST",
    "MAX_FIELD_BYTES",
    "MediaRange",
    "MediaType",
    "MediaTypeError",
    "SUPPORTED_VERSION",
    "parse",
    "parse_accept",
    "request_type_problem",
]

#: §9.1: the request media type, and the one value its ``version`` parameter may have.
LLM_REQUEST: Final = "application/llm-request+json"
SUPPORTED_VERSION: Final = "1.0"
#: A header value longer than this is refused before it is parsed.
MAX_FIELD_BYTES: Final = 8192

# RFC 9110 §5.6.2: tchar.
_TCHAR: Final = frozenset(
    "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
)
_OWS: Final = " \t"


class MediaTypeError(TokenwireError, ValueError):
    """A ``Content-Type`` or ``Accept`` value that is not valid RFC 9110 syntax."""

    def __init__(self, reason: str, offset: int) -> None:
        super().__init__(f"{reason} at offset {offset}")
        self.reason = reason
        self.offset = offset


class MediaType(msgspec.Struct, frozen=True):
    """``type/subtype`` (lower-cased) and its parameters, names lower-cased, values unquoted."""

    type: str
    subtype: str
    params: tuple[tuple[str, str], ...] = ()

    @property
    def essence(self) -> str:
        """``type/subtype``, lower-cased, without parameters."""
        return f"{self.type}/{self.subtype}"

    def param(self, name: str) -> str | None:
        """The value of parameter ``name`` (case-insensitive), the first one if repeated."""
        name = name.lower()
        for key, value in self.params:
            if key == name:
                return value
        return None


class MediaRange(msgspec.Struct, frozen=True):
    """One ``Accept`` element: a media type (``*`` wildcards allowed) and its weight."""

    media_type: MediaType
    q: float = 1.0


class _Reader:
    """A cursor over one header value."""

    __slots__ = ("text", "pos")

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def at_end(self) -> bool:
        return self.pos >= len(self.text)

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def skip_ows(self) -> None:
        text, pos = self.text, self.pos
        while pos < len(text) and text[pos] in _OWS:
            pos += 1
        self.pos = pos

    def token(self, what: str) -> str:
        text, start = self.text, self.pos
        pos = start
        while pos < len(text) and text[pos] in _TCHAR:
            pos += 1
        if pos == start:
            raise MediaTypeError(f"expected {what}", start)
        self.pos = pos
        return text[start:pos]

    def quoted_string(self) -> str:
        # §5.6.4: DQUOTE *( qdtext / quoted-pair ) DQUOTE
        text = self.text
        pos = self.pos + 1  # past the opening quote
        out: list[str] = []
        while pos < len(text):
            char = text[pos]
            if char == '"':
                self.pos = pos + 1
                return "".join(out)
            if char == "\\":
                if pos + 1 >= len(text):
                    break
                escaped = text[pos + 1]
                if not _quotable(escaped):
                    raise MediaTypeError("invalid quoted-pair", pos)
                out.append(escaped)
                pos += 2
                continue
            if not _qdtext(char):
                raise MediaTypeError("invalid character in quoted string", pos)
            out.append(char)
            pos += 1
        raise MediaTypeError("unterminated quoted string", self.pos)


def _qdtext(char: str) -> bool:
    # HTAB / SP / %x21 / %x23-5B / %x5D-7E / obs-text
    code = ord(char)
    return (
        code in (0x09, 0x20, 0x21)
        or 0x23 <= code <= 0x5B
        or 0x5D <= code <= 0x7E
        or 0x80 <= code <= 0xFF
    )


def _quotable(char: str) -> bool:
    # quoted-pair = "\" ( HTAB / SP / VCHAR / obs-text )
    code = ord(char)
    return code in (0x09, 0x20) or 0x21 <= code <= 0x7E or 0x80 <= code <= 0xFF


def _check_size(text: str) -> None:
    if len(text) > MAX_FIELD_BYTES:
        raise MediaTypeError(f"value is over the {MAX_FIELD_BYTES}-byte limit", MAX_FIELD_BYTES)


def _decode(value: str | bytes) -> str:
    return value.decode("latin-1") if isinstance(value, bytes) else value


def _media_type(reader: _Reader, *, in_list: bool) -> MediaType:
    """``type "/" subtype parameters``; stops before a ``,`` when ``in_list``."""
    kind = reader.token("a type").lower()
    if reader.peek() != "/":
        raise MediaTypeError("expected '/'", reader.pos)
    reader.pos += 1
    subtype = reader.token("a subtype").lower()
    params: list[tuple[str, str]] = []
    while True:
        reader.skip_ows()
        char = reader.peek()
        if char == "" or (in_list and char == ","):
            return MediaType(kind, subtype, tuple(params))
        if char != ";":
            raise MediaTypeError("expected ';'", reader.pos)
        reader.pos += 1
        reader.skip_ows()
        char = reader.peek()
        if char in ("", ";") or (in_list and char == ","):
            continue  # an empty parameter is allowed: *( OWS ";" OWS [ parameter ] )
        name = reader.token("a parameter name").lower()
        if reader.peek() != "=":
            raise MediaTypeError(f"expected '=' after parameter {name!r}", reader.pos)
        reader.pos += 1
        if reader.peek() == '"':
            value = reader.quoted_string()
        else:
            value = reader.token(f"a value for parameter {name!r}")
        params.append((name, value))


def parse(value: str | bytes) -> MediaType:
    """One ``Content-Type`` value. Raises ``MediaTypeError`` naming the offset."""
    if len(value) <= _CACHED_LENGTH:
        # A request's Content-Type is read by the guard and again by the route,
        # and clients send the same few values: each is parsed once per process.
        return _parse_cached(value)
    return _parse(value)


#: Values up to this long are remembered (``parse``); the cache holds ``_CACHED`` of them.
_CACHED_LENGTH: Final = 256
_CACHED: Final = 256


@functools.lru_cache(maxsize=_CACHED)
def _parse_cached(value: str | bytes) -> MediaType:
    return _parse(value)  # MediaType is frozen: one instance may be shared


def _parse(value: str | bytes) -> MediaType:
    text = _decode(value)
    _check_size(text)
    reader = _Reader(text)
    reader.skip_ows()
    media_type = _media_type(reader, in_list=False)
    if not reader.at_end():
        raise MediaTypeError("unexpected character", reader.pos)
    if media_type.type == "*" or media_type.subtype == "*":
        raise MediaTypeError("a wildcard is not a media type", 0)
    return media_type


def _weight(value: str, offset: int) -> float:
    # §12.4.2: qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] )
    head, _dot, tail = value.partition(".")
    digits = tail.isascii() and (tail.isdigit() or not tail)
    valid = (
        head in ("0", "1") and len(tail) <= 3 and digits and not (head == "1" and tail.strip("0"))
    )
    if not valid:
        raise MediaTypeError(f"invalid weight {value!r}", offset)
    return float(value)


def _skip_element(reader: _Reader) -> None:
    """Move past the rest of a list element, up to its ``,`` (commas in quotes don't count)."""
    text, pos = reader.text, reader.pos
    quoted = False
    while pos < len(text):
        char = text[pos]
        if quoted and char == "\\":
            pos += 2
            continue
        if char == '"':
            quoted = not quoted
        elif char == "," and not quoted:
            break
        pos += 1
    reader.pos = pos


def parse_accept(value: str | bytes, *, lenient: bool = False) -> list[MediaRange]:
    """An ``Accept`` value: its media ranges, in order, with their weights.

    A range's ``q`` parameter is its weight, not one of its parameters.
    Empty list elements are allowed (§5.6.1). Raises ``MediaTypeError``;
    with ``lenient``, an invalid element is skipped instead (the others still count).
    """
    text = _decode(value)
    _check_size(text)
    reader = _Reader(text)
    ranges: list[MediaRange] = []
    while True:
        reader.skip_ows()
        if reader.at_end():
            return ranges
        if reader.peek() == ",":
            reader.pos += 1
            continue
        try:
            ranges.append(_media_range(reader))
        except MediaTypeError:
            if not lenient:
                raise
            _skip_element(reader)


def _media_range(reader: _Reader) -> MediaRange:
    start = reader.pos
    media_type = _media_type(reader, in_list=True)
    if media_type.type == "*" and media_type.subtype != "*":
        raise MediaTypeError("'*/subtype' is not a media range", start)
    q = 1.0
    params: list[tuple[str, str]] = []
    for name, param in media_type.params:
        if name == "q":
            q = _weight(param, start)
        else:
            params.append((name, param))
    return MediaRange(MediaType(media_type.type, media_type.subtype, tuple(params)), q)


def request_type_problem(media_type: MediaType) -> tuple[int, str] | None:
    """Why an endpoint refuses a request body of this (well-formed) type, or ``None``.

    ``(415, message)`` for a ``charset`` other than UTF-8 (JSON bodies are
    UTF-8, RFC 8259 §8.1) and for an ``application/llm-request+json``
    whose §9.1 ``version`` is not ``1.0``; the message names what is supported.
    """
    charset = media_type.param("charset")
    if charset is not None and charset.lower() != "utf-8":
        return 415, f"charset {charset!r} is not supported: request bodies are UTF-8"
    if media_type.essence == LLM_REQUEST:
        version = media_type.param("version")
        if version is not None and version != SUPPORTED_VERSION:
            return 415, (
                f"{LLM_REQUEST} version {version!r} is not supported; "
                f'the supported version is "{SUPPORTED_VERSION}" (§9.1)'
            )
    return None
