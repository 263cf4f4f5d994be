"""Fuzz the SSE decoder, event parsing and the validator: output or a ProtocolError."""

from __future__ import annotations

import msgspec
from hypothesis import given
from hypothesis import strategies as st
from tests.fuzz.fuzz_inputs import FUZZ, chunked
from tests.strategies import canonical_streams, sse_streams

import tokenwire
from tokenwire import events, sse
from tokenwire.errors import FramingError, ProtocolError


def _decode(chunks: list[bytes], limit: int) -> list[sse.Message] | FramingError:
    decoder = sse.Decoder(max_event_bytes=limit)
    out: list[sse.Message] = []
    try:
        for chunk in chunks:
            out += decoder.feed(chunk)
        out += decoder.close()
    except FramingError as exc:
        return exc
    return out


@FUZZ
@given(
    data=st.one_of(st.binary(max_size=600), sse_streams(), canonical_streams()),
    limit=st.sampled_from([1, 7, 64, 1 << 20]),
    cuts=st.data(),
)
def test_the_decoder_gives_messages_or_a_framing_error(
    data: bytes, limit: int, cuts: st.DataObject
) -> None:
    result = _decode(cuts.draw(chunked(data)), limit)
    if isinstance(result, FramingError):
        assert result.offset is not None and result.offset >= 0
        return
    for message in result:
        assert isinstance(message, sse.Message)
        assert isinstance(message.event, str) and isinstance(message.data, str)
        assert message.retry is None or message.retry >= 0
    # However the input was cut, the same messages.
    assert result == _decode([data], limit)


@FUZZ
@given(name=st.one_of(st.sampled_from(sorted(events.EVENT_TYPES)), st.text(max_size=20)),
       data=st.one_of(st.text(max_size=200), st.binary(max_size=200).map(
           lambda b: b.decode("utf-8", "replace"))))  # fmt: skip
def test_event_parsing_gives_an_event_or_a_protocol_error(name: str, data: str) -> None:
    try:
        event = events.parse(name, data)
    except ProtocolError:
        return
    assert isinstance(event, events.UnknownEvent | tuple(events.EVENT_TYPES.values()))


@FUZZ
@given(data=st.one_of(st.binary(max_size=600), sse_streams(), canonical_streams()))
def test_iter_events_and_validate_never_raise_anything_else(data: bytes) -> None:
    try:
        for event in tokenwire.iter_events(data):
            assert event is not None
    except ProtocolError:
        pass
    report = tokenwire.validate([data])  # the validator reports; it never raises
    assert isinstance(report.ok, bool)


@FUZZ
@given(
    name=st.one_of(
        st.from_regex(events.TYPE_NAME, fullmatch=True),
        st.text(max_size=80),
        st.sampled_from(["x.y\n\nevent: stream.end", "a:b", "x\r", "x\0", " x"]),
    ),
    seq=st.integers(0, 2**53),
)
def test_any_event_that_parses_dumps_as_exactly_one_frame(name: str, seq: int) -> None:
    # Event names (docs/conformance.md ruling 13): whatever the upstream sent,
    # an event that parses is written back as one SSE frame with that name.
    data = msgspec.json.encode({"v": "1.0", "seq": seq, "type": name}).decode()
    try:
        event = events.parse(name, data)
    except ProtocolError:
        assert not events.is_type_name(name) or name in events.EVENT_TYPES
        return
    decoder = sse.Decoder()
    messages = decoder.feed(events.dump(event)) + decoder.close()
    assert [m.event for m in messages] == [name]
