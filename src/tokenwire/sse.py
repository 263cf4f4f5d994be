"""WHATWG server-sent events: an incremental decoder and an encoder, with no I/O.

The decoder follows the "event stream interpretation" of the HTML standard
(https://html.spec.whatwg.org/multipage/server-sent-events.html, §9.2.5-9.2.6)
exactly; the project's ``sse-parsing-rules.md`` restates it as 29 facts, and
the comments below cite them as "fact N".

Design, for speed (this is the hot path of every stream):

* ``feed`` works on bytes and whole chunks. A run of complete blocks in the
  canonical shapes tokenwire and most LLM servers write (``event:``/``id:``/
  ``data:``, ``event:``/``data:`` or ``data:`` only, one line each, LF or CRLF endings)
  is decoded with one UTF-8 decode and one regular-expression scan (CRLF
  framing, Gemini's, has its own patterns, so it costs no copy); the scan is
  accepted only if its matches tile the region exactly (with CRLF, and one CR
  per line: no lone CR), so the result is the one the line-by-line path would
  give. Everything else (lone CRs, comments,
  ``retry``, multi-line data, NUL, unknown fields, a block cut by a chunk
  boundary) goes through the line-by-line path, which implements the spec as
  written.
* Lines are decoded as UTF-8 with ``errors="replace"`` only once complete, so
  a character split across chunks survives (fact 14). Decoding a run of
  complete lines at once equals decoding each line alone, because CR and LF
  are ASCII and end any truncated multi-byte sequence the same way.
* ``max_event_bytes`` bounds the memory held for one pending event. The rule:
  a pending block is every byte from the end of the previous blank line's
  terminator (or the stream start, after a BOM) up to the byte consumed last,
  line terminators included (CRLF counts 2 even when cut between chunks), and
  blank lines belong to no block. The error is raised when the block's
  ``max_event_bytes + 1``-th byte has been consumed, and names its offset:
  the same offset, and the same events before it, however the input was split.
  A run of lines that cannot reach the limit (the span from the pending
  block's start to the run's end fits it) is not checked; otherwise lines are
  checked one by one.
"""

from __future__ import annotations

import re
from itertools import repeat
from typing import Final

import msgspec

from .errors import FramingError, LocalProtocolError, ProtocolError

__all__ = ["Decoder", "Message", "encode"]


class Message(msgspec.Struct, frozen=True, gc=False):
    """One dispatched server-sent event.

    ``id`` is the last event ID in force when the event was dispatched (it
    carries over between events, fact 22). ``retry`` is a valid ``retry``
    value given in this event's own block, else ``None``; the reconnection
    time in force is ``Decoder.reconnect_ms``.
    """

    event: str = "message"
    data: str = ""
    id: str = ""
    retry: int | None = None


_BOM: Final = b"\xef\xbb\xbf"
# Fact 7: CRLF, CR and LF all end a line; CRLF is tried first so it is one terminator.
_TERMINATOR: Final = re.compile(rb"(\r\n|\r|\n)")
_TERMINATOR_STR: Final = re.compile(r"\r\n|\r|\n")

# The canonical block shapes of the fast path, one line per field. ``.``
# matches anything but LF, and the fast path only runs on regions without NUL
# whose CRs (if any) were all part of CRLFs, now made LF; so each group is
# exactly one line's value after the one space the spec strips (fact 16).
_EVENT_ID_DATA: Final = re.compile(r"event: (.*)\nid: (.*)\ndata: (.*)\n\n")
_EVENT_DATA: Final = re.compile(r"event: (.*)\ndata: (.*)\n\n")
_DATA: Final = re.compile(r"data: (.*)\n\n")
# The same shapes framed with CRLF (Gemini, sse-starlette), matched on the
# decoded text as it is: no copy to turn CRLF into LF. ``.`` matches CR, but the
# fast path only runs where every CR is part of a CRLF (feed checked), so
# ``(.*)\r\n`` gives back one line's value.
_EVENT_ID_DATA_CRLF: Final = re.compile(r"event: (.*)\r\nid: (.*)\r\ndata: (.*)\r\n\r\n")
_EVENT_DATA_CRLF: Final = re.compile(r"event: (.*)\r\ndata: (.*)\r\n\r\n")
_DATA_CRLF: Final = re.compile(r"data: (.*)\r\n\r\n")
# The longest start of a block kept unprocessed between two calls (see feed),
# and the most bytes the fast path decodes at once.
_RAW_KEEP: Final = 16 * 1024
_PIECE: Final = 64 * 1024

# Python refuses int() on more than sys.get_int_max_str_digits() digits (4300 by
# default). The spec sets no upper bound on retry (fact 26); a longer value is
# clamped to this ceiling rather than ignored.
_RETRY_MAX_DIGITS: Final = 4300
_RETRY_CEILING: Final = 10**_RETRY_MAX_DIGITS - 1


def _all_crlf(data: bytes, pos: int) -> bool:
    """Whether every CR and LF of ``data[pos:]`` is part of a CRLF."""
    pairs = data.count(b"\r\n", pos)
    return pairs == data.count(13, pos) and pairs == data.count(10, pos)


def _retry_value(value: bytes) -> int:
    # Fact 25: base 10, so leading zeros are not octal; strip them so that a
    # long run of zeros does not hit the digit limit.
    digits = value.lstrip(b"0") or b"0"
    if len(digits) <= _RETRY_MAX_DIGITS:
        try:
            return int(digits)
        except ValueError:  # sys.set_int_max_str_digits() set lower than the default
            pass
    return _RETRY_CEILING


class Decoder:
    """Incremental WHATWG event-stream decoder: ``feed(bytes) -> list[Message]``.

    ``max_event_bytes`` bounds one pending event: the bytes of a block (every
    line from the previous blank line on, terminators included, or one
    unterminated line still buffered). Passing it raises ``FramingError`` whose
    ``offset`` is the absolute input offset of the first byte over the limit.
    Events completed before that byte are still returned: if a ``feed`` call
    already holds some, it returns them and the error is raised by the next
    ``feed`` or ``close``. After a ``FramingError`` the decoder is unusable:
    every later call raises the same error.
    """

    def __init__(self, *, max_event_bytes: int = 1 << 20) -> None:
        if max_event_bytes < 1:
            raise ValueError("max_event_bytes must be >= 1")
        self._max = max_event_bytes
        self._fed = 0  # bytes consumed so far
        self._block_start = 0  # absolute offset of the pending block's first byte
        # Bytes not processed yet, from a line start: an unterminated line, or
        # (see _RAW_KEEP) the start of the next block. A bytearray only while a
        # long line grows chunk by chunk.
        self._tail: bytes | bytearray = b""
        self._skip_lf = False  # the last byte was a CR that ended a line (fact 11)
        self._at_start = True  # a BOM may still come (fact 13)
        # A FramingError (sticky), or the LocalProtocolError of feed() after close().
        self._error: ProtocolError | None = None
        # Any of the three above: feed() has something to do before the common path.
        self._special = True
        # The pending block has data, an event type or a retry: it is not at a
        # block boundary, so the fast path cannot start here.
        self._dirty = False
        # The spec's buffers. Data lines and the event type stay bytes until dispatch.
        self._data: list[bytes] = []
        self._event = b""
        self._id = ""  # the last event ID buffer
        self._last_id = ""  # the last event ID string, committed at each blank line
        self._block_retry: int | None = None
        self._reconnect: int | None = None

    @property
    def last_event_id(self) -> str:
        """The last event ID committed by a blank line (facts 22-24)."""
        return self._last_id

    @property
    def reconnect_ms(self) -> int | None:
        """The last valid ``retry`` value seen anywhere, or ``None`` (facts 25-27)."""
        return self._reconnect

    @property
    def bytes_fed(self) -> int:
        """Total bytes consumed so far; ``FramingError.offset`` counts in the same unit."""
        return self._fed

    def _fail(self, offset: int) -> FramingError:
        error = FramingError(f"SSE event larger than max_event_bytes={self._max}", offset=offset)
        self._error = error
        self._special = True
        return error

    def _prelude(self, chunk: bytes) -> bytes:
        """The rare work before ``feed``'s common path; returns what is left to do."""
        if self._error is not None:
            raise self._error
        if self._skip_lf and chunk:
            # Fact 8: the LF of a CRLF split across chunks belongs to the CR's line.
            self._skip_lf = False
            if chunk[0] == 10:
                start = self._fed - len(chunk)
                if self._block_start == start:
                    # That CRLF was a blank line: its LF is not part of the next block.
                    self._block_start = start + 1
                elif start + 1 - self._block_start > self._max:
                    # The LF ends a line of the pending block, so it counts
                    # toward the limit as it would in one chunk.
                    raise self._fail(self._block_start + self._max)
                chunk = chunk[1:]
        if self._at_start and chunk:
            # Fact 13: one BOM, only at the very start, even split across chunks.
            head = b"".join((self._tail, chunk))
            if len(head) < 3 and _BOM.startswith(head):
                self._tail = head  # wait for the rest of a possible BOM
                return b""
            self._at_start = False
            self._tail = b""
            chunk = head[3:] if head.startswith(_BOM) else head
        self._special = self._skip_lf or self._at_start
        return chunk

    def feed(self, chunk: bytes) -> list[Message]:
        """Consume ``chunk`` and return the events it completes, in order.

        Never raises on malformed bytes (invalid UTF-8 becomes U+FFFD, unknown
        fields are ignored). Raises ``FramingError`` when one event passes
        ``max_event_bytes`` (see the class docstring), and
        ``LocalProtocolError`` when called after ``close``.
        """
        if (
            chunk[-2:] == b"\n\n"
            and chunk[:6] == b"data: "
            and not (self._special or self._tail or self._dirty)
            and chunk.count(10) == 2
            and 13 not in chunk
        ):
            # One whole data-only event at a block boundary ("data: X\n\n",
            # most chunks of a vendor stream): the event, as every other path
            # would dispatch it (facts 1, 21, 22), without splitting anything.
            fed = self._fed + len(chunk)
            if fed - self._block_start <= self._max:
                self._fed = self._block_start = fed
                last_id = self._last_id = self._id
                return [Message("message", chunk[6:-2].decode("utf-8", "replace"), last_id, None)]
        if len(chunk) > 1 and chunk[-1] == 13:
            # The chunk ends inside a CRLF (fact 8) or with CR line ends: the
            # trailing CRs go on their own, so that the rest, when it is all
            # CRLF, keeps the fast path (any split gives the same result).
            head = chunk.rstrip(b"\r")
            if head:
                return self._feed_in_two(head, chunk[len(head) :])
        fed = self._fed = self._fed + len(chunk)
        if self._special:
            chunk = self._prelude(chunk)
        if not chunk:
            return []
        tail = self._tail
        if 10 not in chunk and 13 not in chunk:  # (an int operand: the fastest `in`)
            # No line ends here: just buffer, but never past the limit.
            if fed - self._block_start > self._max:
                raise self._fail(self._block_start + self._max)
            if not tail:
                self._tail = chunk
            elif type(tail) is bytes:
                self._tail = tail + chunk if len(tail) < 4096 else bytearray(tail) + chunk
            else:
                tail += chunk  # a bytearray: amortised O(1) for a long line
            return []
        if tail:
            data = b"".join((tail, chunk))
            self._tail = b""
        else:
            data = chunk
        # Line ends all LF (the usual case) or all CRLF (Gemini, sse-starlette):
        # find blocks by their blank line. With a CR anywhere, blocks are cut
        # at CRLF blank lines ("\r\n\r\n" always ends a blank line, whatever
        # comes before), and nothing is assumed of the bytes between: the fast
        # path checks its own region, and each part that is not checked goes
        # line by line (mixed and lone CRs, facts 6-9, 11), so no pass over
        # the whole chunk is needed to prove it is all CRLF.
        crlf = 13 in data
        if crlf:
            blank, width = b"\r\n\r\n", 4
        else:
            blank, width = b"\n\n", 2

        out: list[Message] = []
        pos = 0
        size = len(data)
        base = fed - size  # absolute offset of data[0]
        limit = self._max
        if self._dirty:
            # The previous chunk cut a block: finish it line by line.
            exact = fed - self._block_start > limit
            if data[0] == 10 or data[0] == 13:  # a blank line right after that chunk's last line
                if crlf and data[:2] != b"\r\n":
                    return self._with_cr(data, fed)  # a lone CR or LF
                pos = width // 2
            else:
                pos = data.find(blank)
                if pos < 0:  # no blank line: the block goes on
                    end = data.rfind(10) + 1
                    if crlf and data.find(b"\r", end) >= 0:
                        return self._with_cr(data, fed)  # lines ended by a lone CR
                    self._lines(data, 0, end, base, exact, out)
                    return self._finish(data, end, fed, exact, out)
                pos += width
            self._lines(data, 0, pos, base, exact, out)
            if self._error is not None:
                return self._finish(data, size, fed, exact, out)
        # Complete blocks, in pieces of at most _PIECE bytes (to bound the text
        # made at once): the fast path when canonical, else line by line. A
        # piece's blocks lie inside [block_start, piece end): when that span
        # fits the limit, none of them needs a check.
        stop = data.rfind(blank) + width  # after the last blank line (width - 1: none)
        if (
            pos < stop >= width
            and stop - pos <= _PIECE
            and base + stop - self._block_start <= limit
            and self._fast(data, pos, stop, base, out)
        ):
            pos = stop  # the common case: one piece, canonical, within the limit
        while pos < stop >= width:
            piece = stop
            if stop - pos > _PIECE:
                piece = data.rfind(blank, pos, pos + _PIECE) + width
                if piece < pos + width:  # one block longer than a piece
                    piece = data.find(blank, pos + _PIECE - width + 1) + width
            if base + piece - self._block_start > limit:
                self._lines(data, pos, piece, base, True, out)
                if self._error is not None:
                    return self._finish(data, size, fed, True, out)
            elif not self._fast(data, pos, piece, base, out):
                self._lines(data, pos, piece, base, False, out)
            pos = piece
        if pos == size:
            return out
        if crlf and not _all_crlf(data, pos):
            # The rest has a lone CR or LF: it may hold blank lines of another
            # kind, or lines a CR ends at once (fact 11). Line by line.
            try:
                out += self._with_cr(data[pos:], fed)
            except FramingError:
                if not out:
                    raise
            return out
        # The rest opens the next block and holds no blank line (but maybe one
        # at its very start). Small, within the limit and without a retry
        # (whose effect is immediate, fact 27), it stays raw for the next call,
        # which then takes the whole block on the fast path.
        exact = fed - self._block_start > limit
        if (
            not exact
            and size - pos <= _RAW_KEEP
            and data[pos] != 10
            and data[pos] != 13
            and data.find(b"retry", pos) < 0
        ):
            self._tail = data[pos:]
            return out
        end = data.rfind(10) + 1
        if pos < end:
            self._lines(data, pos, end, base, exact, out)
        return self._finish(data, end, fed, exact, out)

    def _feed_in_two(self, head: bytes, rest: bytes) -> list[Message]:
        """``feed(head + rest)`` as two calls, keeping ``feed``'s error contract."""
        out = self.feed(head)
        if self._error is not None:  # a FramingError for the next call to raise
            self._fed += len(rest)
            return out
        try:
            out += self.feed(rest)
        except FramingError:
            if not out:
                raise
        return out

    def _finish(
        self, data: bytes, end: int, fed: int, exact: bool, out: list[Message]
    ) -> list[Message]:
        """Keep ``data[end:]`` (an unterminated line), check the limit, return ``out``."""
        if self._error is None:
            if end < len(data):
                self._tail = data[end:]
            if exact and fed - self._block_start > self._max:
                self._fail(self._block_start + self._max)  # the unterminated rest
        if self._error is not None and not out:
            raise self._error
        return out

    def _with_cr(self, data: bytes, fed: int) -> list[Message]:
        """``feed`` for data with CR line ends (facts 6-9, 11): rare, line by line."""
        out: list[Message] = []
        end = max(data.rfind(b"\n"), data.rfind(b"\r")) + 1
        exact = fed - self._block_start > self._max
        self._lines(data, 0, end, fed - len(data), exact, out)
        if end == len(data) and data[-1] == 13:
            # Fact 11: a CR ends its line at once; drop an LF that comes next.
            self._skip_lf = self._special = True
        return self._finish(data, end, fed, exact, out)

    def _fast(self, data: bytes, pos: int, end: int, base: int, out: list[Message]) -> bool:
        """Decode ``data[pos:end]``, complete blocks, if it is all canonical.

        Returns False, having changed nothing, when it is not; the caller then
        uses the line-by-line path.
        """
        # The first block's shape picks the pattern (a slice compares faster
        # than a startswith call); stride: groups per block + 1, see split below.
        # CRLF line ends only, or LF only (feed checked): the block's last byte says which.
        crlf = data[end - 2] == 13
        if data[pos : pos + 7] == b"event: ":
            nl = data.find(10, pos) + 1
            if data[nl : nl + 4] == b"id: ":
                pattern, stride = (_EVENT_ID_DATA_CRLF if crlf else _EVENT_ID_DATA), 4
            elif data[nl : nl + 6] == b"data: ":
                pattern, stride = (_EVENT_DATA_CRLF if crlf else _EVENT_DATA), 3
            else:
                return False
        elif data[pos : pos + 6] == b"data: ":
            pattern, stride = (_DATA_CRLF if crlf else _DATA), 2
        else:
            return False
        region = data[pos:end] if pos or end != len(data) else data
        if 0 in region:  # fact 23: an id with NUL is ignored; leave that to _lines
            return False
        text = region.decode("utf-8", "replace")
        # split() gives [gap, group..., gap, group..., gap]: the matches tile the
        # region (so every line is in a canonical block, and the line-by-line
        # path would give the same events) iff every gap is empty.
        parts = pattern.split(text)
        if any(parts[0::stride]):
            return False
        # With CRLF, "." also matches a lone CR (a line end, fact 7): the
        # region holds exactly one CR per line (stride per block) iff none.
        if crlf and region.count(13) != len(parts) - 1:
            return False
        # Facts 1, 21, 22: each block dispatches; an empty event value means "message".
        # (Message is built with all four fields: positional is its fastest call.)
        if stride == 4:
            ids = parts[2::4]
            out += [
                Message(e or "message", d, i, None)
                for e, i, d in zip(parts[1::4], ids, parts[3::4], strict=False)
            ]
            self._id = self._last_id = ids[-1]
        elif stride == 3:
            last_id = self._last_id = self._id
            out += [
                Message(e or "message", d, last_id, None)
                for e, d in zip(parts[1::3], parts[2::3], strict=False)
            ]
        else:
            last_id = self._last_id = self._id
            out += [Message("message", d, last_id, None) for d in parts[1::2]]
        self._block_start = base + end
        return True

    def _lines(
        self, data: bytes, pos: int, end: int, base: int, exact: bool, out: list[Message]
    ) -> None:
        """Process the complete lines of ``data[pos:end]`` as the spec says.

        With ``exact``, check ``max_event_bytes`` at each line start; on failure
        record the error in ``self._error`` and stop.
        """
        segment = data[pos:end]
        sizes: list[int] | repeat[int]
        if 13 in segment:
            crlf = segment.count(b"\r\n")
            if crlf == segment.count(13) == segment.count(10):
                lines = segment.split(b"\r\n")
                sizes = repeat(2)
            else:
                parts = _TERMINATOR.split(segment)
                lines = parts[0::2]
                sizes = [len(t) for t in parts[1::2]]
        else:
            lines = segment.split(b"\n")
            sizes = repeat(1)
        lines.pop()  # the empty remainder after the last terminator
        at = base + pos  # absolute offset of the current line
        limit = self._max
        block_start = self._block_start
        data_lines = self._data
        event = self._event
        id_ = self._id
        block_retry = self._block_retry
        for line, size in zip(lines, sizes, strict=False):  # sizes may be repeat(1)
            if exact and at - block_start > limit:
                self._fail(block_start + limit)
                break
            if not line:
                # Fact 1: a blank line dispatches. Fact 24: it commits the id even
                # when there is no data. Facts 2/3: no data line, no event.
                self._last_id = id_
                if data_lines:
                    out.append(
                        Message(
                            event.decode("utf-8", "replace") if event else "message",
                            b"\n".join(data_lines).decode("utf-8", "replace"),
                            id_,
                            block_retry,
                        )
                    )
                    data_lines = []
                event = b""  # fact 21: the type goes back to "message"
                block_retry = None
                at += size
                block_start = at
                continue
            at += len(line) + size
            # Fact 16: the name is everything before the first colon; fact 17: no
            # colon means the whole line is the name and the value is empty.
            name, _, value = line.partition(b":")
            if not name:
                continue  # fact 15: a comment
            if value[:1] == b" ":
                value = value[1:]  # fact 16: exactly one leading space
            # Fact 18: names are compared exactly (case, spaces and NUL matter).
            if name == b"data":
                data_lines.append(value)
            elif name == b"event":
                event = value
            elif name == b"id":
                if 0 not in value:  # fact 23
                    id_ = value.decode("utf-8", "replace")
            elif name == b"retry":
                # Fact 25: ASCII digits only; bytes.isdigit() is ASCII-only (str's is not).
                if value.isdigit():
                    block_retry = self._reconnect = _retry_value(value)
        self._block_start = block_start
        self._data = data_lines
        self._event = event
        self._id = id_
        self._block_retry = block_retry
        self._dirty = bool(data_lines or event) or block_retry is not None

    def close(self) -> list[Message]:
        """Signal the end of input and return the events it completes.

        Always returns ``[]``: a CR at the very end already ended its line when
        it arrived (fact 6), and an event without its blank line is dropped,
        its id never committed (fact 5). Raises a pending ``FramingError``.
        Calling ``close`` again is harmless; ``feed`` after it raises
        ``LocalProtocolError``.
        """
        if isinstance(self._error, FramingError):
            raise self._error
        self._error = LocalProtocolError("Decoder.feed() called after close()")
        self._special = True
        self._dirty = False
        self._tail = b""
        self._skip_lf = False
        self._data = []
        self._event = b""
        self._block_retry = None
        return []


def _check_field(name: str, value: str, forbidden: str = "\r\n") -> None:
    # An encoder must never let a value end its line early: any CR or LF
    # would start a new field (fact 7), and so could forge a whole frame.
    if any(c in value for c in forbidden):
        shown = value if len(value) <= 64 else value[:64] + "..."
        what = " or ".join(("CR", "LF", "NUL")[: len(forbidden)])
        raise LocalProtocolError(f"SSE {name} must not contain {what}: {shown!r}")


def encode(
    *,
    data: str,
    event: str | None = None,
    id: str | None = None,
    retry: int | None = None,
    comment: str | None = None,
) -> bytes:
    """One SSE block, as UTF-8 bytes ending with a blank line.

    Writes, in order, a comment, ``event:``, ``id:``, ``retry:`` and one
    ``data:`` line per line of ``data`` (split on CRLF, CR and LF, so a
    decoder gives back ``data`` with LF line ends). ``None`` leaves a field
    out; note that an empty ``event`` decodes as ``"message"`` and an empty
    ``id`` resets the last event ID.

    Raises ``LocalProtocolError`` when ``event``, ``id`` or ``comment``
    contains CR or LF (it would end the line and could forge fields or a
    whole frame), ``event`` or ``id`` contains NUL (a decoder ignores such an
    id, fact 23, and no LLM-Stream type has one), ``retry`` is negative or
    not an int, or the text is not encodable as UTF-8 (a lone surrogate).
    """
    parts: list[str] = []
    if comment is not None:
        _check_field("comment", comment)
        parts.append(f": {comment}\n" if comment else ":\n")
    if event is not None:
        _check_field("event", event, "\r\n\0")
        parts.append(f"event: {event}\n")
    if id is not None:
        _check_field("id", id, "\r\n\0")
        parts.append(f"id: {id}\n")
    if retry is not None:
        if type(retry) is not int or retry < 0:
            raise LocalProtocolError(f"SSE retry must be an int >= 0: {retry!r}")
        parts.append(f"retry: {retry}\n")
    if "\n" in data or "\r" in data:
        parts.extend(f"data: {line}\n" for line in _TERMINATOR_STR.split(data))
    else:
        parts.append(f"data: {data}\n")
    parts.append("\n")
    try:
        return "".join(parts).encode()
    except UnicodeEncodeError as exc:
        raise LocalProtocolError(f"SSE text is not encodable as UTF-8: {exc}") from None
