"""What every vendor translator shares: the sans-I/O shape and the never-raise rule.

A translator turns one vendor response body into one standard stream. It is
fed bytes as they arrive and returns standard events, stamped and ordered by a
``Writer``, so its output always passes the lifecycle validator. Nothing raises
past it: a vendor error, a framing problem or a stream cut short becomes an
``error`` event and ``stream.end``.

The batch loop lives here, once. A subclass says how bytes split into vendor
frames (``_frames`` / ``_final_frames``: SSE messages, SignalR records,
Connect envelopes) and what one frame means (``_on_frame``). It emits by
appending the writer's events to ``self.out``, the list this call returns:
a failure half-way through a frame keeps every event already stamped (their
``seq`` numbers are spent), then ends the stream through ``_fail``.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterable
from typing import Any, ClassVar, Final, Generic, TypeVar

import msgspec

from .. import events as ev
from .. import sse
from .._buffer import PushBuffer
from .._secrets import SECRET_HEADERS, SECRET_PARAMS
from ..errors import FramingError, ProtocolError
from ..writer import Writer

__all__ = [
    "BlockNumbers",
    "PushBuffer",
    "SSETranslator",
    "StreamTranslator",
    "VendorRequest",
    "event_type",
    "redact_url",
]

_REDACTED: Final = "<redacted>"

#: docs/extensions.md: at most this many distinct unknown vendor event types are
#: counted by name per stream (then as ``"other"``), each name cut to 64 characters.
MAX_UNKNOWN_TYPES: Final = 50
_MAX_TYPE_NAME: Final = 64


def redact_url(url: str) -> str:
    """``url`` with the values of credential query parameters replaced by ``<redacted>``."""
    base, sep, query = url.partition("?")
    if not sep:
        return url
    fragment = ""
    if "#" in query:
        query, _, fragment = query.partition("#")
        fragment = "#" + fragment
    pairs = []
    for pair in query.split("&"):
        name, eq, _value = pair.partition("=")
        if eq and name.lower() in SECRET_PARAMS:
            pair = f"{name}={_REDACTED}"
        pairs.append(pair)
    return f"{base}?{'&'.join(pairs)}{fragment}"


class _Kind(msgspec.Struct, frozen=True, gc=False):
    type: str = ""


_decode_kind: Final = msgspec.json.Decoder(_Kind).decode


def event_type(data: str) -> str:
    """The ``type`` of a JSON vendor event, ``""`` when it has none or is not JSON.

    For an event that did not decode as the translator's own struct: a type the
    translator does not read may carry fields of other shapes (forward
    compatibility), while one it reads must decode.
    """
    try:
        return _decode_kind(data).type
    except msgspec.DecodeError:
        return ""


K = TypeVar("K")


class BlockNumbers(Generic[K]):
    """§5.2: the standard stream's content block numbers, 0, 1, 2... in the order
    blocks open, for a vendor that names its blocks its own way (an index and a
    kind, a candidate...). ``of(key)`` is the block of a vendor key, numbered on
    first use; ``new()`` numbers a block no key names (a whole tool call)."""

    __slots__ = ("_numbers", "count")

    def __init__(self) -> None:
        self._numbers: dict[K, int] = {}
        self.count = 0  # blocks numbered so far

    def of(self, key: K) -> int:
        number = self._numbers.get(key)
        if number is None:
            number = self._numbers[key] = self.new()
        return number

    def get(self, key: K) -> int | None:
        """The block of ``key`` if it has one (numbers nothing)."""
        return self._numbers.get(key)

    def new(self) -> int:
        number = self.count
        self.count += 1
        return number

    def items(self) -> list[tuple[K, int]]:
        """(key, block) of every keyed block, in the order they were numbered."""
        return sorted(self._numbers.items(), key=lambda item: item[1])

    def forget(self, numbers: Iterable[int]) -> None:
        """Unname these blocks (stopped): the next ``of`` of their keys numbers a new one."""
        gone = set(numbers)
        self._numbers = {k: n for k, n in self._numbers.items() if n not in gone}


class VendorRequest(msgspec.Struct, frozen=True, kw_only=True):
    """An HTTP request for a vendor's API, built from a standard request.

    Its ``repr`` never shows a credential: secret headers (``Authorization``,
    ``x-api-key``, ``x-goog-api-key``, ``api-key``...) and secret query
    parameters (``key=``...) print as ``<redacted>``, so a request can be
    logged or shown in a traceback.
    """

    method: str = "POST"
    url: str
    headers: dict[str, str]
    body: bytes

    def __repr__(self) -> str:
        headers = {
            k: (_REDACTED if k.lower() in SECRET_HEADERS else v) for k, v in self.headers.items()
        }
        return (
            f"VendorRequest(method={self.method!r}, url={redact_url(self.url)!r}, "
            f"headers={headers!r}, body=<{len(self.body)} bytes>)"
        )

    __str__ = __repr__


class StreamTranslator:
    """Base class: ``feed(bytes) -> list[Event]`` and ``close() -> list[Event]``.

    Subclasses implement ``_frames`` (bytes -> vendor frames; a framing problem
    raises ``ProtocolError``), ``_on_frame`` (one frame; emit with
    ``self.out += self.writer...``) and ``_on_eof`` (the body ended with the
    stream still open); optionally ``_final_frames`` (frames held back until
    the body ends) and ``_fail`` (how a failure ends the stream, e.g. with the
    usage reported so far). ``reasoning`` says whether reasoning text is
    carried (on its own block, marked ``tokenwire:reasoning``) or dropped.
    ``tool_deltas`` says whether ``_tool_delta`` sends ``tokenwire.tool_delta``
    events (the request extension ``tokenwire:tool_deltas``). ``unknown_types``
    counts the vendor event types the translator did not know (``note_unknown``):
    never silently dropped, the gateway reports them in ``/metrics`` and its log.
    """

    name: ClassVar[str]

    def __init__(
        self,
        *,
        model: str,
        request_id: str | None = None,
        reasoning: bool = False,
        created: int | None = None,
        tool_deltas: bool = False,
    ) -> None:
        self.writer = Writer(model=model, request_id=request_id, created=created)
        self.reasoning = reasoning
        self.tool_deltas = tool_deltas
        self.unknown_types: collections.Counter[str] = collections.Counter()
        #: The events of the current ``feed``/``close`` call, in order.
        self.out: list[ev.Event] = []

    @property
    def done(self) -> bool:
        """True once ``stream.end`` has been produced."""
        return self.writer.ended

    def note_unknown(self, type_name: str) -> None:
        """Count one vendor event of a type this translator does not know (and skipped).

        Bounded: past ``MAX_UNKNOWN_TYPES`` distinct names, more count as ``"other"``.
        """
        name = type_name[:_MAX_TYPE_NAME]
        counts = self.unknown_types
        if name not in counts and len(counts) >= MAX_UNKNOWN_TYPES:
            name = "other"
        counts[name] += 1

    def _tool_delta(self, index: int, id: str, name: str | None, fragment: str) -> list[ev.Event]:
        """A ``tokenwire.tool_delta`` (``Writer.tool_delta``) when asked for, else ``[]``.

        ``index`` must be the block the call's ``tool.call`` will carry, and
        ``id`` its id: reserve both at the call's first fragment.
        """
        if not self.tool_deltas:
            return []
        return self.writer.tool_delta(index, id, name, fragment)

    def feed(self, data: bytes) -> list[ev.Event]:
        """Translate the next bytes of the vendor body. Never raises."""
        if self.writer.ended:
            return []
        out: list[ev.Event] = []
        self.out = out
        self._run(self._split(self._frames, data))
        return out

    def fail(self, code: str, message: str) -> list[ev.Event]:
        """End the stream for a failure outside the body (a reset, a timeout): ``error``,
        the usage known so far (the vendor's own counts, docs/extensions.md), ``stream.end``."""
        if self.writer.ended:
            return []
        out: list[ev.Event] = []
        self.out = out
        self._fail(code, message)
        return out

    def close(self) -> list[ev.Event]:
        """End of the vendor body. A body without its end marker is an error."""
        if self.writer.ended:
            return []
        out: list[ev.Event] = []
        self.out = out
        self._run(self._split(lambda _: self._final_frames(), b""))
        if not self.writer.ended:
            try:
                self._on_eof()
            except ProtocolError as exc:
                self._fail(exc.code, exc.message)
            except Exception as exc:  # a translator bug must still end the stream cleanly
                self._fail("internal_error", f"translation failed: {exc!r}")
        return out

    def _split(self, frames_of: Callable[[bytes], Iterable[Any]], data: bytes) -> Iterable[Any]:
        """``frames_of(data)``; none when splitting ended the stream (an eager split's
        framing error: a lazy one's is caught by ``_run``)."""
        try:
            return frames_of(data)
        except ProtocolError as exc:
            self._fail(exc.code, exc.message)
        except Exception as exc:
            self._fail("internal_error", f"translation failed: {exc!r}")
        return ()

    def _run(self, frames: Iterable[Any]) -> None:
        # The one batch loop. Exceptions are caught per frame, so one bad
        # vendor event cannot lose the events already translated from the chunk.
        writer = self.writer
        on_frame = self._on_frame
        try:
            for frame in frames:
                try:
                    on_frame(frame)
                except ProtocolError as exc:
                    self._fail(exc.code, exc.message)
                except Exception as exc:  # a translator bug must still end the stream cleanly
                    self._fail("internal_error", f"translation failed: {exc!r}")
                if writer.ended:
                    break
        except ProtocolError as exc:  # the framing itself (raised by a lazy split)
            self._fail(exc.code, exc.message)
        except Exception as exc:
            self._fail("internal_error", f"translation failed: {exc!r}")

    def _frames(self, data: bytes) -> Iterable[Any]:
        """The complete vendor frames in ``data`` (buffering a partial one)."""
        raise NotImplementedError

    def _final_frames(self) -> Iterable[Any]:
        """The frames still buffered when the body ends (none by default)."""
        return ()

    def _on_frame(self, frame: Any) -> None:
        """Translate one vendor frame, appending its events to ``self.out``."""
        raise NotImplementedError

    def _on_eof(self) -> None:
        """The body ended before the vendor's end marker: never a clean finish."""
        self._fail("internal_error", f"{self.name} stream ended before its end marker (truncated)")

    def _fail(self, code: str, message: str) -> None:
        """End the stream: ``error`` (unless one was sent) and ``stream.end``."""
        self.out += self.writer.fail(code, message)


class SSETranslator(StreamTranslator):
    """A translator for a vendor that streams SSE: one ``_on_frame`` per SSE message."""

    max_event_bytes: ClassVar[int] = 8 << 20

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._decoder = sse.Decoder(max_event_bytes=self.max_event_bytes)

    def _frames(self, data: bytes) -> Iterable[sse.Message]:
        try:
            return self._decoder.feed(data)
        except FramingError as exc:
            raise FramingError(f"upstream framing: {exc.message}") from None

    def _final_frames(self) -> Iterable[sse.Message]:
        try:
            return self._decoder.close()
        except FramingError as exc:
            raise FramingError(f"upstream framing: {exc.message}") from None

    def _on_frame(self, frame: sse.Message) -> None:
        raise NotImplementedError
