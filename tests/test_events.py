"""Typed events: exact draft fields, decode by SSE name, round trips."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.strategies import known_events

from tokenwire import events, iter_events
from tokenwire.errors import EventDecodeError, LocalProtocolError
from tokenwire.events import (
    ContentDelta,
    ContentStop,
    Delta,
    ErrorEvent,
    StreamEnd,
    StreamStart,
    ToolCall,
    UnknownEvent,
    Usage,
)


@given(known_events)
def test_dump_then_parse_round_trips_every_event_type(ev: events.KnownEvent) -> None:
    (back,) = list(iter_events(events.dump(ev)))
    assert back == ev


def test_registry_has_the_seven_draft_types() -> None:
    assert set(events.EVENT_TYPES) == {
        "stream.start",
        "content.delta",
        "content.stop",
        "tool.call",
        "usage",
        "error",
        "stream.end",
    }


def test_fields_are_exactly_the_drafts() -> None:
    # §5.3.1-§5.3.7 field tables (v, seq, type common; type is the tag).
    expected = {
        StreamStart: {"v", "seq", "request_id", "model", "created"},
        ContentDelta: {"v", "seq", "index", "role", "delta", "reasoning"},
        ContentStop: {"v", "seq", "index", "stop_reason"},
        ToolCall: {"v", "seq", "index", "id", "name", "arguments"},
        Usage: {"v", "seq", "input_tokens", "output_tokens", "estimated"},
        ErrorEvent: {"v", "seq", "code", "message", "upstream_status"},
        StreamEnd: {"v", "seq", "request_id"},
    }
    for cls, fields in expected.items():
        assert set(cls.__struct_fields__) == fields, cls
    # The extension fields are namespaced on the wire and omitted by default.
    d = ContentDelta(v="1.0", seq=1, index=0, role="assistant", delta=Delta(text="x"))
    assert b"reasoning" not in events.to_json(d)
    r = msgspec.structs.replace(d, reasoning=True)
    assert b'"tokenwire:reasoning":true' in events.to_json(r)
    u = Usage(v="1.0", seq=2, input_tokens=1, output_tokens=1)
    assert b"estimated" not in events.to_json(u)
    e = msgspec.structs.replace(u, estimated=True)
    assert b'"tokenwire:estimated":true' in events.to_json(e)
    assert events.parse("usage", events.to_json(e)) == e
    err = ErrorEvent(v="1.0", seq=3, code="internal_error", message="m")
    assert b"upstream_status" not in events.to_json(err)
    err = msgspec.structs.replace(err, upstream_status=401)
    assert b'"tokenwire:upstream_status":401' in events.to_json(err)
    assert events.parse("error", events.to_json(err)) == err


def test_dump_writes_event_id_and_one_data_line() -> None:
    ev = Usage(v="1.0", seq=6, input_tokens=42, output_tokens=8)
    frame = events.dump(ev)
    assert frame.startswith(b"event: usage\nid: 6\ndata: {")
    assert frame.endswith(b"}\n\n") and frame.count(b"\n") == 4
    assert msgspec.json.decode(frame.split(b"data: ")[1]) == {
        "type": "usage",
        "v": "1.0",
        "seq": 6,
        "input_tokens": 42,
        "output_tokens": 8,
    }


def test_optional_request_id_is_omitted_not_null() -> None:
    assert b"request_id" not in events.to_json(StreamEnd(v="1.0", seq=3))


def test_unknown_fields_are_ignored() -> None:
    ev = events.parse(
        "usage", '{"v":"1.0","seq":1,"type":"usage","input_tokens":1,"output_tokens":2,"x":[1]}'
    )
    assert ev == Usage(v="1.0", seq=1, input_tokens=1, output_tokens=2)


def test_unknown_type_is_kept() -> None:
    data = '{"v":"1.0","seq":4,"type":"x.note","note":"hi"}'
    ev = events.parse("x.note", data)
    assert ev == UnknownEvent(type="x.note", data=data, v="1.0", seq=4)
    assert events.dump(ev) == b"event: x.note\nid: 4\ndata: " + data.encode() + b"\n\n"


@pytest.mark.parametrize(
    ("name", "data", "rule"),
    [
        (
            "usage",
            '{"v":"1.0","seq":1,"type":"content.stop","index":0,"stop_reason":"x"}',
            "type-mismatch",
        ),
        ("usage", '{"v":"1.0","seq":1,"input_tokens":1,"output_tokens":2}', "type-mismatch"),
        ("usage", '{"v":"1.0","seq":1,"type":"usage","input_tokens":1}', "invalid-field"),
        (
            "usage",
            '{"v":"1.0","seq":-1,"type":"usage","input_tokens":1,"output_tokens":1}',
            "invalid-field",
        ),
        ("usage", '{"v":"1.0","seq":1,"type":"usage",', "invalid-json"),
        ("usage", "[]", "invalid-json"),
        ("x.custom", '{"type":"x.other"}', "type-mismatch"),
        ("x.custom", "nope", "invalid-json"),
    ],
)
def test_parse_rejects_with_the_rule(name: str, data: str, rule: str) -> None:
    with pytest.raises(EventDecodeError) as info:
        events.parse(name, data)
    assert info.value.rule == rule


def test_type_mismatch_keeps_the_seq_for_the_validator() -> None:
    with pytest.raises(EventDecodeError) as info:
        events.parse("usage", '{"v":"1.0","seq":7,"type":"stream.end"}')
    assert info.value.seq == 7


@given(st.text(), st.sampled_from([*events.EVENT_TYPES, "x.custom", "message"]))
def test_arbitrary_data_gives_an_event_or_a_decode_error(data: str, name: str) -> None:
    try:
        events.parse(name, data)
    except EventDecodeError:
        pass


def test_deep_nesting_is_a_decode_error_not_a_crash() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    with pytest.raises(EventDecodeError) as info:
        events.parse("usage", deep)
    assert info.value.rule == "invalid-json"
    with pytest.raises(EventDecodeError):
        events.parse("x.custom", deep)
    head = '{"v":"1.0","seq":1,"type":"usage","input_tokens":1,"output_tokens":2,"x":'
    hidden = head + deep + "}"
    try:
        events.parse("usage", hidden)
    except EventDecodeError as exc:
        assert exc.rule == "invalid-json"


# --- event type names (docs/conformance.md ruling 13) ---------------------------

VALID_NAMES = [
    "stream.start",
    "tool.call",
    "x.vendor.note",
    "response.output_text.delta",
    "a-b_c.9",
]
INVALID_NAMES = [
    "",
    "a" * 65,
    "vendor:note",
    "x note",
    " x",
    "x.",
    ".x",
    "a..b",
    "-x",
    "x\n",
    "x\r",
    "x\0",
    "caf\u00e9",
    "x/y",
]


@pytest.mark.parametrize("name", VALID_NAMES)
def test_valid_type_names_build_parse_and_dump(name: str) -> None:
    assert events.is_type_name(name)
    if name in events.EVENT_TYPES:
        return
    data = msgspec.json.encode({"v": "1.0", "seq": 1, "type": name}).decode()
    event = events.parse(name, data)
    assert event == UnknownEvent(type=name, data=data, v="1.0", seq=1)
    assert events.dump(event).startswith(b"event: %s\n" % name.encode())


@pytest.mark.parametrize("name", INVALID_NAMES)
def test_invalid_type_names_are_refused_everywhere(name: str) -> None:
    assert not events.is_type_name(name)
    with pytest.raises(LocalProtocolError, match="not a valid name"):
        UnknownEvent(type=name, data="{}")
    data = msgspec.json.encode({"v": "1.0", "seq": 1, "type": name}).decode()
    with pytest.raises(EventDecodeError) as info:
        events.parse(name, data)
    assert info.value.rule == "bad-type-name"


def test_a_type_name_in_an_error_message_is_cut_short() -> None:
    with pytest.raises(LocalProtocolError) as info:
        UnknownEvent(type="x\n" * 10_000, data="{}")
    assert len(str(info.value)) < 300


def test_dump_checks_the_name_again() -> None:
    # msgspec.structs.replace and decoding run __post_init__ too; a name
    # smuggled past it (force_setattr) is still refused on output.
    event = UnknownEvent(type="x.ok", data="{}")
    with pytest.raises(LocalProtocolError):
        msgspec.structs.replace(event, type="x\n\ndata: forged")
    with pytest.raises(LocalProtocolError):
        msgspec.json.decode(b'{"type": "x\\nid: 9", "data": "{}"}', type=UnknownEvent)
    msgspec.structs.force_setattr(event, "type", "x\n\ndata: forged")
    with pytest.raises(LocalProtocolError):
        events.dump(event)


@given(st.text(max_size=80))
def test_a_name_either_matches_the_grammar_or_is_refused(name: str) -> None:
    try:
        event = UnknownEvent(type=name, data="{}")
    except LocalProtocolError:
        assert not events.is_type_name(name)
        return
    # Accepted: it is one SSE token that reads back unchanged.
    from tokenwire import sse

    decoder = sse.Decoder()
    (message,) = decoder.feed(events.dump(event))
    assert message.event == name
