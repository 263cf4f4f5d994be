"""Connect protocol streaming (Cursor, Windsurf) -> the standard (§1.1, §7.1).

A Connect server-streaming response body is a run of envelopes: one flags byte
(``0x01`` compressed with the negotiated ``Connect-Content-Encoding``, ``0x02``
end-stream), a 4-byte big-endian length and the message. Envelopes may be
split anywhere across reads; ``max_message_bytes`` bounds one message, before
and after decompression. The end-stream envelope is JSON even for ``+proto``
and carries ``{"error": {code, message, details}, "metadata": {...}}``.

Two message mappings (``mapping=``):

* ``"text"`` (default): each message has a ``text`` delta field (proto field 1)
  and an optional ``done`` flag (proto field 2), the public shape of Cursor-style
  chat responses (``vendor-fixtures/connect/demo-chat.proto``).
* ``"standard"``: each message is one ``tokenwire.llmstream.v1.Event``
  (``tokenwire/proto/llm_stream.proto``), the Connect binding of the standard.

Two stream lifecycles, both accepted:

* Windsurf-style: the end-stream envelope ends the stream.
* Cursor-style: the HTTP/2 stream never ends (no END_STREAM, no end-stream
  envelope), so a message-level completion marker (``done: true``) or the
  caller's idle timeout (``Translator.idle()``) closes the standard stream.

A body that stops inside an envelope, or ends with neither marker, is
truncated: ``error`` + ``stream.end``.
"""

from __future__ import annotations

from .._contract import VendorFormat
from .codec import decode_event, encode_event, encode_text_chunk
from .errors import ERROR_CODES, error_code, error_from_http, http_status_code
from .framing import (
    CODECS,
    DEFAULT_MAX_MESSAGE_BYTES,
    FLAG_COMPRESSED,
    FLAG_END_STREAM,
    MAPPINGS,
    MEDIA_TYPES,
    SERVICE_PATHS,
    Envelope,
    EnvelopeDecoder,
    compress,
    encode_envelope,
    end_stream,
)
from .request import build_request
from .stream import Translator

__all__ = [
    "CODECS",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "ERROR_CODES",
    "FLAG_COMPRESSED",
    "FLAG_END_STREAM",
    "FORMAT",
    "MAPPINGS",
    "MEDIA_TYPES",
    "SERVICE_PATHS",
    "Envelope",
    "EnvelopeDecoder",
    "Translator",
    "build_request",
    "compress",
    "decode_event",
    "encode_envelope",
    "encode_event",
    "encode_text_chunk",
    "end_stream",
    "error_code",
    "error_from_http",
    "http_status_code",
]

#: The Connect binding (Cursor / Windsurf style upstreams, docs/bindings.md).
FORMAT = VendorFormat(
    name="connect",
    title="Connect (Cursor, Windsurf)",
    transport="connect",
    media_type="application/connect+json",
    translator=Translator,
    build_request=build_request,
    http_error=error_from_http,
    endpoint="POST {base_url}{service_path}",
)
