"""Connect messages: the ``text`` mapping's chunks and the ``standard`` mapping's
``tokenwire.llmstream.v1.Event`` (JSON or proto).
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from ... import events as ev
from ...errors import TranslationError
from ...request import echo as rq_echo
from .. import _protowire as pw

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
    name = f.get_str("type")
    if not ev.is_type_name(name):  # an upstream's name can never add an SSE frame (ruling 13)
        raise TranslationError(f"Connect event type {rq_echo(name)} is not an event type name")
    return ev.UnknownEvent(type=name, data=f.get_str("data"), v=v, seq=seq)


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
