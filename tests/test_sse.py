"""tokenwire.sse: the WHATWG event-stream decoder and the encoder.

The shared vectors (tests/vectors/sse/*.json) cover every fact of
sse-parsing-rules.md; the properties compare the decoder with a plain,
line-at-a-time rendering of the spec's algorithm (``reference_decode``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from tests.strategies import (
    canonical_streams,
    chunkings,
    data_texts,
    event_ids,
    event_names,
    retries,
    split_at,
    sse_streams,
)

from tokenwire import sse
from tokenwire.errors import FramingError, LocalProtocolError, RemoteProtocolError
from tokenwire.sse import Decoder, Message, encode

VECTORS = Path(__file__).parent / "vectors" / "sse"


# --- a reference: the spec's algorithm as literally as possible --------------

_LINE_END = re.compile(r"\r\n|\r|\n")


def reference_decode(raw: bytes) -> tuple[list[Message], str, int | None]:
    """The whole input at once: (events, last event ID, reconnection time).

    HTML §9.2.6, step by step, on the decoded text: no chunks, no speed.
    """
    if raw.startswith(b"\xef\xbb\xbf"):  # the UTF-8 decode algorithm strips one BOM
        raw = raw[3:]
    *lines, _unterminated = _LINE_END.split(raw.decode("utf-8", "replace"))
    events: list[Message] = []
    data = event = id_buffer = last_id = ""
    retry: int | None = None
    reconnect: int | None = None
    for line in lines:
        if line == "":
            last_id = id_buffer
            if data != "":
                events.append(Message(event or "message", data[:-1], last_id, retry))
            data = event = ""
            retry = None
        elif line.startswith(":"):
            continue
        else:
            if ":" in line:
                name, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
            else:
                name, value = line, ""
            if name == "event":
                event = value
            elif name == "data":
                data += value + "\n"
            elif name == "id" and "\0" not in value:
                id_buffer = value
            elif name == "retry" and value and all("0" <= c <= "9" for c in value):
                retry = reconnect = int(value)
    return events, last_id, reconnect


def decode_chunks(
    chunks: list[bytes], max_event_bytes: int = 1 << 20
) -> tuple[list[Message], str, int | None]:
    dec = Decoder(max_event_bytes=max_event_bytes)
    out: list[Message] = []
    for chunk in chunks:
        out += dec.feed(chunk)
    out += dec.close()
    return out, dec.last_event_id, dec.reconnect_ms


def decode_until_error(
    chunks: list[bytes], max_event_bytes: int
) -> tuple[list[Message], int | None]:
    """Events and the FramingError offset (None if none); any other exception escapes."""
    dec = Decoder(max_event_bytes=max_event_bytes)
    out: list[Message] = []
    try:
        for chunk in chunks:
            out += dec.feed(chunk)
        out += dec.close()
    except FramingError as exc:
        assert exc.offset is not None
        return out, exc.offset
    return out, None


def bytewise(data: bytes) -> list[bytes]:
    return [data[i : i + 1] for i in range(len(data))]


# --- shared vectors ------------------------------------------------------------


def load_vectors() -> list[dict[str, Any]]:
    cases = []
    for path in sorted(VECTORS.glob("*.json")):
        doc = json.loads(path.read_text())
        for case in doc["cases"]:
            case["file"] = path.name
            cases.append(case)
    return cases


CASES = load_vectors()


def case_chunks(case: dict[str, Any]) -> list[bytes]:
    # The vectors' byte encoding: one character U+0000-U+00FF per byte.
    return [chunk.encode("latin-1") for chunk in case["chunks"]]


def expected_messages(case: dict[str, Any]) -> list[Message]:
    return [Message(e["event"], e["data"], e["id"], e["retry"]) for e in case["expected"]]


def test_vectors_cover_every_fact() -> None:
    covered = {fact for case in CASES for fact in case["fact"]}
    assert covered >= set(range(1, 30))
    assert len({case["name"] for case in CASES}) == len(CASES)


@pytest.mark.parametrize("mode", ["given", "bytewise", "whole"])
@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_vector(case: dict[str, Any], mode: str) -> None:
    chunks = case_chunks(case)
    if mode == "bytewise":
        chunks = bytewise(b"".join(chunks))
    elif mode == "whole":
        chunks = [b"".join(chunks)]
    if "max_event_bytes" in case:  # limits.json: events and the error offset
        got = decode_until_error(chunks, case["max_event_bytes"])
        assert got == (expected_messages(case), case["error_offset"])
        return
    dec = Decoder()
    out: list[Message] = []
    per_chunk = []
    for chunk in chunks:
        got = dec.feed(chunk)
        per_chunk.append(len(got))
        out += got
    assert dec.close() == []
    assert out == expected_messages(case)
    if "last_event_id" in case:
        assert dec.last_event_id == case["last_event_id"]
    if "reconnect_ms" in case:
        assert dec.reconnect_ms == case["reconnect_ms"]
    if mode == "given" and "per_chunk" in case:
        assert per_chunk == case["per_chunk"]
    assert dec.bytes_fed == sum(map(len, chunks))


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_reference_agrees_with_vector(case: dict[str, Any]) -> None:
    # Keeps the reference honest, so that the properties below mean something.
    events, last_id, reconnect = reference_decode(b"".join(case_chunks(case)))
    if case.get("error_offset") is not None:
        # The reference has no limit: the events before the error are a prefix of its events.
        expected = expected_messages(case)
        assert events[: len(expected)] == expected
        return
    assert events == expected_messages(case)
    if "last_event_id" in case:
        assert last_id == case["last_event_id"]
    if "reconnect_ms" in case:
        assert reconnect == case["reconnect_ms"]


# --- properties ------------------------------------------------------------------


@given(
    st.one_of(sse_streams(), canonical_streams()).flatmap(
        lambda b: st.tuples(st.just(b), chunkings(b))
    )
)
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@example((b"data: a\r\n\r\n", [b"data: a\r", b"\n\r", b"\n"]))
@example((b"\xef\xbb\xbfdata: x\n\n", [b"\xef", b"", b"\xbb\xbf", b"data: x\n\n"]))
def test_any_split_gives_the_spec_result(stream_and_chunks: tuple[bytes, list[bytes]]) -> None:
    stream, chunks = stream_and_chunks
    expected = reference_decode(stream)
    assert decode_chunks(chunks) == expected
    assert decode_chunks([stream]) == expected


@given(st.one_of(sse_streams(max_lines=12), canonical_streams(max_blocks=5)))
@settings(max_examples=150, deadline=None)
def test_byte_by_byte_gives_the_spec_result(stream: bytes) -> None:
    assert decode_chunks(bytewise(stream)) == reference_decode(stream)


@given(
    st.one_of(
        st.binary(max_size=300), sse_streams(max_lines=15), canonical_streams(max_blocks=6)
    ).flatmap(lambda b: st.tuples(st.just(b), chunkings(b)))
)
@settings(max_examples=300, deadline=None)
# Issue 16: a CRLF cut between its CR and LF once escaped the limit (offset 40
# whole, no error split).
@example((b"\0" * 39 + b"\r\n", [b"\0" * 39 + b"\r\n"]))
@example((b"\0" * 39 + b"\r\n", [b"\0" * 39 + b"\r", b"\n"]))
def test_arbitrary_bytes_give_events_or_framing_error(
    stream_and_chunks: tuple[bytes, list[bytes]],
) -> None:
    stream, chunks = stream_and_chunks
    # Large limit: never an error, and the spec's result.
    assert decode_chunks(chunks) == reference_decode(stream)
    # Small limits: events or a FramingError, whatever the split, same offset.
    for limit in (1, 7, 40):
        whole = decode_until_error([stream], limit)
        assert decode_until_error(chunks, limit) == whole
        assert decode_until_error(bytewise(stream), limit) == whole


@given(
    event=st.none() | event_names,
    data=data_texts,
    id_=st.none() | event_ids,
    retry=st.none() | retries,
    comment=st.none() | event_names,
)
@settings(deadline=None)
def test_decode_encode_round_trips(
    event: str | None, data: str, id_: str | None, retry: int | None, comment: str | None
) -> None:
    raw = encode(data=data, event=event, id=id_, retry=retry, comment=comment)
    dec = Decoder()
    out = dec.feed(raw) + dec.close()
    # An empty (or absent) event name means "message"; line ends come back as LF.
    expected_data = data.replace("\r\n", "\n").replace("\r", "\n")
    assert out == [Message(event or "message", expected_data, id_ or "", retry)]
    assert dec.reconnect_ms == retry


@given(st.lists(st.tuples(event_names, data_texts, event_ids), max_size=8), st.data())
@settings(deadline=None)
def test_encoded_streams_round_trip_in_any_split(
    items: list[tuple[str, str, str]], draw: st.DataObject
) -> None:
    raw = b"".join(encode(event=e, data=d, id=i) for e, d, i in items)
    chunks = draw.draw(chunkings(raw))
    out, last_id, _ = decode_chunks(chunks)
    assert out == [
        Message(e or "message", d.replace("\r\n", "\n").replace("\r", "\n"), i, None)
        for e, d, i in items
    ]
    assert last_id == (items[-1][2] if items else "")


def test_big_chunks_match_the_reference() -> None:
    # Over 64 KiB at once: the fast path works in pieces, one block is longer
    # than a piece, and a non-canonical block sits among canonical ones.
    blocks = [
        b'event: content.delta\nid: %d\ndata: {"t":"\xc3\xa9%d"}\n\n' % (i, i) for i in range(3000)
    ]
    blocks[1000] = b"data: " + b"x" * 100_000 + b"\n\n"
    blocks[2000] = b": ping\n" + blocks[2000]
    blocks[2500] = b"data: only\n\n"
    stream = b"".join(blocks)
    expected = reference_decode(stream)
    assert len(expected[0]) == 3000
    assert decode_chunks([stream]) == expected
    assert decode_chunks(split_at(stream, range(0, len(stream), 70_001))) == expected


# --- max_event_bytes ---------------------------------------------------------------


def test_8mb_line_without_newline_raises_once_past_the_limit() -> None:
    limit = 1 << 20
    dec = Decoder(max_event_bytes=limit)
    piece = b"x" * 65536
    fed = 0
    with pytest.raises(FramingError) as info:
        for _ in range(128):  # 8 MiB
            dec.feed(piece)
            fed += len(piece)
    assert info.value.offset == limit
    # It stopped at the first chunk that crossed the limit, not at the end.
    assert fed == limit
    assert dec.bytes_fed == limit + len(piece)
    assert isinstance(info.value, RemoteProtocolError)


def test_8mb_line_in_one_chunk_raises() -> None:
    dec = Decoder()
    with pytest.raises(FramingError) as info:
        dec.feed(b"data: " + b"x" * (8 << 20))
    assert info.value.offset == 1 << 20


def test_8mb_line_after_events_names_the_absolute_offset() -> None:
    head = b"event: a\nid: 1\ndata: x\n\n" * 3
    dec = Decoder(max_event_bytes=1000)
    assert len(dec.feed(head)) == 3
    with pytest.raises(FramingError) as info:
        for _ in range(100):
            dec.feed(b"y" * 300)
    assert info.value.offset == len(head) + 1000


def test_huge_multiline_event_raises() -> None:
    line = b"data: " + b"z" * 994 + b"\n"  # 1001 bytes
    dec = Decoder(max_event_bytes=100_000)
    with pytest.raises(FramingError) as info:
        for _ in range(1000):
            dec.feed(line)
    assert info.value.offset == 100_000
    # The same event, in one chunk with its blank line.
    with pytest.raises(FramingError) as info:
        Decoder(max_event_bytes=100_000).feed(line * 1000 + b"\n")
    assert info.value.offset == 100_000


def test_events_before_the_error_are_returned_then_it_raises() -> None:
    good = b"data: ok\n\n"
    dec = Decoder(max_event_bytes=50)
    out = dec.feed(good + b"data: " + b"x" * 100 + b"\n\n" + good)
    assert out == [Message("message", "ok")]
    with pytest.raises(FramingError) as info:
        dec.feed(good)
    assert info.value.offset == len(good) + 50
    # The error is sticky: the decoder is unusable afterwards.
    with pytest.raises(FramingError):
        dec.close()


def test_event_of_exactly_the_limit_passes() -> None:
    block = b"event: e\ndata: 0123456789\n"  # 26 bytes
    assert (
        decode_chunks([block + b"\n"] * 2, max_event_bytes=26)[0]
        == [Message("e", "0123456789")] * 2
    )
    assert decode_until_error([block + b"\n"], 25) == ([], 25)
    # A CRLF split across chunks counts its LF too.
    crlf = b"data: 0123456\r\n\r\n"  # block: 15 bytes with the CRLF
    assert decode_until_error([crlf], 14) == ([], 14)
    assert decode_until_error([crlf[:14], crlf[14:]], 14) == ([], 14)
    assert decode_until_error([crlf[:14], crlf[14:]], 15)[1] is None


@pytest.mark.parametrize("extra", [0, 1])
@pytest.mark.parametrize(
    ("nl", "blank"),
    [(b"\n", b) for b in (b"\n", b"\r\n", b"\r", b"\r\r\n", b"\r\n\n", b"\n\r")]
    + [(b"\r\n", b"\r\n"), (b"\r\n", b"\r\n\r\n")],
)
def test_blank_lines_never_count_toward_the_next_event_whatever_the_split(
    nl: bytes, blank: bytes, extra: int
) -> None:
    # Blank lines of every kind (LF, CRLF, CR, a CRLF cut in two) end the
    # previous block; the next block, of exactly the limit (or one byte more),
    # must pass (or fail at the same offset) for every cut into three chunks.
    block = b"event: e" + nl + b"data: " + b"x" * (10 + extra) + nl
    head = b"data: a" + nl + nl + blank
    stream = head + block + nl
    limit = len(block) - extra
    expected: tuple[list[Message], int | None]
    if extra:
        expected = ([Message("message", "a")], len(head) + limit)
    else:
        expected = ([Message("message", "a"), Message("e", "x" * 10)], None)
    for i in range(len(stream) + 1):
        for j in range(i, len(stream) + 1):
            for cuts in (
                [i, j],
                [i, j, len(stream) - 2 * len(nl)],
            ):  # the latter: a chunk with no LF
                chunks = split_at(stream, cuts)
                assert decode_until_error(chunks, limit) == expected, chunks


def test_blank_lines_and_comments_between_events_do_not_add_up() -> None:
    dec = Decoder(max_event_bytes=20)
    out = []
    for _ in range(1000):
        out += dec.feed(b"data: x\n\n\n\r\n: c\n\n")
    assert len(out) == 1000


def test_max_event_bytes_must_be_positive() -> None:
    with pytest.raises(ValueError):
        Decoder(max_event_bytes=0)


# --- decoder API details ---------------------------------------------------------------


def test_feed_after_close_is_refused() -> None:
    dec = Decoder()
    dec.feed(b"data: a\n")
    assert dec.close() == []
    assert dec.close() == []
    with pytest.raises(LocalProtocolError):
        dec.feed(b"\n")


def test_close_drops_pending_event_and_partial_line() -> None:
    dec = Decoder()
    assert dec.feed(b"id: 9\ndata: a\n\nid: 10\ndata: b\nda") == [Message("message", "a", "9")]
    assert dec.close() == []
    assert dec.last_event_id == "9"


def test_retry_line_is_seen_between_feeds() -> None:
    dec = Decoder()
    dec.feed(b"event: a\nid: 1\ndata: x\n\nretry: 250\nevent: b\n")
    assert dec.reconnect_ms == 250


def test_huge_retry_is_clamped_not_ignored() -> None:
    dec = Decoder()
    out = dec.feed(b"retry: " + b"9" * 5000 + b"\ndata: x\n\n")
    assert out[0].retry == dec.reconnect_ms == 10**4300 - 1
    dec.feed(b"retry: " + b"0" * 5000 + b"7\n\n")
    assert dec.reconnect_ms == 7


def test_message_is_frozen_and_comparable() -> None:
    m = Message("content.delta", "{}", "3")
    assert m == Message(event="content.delta", data="{}", id="3", retry=None)
    assert Message() == Message("message", "", "", None)
    assert hash(m) == hash(Message("content.delta", "{}", "3"))
    with pytest.raises(AttributeError):
        m.data = "x"  # type: ignore[misc]


def test_module_exports() -> None:
    assert sorted(sse.__all__) == ["Decoder", "Message", "encode"]


# --- encode ---------------------------------------------------------------


def test_encode_layout() -> None:
    assert encode(data="x") == b"data: x\n\n"
    assert encode(data="a\r\nb\rc\nd", event="e", id="7", retry=0, comment="hi") == (
        b": hi\nevent: e\nid: 7\nretry: 0\ndata: a\ndata: b\ndata: c\ndata: d\n\n"
    )
    assert encode(data="", comment="") == b":\ndata: \n\n"
    assert encode(data=" lead", event=" sp") == b"event:  sp\ndata:  lead\n\n"


@pytest.mark.parametrize("field", ["event", "id", "comment"])
@pytest.mark.parametrize("bad", ["a\nb", "a\rb", "\r\n", "\n"])
def test_encode_refuses_line_ends_in_fields(field: str, bad: str) -> None:
    with pytest.raises(LocalProtocolError):
        encode(data="x", **{field: bad})


def test_encode_refuses_nul_in_id_and_bad_retry() -> None:
    with pytest.raises(LocalProtocolError):
        encode(data="x", id="a\0b")
    with pytest.raises(LocalProtocolError):
        encode(data="x", retry=-1)
    with pytest.raises(LocalProtocolError):
        encode(data="x", retry=True)
    with pytest.raises(LocalProtocolError):
        encode(data="\ud800")


def test_split_at_helper() -> None:
    assert split_at(b"abcd", [2, 2, 4]) == [b"ab", b"", b"cd", b""]


def test_chunks_of_one_data_frame_each_decode_as_one_stream() -> None:
    # The one-frame path (a vendor's usual chunk): the last event ID carries
    # over, an empty value and a value with a leading space stay as sent, a
    # chunk cut mid-frame and a CR line end take the general path, and every
    # event is the one a single feed of the whole stream gives.
    chunks = [
        b"id: 7\ndata: a\n\n",
        b"data: b\n\n",
        b"data: \n\n",
        b"data:  c\n\n",
        b"data: d",
        b"\n\n",
        b"data: e\r\n\r\n",
        b'data: {"x": "\xc3\xa9"}\n\n',
    ]
    piecewise = Decoder()
    got = [m for chunk in chunks for m in piecewise.feed(chunk)]
    assert got == Decoder().feed(b"".join(chunks))
    assert [m.data for m in got] == ["a", "b", "", " c", "d", "e", '{"x": "é"}']
    assert {m.id for m in got} == {"7"}
    assert piecewise.last_event_id == "7"
    assert piecewise.bytes_fed == len(b"".join(chunks))


def test_one_data_frame_over_the_limit_raises_at_the_limit() -> None:
    with pytest.raises(FramingError) as info:
        Decoder(max_event_bytes=10).feed(b"data: 0123456789\n\n")
    assert info.value.offset == 10
    # After a clean frame the limit counts from that frame's end.
    dec = Decoder(max_event_bytes=12)
    assert dec.feed(b"data: 12345\n\n")[0].data == "12345"
    with pytest.raises(FramingError) as info:
        dec.feed(b"data: 1234567\n\n")
    assert info.value.offset == 13 + 12
