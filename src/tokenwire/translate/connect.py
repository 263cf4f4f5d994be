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

import zlib
from collections.abc import Iterator, Mapping
from typing import Any, Final, NamedTuple

import msgspec

from .. import events as ev
from .. import request as rq
from ..errors import FramingError, TranslationError
from . import _protowire as pw
from ._base import StreamTranslator, VendorRequest

__all__ = [
    "CODECS",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "ERROR_CODES",
    "FLAG_COMPRESSED",
    "FLAG_END_STREAM",
    "MAPPINGS",
    "MEDIA_TYPES",
    "SERVICE_PATHS",
    "Envelope",
    "EnvelopeDecoder",
    "Translator",
    "build_request",
    "decode_event",
    "encode_envelope",
    "encode_event",
    "encode_text_chunk",
    "end_stream",
    "error_code",
    "error_from_http",
    "http_status_code",
]

CODECS: Final = ("json", "proto")
MAPPINGS: Final = ("text", "standard")

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

#: Connect error code -> the draft's §5.3.6 code. The registry has five codes
#: (plus tokenwire's ``cancelled`` extension), so most Connect codes, which
#: describe the gateway's own request or configuration, become
#: ``internal_error``; the retry-later family maps to ``rate_limited`` /
#: ``overloaded``. docs/bindings.md has the table and the reasons.
ERROR_CODES: Final[dict[str, str]] = {
    "canceled": "cancelled",
    "unknown": "internal_error",
    "invalid_argument": "internal_error",
    "deadline_exceeded": "overloaded",
    "not_found": "internal_error",
    "already_exists": "internal_error",
    "permission_denied": "internal_error",
    "resource_exhausted": "rate_limited",
    "failed_precondition": "internal_error",
    "aborted": "overloaded",
    "out_of_range": "internal_error",
    "unimplemented": "internal_error",
    "internal": "internal_error",
    "unavailable": "overloaded",
    "data_loss": "internal_error",
    "unauthenticated": "internal_error",
}

#: Connect protocol: the code to infer from an HTTP status that has no Connect code.
_HTTP_STATUS_CODES: Final[dict[int, str]] = {
    400: "internal",
    401: "unauthenticated",
    403: "permission_denied",
    404: "unimplemented",
    429: "unavailable",
    502: "unavailable",
    503: "unavailable",
    504: "unavailable",
}


def error_code(connect_code: object) -> str:
    """The §5.3.6 code for a Connect error code (``internal_error`` when unknown)."""
    if isinstance(connect_code, str):
        return ERROR_CODES.get(connect_code, "internal_error")
    return "internal_error"


def http_status_code(status: int) -> str:
    """The Connect code a client infers from an HTTP status without a Connect body."""
    return _HTTP_STATUS_CODES.get(status, "unknown")


def _describe(error: Mapping[str, Any]) -> str:
    """A human-readable message for an end-stream or unary error object.

    Cursor puts the useful reason in ``details[].debug`` rather than in
    ``message``, so a debug title/detail is appended when present.
    """
    code = error.get("code")
    message = error.get("message")
    text = message if isinstance(message, str) and message else str(code or "error")
    details = error.get("details")
    if isinstance(details, list):
        for detail in details:
            debug = detail.get("debug") if isinstance(detail, dict) else None
            if not isinstance(debug, dict):
                continue
            parts = [debug.get("error")]
            inner = debug.get("details")
            if isinstance(inner, dict):
                parts += [inner.get("title"), inner.get("detail")]
            extra = [p for p in parts if isinstance(p, str) and p]
            if extra:
                text = f"{text} ({': '.join(extra)})"
                break
    return text


def error_from_http(status: int, body: bytes) -> tuple[str, str]:
    """``(draft code, message)`` for a non-200 Connect answer.

    A unary-style JSON body ``{"code", "message", "details"}`` gives the code;
    otherwise it is inferred from the HTTP status (Connect protocol table).
    """
    try:
        obj = msgspec.json.decode(body) if body else None
    except msgspec.DecodeError:
        obj = None
    if isinstance(obj, dict) and isinstance(obj.get("code"), str):
        return error_code(obj["code"]), f"upstream HTTP {status}: {_describe(obj)}"
    connect_code = http_status_code(status)
    return error_code(connect_code), f"upstream HTTP {status} ({connect_code})"


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


class EnvelopeDecoder:
    """Incremental envelope framing: ``push(bytes)``, then ``next_envelope()``.

    Envelopes come out one at a time, so that a caller handles every envelope
    before a framing error further on is raised: the result does not depend on
    how the body was split. ``next_envelope`` raises ``FramingError`` (with the
    byte offset) for reserved flag bits or a length over ``max_message_bytes``;
    the length is checked from the header, before the message is buffered.
    """

    def __init__(self, *, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> None:
        self.max_message_bytes = max_message_bytes
        self._buf = bytearray()
        self._pos = 0  # start of the next envelope in _buf
        self._offset = 0  # byte offset of _buf[0] in the whole body

    @property
    def pending(self) -> int:
        """Bytes held of an envelope that is not complete yet."""
        return len(self._buf) - self._pos

    def push(self, data: bytes) -> None:
        """Append the next bytes of the body."""
        if self._pos:
            del self._buf[: self._pos]
            self._offset += self._pos
            self._pos = 0
        self._buf += data

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


def _gunzip(data: bytes, limit: int) -> bytes:
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


# --- message codecs ----------------------------------------------------------------

_decode_json = msgspec.json.Decoder().decode
_encode_json = msgspec.json.Encoder().encode


def _json_object(data: bytes, what: str) -> dict[str, Any]:
    try:
        obj = _decode_json(data)
    except msgspec.DecodeError as exc:
        raise TranslationError(f"{what} is not valid JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise TranslationError(f"{what} is not a JSON object")
    return obj


def _utf8(data: bytes, what: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise TranslationError(f"{what} is not valid UTF-8") from None


def encode_text_chunk(text: str = "", *, done: bool = False, codec: str = "json") -> bytes:
    """A Cursor-style chunk message ``{text, done}`` (demo-chat.proto ``ChatChunk``)."""
    if codec == "proto":
        return pw.field_string(1, text) + pw.field_bool(2, done)
    body: dict[str, Any] = {}
    if text:
        body["text"] = text
    if done:
        body["done"] = True
    return _encode_json(body)


def _decode_text_chunk(data: bytes, codec: str) -> tuple[str, bool]:
    """``(text, done)`` of one text-mapping message; unknown fields are ignored."""
    if codec == "proto":
        text, done = "", False
        for number, wire_type, value in pw.decode_fields(data):
            if number == 1 and wire_type == pw.LEN and isinstance(value, bytes):
                text = _utf8(value, "Connect message field 1 (text)")
            elif number == 2 and wire_type == pw.VARINT and isinstance(value, int):
                done = value != 0
        return text, done
    obj = _json_object(data, "Connect message")
    text_value = obj.get("text")
    if text_value is not None and not isinstance(text_value, str):
        raise TranslationError("Connect message field text is not a string")
    return text_value or "", obj.get("done") is True


# The standard mapping: llm_stream.proto ``Event``. Field numbers of the oneof.
_EVENT_FIELDS: Final[dict[str, int]] = {
    "stream.start": 10,
    "content.delta": 11,
    "content.stop": 12,
    "tool.call": 13,
    "usage": 14,
    "error": 15,
    "stream.end": 16,
    "unregistered": 30,
}
_EVENT_BY_FIELD: Final = {number: name for name, number in _EVENT_FIELDS.items()}
# proto3 JSON names of the oneof (lowerCamelCase); the original names are accepted too.
_JSON_NAMES: Final[dict[str, str]] = {
    "stream.start": "streamStart",
    "content.delta": "contentDelta",
    "content.stop": "contentStop",
    "tool.call": "toolCall",
    "usage": "usage",
    "error": "error",
    "stream.end": "streamEnd",
    "unregistered": "unregistered",
}


def _event_fields_proto(event: ev.Event) -> tuple[str, bytes]:
    """The oneof name and the encoded sub-message for ``event``."""
    s, u, b = pw.field_string, pw.field_varint, pw.field_bool
    match event:
        case ev.StreamStart():
            body = s(1, event.model) + u(2, event.created) + s(3, event.request_id, always=True)
            return "stream.start", body
        case ev.ContentDelta():
            delta = pw.field_bytes(3, s(1, event.delta.text), always=True)
            return "content.delta", u(1, event.index) + s(2, event.role) + delta + b(
                4, event.reasoning
            )
        case ev.ContentStop():
            return "content.stop", u(1, event.index) + s(2, event.stop_reason)
        case ev.ToolCall():
            return "tool.call", u(1, event.index) + s(2, event.id) + s(3, event.name) + s(
                4, event.arguments
            )
        case ev.Usage():
            return "usage", u(1, event.input_tokens) + u(2, event.output_tokens)
        case ev.ErrorEvent():
            return "error", s(1, event.code) + s(2, event.message)
        case ev.StreamEnd():
            return "stream.end", s(1, event.request_id, always=True)
        case ev.UnknownEvent():
            return "unregistered", s(1, event.type) + s(2, event.data)
    raise TypeError(f"not an event: {event!r}")  # pragma: no cover


def _int64(value: int) -> str | None:
    """proto3 JSON writes 64-bit integers as strings; the default 0 is omitted."""
    return str(value) if value else None


def _drop_defaults(obj: dict[str, Any]) -> dict[str, Any]:
    """proto3 JSON omits fields at their default (None stands for "omit")."""
    return {k: v for k, v in obj.items() if v is not None and v != "" and v is not False and v != 0}


def _event_body_json(event: ev.Event) -> tuple[str, dict[str, Any]]:
    """The oneof name and its proto3-JSON object (defaults omitted, 64-bit as strings)."""
    drop = _drop_defaults
    match event:
        case ev.StreamStart():
            body = drop({"model": event.model, "created": _int64(event.created)})
            if event.request_id is not None:  # proto3 optional: presence is kept
                body["requestId"] = event.request_id
            return "stream.start", body
        case ev.ContentDelta():
            body = drop({"index": event.index, "role": event.role})
            body["delta"] = drop({"text": event.delta.text})
            return "content.delta", body | drop({"reasoning": event.reasoning})
        case ev.ContentStop():
            return "content.stop", drop({"index": event.index, "stopReason": event.stop_reason})
        case ev.ToolCall():
            return "tool.call", drop(
                {
                    "index": event.index,
                    "id": event.id,
                    "name": event.name,
                    "arguments": event.arguments,
                }
            )
        case ev.Usage():
            return "usage", drop(
                {
                    "inputTokens": _int64(event.input_tokens),
                    "outputTokens": _int64(event.output_tokens),
                }
            )
        case ev.ErrorEvent():
            return "error", drop({"code": event.code, "message": event.message})
        case ev.StreamEnd():
            return "stream.end", {} if event.request_id is None else {"requestId": event.request_id}
        case ev.UnknownEvent():
            return "unregistered", drop({"type": event.type, "data": event.data})
    raise TypeError(f"not an event: {event!r}")  # pragma: no cover


def encode_event(event: ev.Event, codec: str = "proto") -> bytes:
    """One ``tokenwire.llmstream.v1.Event`` message for ``event`` in ``codec``.

    ``proto`` is the binary encoding of ``llm_stream.proto``; ``json`` is its
    proto3 JSON mapping. Raises ``ValueError`` for an unknown codec.
    """
    v = event.v if event.v is not None else ev.VERSION
    seq = event.seq if event.seq is not None else 0
    if codec == "proto":
        name, body = _event_fields_proto(event)
        return (
            pw.field_string(1, v)
            + pw.field_varint(2, seq)
            + pw.field_bytes(_EVENT_FIELDS[name], body, always=True)
        )
    if codec == "json":
        name, obj = _event_body_json(event)
        envelope: dict[str, Any] = {"v": v}
        if seq:
            envelope["seq"] = str(seq)
        envelope[_JSON_NAMES[name]] = obj
        return _encode_json(envelope)
    raise ValueError(f"unknown Connect codec {codec!r}")


class _Fields:
    """Typed reads of one decoded message (proto fields or a JSON object)."""

    def __init__(self, values: dict[str, Any], what: str) -> None:
        self.values = values
        self.what = what

    def get_str(self, name: str, default: str = "") -> str:
        value = self.values.get(name, default)
        if value is None:
            return default
        if not isinstance(value, str):
            raise TranslationError(f"{self.what}.{name} is not a string")
        return value

    def get_opt_str(self, name: str) -> str | None:
        return self.get_str(name) if self.values.get(name) is not None else None

    def get_int(self, name: str, *, signed: bool = False) -> int:
        value = self.values.get(name, 0)
        if value is None:
            return 0
        if isinstance(value, str):  # proto3 JSON: 64-bit integers as strings
            try:
                value = int(value)
            except ValueError:
                raise TranslationError(f"{self.what}.{name} is not an integer") from None
        if isinstance(value, bool) or not isinstance(value, int):
            raise TranslationError(f"{self.what}.{name} is not an integer")
        if value < 0 and not signed:
            raise TranslationError(f"{self.what}.{name} is negative")
        return value

    def get_bool(self, name: str) -> bool:
        value = self.values.get(name, False)
        if value is None:
            return False
        if not isinstance(value, bool):
            raise TranslationError(f"{self.what}.{name} is not a boolean")
        return value

    def get_sub(self, name: str) -> _Fields:
        value = self.values.get(name)
        if value is None:
            return _Fields({}, f"{self.what}.{name}")
        if not isinstance(value, dict):
            raise TranslationError(f"{self.what}.{name} is not a message")
        return _Fields(value, f"{self.what}.{name}")


# Field numbers -> names, per sub-message of llm_stream.proto, with their kinds.
_PROTO_SCHEMA: Final[dict[str, dict[int, tuple[str, str]]]] = {
    "stream.start": {1: ("model", "str"), 2: ("created", "int64"), 3: ("request_id", "str")},
    "content.delta": {
        1: ("index", "int"),
        2: ("role", "str"),
        3: ("delta", "delta"),
        4: ("reasoning", "bool"),
    },
    "delta": {1: ("text", "str")},
    "content.stop": {1: ("index", "int"), 2: ("stop_reason", "str")},
    "tool.call": {
        1: ("index", "int"),
        2: ("id", "str"),
        3: ("name", "str"),
        4: ("arguments", "str"),
    },
    "usage": {1: ("input_tokens", "int"), 2: ("output_tokens", "int")},
    "error": {1: ("code", "str"), 2: ("message", "str")},
    "stream.end": {1: ("request_id", "str")},
    "unregistered": {1: ("type", "str"), 2: ("data", "str")},
}
_WIRE_OF_KIND: Final = {"str": pw.LEN, "delta": pw.LEN, "int": pw.VARINT, "int64": pw.VARINT}


def _proto_values(data: bytes, shape: str) -> dict[str, Any]:
    schema = _PROTO_SCHEMA[shape]
    values: dict[str, Any] = {}
    for number, wire_type, value in pw.decode_fields(data):
        entry = schema.get(number)
        if entry is None:
            continue  # an unknown field: forward compatibility
        name, kind = entry
        expected = _WIRE_OF_KIND.get(kind, pw.VARINT)
        if wire_type != expected:
            raise TranslationError(f"protobuf: {shape}.{name} has wire type {wire_type}")
        if kind == "str":
            assert isinstance(value, bytes)
            values[name] = _utf8(value, f"protobuf {shape}.{name}")
        elif kind == "delta":
            assert isinstance(value, bytes)
            values[name] = _proto_values(value, "delta")
        elif kind == "int64":
            assert isinstance(value, int)
            values[name] = pw.to_int64(value)
        elif kind == "bool":
            values[name] = value != 0
        else:
            values[name] = value
    return values


def _snake(obj: dict[str, Any]) -> dict[str, Any]:
    """proto3 JSON names (``stopReason``) to the original names (``stop_reason``)."""
    out: dict[str, Any] = {}
    for key, value in obj.items():
        snake = "".join("_" + c.lower() if c.isupper() else c for c in key)
        out.setdefault(snake, value)
        if snake == key:
            out[key] = value  # an original name wins over its camelCase twin
    return out


def _build_event(name: str, v: str, seq: int, f: _Fields) -> ev.Event:
    match name:
        case "stream.start":
            return ev.StreamStart(
                v=v,
                seq=seq,
                model=f.get_str("model"),
                created=f.get_int("created", signed=True),
                request_id=f.get_opt_str("request_id"),
            )
        case "content.delta":
            delta = f.get_sub("delta")
            delta.values = _snake(delta.values)
            return ev.ContentDelta(
                v=v,
                seq=seq,
                index=f.get_int("index"),
                role=f.get_str("role", "assistant") or "assistant",
                delta=ev.Delta(text=delta.get_str("text")),
                reasoning=f.get_bool("reasoning"),
            )
        case "content.stop":
            return ev.ContentStop(
                v=v, seq=seq, index=f.get_int("index"), stop_reason=f.get_str("stop_reason")
            )
        case "tool.call":
            return ev.ToolCall(
                v=v,
                seq=seq,
                index=f.get_int("index"),
                id=f.get_str("id"),
                name=f.get_str("name"),
                arguments=f.get_str("arguments"),
            )
        case "usage":
            return ev.Usage(
                v=v,
                seq=seq,
                input_tokens=f.get_int("input_tokens"),
                output_tokens=f.get_int("output_tokens"),
            )
        case "error":
            return ev.ErrorEvent(v=v, seq=seq, code=f.get_str("code"), message=f.get_str("message"))
        case "stream.end":
            return ev.StreamEnd(v=v, seq=seq, request_id=f.get_opt_str("request_id"))
    return ev.UnknownEvent(type=f.get_str("type"), data=f.get_str("data"), v=v, seq=seq)


def decode_event(data: bytes, codec: str = "proto") -> ev.Event | None:
    """Decode one ``tokenwire.llmstream.v1.Event`` message.

    Returns ``None`` for an event whose type this version does not know (no
    known oneof member set: forward compatibility). Raises ``TranslationError``
    for a malformed message, ``ValueError`` for an unknown codec.
    """
    if codec == "proto":
        v, seq, name, body = "", 0, None, b""
        for number, wire_type, value in pw.decode_fields(data):
            if number == 1 and wire_type == pw.LEN and isinstance(value, bytes):
                v = _utf8(value, "protobuf Event.v")
            elif number == 2 and wire_type == pw.VARINT and isinstance(value, int):
                seq = value
            elif number in _EVENT_BY_FIELD and wire_type == pw.LEN and isinstance(value, bytes):
                name, body = _EVENT_BY_FIELD[number], value  # a oneof: the last one wins
        if name is None:
            return None
        return _build_event(name, v or ev.VERSION, seq, _Fields(_proto_values(body, name), name))
    if codec == "json":
        obj = _json_object(data, "Connect Event message")
        envelope = _Fields(obj, "Event")
        found: tuple[str, Any] | None = None
        for name, json_name in _JSON_NAMES.items():
            snake = name.replace(".", "_")
            for key in (json_name, snake):
                if obj.get(key) is not None:
                    found = (name, obj[key])
        if found is None:
            return None
        name, body_obj = found
        if not isinstance(body_obj, dict):
            raise TranslationError(f"Event.{_JSON_NAMES[name]} is not an object")
        fields = _Fields(_snake(body_obj), _JSON_NAMES[name])
        return _build_event(
            name, envelope.get_str("v") or ev.VERSION, envelope.get_int("seq"), fields
        )
    raise ValueError(f"unknown Connect codec {codec!r}")


# --- the translator ------------------------------------------------------------------


class Translator(StreamTranslator):
    """Connect response body -> standard events (sans-I/O).

    ``codec`` is ``"json"`` or ``"proto"`` (the response ``Content-Type``),
    ``mapping`` ``"text"`` or ``"standard"``, ``encoding`` the response's
    ``Connect-Content-Encoding`` (compressed envelopes use gzip when it is
    ``None``). ``None`` for ``codec``/``mapping`` means the default, so the CLI
    can pass its options through unchanged. Raises ``ValueError`` for an
    unknown codec or mapping.
    """

    name = "connect"

    def __init__(
        self,
        *,
        model: str,
        request_id: str | None = None,
        codec: str | None = None,
        mapping: str | None = None,
        encoding: str | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        reasoning: bool = False,
        created: int | None = None,
    ) -> None:
        super().__init__(model=model, request_id=request_id, reasoning=reasoning, created=created)
        codec = codec or "json"
        mapping = mapping or "text"
        if codec not in CODECS:
            raise ValueError(f"unknown Connect codec {codec!r} (known: json, proto)")
        if mapping not in MAPPINGS:
            raise ValueError(f"unknown Connect mapping {mapping!r} (known: text, standard)")
        self.codec = codec
        self.mapping = mapping
        self.encoding = encoding.strip().lower() if encoding else None
        self.max_message_bytes = max_message_bytes
        self._decoder = EnvelopeDecoder(max_message_bytes=max_message_bytes)
        #: The end-stream envelope's metadata (trailers), once it arrived.
        self.trailers: dict[str, Any] | None = None

    # -- input -------------------------------------------------------------

    def _frames(self, data: bytes) -> Iterator[Envelope]:
        # One envelope at a time: each is handled before a framing error further on.
        self._decoder.push(data)
        return iter(self._decoder.next_envelope, None)

    def _on_frame(self, frame: Envelope) -> None:
        self.out += self._on_envelope(frame)

    def _on_eof(self) -> None:
        if self._decoder.pending:
            raise FramingError(
                f"Connect body ended inside an envelope ({self._decoder.pending} bytes "
                "of it received; truncated)"
            )
        raise TranslationError(
            "Connect body ended without an end-stream envelope or completion marker (truncated)"
        )

    def idle(self) -> list[ev.Event]:
        """The upstream was silent for the caller's idle timeout (Cursor-style).

        Between envelopes this ends the standard stream cleanly (``text``
        mapping); inside an envelope, or in the ``standard`` mapping before
        ``stream.end``, it is a truncation (``error`` + ``stream.end``).
        Never raises.
        """
        if self.writer.ended:
            return []
        if self._decoder.pending:
            return self.writer.fail(
                "internal_error", "Connect stream went idle inside an envelope (truncated)"
            )
        if self.mapping == "standard":
            return self.writer.fail(
                "internal_error", "Connect stream went idle before stream.end (truncated)"
            )
        return self._end()

    # -- envelopes ----------------------------------------------------------

    def _message(self, envelope: Envelope) -> bytes:
        if not envelope.compressed:
            return envelope.data
        encoding = self.encoding or "gzip"  # gzip when none was negotiated
        if encoding == "identity":
            raise TranslationError(
                "Connect envelope is flagged compressed but the encoding is identity"
            )
        if encoding != "gzip":
            raise TranslationError(f"unsupported Connect-Content-Encoding {encoding!r}")
        return _gunzip(envelope.data, self.max_message_bytes)

    def _on_envelope(self, envelope: Envelope) -> list[ev.Event]:
        data = self._message(envelope)
        if envelope.end_stream:
            return self._on_end_stream(data)
        if self.mapping == "standard":
            event = decode_event(data, self.codec)
            return [] if event is None else self._on_event(event)
        text, done = _decode_text_chunk(data, self.codec)
        out = self.writer.text(text, 0) if text else []
        if done:  # §5.3.3: Cursor-style completion marker, no END_STREAM follows
            out += self._end()
        return out

    def _on_end_stream(self, data: bytes) -> list[ev.Event]:
        # Connect: the end-stream message is JSON whatever the codec.
        obj = _json_object(data, "Connect end-stream message")
        metadata = obj.get("metadata")
        self.trailers = metadata if isinstance(metadata, dict) else {}
        error = obj.get("error")
        if error is not None:
            if not isinstance(error, dict):
                raise TranslationError("Connect end-stream error is not an object")
            return self.writer.fail(error_code(error.get("code")), _describe(error))
        if self.mapping == "standard":
            # The standard stream itself ends with stream.end (§5.3.7).
            raise TranslationError("Connect stream ended before stream.end (truncated)")
        return self._end()

    def _end(self) -> list[ev.Event]:
        return self.writer.end("end_turn")

    def _on_event(self, event: ev.Event) -> list[ev.Event]:
        w = self.writer
        match event:
            case ev.StreamStart():
                if w.started:
                    raise TranslationError("§5.4: upstream sent a second stream.start")
                return w.start()
            case ev.ContentDelta():
                if event.reasoning and not self.reasoning:
                    return []
                return w.text(event.delta.text, event.index, reasoning=event.reasoning)
            case ev.ToolCall():
                return w.tool_call(
                    id=event.id, name=event.name, arguments=event.arguments, index=event.index
                )
            case ev.ContentStop():
                return w.stop(event.index, event.stop_reason)
            case ev.Usage():
                return w.usage(event.input_tokens, event.output_tokens)
            case ev.ErrorEvent():
                return w.error(event.code, event.message)
            case ev.StreamEnd():
                return w.end()
            case ev.UnknownEvent():
                _json_object(event.data.encode(), f"unregistered event {event.type!r}")
                return w.add(event)
        raise TranslationError(f"not an event: {event!r}")  # pragma: no cover


# --- the request --------------------------------------------------------------------


def _prompt(req: rq.Request) -> str:
    """The text-mapping prompt: the last user message's text."""
    for message in reversed(req.messages):
        if message.role == "user":
            return message.text
    return ""


def build_request(
    req: rq.Request,
    *,
    base_url: str,
    service_path: str | None = None,
    codec: str | None = None,
    mapping: str | None = None,
    compression: str | None = None,
    timeout_ms: int | None = None,
    api_key: str | None = None,
    headers: Mapping[str, str] | None = None,
    upstream_model: str | None = None,
) -> VendorRequest:
    """The Connect server-streaming request for ``req``: one envelope and its headers.

    ``mapping="text"`` sends ``ChatRequest{prompt}`` (demo-chat.proto) with the
    last user message's text; ``mapping="standard"`` sends
    ``StreamRequest{request}`` carrying the §4 envelope as JSON text.
    ``compression="gzip"`` compresses the request message (flag 0x01) and says so
    in ``Connect-Content-Encoding``. ``upstream_model`` is accepted for the
    gateway's generic HTTP provider and unused: neither message has a model
    field (the standard mapping carries ``req.model`` inside the envelope).
    Raises ``ValueError`` for an unknown codec, mapping or compression.
    """
    codec = codec or "json"
    mapping = mapping or "text"
    if codec not in CODECS:
        raise ValueError(f"unknown Connect codec {codec!r} (known: json, proto)")
    if mapping not in MAPPINGS:
        raise ValueError(f"unknown Connect mapping {mapping!r} (known: text, standard)")
    if mapping == "standard":
        request_json = rq.dumps(req).decode("utf-8")
        if codec == "proto":
            message = pw.field_string(1, request_json)
        else:
            message = _encode_json({"request": request_json})
    elif codec == "proto":
        message = pw.field_string(1, _prompt(req))
    else:
        message = _encode_json({"prompt": _prompt(req)})
    out_headers = {
        "content-type": MEDIA_TYPES[codec],
        "connect-protocol-version": "1",
        "connect-accept-encoding": "gzip",
    }
    flags = 0
    if compression and compression != "identity":
        message = compress(message, compression)
        flags = FLAG_COMPRESSED
        out_headers["connect-content-encoding"] = compression
    if timeout_ms is not None:
        out_headers["connect-timeout-ms"] = str(int(timeout_ms))
    if api_key:
        out_headers["authorization"] = f"Bearer {api_key}"
    out_headers.update(headers or {})
    path = service_path or SERVICE_PATHS[mapping]
    if not path.startswith("/"):
        path = "/" + path
    return VendorRequest(
        method="POST",
        url=base_url.rstrip("/") + path,
        headers=out_headers,
        body=encode_envelope(message, flags=flags),
    )
