"""The binary binding (docs/binary.md): frames, limits, and the same events as SSE.

The frame vectors (tests/vectors/binary/frames.json) are shared with the
TypeScript decoder. The lifecycle vectors and the SSE vectors are carried in
both bindings: the same events must decode and validate identically.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.strategies import chunkings, known_events, split_at
from tests.test_lifecycle import VECTORS as LIFECYCLE_VECTORS
from tests.test_lifecycle import req, wire

from tokenwire import binary, events, sse, validate
from tokenwire.binary import CHANNEL_BIT, Decoder, Frame, FrameType
from tokenwire.errors import (
    EventDecodeError,
    FramingError,
    LocalProtocolError,
    RemoteProtocolError,
)

VECTORS = Path(__file__).parent / "vectors"
FRAME_CASES: list[dict[str, Any]] = json.loads((VECTORS / "binary" / "frames.json").read_text())[
    "cases"
]


def decode_all(data: bytes, chunks: list[bytes], case: dict[str, Any]) -> list[Frame]:
    decoder = Decoder(
        max_frame_bytes=case.get("max_frame_bytes", binary.DEFAULT_MAX_FRAME_BYTES),
        channels=case.get("channels", False),
    )
    out: list[Frame] = []
    for chunk in chunks:
        out += decoder.feed(chunk)
    out += decoder.close()
    return out


def comparable(frames: list[Frame], case: dict[str, Any]) -> list[tuple[int, int | None, Any]]:
    """(type, channel, body) with each body read as the vector gives it: JSON or hex."""
    assert len(frames) == len(case["frames"]), frames
    return [
        (f.type, f.channel, json.loads(f.body) if "json" in want else f.body.hex())
        for f, want in zip(frames, case["frames"], strict=True)
    ]


def expected(case: dict[str, Any]) -> list[tuple[int, int | None, Any]]:
    return [(f["type"], f.get("channel"), f.get("json", f.get("hex"))) for f in case["frames"]]


def check_case(case: dict[str, Any], chunks: list[bytes]) -> None:
    data = bytes.fromhex(case["hex"])
    if "error" in case:
        with pytest.raises(FramingError) as info:
            decode_all(data, chunks, case)
        assert info.value.offset == case["error"]["offset"]
        assert case["error"]["contains"] in str(info.value)
        assert f"(at byte {case['error']['offset']})" in str(info.value)
    else:
        assert comparable(decode_all(data, chunks, case), case) == expected(case)


@pytest.mark.parametrize("case", FRAME_CASES, ids=[c["name"] for c in FRAME_CASES])
def test_frame_vector_whole(case: dict[str, Any]) -> None:
    check_case(case, [bytes.fromhex(case["hex"])])


@pytest.mark.parametrize("case", FRAME_CASES, ids=[c["name"] for c in FRAME_CASES])
def test_frame_vector_byte_by_byte(case: dict[str, Any]) -> None:
    data = bytes.fromhex(case["hex"])
    check_case(case, [data[i : i + 1] for i in range(len(data))])


@given(st.data())
def test_frame_vectors_any_split(data: st.DataObject) -> None:
    case = data.draw(st.sampled_from(FRAME_CASES))
    body = bytes.fromhex(case["hex"])
    check_case(case, data.draw(chunkings(body)))


def test_the_frame_vectors_cover_every_refusal() -> None:
    phrases = {c["error"]["contains"].split(" 0x")[0] for c in FRAME_CASES if "error" in c}
    for needed in (
        "over the",
        "ended inside a frame's head",
        "ended inside a frame's payload",
        "reserved frame type",
        "unknown frame type",
        "must not have a channel id",
        "needs a channel id",
        "has no channel id",
        "a PING of",
    ):
        assert any(needed in p for p in phrases), needed


def test_an_over_long_length_is_refused_from_the_head_alone() -> None:
    decoder = Decoder(max_frame_bytes=1024)
    with pytest.raises(FramingError, match="over the 1024-byte limit"):
        decoder.feed(b"\x01\x00\x00\x04\x01")  # 1025: nothing of the payload buffered
    assert decoder.pending == 5


@given(st.binary(max_size=300), st.data())
def test_arbitrary_bytes_give_frames_or_a_framing_error(body: bytes, data: st.DataObject) -> None:
    case = {"channels": data.draw(st.booleans()), "max_frame_bytes": 64}
    pieces = data.draw(chunkings(body))
    try:
        whole = decode_all(body, [body], case)
    except FramingError as exc:
        with pytest.raises(FramingError) as split:
            decode_all(body, pieces, case)
        assert split.value.offset == exc.offset
    else:
        assert decode_all(body, pieces, case) == whole


# --- events in frames -----------------------------------------------------------------


@given(known_events, st.sampled_from(binary.PAYLOADS))
def test_encode_then_decode_round_trips_every_event(
    event: events.KnownEvent, payload: binary.Payload
) -> None:
    (back,) = list(binary.iter_events(binary.encode_event(event, payload=payload), payload=payload))
    assert back == event


@given(known_events)
def test_the_json_body_is_the_sse_data_line(event: events.KnownEvent) -> None:
    frame = binary.encode_event(event)
    (msg,) = sse.Decoder().feed(events.dump(event))
    assert frame[5:] == msg.data.encode()
    assert frame[0] == FrameType.EVENT and int.from_bytes(frame[1:5], "big") == len(frame) - 5


def test_unknown_event_types_travel_in_both_payloads() -> None:
    data = '{"v":"1.0","seq":3,"type":"x.note","text":"hi"}'
    event = events.parse("x.note", data)
    for payload in binary.PAYLOADS:
        frame = binary.encode_event(event, payload=payload)
        (back,) = list(binary.iter_events(frame, payload=payload))
        assert isinstance(back, events.UnknownEvent)
        assert (back.type, back.seq, json.loads(back.data)) == ("x.note", 3, json.loads(data))


def test_msgpack_is_smaller_for_a_short_delta() -> None:
    delta = events.ContentDelta(
        v="1.0", seq=12, index=0, role="assistant", delta=events.Delta(text="Hi")
    )
    assert len(binary.encode_event(delta, payload="msgpack")) < len(binary.encode_event(delta))


@pytest.mark.parametrize(
    ("body", "rule"),
    [
        (b"{not json", "invalid-json"),
        (b"[1,2]", "invalid-json"),
        (b'{"v":"1.0","seq":0}', "invalid-field"),
        (b'{"v":"1.0","seq":0,"type":7}', "invalid-field"),
        (b'{"v":"1.0","seq":0,"type":"stream.start"}', "invalid-field"),
        (b'{"v":"1.0","seq":0,"type":"bad name"}', "bad-type-name"),
        (b"[" * 100_000 + b"]" * 100_000, "invalid-json"),
    ],
)
def test_a_bad_envelope_names_its_rule(body: bytes, rule: str) -> None:
    with pytest.raises(EventDecodeError) as info:
        binary.decode_event(body)
    assert info.value.rule == rule


@pytest.mark.parametrize("body", [b"\xc1", b"\x93\x01\x02\x03", b"\x81\xa1t\xc1"])
def test_a_bad_msgpack_body_is_invalid_json(body: bytes) -> None:
    with pytest.raises(EventDecodeError) as info:
        binary.decode_event(body, "msgpack")
    assert info.value.rule == "invalid-json"


def test_an_error_frame_ends_the_reader_with_the_peers_words() -> None:
    body = binary.encode_event(events.StreamStart(v="1.0", seq=0, model="m", created=1))
    body += binary.encode_error("overloaded", "shedding load")
    with pytest.raises(RemoteProtocolError, match="overloaded: shedding load"):
        list(binary.iter_events(body))
    report = validate(body, framing="binary")
    assert [v.rule for v in report.violations] == ["framing"]
    assert "shedding load" in report.violations[0].message


def test_a_client_frame_in_a_response_is_refused() -> None:
    with pytest.raises(FramingError, match="client's frame type 0x10"):
        list(binary.iter_events(binary.encode_frame(FrameType.REQUEST, b"{}")))


def test_pings_carry_no_event() -> None:
    end = events.StreamEnd(v="1.0", seq=0)
    body = binary.encode_frame(FrameType.PING) + binary.encode_event(end)
    assert list(binary.iter_events(body)) == [end]


@pytest.mark.parametrize("frame_type", [0x00, 0x7F, 0x80, 0x81, 0x100, -1])
def test_reserved_and_channel_types_cannot_be_sent(frame_type: int) -> None:
    with pytest.raises(LocalProtocolError):
        binary.encode_frame(frame_type, b"")


def test_channels_round_trip() -> None:
    start = events.StreamStart(v="1.0", seq=0, model="m", created=1)
    frame = binary.encode_event(start, channel=9)
    assert frame[0] == FrameType.EVENT | CHANNEL_BIT
    (got,) = Decoder(channels=True).feed(frame)
    assert got.channel == 9 and binary.decode_event(got.body) == start


def test_aiter_events_matches_iter_events() -> None:
    evs = [
        events.StreamStart(v="1.0", seq=0, model="m", created=1),
        events.StreamEnd(v="1.0", seq=1),
    ]
    body = b"".join(binary.encode_event(e) for e in evs)

    async def chunks() -> Any:
        for i in range(len(body)):
            yield body[i : i + 1]

    async def collect() -> list[events.Event]:
        return [e async for e in binary.aiter_events(chunks())]

    assert asyncio.run(collect()) == evs


# --- the same vectors, both bindings ------------------------------------------------


def binary_wire(case: dict[str, Any]) -> bytes:
    """A lifecycle vector's events as EVENT frames (their data, unchanged, as bodies)."""
    out = []
    for item in case["events"]:
        data = item["raw"] if "raw" in item else json.dumps(item["data"], separators=(",", ":"))
        out.append(binary.encode_frame(FrameType.EVENT, data.encode()))
    return b"".join(out)


def _sse_only(case: dict[str, Any]) -> bool:
    """Cases about SSE's second type carrier (the ``event:`` line), which frames do not have."""
    return "type-mismatch" in case["rules"]


BOTH = [c for c in LIFECYCLE_VECTORS if not _sse_only(c)]


def test_only_the_sse_type_carrier_cases_are_left_out() -> None:
    left_out = [c["name"] for c in LIFECYCLE_VECTORS if _sse_only(c)]
    assert left_out and len(left_out) <= 2, left_out


@pytest.mark.parametrize("case", BOTH, ids=[c["name"] for c in BOTH])
@pytest.mark.parametrize("byte_by_byte", [False, True])
def test_lifecycle_vector_validates_identically(case: dict[str, Any], byte_by_byte: bool) -> None:
    sse_report = validate(wire(case), req(case))
    body = binary_wire(case)
    chunks = [body[i : i + 1] for i in range(len(body))] if byte_by_byte else [body]
    bin_report = validate(chunks, req(case), framing="binary")
    assert [v.rule for v in bin_report.violations] == case["rules"]
    assert bin_report.violations == sse_report.violations
    assert (bin_report.ok, bin_report.events) == (sse_report.ok, sse_report.events)


def _sse_vector_events() -> list[tuple[str, list[events.Event]]]:
    """Every SSE vector whose dispatched events are LLM-Stream envelopes, as typed events."""
    out = []
    for path in sorted((VECTORS / "sse").glob("*.json")):
        for case in json.loads(path.read_text())["cases"]:
            typed = []
            for ev in case["expected"]:
                try:
                    typed.append(events.parse(ev["event"], ev["data"]))
                except EventDecodeError:
                    break
            else:
                if typed:
                    out.append((f"{path.stem}:{case['name']}", typed))
    return out


SSE_VECTOR_EVENTS = _sse_vector_events()


def test_the_llm_sse_vectors_are_among_them() -> None:
    assert any(name.startswith("llm:") for name, _ in SSE_VECTOR_EVENTS)


@pytest.mark.parametrize(
    ("name", "evs"), SSE_VECTOR_EVENTS, ids=[name for name, _ in SSE_VECTOR_EVENTS]
)
def test_sse_vector_events_survive_the_binary_binding(name: str, evs: list[events.Event]) -> None:
    for payload in binary.PAYLOADS:
        body = b"".join(binary.encode_event(e, payload=payload) for e in evs)
        back = list(binary.iter_events(split_at(body, range(0, len(body), 3)), payload=payload))
        assert [msgspec.to_builtins(e) for e in back] == [msgspec.to_builtins(e) for e in evs]


def test_frames_before_a_refusal_come_out_first_then_every_call_raises() -> None:
    end = binary.encode_event(events.StreamEnd(v="1.0", seq=0))
    decoder = Decoder()
    assert [f.type for f in decoder.feed(end + b"\x05\x00\x00\x00\x00")] == [FrameType.EVENT]
    for call in (lambda: decoder.feed(b""), decoder.close):
        with pytest.raises(FramingError, match=f"unknown frame type 0x05 \\(at byte {len(end)}\\)"):
            call()


def test_a_refusal_message_reads_back_as_its_status() -> None:
    # docs/binary.md 6.2: a stream the HTTP route refused is an ERROR "<status>: <message>".
    message = binary.refusal_message(404, 'unknown model "x": did you mean "demo"?')
    assert binary.refusal_of(message) == (404, 'unknown model "x": did you mean "demo"?')
    assert binary.refusal_of("cancelled by the client") is None
    assert binary.refusal_of("40: too short") is None
