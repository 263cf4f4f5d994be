"""How a vendor route answers: a whole JSON object, or a stream whose head waits.

``tokenwire.server`` sends a ``HeldAnswer``'s response head only once the
answer decides it:

- ``WholeAnswer``: a non-streaming request. The events feed the vendor's
  aggregator (``translate/<vendor>/aggregate.py``); at ``stream.end`` its
  result is the JSON body, with its status (200, or the vendor's error
  status and body when the stream failed).
- ``HeldStream``: a streaming request. ``stream.start`` is held; the first
  event after it decides: an ``error`` (the upstream failed before the first
  token) is answered with the upstream's status and the vendor's error body,
  not 200 and an in-stream error; anything else sends the held bytes and the
  stream goes on as before, one attribute test per event after that.
- ``ChunkArray``: Gemini's ``:streamGenerateContent`` without ``alt=sse``,
  a JSON array of the chunks, sent whole.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, cast

import msgspec

from .. import events as ev
from .. import sse
from ..server import SSE_HEADERS, Encode, HeldAnswer
from ..translate._aggregate import Aggregator
from ..translate.adapt.signatures import Minter

__all__ = [
    "ChunkArray",
    "HeldStream",
    "WholeAnswer",
    "json_head",
    "minted",
    "minted_aggregate",
    "with_headers",
]

_encode = msgspec.json.Encoder().encode
_JSON: Final = (b"content-type", b"application/json")


def json_head(status: int, body: bytes) -> tuple[int, list[tuple[bytes, bytes]]]:
    """The head of a whole JSON answer."""
    return status, [_JSON, (b"content-length", str(len(body)).encode())]


Headers = list[tuple[bytes, bytes]]


class WithHeaders:
    """An encoder whose response head carries ``headers`` too (the server's ``head`` hook)."""

    __slots__ = ("encode", "headers")

    def __init__(self, encode: Encode, headers: Headers) -> None:
        self.encode = encode
        self.headers = headers

    def __call__(self, event: ev.Event) -> bytes:
        return self.encode(event)

    async def head(self, outbox: Any, loop: Any, headers: Headers) -> tuple[int, Headers]:
        return 200, [*headers, *self.headers]


def with_headers(encode: Encode, headers: Headers) -> Encode:
    """``encode``, its response head carrying ``headers`` (``encode`` itself when none)."""
    return WithHeaders(encode, headers) if headers else encode


def minted(encode: Encode, minter: Minter) -> Encode:
    """``encode`` fed through ``minter`` (another vendor's reasoning seals, re-sealed)."""

    def encode_minted(event: ev.Event) -> bytes:
        return b"".join([encode(e) for e in minter.feed(event)])

    return encode_minted


class _MintedAggregator:
    __slots__ = ("inner", "minter")

    def __init__(self, inner: Aggregator, minter: Minter) -> None:
        self.inner = inner
        self.minter = minter

    def feed(self, event: ev.Event) -> None:
        for e in self.minter.feed(event):
            self.inner.feed(e)

    def result(self) -> tuple[int, dict[str, Any]]:
        return self.inner.result()


def minted_aggregate(
    aggregate: Callable[[dict[str, Any], Any], Aggregator], minter: Minter
) -> Callable[[dict[str, Any], Any], Aggregator]:
    """``aggregate`` whose aggregators are fed through ``minter``."""

    def build(obj: dict[str, Any], request: Any) -> Aggregator:
        return cast(Aggregator, _MintedAggregator(aggregate(obj, request), minter))

    return build


class WholeAnswer(HeldAnswer):
    """A non-streaming answer: the aggregator's object, sent at ``stream.end``."""

    __slots__ = ("aggregator", "extra_headers")

    def __init__(self, aggregator: Aggregator) -> None:
        super().__init__()
        self.aggregator = aggregator
        #: Headers the answer's head carries besides its own (``tokenwire-adapted``).
        self.extra_headers: Headers = []

    def __call__(self, event: ev.Event) -> bytes:
        if self.head is not None:
            return b""
        self.aggregator.feed(event)
        if event.__class__ is not ev.StreamEnd:
            return b""
        status, obj = self.aggregator.result()
        body = _encode(obj)
        self.head = _with(json_head(status, body), self.extra_headers)
        return body


def _with(head: tuple[int, Headers], extra: Headers) -> tuple[int, Headers]:
    return (head[0], [*head[1], *extra]) if extra else head


class HeldStream(HeldAnswer):
    """A vendor stream whose head waits for the first event after ``stream.start``."""

    __slots__ = ("encode", "aggregator", "held", "failed", "extra_headers")

    def __init__(self, encode: Encode, aggregator: Callable[[], Aggregator]) -> None:
        super().__init__()
        self.encode = encode
        self.aggregator = aggregator
        self.held: list[ev.Event] = []
        self.failed = False
        self.extra_headers: Headers = []

    def __call__(self, event: ev.Event) -> bytes:
        if self.head is not None:
            return b"" if self.failed else self.encode(event)
        if event.__class__ is ev.StreamStart:
            self.held.append(event)
            return b""
        if event.__class__ is ev.ErrorEvent:
            # Nothing was generated: the client gets the failure's own status.
            whole = self.aggregator()
            for earlier in (*self.held, event, ev.StreamEnd(v=ev.VERSION, seq=0)):
                whole.feed(earlier)
            status, obj = whole.result()
            body = _encode(obj)
            self.failed = True
            self.head = _with(json_head(status, body), self.extra_headers)
            return body
        # (200, None): the stream's own SSE head; extra headers need it spelt out.
        self.head = (200, [*SSE_HEADERS, *self.extra_headers] if self.extra_headers else None)
        self.keepalive = True
        self.after = self.encode  # the server encodes with it directly from now on
        encode = self.encode
        out = b"".join([encode(held) for held in self.held])
        self.held = []
        return out + encode(event)


class ChunkArray(HeldAnswer):
    """Gemini's JSON-array stream form (no ``alt=sse``): the SSE chunks, as one array."""

    __slots__ = ("encode", "decoder", "chunks", "extra_headers")

    def __init__(self, encode: Encode) -> None:
        super().__init__()
        self.encode = encode
        self.decoder = sse.Decoder()
        self.chunks: list[Any] = []
        self.extra_headers: Headers = []

    def __call__(self, event: ev.Event) -> bytes:
        if self.head is not None:
            return b""
        data = self.encode(event)
        if data:
            for message in self.decoder.feed(data):
                self.chunks.append(msgspec.Raw(message.data.encode()))
        if event.__class__ is not ev.StreamEnd:
            return b""
        body = _encode(self.chunks)
        self.head = _with(json_head(200, body), self.extra_headers)
        return body
