"""Typed events: exact draft fields, decode by SSE name, round trips."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tokenwire import events, iter_events
from tokenwire.errors import EventDecodeError
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

seqs = st.integers(min_value=0, max_value=2**63)
texts = st.text()
known_events = st.one_of(
    st.builds(
        StreamStart,
        v=st.just("1.0"),
        seq=seqs,
        model=texts,
        created=st.integers(0, 2**40),
        request_id=st.none() | texts,
    ),
    st.builds(
        ContentDelta,
        v=st.just("1.0"),
        seq=seqs,
        index=st.integers(0, 100),
        role=st.just("assistant"),
        delta=st.builds(Delta, text=texts),
        reasoning=st.booleans(),
    ),
    st.builds(
        ContentStop,
        v=st.just("1.0"),
        seq=seqs,
        index=st.integers(0, 100),
        stop_reason=st.sampled_from(sorted(events.STOP_REASONS)),
    ),
    st.builds(
        ToolCall,
        v=st.just("1.0"),
        seq=seqs,
        index=st.integers(0, 100),
        id=texts,
        name=texts,
        arguments=texts,
    ),
    st.builds(
        Usage,
        v=st.just("1.0"),
        seq=seqs,
        input_tokens=st.integers(0, 2**31),
        output_tokens=st.integers(0, 2**31),
    ),
    st.builds(ErrorEvent, v=st.just("1.0"), seq=seqs, code=texts, message=texts),
    st.builds(StreamEnd, v=st.just("1.0"), seq=seqs, request_id=st.none() | texts),
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
        Usage: {"v", "seq", "input_tokens", "output_tokens"},
        ErrorEvent: {"v", "seq", "code", "message"},
        StreamEnd: {"v", "seq", "request_id"},
    }
    for cls, fields in expected.items():
        assert set(cls.__struct_fields__) == fields, cls
    # The one extension field is namespaced on the wire and omitted by default.
    d = ContentDelta(v="1.0", seq=1, index=0, role="assistant", delta=Delta(text="x"))
    assert b"reasoning" not in events.to_json(d)
    r = msgspec.structs.replace(d, reasoning=True)
    assert b'"tokenwire:reasoning":true' in events.to_json(r)


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
