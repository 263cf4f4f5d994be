"""Connect envelopes: flags byte, 4-byte big-endian length, message; gzip."""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from typing import Any, Final, NamedTuple

import msgspec

from ...errors import FramingError, TranslationError
from .._base import PushBuffer

CODECS: Final = ("json", "proto")
MAPPINGS: Final = ("text", "standard")


def codec_and_mapping(codec: str | None, mapping: str | None) -> tuple[str, str]:
    """``(codec, mapping)`` with the defaults (json, text). Raises ``ValueError`` if unknown."""
    codec = codec or "json"
    mapping = mapping or "text"
    if codec not in CODECS:
        raise ValueError(f"unknown Connect codec {codec!r} (known: json, proto)")
    if mapping not in MAPPINGS:
        raise ValueError(f"unknown Connect mapping {mapping!r} (known: text, standard)")
    return codec, mapping


#: The ``Content-Type`` of a Connect streaming request/response, by codec.
MEDIA_TYPES: Final[dict[str, str]] = {
    "json": "application/connect+json",
    "proto": "application/connect+proto",
}

#: The default RPC path for each mapping.
SERVICE_PATHS: Final[dict[str, str]] = {
    "text": "/demo.v1.ChatService/StreamChat",
    "standard": "/tokenwire.llmstream.v1.LLMStreamService/Stream",
}

FLAG_COMPRESSED: Final = 0x01
FLAG_END_STREAM: Final = 0x02
_KNOWN_FLAGS: Final = FLAG_COMPRESSED | FLAG_END_STREAM
_HEADER: Final = 5

DEFAULT_MAX_MESSAGE_BYTES: Final = 8 << 20


# --- envelopes ---------------------------------------------------------------------


class Envelope(NamedTuple):
    """One Connect envelope: its flags byte and its (still compressed) message."""

    flags: int
    data: bytes

    @property
    def end_stream(self) -> bool:
        return bool(self.flags & FLAG_END_STREAM)

    @property
    def compressed(self) -> bool:
        return bool(self.flags & FLAG_COMPRESSED)


class EnvelopeDecoder(PushBuffer):
    """Incremental envelope framing: ``push(bytes)``, then ``next_envelope()``.

    Envelopes come out one at a time, so that a caller handles every envelope
    before a framing error further on is raised: the result does not depend on
    how the body was split. ``next_envelope`` raises ``FramingError`` (with the
    byte offset) for reserved flag bits or a length over ``max_message_bytes``;
    the length is checked from the header, before the message is buffered.
    """

    def __init__(self, *, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> None:
        self.max_message_bytes = max_message_bytes
        super().__init__()

    def next_envelope(self) -> Envelope | None:
        """The next complete envelope, or ``None`` until more bytes are pushed."""
        buf, pos = self._buf, self._pos
        if len(buf) - pos < _HEADER:
            return None
        flags = buf[pos]
        if flags & ~_KNOWN_FLAGS:
            # 0x80 is gRPC-Web's trailer flag, not Connect's.
            raise FramingError(
                f"Connect envelope has reserved flag bits set (0x{flags:02x})",
                offset=self._offset + pos,
            )
        length = int.from_bytes(buf[pos + 1 : pos + _HEADER], "big")
        if length > self.max_message_bytes:
            raise FramingError(
                f"Connect message of {length} bytes is over the "
                f"{self.max_message_bytes}-byte limit",
                offset=self._offset + pos,
            )
        end = pos + _HEADER + length
        if end > len(buf):
            return None
        self._pos = end
        return Envelope(flags, bytes(buf[pos + _HEADER : end]))

    def feed(self, data: bytes) -> list[Envelope]:
        """Push ``data`` and return every envelope now complete (raises as above)."""
        self.push(data)
        out: list[Envelope] = []
        while (envelope := self.next_envelope()) is not None:
            out.append(envelope)
        return out


def encode_envelope(data: bytes, *, flags: int = 0) -> bytes:
    """One envelope: ``flags``, the 4-byte big-endian length, ``data``."""
    return bytes([flags]) + len(data).to_bytes(4, "big") + data


def _gzip(data: bytes) -> bytes:
    compressor = zlib.compressobj(wbits=31)
    return compressor.compress(data) + compressor.flush()


def gunzip(data: bytes, limit: int) -> bytes:
    """``data`` inflated (gzip), at most ``limit`` bytes. Raises ``TranslationError``."""
    decompressor = zlib.decompressobj(wbits=31)
    try:
        out = decompressor.decompress(data, limit + 1)
    except zlib.error as exc:
        raise TranslationError(f"Connect message is not valid gzip: {exc}") from None
    if len(out) > limit:
        raise TranslationError(f"Connect message is over the {limit}-byte limit once inflated")
    if not decompressor.eof:
        raise TranslationError("Connect gzip message is truncated")
    return out


def compress(data: bytes, encoding: str = "gzip") -> bytes:
    """``data`` compressed with a Connect encoding (``gzip`` or ``identity``)."""
    if encoding == "identity":
        return data
    if encoding == "gzip":
        return _gzip(data)
    raise ValueError(f"unsupported Connect encoding {encoding!r}")


def end_stream(
    error: Mapping[str, Any] | None = None, metadata: Mapping[str, list[str]] | None = None
) -> bytes:
    """The end-stream envelope (always JSON): ``{"error"?, "metadata"?}``."""
    body: dict[str, Any] = {}
    if metadata:
        body["metadata"] = dict(metadata)
    if error is not None:
        body["error"] = dict(error)
    return encode_envelope(msgspec.json.encode(body), flags=FLAG_END_STREAM)
