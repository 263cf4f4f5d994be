"""Hypothesis strategies shared by the test suite.

SSE inputs (``sse_streams``, ``canonical_streams``), ways to cut them
(``chunkings``, ``split_at``) and valid field values for the encoder
(``event_names``, ``event_ids``, ``data_texts``, ``retries``).
"""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import strategies as st

from tokenwire import events
from tokenwire.events import (
    ContentDelta,
    ContentStop,
    Delta,
    ErrorEvent,
    StreamEnd,
    StreamStart,
    ToolCall,
    Usage,
)

__all__ = [
    "canonical_streams",
    "known_events",
    "chunkings",
    "data_texts",
    "event_ids",
    "event_names",
    "retries",
    "split_at",
    "sse_streams",
    "sse_text",
]

_BOM = b"\xef\xbb\xbf"

# Characters that matter to an SSE parser: separators, the one stripped space,
# NUL, line-like characters that are NOT line ends (U+2028/2029, NEL, VT, FF,
# FS/GS/RS), non-ASCII of every UTF-8 length, non-ASCII digits (retry), BOM.
_TRICKY_CHARS = (
    ":  \t\x00\u2028\u2029\u0085\x0b\x0c\x1c\x1d\x1e\u00e9\u041f\u6771\U0001f642\u0663\uff15\ufeff"
)
# Bytes that are not valid UTF-8 on their own (a lone continuation byte, a
# truncated 3-byte sequence, an encoded surrogate, 0xFF) and a BOM.
_BAD_BYTES = [b"\xff", b"\x80", b"\xe2\x82", b"\xed\xa0\x80", b"\xf0\x9f\x99", _BOM]
_TERMINATORS = [b"\n", b"\r", b"\r\n"]
_NAMES = [b"data", b"event", b"id", b"retry", b"Data", b"ID", b"dat", b"data ", b" data", b"x"]

#: Text without CR or LF (so: one SSE line's worth), any Unicode but surrogates.
sse_text = st.text(
    alphabet=st.one_of(
        st.sampled_from("abc09 "),
        st.sampled_from(_TRICKY_CHARS),
        st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"),
    ),
    max_size=12,
)


def _value() -> st.SearchStrategy[bytes]:
    text = sse_text.map(lambda s: s.encode())
    digits = st.integers(min_value=0, max_value=10**22).map(lambda n: str(n).encode())
    spaced = st.tuples(st.sampled_from([b"", b" ", b"  "]), st.one_of(text, digits)).map(b"".join)
    bad = st.lists(st.one_of(text, st.sampled_from(_BAD_BYTES)), max_size=3).map(b"".join)
    return st.one_of(spaced, bad)


@st.composite
def _line(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["field", "field", "field", "blank", "blank", "comment", "bare"]))
    if kind == "blank":
        return b""
    if kind == "comment":
        return b":" + draw(_value())
    name = draw(st.one_of(st.sampled_from(_NAMES), sse_text.map(lambda s: s.encode())))
    if kind == "bare":
        return name
    return name + b":" + draw(_value())


@st.composite
def sse_streams(draw: st.DrawFn, max_lines: int = 25) -> bytes:
    """Bytes shaped like an event stream, with every trap of the parsing rules.

    Lines of known and unknown fields, comments, blank lines and bare names;
    values with NUL, U+2028, non-ASCII digits and invalid UTF-8; CR, LF and
    CRLF mixed; sometimes a BOM (or two) in front; sometimes no final line end.
    """
    lines = draw(st.lists(_line(), max_size=max_lines))
    parts = [draw(st.sampled_from([b"", b"", _BOM, _BOM + _BOM]))]
    for line in lines:
        parts.append(line)
        parts.append(draw(st.sampled_from(_TERMINATORS)))
    if parts and draw(st.booleans()):
        parts.pop()  # end in the middle of a line
    return b"".join(parts)


@st.composite
def canonical_streams(draw: st.DrawFn, max_blocks: int = 12) -> bytes:
    """Mostly canonical blocks (``event``/``id``/``data``, ``event``/``data``,
    ``data``), as LLM servers write them, with now and then a deviation
    (a comment, a retry, a NUL in an id, two data lines, an extra blank line,
    a CR line end) to check that a decoder's fast path gives up correctly;
    one stream in four uses CRLF line ends throughout.
    """
    text = st.text(
        alphabet=st.one_of(st.sampled_from('ab {}":,\\é🙂\u2028'), st.sampled_from(_TRICKY_CHARS)),
        max_size=20,
    ).map(lambda s: s.encode())
    blocks = []
    for _ in range(draw(st.integers(0, max_blocks))):
        shape = draw(st.sampled_from(["eid", "eid", "eid", "ed", "d", "odd"]))
        event = (
            b"event: " + draw(st.sampled_from([b"content.delta", b"usage", b"", b"x:y"])) + b"\n"
        )
        id_ = b"id: " + draw(st.one_of(st.integers(0, 999).map(lambda n: b"%d" % n), text)) + b"\n"
        data = b"data: " + draw(text) + b"\n"
        if shape == "eid":
            block = event + id_ + data
        elif shape == "ed":
            block = event + data
        elif shape == "d":
            block = data
        else:
            block = draw(
                st.sampled_from(
                    [
                        b": ping\n" + event + id_ + data,
                        event + b"retry: 50\n" + data,
                        event + b"id: 1\x002\n" + data,
                        data + data,
                        b"\n" + data,
                        event + id_ + data.replace(b"\n", b"\r\n"),
                        event.replace(b"\n", b"\r\n") + data,
                        event + b"\r" + data,
                        b"x" + event + id_ + data,
                    ]
                )
            )
        blocks.append(block + b"\n")
    body = b"".join(blocks)
    if draw(st.integers(0, 3)) == 0:
        body = body.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")  # a CRLF server
    if body and draw(st.booleans()):
        body = body[: draw(st.integers(0, len(body)))]
    return body


def split_at(data: bytes, cuts: Sequence[int]) -> list[bytes]:
    """``data`` cut at the given offsets (sorted, possibly repeated: empty chunks)."""
    chunks = []
    start = 0
    for cut in sorted(cuts):
        chunks.append(data[start:cut])
        start = cut
    chunks.append(data[start:])
    return chunks


def chunkings(data: bytes, max_cuts: int = 20) -> st.SearchStrategy[list[bytes]]:
    """Ways to cut ``data`` into chunks: random cut points, empty chunks included."""
    return st.lists(st.integers(0, len(data)), max_size=max_cuts).map(
        lambda cuts: split_at(data, cuts)
    )


#: A valid SSE event name for the encoder (no CR, LF or NUL); may be empty.
event_names = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n\x00"),
    max_size=20,
)

#: A valid SSE id for the encoder (no CR, LF or NUL); may be empty.
event_ids = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n\x00"),
    max_size=20,
)

#: Any data text (lines joined with LF, CR or CRLF), surrogates excepted.
data_texts = st.text(
    alphabet=st.one_of(
        st.sampled_from("\n\r ab:"),
        st.characters(blacklist_categories=("Cs",)),
    ),
    max_size=40,
)

#: A valid retry value: any non-negative int, huge ones included (no upper bound).
retries = st.one_of(st.integers(min_value=0, max_value=10**6), st.integers(min_value=0))


#: Every registered event type with arbitrary field values (tests/test_events.py, test_binary.py).
_seqs = st.integers(min_value=0, max_value=2**63)
_texts = st.text()
known_events = st.one_of(
    st.builds(
        StreamStart,
        v=st.just("1.0"),
        seq=_seqs,
        model=_texts,
        created=st.integers(0, 2**40),
        request_id=st.none() | _texts,
    ),
    st.builds(
        ContentDelta,
        v=st.just("1.0"),
        seq=_seqs,
        index=st.integers(0, 100),
        role=st.just("assistant"),
        delta=st.builds(Delta, text=_texts),
        reasoning=st.booleans(),
    ),
    st.builds(
        ContentStop,
        v=st.just("1.0"),
        seq=_seqs,
        index=st.integers(0, 100),
        stop_reason=st.sampled_from(sorted(events.STOP_REASONS)),
    ),
    st.builds(
        ToolCall,
        v=st.just("1.0"),
        seq=_seqs,
        index=st.integers(0, 100),
        id=_texts,
        name=_texts,
        arguments=_texts,
    ),
    st.builds(
        Usage,
        v=st.just("1.0"),
        seq=_seqs,
        input_tokens=st.integers(0, 2**31),
        output_tokens=st.integers(0, 2**31),
    ),
    st.builds(ErrorEvent, v=st.just("1.0"), seq=_seqs, code=_texts, message=_texts),
    st.builds(StreamEnd, v=st.just("1.0"), seq=_seqs, request_id=st.none() | _texts),
)
