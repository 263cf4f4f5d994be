"""Fuzz the binary framers (Connect envelopes, SignalR records) and the Connect
event codec: output, or the library's own ProtocolError."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from tests.fuzz.fuzz_inputs import FUZZ, chunked

from tokenwire import events as ev
from tokenwire.errors import FramingError, ProtocolError
from tokenwire.translate import connect, signalr
from tokenwire.writer import Writer


@FUZZ
@given(data=st.binary(max_size=400), limit=st.sampled_from([0, 3, 64, 1 << 20]), cuts=st.data())
def test_connect_envelopes_or_a_framing_error(data: bytes, limit: int, cuts: st.DataObject) -> None:
    decoder = connect.EnvelopeDecoder(max_message_bytes=limit)
    try:
        for chunk in cuts.draw(chunked(data)):
            for envelope in decoder.feed(chunk):
                assert isinstance(envelope.flags, int) and len(envelope.data) <= limit
    except FramingError as exc:
        assert exc.offset is not None


@FUZZ
@given(
    messages=st.lists(
        st.tuples(st.sampled_from([0, connect.FLAG_COMPRESSED, connect.FLAG_END_STREAM]),
                  st.binary(max_size=50)),
        max_size=6,
    ),
    cuts=st.data(),
)  # fmt: skip
def test_connect_envelopes_round_trip_however_cut(
    messages: list[tuple[int, bytes]], cuts: st.DataObject
) -> None:
    body = b"".join(connect.encode_envelope(data, flags=flags) for flags, data in messages)
    decoder = connect.EnvelopeDecoder()
    out = []
    for chunk in cuts.draw(chunked(body)):
        out += decoder.feed(chunk)
    assert [(e.flags, e.data) for e in out] == messages
    assert decoder.pending == 0


@FUZZ
@given(data=st.binary(max_size=300), codec=st.sampled_from(connect.CODECS))
def test_connect_event_messages_or_a_protocol_error(data: bytes, codec: str) -> None:
    try:
        event = connect.decode_event(data, codec)
    except ProtocolError:
        return
    assert event is None or isinstance(event, ev.UnknownEvent | tuple(ev.EVENT_TYPES.values()))


@FUZZ
@given(text=st.text(max_size=30), codec=st.sampled_from(connect.CODECS))
def test_connect_events_round_trip(text: str, codec: str) -> None:
    w = Writer(model="m", request_id="r")
    stream = w.start() + w.text(text or "x") + w.usage(1, 2) + w.end()
    for event in stream:
        assert connect.decode_event(connect.encode_event(event, codec), codec) == event


@FUZZ
@given(
    data=st.one_of(
        st.binary(max_size=300),
        st.lists(st.binary(max_size=30), max_size=8).map(signalr.RECORD_SEPARATOR.join),
    ),
    limit=st.sampled_from([1, 16, 1 << 20]),
    cuts=st.data(),
)
def test_signalr_records_or_a_framing_error(data: bytes, limit: int, cuts: st.DataObject) -> None:
    decoder = signalr.RecordDecoder(max_record_bytes=limit)
    records: list[bytes] = []
    try:
        for chunk in cuts.draw(chunked(data)):
            decoder.push(chunk)
            while (record := decoder.next_record()) is not None:
                records.append(record)
    except FramingError:
        return
    # Every complete record came out, in order, without its separator.
    complete = data.split(signalr.RECORD_SEPARATOR)[:-1]
    assert records == complete
