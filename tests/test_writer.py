"""The writer can only ever produce conformant streams."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tokenwire import events, validate
from tokenwire.errors import LocalProtocolError, RemoteProtocolError
from tokenwire.writer import MAX_SEQ, Writer


def wire(evs: list[events.Event]) -> bytes:
    return b"".join(events.dump(e) for e in evs)


def test_text_stream_opens_and_closes_itself() -> None:
    w = Writer(model="m", request_id="r1", created=7)
    out = w.text("Hello") + w.text(", world") + w.usage(3, 2) + w.end()
    assert [e.type for e in out] == [
        "stream.start",
        "content.delta",
        "content.delta",
        "usage",
        "content.stop",
        "stream.end",
    ]
    assert [e.seq for e in out] == list(range(6))
    assert out[0] == events.StreamStart(v="1.0", seq=0, model="m", created=7, request_id="r1")
    assert out[-1] == events.StreamEnd(v="1.0", seq=5, request_id="r1")
    assert validate(wire(out)).violations == []


def test_tool_call_arguments_must_be_a_json_object() -> None:
    w = Writer(model="m")
    with pytest.raises(LocalProtocolError, match="not valid JSON"):
        w.tool_call(id="c1", name="f", arguments='{"a":', index=0)
    with pytest.raises(LocalProtocolError, match="not a JSON object"):
        w.tool_call(id="c1", name="f", arguments="[1]", index=0)
    out = w.tool_call(id="c1", name="f", arguments={"a": 1}, index=0)
    assert isinstance(out[-1], events.ToolCall) and out[-1].arguments == '{"a":1}'
    with pytest.raises(LocalProtocolError, match="already used"):
        w.tool_call(id="c1", name="f", arguments="{}", index=1)


def test_refuses_illegal_moves() -> None:
    w = Writer(model="m")
    w.text("a")
    w.stop(0, "end_turn")
    with pytest.raises(LocalProtocolError, match="already stopped"):
        w.text("b")
    with pytest.raises(LocalProtocolError, match="registered"):
        w.stop(1, "stop")
    w.end()
    with pytest.raises(LocalProtocolError, match="stream.end"):
        w.text("c", 2)
    with pytest.raises(LocalProtocolError):
        w.end()


def test_fail_turns_an_exception_into_error_and_end() -> None:
    w = Writer(model="m")
    out = w.text("partial") + w.fail(RuntimeError("secret detail"))
    assert [e.type for e in out][-2:] == ["error", "stream.end"]
    err = out[-2]
    assert isinstance(err, events.ErrorEvent)
    assert (err.code, err.message) == ("internal_error", "internal error")  # no leak
    assert validate(wire(out)).ok
    assert w.fail("overloaded", "again") == []


def test_fail_keeps_a_protocol_errors_code_and_message() -> None:
    w = Writer(model="m")
    out = w.fail(RemoteProtocolError("upstream is overloaded", code="overloaded"))
    err = out[1]
    assert isinstance(err, events.ErrorEvent)
    assert (err.code, err.message) == ("overloaded", "upstream is overloaded")


def test_add_restamps_provider_events() -> None:
    w = Writer(model="m")
    placeholder = events.ContentDelta(
        v="0", seq=0, index=0, role="assistant", delta=events.Delta(text="x")
    )
    out = w.add(placeholder) + w.add(placeholder) + w.add(events.StreamEnd(v="1.0", seq=0))
    assert [e.seq for e in out] == [0, 1, 2, 3, 4]
    assert validate(wire(out)).violations[0].rule == "missing-usage"


def test_sequence_exhaustion_terminates_the_stream() -> None:
    w = Writer(model="m")
    w.text("a")
    w._seq = MAX_SEQ - 2  # §8.4: pretend 2^53 - 2 events went by
    with pytest.raises(LocalProtocolError, match="exhausted"):
        w.text("b")
    out = w.fail("internal_error", "sequence exhausted")
    assert [e.seq for e in out] == [MAX_SEQ - 2, MAX_SEQ - 1]
    assert out[-1].type == "stream.end"


actions = st.lists(
    st.one_of(
        st.tuples(st.just("text"), st.integers(0, 3)),
        st.tuples(st.just("tool"), st.integers(0, 3)),
        st.tuples(st.just("stop"), st.integers(0, 3)),
        st.tuples(st.just("usage"), st.just(0)),
        st.tuples(st.just("error"), st.just(0)),
        st.tuples(st.just("end"), st.just(0)),
    ),
    max_size=30,
)


@given(actions)
def test_any_sequence_of_calls_gives_a_conformant_stream(plan: list[tuple[str, int]]) -> None:
    w = Writer(model="m")
    out: list[events.Event] = []
    for n, (kind, index) in enumerate(plan):
        try:
            if kind == "text":
                out += w.text("t", index)
            elif kind == "tool":
                out += w.tool_call(id=f"c{n}", name="f", arguments="{}", index=index)
            elif kind == "stop":
                out += w.stop(index, "tool_use")
            elif kind == "usage":
                out += w.usage(1, 1)
            elif kind == "error":
                out += w.error("overloaded", "busy")
            else:
                out += w.end()
        except LocalProtocolError:
            pass  # refused: the stream stays valid
    out += w.fail("internal_error", "done") if not w.ended else []
    report = validate(wire(out))
    assert report.ok, report.violations
