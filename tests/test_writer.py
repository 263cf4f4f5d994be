"""The writer can only ever produce conformant streams."""

from __future__ import annotations

import msgspec
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


def test_add_of_another_writers_deltas_gives_a_conformant_stream() -> None:
    # What the gateway does: a translator's own Writer stamps the vendor's
    # events, the endpoint's Writer takes them. Deltas already carrying the
    # right seq pass; any that do not (seq, v, role, or a block not open yet)
    # are restamped exactly as a provider's would be.
    inner = Writer(model="m", created=1)
    made = inner.text("a") + inner.text("b") + inner.text("c", 1) + inner.text("d", 1)
    made += inner.end()
    outer = Writer(model="m", created=1)
    out = outer.start()
    for event in made[1:]:
        out += outer.add(event)
    assert [e.seq for e in out] == list(range(len(out)))
    assert wire(out) == wire(made)
    odd = [
        events.ContentDelta(
            v="1.0", seq=99, index=0, role="assistant", delta=events.Delta(text="x")
        ),
        events.ContentDelta(
            v="0.9", seq=3, index=0, role="assistant", delta=events.Delta(text="y")
        ),
        events.ContentDelta(v="1.0", seq=4, index=0, role="user", delta=events.Delta(text="z")),
    ]
    w = Writer(model="m", created=1)
    got = w.text("a")  # seq 0 start, 1 delta; block 0 open
    got += w.add(
        events.ContentDelta(v="1.0", seq=2, index=0, role="assistant", delta=events.Delta(text="p"))
    )
    for event in odd:
        got += w.add(event)
    assert [(e.seq, e.v, e.role) for e in got[2:]] == [(s, "1.0", "assistant") for s in range(2, 6)]
    assert [e.delta.text for e in got[2:]] == ["p", "x", "y", "z"]
    w.error("internal_error", "boom")
    with pytest.raises(LocalProtocolError):
        w.add(
            events.ContentDelta(
                v="1.0", seq=w.next_seq, index=0, role="assistant", delta=events.Delta(text="late")
            )
        )


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


# -- tokenwire.tool_delta (docs/extensions.md) ------------------------------------


def _body(event: events.Event) -> dict[str, object]:
    assert isinstance(event, events.UnknownEvent)
    obj = msgspec.json.decode(event.data)
    assert isinstance(obj, dict)
    return obj


def test_tool_deltas_name_on_the_first_and_add_up_to_the_call() -> None:
    w = Writer(model="m")
    out = w.tool_delta(1, "call_1", "get_weather", '{"city": ')
    out += w.tool_delta(1, "call_1", "get_weather", "")  # a no-op
    out += w.tool_delta(1, "call_1", "get_weather", '"Par')
    out += w.tool_call(id="call_1", name="get_weather", arguments='{"city": "Paris"}', index=1)
    out += w.end("tool_use")
    deltas = [_body(e) for e in out if e.type == "tokenwire.tool_delta"]
    assert [(d["index"], d["id"], d.get("name"), d["delta"]) for d in deltas] == [
        (1, "call_1", "get_weather", '{"city": '),
        (1, "call_1", None, '"Par'),
        (1, "call_1", None, 'is"}'),  # the writer sends what the arguments add
    ]
    assert [d["seq"] for d in deltas] == [e.seq for e in out if e.type == "tokenwire.tool_delta"]
    report = validate(wire(out))
    assert [v.rule for v in report.violations] == ["missing-usage"], report.violations


def test_no_tool_delta_after_its_call_and_none_that_cannot_add_up() -> None:
    w = Writer(model="m")
    w.tool_call(id="a", name="f", arguments="{}", index=0)
    with pytest.raises(LocalProtocolError, match="no tool delta may follow"):
        w.tool_delta(0, "a", "f", "{")
    w.tool_delta(1, "b", "f", '{"x": 1')
    with pytest.raises(LocalProtocolError, match="block 1, not 2"):
        w.tool_delta(2, "b", "f", "}")
    with pytest.raises(LocalProtocolError, match="do not continue"):
        w.tool_call(id="b", name="f", arguments='{"y": 2}', index=1)
    w.stop(3, "end_turn")
    with pytest.raises(LocalProtocolError, match="already stopped"):
        w.tool_delta(3, "c", "f", "{")


def test_tool_deltas_spaced_differently_still_add_up() -> None:
    # A translator may tidy the text it calls with (Anthropic strips it): the same value.
    w = Writer(model="m")
    out = w.tool_delta(0, "a", "f", ' {"x": 1} ')
    out += w.tool_call(id="a", name="f", arguments='{"x": 1}', index=0)
    out += w.usage(1, 1) + w.end("tool_use")
    assert [e.type for e in out].count("tokenwire.tool_delta") == 1
    assert validate(wire(out)).violations == []


def test_translator_sends_tool_deltas_only_when_asked() -> None:
    from tokenwire.translate._base import StreamTranslator

    class Fake(StreamTranslator):
        name = "fake"

    quiet, live = Fake(model="m"), Fake(model="m", tool_deltas=True)
    assert quiet._tool_delta(0, "a", "f", "{") == []
    assert [e.type for e in live._tool_delta(0, "a", "f", "{")] == [
        "stream.start",
        "tokenwire.tool_delta",
    ]


# -- usage on every exit path (docs/extensions.md) -------------------------------


def test_a_failure_after_output_sends_an_estimated_usage() -> None:
    w = Writer(model="m", estimate_usage=True)
    out = w.text("x" * 10) + w.fail("cancelled", "cancelled by the client")
    assert [e.type for e in out] == [
        "stream.start",
        "content.delta",
        "error",
        "usage",
        "stream.end",
    ]
    usage = out[3]
    assert usage == events.Usage(v="1.0", seq=3, input_tokens=0, output_tokens=3, estimated=True)
    assert b'"tokenwire:estimated":true' in events.to_json(usage)
    assert validate(wire(out)).violations == []


def test_counts_noted_before_a_failure_are_sent_as_they_are() -> None:
    w = Writer(model="m")
    w.note_usage(input_tokens=40)
    w.note_usage(output_tokens=7)
    out = w.text("partial") + w.fail("overloaded", "upstream overloaded")
    assert out[-2] == events.Usage(v="1.0", seq=3, input_tokens=40, output_tokens=7)
    # A count not noted is estimated, and the event says so.
    w2 = Writer(model="m", estimate_usage=True)
    w2.note_usage(input_tokens=40)
    out2 = w2.text("abcdefgh") + w2.fail("internal_error", "cut")
    assert out2[-2] == events.Usage(
        v="1.0", seq=3, input_tokens=40, output_tokens=2, estimated=True
    )


def test_no_usage_is_invented_and_none_is_repeated() -> None:
    # Nothing known: no usage (an upstream 429 used no tokens).
    w = Writer(model="m", estimate_usage=True)
    assert [e.type for e in w.fail("rate_limited", "slow down")] == [
        "stream.start",
        "error",
        "stream.end",
    ]
    # An estimated prompt alone invents nothing for a stream that generated nothing.
    w = Writer(model="m", estimate_usage=True)
    w.note_usage(input_tokens=12, estimated=True)
    assert "usage" not in [e.type for e in w.fail("rate_limited", "slow down")]
    w = Writer(model="m", estimate_usage=True)
    w.note_usage(input_tokens=12, estimated=True)
    out = w.text("abcd") + w.fail("cancelled", "cancelled")
    assert out[-2] == events.Usage(v="1.0", seq=3, input_tokens=12, output_tokens=1, estimated=True)
    # Without estimate_usage, output alone is not a count (the default: unchanged streams).
    w = Writer(model="m")
    assert "usage" not in [e.type for e in w.text("hi") + w.fail("internal_error", "x")]
    # A usage already sent is not sent again, on the clean path or after an error.
    w = Writer(model="m", estimate_usage=True)
    out = w.text("hi") + w.usage(1, 1) + w.fail("internal_error", "x")
    assert [e.type for e in out].count("usage") == 1
    w = Writer(model="m")
    w.note_usage(input_tokens=5, output_tokens=1)
    out = w.text("hi") + w.end()
    assert [e.type for e in out][-2:] == ["usage", "stream.end"]  # noted: sent at the end
    assert validate(wire(out)).violations == []


def test_an_estimated_usage_passes_through_add() -> None:
    w = Writer(model="m")
    (start, usage) = w.add(
        events.Usage(v="1.0", seq=9, input_tokens=1, output_tokens=2, estimated=True)
    )
    assert isinstance(usage, events.Usage) and usage.estimated and usage.seq == 1


def test_estimate_tokens() -> None:
    from tokenwire.writer import estimate_tokens

    assert [estimate_tokens(s) for s in ("", "a", "abcd", "abcde")] == [0, 1, 1, 2]
    assert estimate_tokens(9) == 3
