"""Same-vendor passthrough: the vendor's request and stream, untouched.

When a vendor route's body (``/v1/messages``, ``/v1/responses``,
``/v1/chat/completions``) is for a model whose every deployment and fallback is
an ``http-sse`` upstream of that same vendor format, the ingress makes an
``Offer``, left on the request's ``Exchange`` (``FormatIngress.parse``), and the
upstream's ``HTTPProvider`` takes it there:

- **request**: the client's body bytes go upstream as they came, with only
  ``model`` changed to the upstream's name (``rename_model``; nothing is
  re-encoded). Server tools, ``container``, ``mcp_servers``, context management
  and follow-up items of any type travel, including types added after today.
  The client's ``anthropic-beta`` / ``anthropic-version`` / ``openai-beta``
  headers go with it (``Exchange.forwarded``).
- **response**: the upstream's stream bytes reach the client unchanged
  (``Encoder`` sends them instead of the vendor encoder's output). The same
  chunks are fed to the vendor's translator, as when translating, so the
  standard events still drive usage, keys and limits, metrics, OpenTelemetry,
  the request log and (a client that asks for the standard) resumable streams.
  An upstream error status reaches the client with the upstream's own status
  and body (``Encoder.head``, the server's ``HeadedEncode``). A stream the
  upstream breaks mid-way ends with an error in the vendor's own shape (the
  format's ``error_frame``), never a hung connection.
- the standard ``Request`` the rest of the gateway sees is parsed from the body
  with what the standard does not model left out (``lenient``); only the
  upstream ever sees the body itself.

The order of events per chunk is what makes it cost no more than translating:
the chunk is kept (``Offer.push``), the translator parses it, and the first
event the chunk produces carries the chunk's complete SSE events out
(``Offer.take``); the vendor encoder is never run (bench/passthrough.py).

The request side (``Routes``, ``rename_model``, ``lenient``) is
``passthrough_request``; this module is the stream side. The provider's path is
``http.HTTPProvider.serve``'s one loop, which the offer taps.

An offer's life is a state table (``TRANSITIONS``, as h11's ``_state.py``
keeps its): each side's step is an input, and what the encoder and the
provider ask of it (``taken``, ``covered``, ``closed``, ``whole``) is read
off the state.

Across vendors the ingress translates, and what the standard does not carry is
adapted by one table (``translate.adapt``): mapped, dropped or refused, every
map and drop reported.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable, Mapping
from typing import Any, Final, cast

from ... import events as ev
from ... import translate
from ...server import Exchange, HeadedEncode
from .passthrough_request import (
    FORMATS,
    Routes,
    eligible,
    lenient,
    rename_model,
)

__all__ = [
    "FORMATS",
    "TRANSITIONS",
    "Encoder",
    "Offer",
    "OfferState",
    "Routes",
    "eligible",
    "lenient",
    "rename_model",
]

#: Client request headers that are part of the vendor's protocol, per format.
_FORWARDED: Final[Mapping[str, tuple[bytes, ...]]] = {
    "anthropic": (b"anthropic-beta", b"anthropic-version"),
    "openai-responses": (b"openai-beta",),
    "openai": (b"openai-beta",),
}

#: Formats whose clients' own ``x-`` headers (SDK and agent metadata such as
#: ``x-stainless-*``, ``x-app``, ``x-goog-api-client``) reach a same-vendor upstream,
#: as they would reach it directly. Across vendors they mean nothing and are not sent.
_FORWARDS_X: Final = frozenset({"anthropic", "openai-responses", "openai", "gemini"})
#: ``x-`` headers never forwarded: the client's credentials (the upstream gets the
#: gateway's own) and what proxies on the way say about the client.
_NOT_FORWARDED: Final = frozenset({b"x-api-key", b"x-goog-api-key", b"x-real-ip"})
_NOT_FORWARDED_PREFIXES: Final = (b"x-forwarded-", b"x-tokenwire-")

#: Upstream error-answer headers the client gets with the upstream's status.
_ERROR_HEADERS: Final = ("retry-after", "x-should-retry", "request-id", "x-request-id")


# --- the offer's states ----------------------------------------------------------------


def _forwarded_x(name: bytes) -> bool:
    """Whether a client's header is an ``x-`` header a same-vendor upstream gets."""
    return (
        name.startswith(b"x-")
        and name not in _NOT_FORWARDED
        and not name.startswith(_NOT_FORWARDED_PREFIXES)
    )


class OfferState(enum.Enum):
    """Where one passthrough request is (see ``TRANSITIONS``)."""

    #: Made by the ingress; the client's encoder has not run (it may never: a
    #: client that asks for the standard is answered in it).
    OFFERED = "offered"
    #: The encoder ran: the client reads the vendor stream, once a provider takes it.
    ENGAGED = "engaged"
    #: A provider's attempt took it: the upstream's bytes are kept for the client.
    TAKEN = "taken"
    #: The provider yields events parsed from the bytes it pushed.
    READING = "reading"
    #: The bytes hold the vendor stream's end (its end marker, or the error the
    #: gateway wrote in the vendor's shape): nothing more is added.
    ENDED = "ended"
    #: The upstream answered an error status: its body is the answer, sent whole.
    ANSWERED = "answered"
    #: The standard stream ended: what is pending goes out whole.
    FLUSHED = "flushed"


S = OfferState
#: Before a provider takes it, an attempt changes nothing.
_NOT_TAKEN: Final = (S.OFFERED,)
_TAKEN: Final = (S.TAKEN, S.READING, S.ENDED, S.ANSWERED, S.FLUSHED)

#: ``(state, input) -> next state``; an input not in the table from a state is a
#: bug of the gateway's (``Offer.step`` raises).
TRANSITIONS: Final[Mapping[tuple[OfferState, str], OfferState]] = {
    # the encoder's first call (stream.start): the client reads the vendor stream
    (S.OFFERED, "engage"): S.ENGAGED,
    # a provider's attempt (routing may retry: each attempt starts afresh)
    (S.OFFERED, "attempt"): S.OFFERED,
    **{(state, "attempt"): S.TAKEN for state in (S.ENGAGED, *_TAKEN)},
    # the body: read, then stopped with or without the vendor's own end
    (S.TAKEN, "read"): S.READING,
    (S.READING, "stop"): S.TAKEN,
    (S.READING, "end"): S.ENDED,
    # the upstream's error status and body, as it sent them
    (S.TAKEN, "answer"): S.ANSWERED,
    # an error the gateway adds (a cut, a timeout), written in the vendor's shape
    (S.TAKEN, "own_error"): S.ENDED,
    # stream.end: the rest goes out whole
    **{(state, "flush"): S.FLUSHED for state in _TAKEN},
}


class Offer:
    """One passthrough request: its body, and the upstream's bytes on their way out.

    Made by the ingress (``make``), taken by the ``HTTPProvider`` of the same
    format. Its ``state`` moves by ``TRANSITIONS``; ``fresh`` says bytes were
    pushed since the last ``take`` (buffer bookkeeping, not a state).
    """

    __slots__ = (
        "format",
        "raw",
        "obj",
        "headers",
        "state",
        "head",
        "frames",
        "counting",
        "fresh",
        "_pending",
    )

    def __init__(self, fmt: str, raw: bytes, obj: dict[str, Any], headers: dict[str, str]) -> None:
        self.format = fmt
        self.raw = raw
        self.obj = obj
        self.headers = headers
        self.state = OfferState.OFFERED
        self.head: tuple[int, list[tuple[bytes, bytes]]] | None = None
        self.frames = 0  # SSE events passed so far (Responses numbers its events)
        self.counting = fmt == "openai-responses"
        self.fresh = False  # bytes pushed since the last take
        self._pending = b""

    @classmethod
    def make(cls, fmt: str, raw: bytes, obj: dict[str, Any], exchange: Exchange) -> Offer:
        """An offer for this request, with the vendor headers it forwards (and, to a
        format in ``_FORWARDS_X``, the client's own ``x-`` headers)."""
        headers = exchange.forwarded(_FORWARDED.get(fmt, ()))
        if fmt in _FORWARDS_X:
            headers |= exchange.forwarded(n for n, _ in exchange.headers if _forwarded_x(n))
        return cls(fmt, raw, obj, headers)

    # -- what the state says ------------------------------------------------------------

    @property
    def taken(self) -> bool:
        """A provider took the offer, for a client that reads the vendor stream."""
        return self.state in _TAKEN

    @property
    def covered(self) -> bool:
        """The events now yielded are parsed from bytes already kept."""
        return self.state is S.READING or self.state is S.ANSWERED

    @property
    def closed(self) -> bool:
        """The kept bytes hold the vendor stream's end."""
        return self.state is S.ENDED or self.state is S.ANSWERED

    @property
    def whole(self) -> bool:
        """What is pending goes out whole (an error body, the stream's end)."""
        return self.state is S.ANSWERED or self.state is S.FLUSHED

    def step(self, event: str) -> None:
        """Move by ``TRANSITIONS``."""
        try:
            self.state = TRANSITIONS[self.state, event]
        except KeyError:
            raise RuntimeError(f"passthrough offer: {event!r} in state {self.state.name}") from None

    # -- the provider's side -----------------------------------------------------------

    def body_for(self, upstream_model: str) -> bytes:
        """The body to send upstream: the client's, ``model`` renamed."""
        return rename_model(self.raw, self.obj, upstream_model)

    def attempt(self) -> None:
        """A provider's attempt starts: forget a previous attempt's bytes."""
        self.step("attempt")
        self.head = None
        self.frames = 0
        self.discard()

    def reading(self) -> None:
        """The upstream's body is read: events parsed from it follow."""
        if self.taken:
            self.step("read")

    def stopped(self, *, ended: bool) -> None:
        """Reading stopped; ``ended``: the vendor stream's own end is in."""
        if self.state is S.READING:
            self.step("end" if ended else "stop")

    def answer(self, status: int, data: bytes, header: Callable[[str], str | None]) -> None:
        """The upstream answered an error status: its status, headers and body, as sent."""
        if not self.taken:
            return
        out = [(b"content-type", (header("content-type") or "application/json").encode())]
        out += [(n.encode(), v.encode()) for n in _ERROR_HEADERS if (v := header(n)) is not None]
        self.head = (status, out)
        self.push(data)
        self.step("answer")

    def discard(self) -> None:
        """Forget the bytes not sent yet (the rest of an event the upstream cut)."""
        self._pending = b""
        self.fresh = False

    def push(self, data: bytes) -> None:
        if self.state in _TAKEN:
            self._pending += data
            self.fresh = True

    def take(self) -> bytes:
        """The complete SSE events received and not yet sent (everything when ``whole``)."""
        self.fresh = False
        data = self._pending
        if self.whole or data.endswith(b"\n\n"):
            # The usual case: the upstream flushed whole events (an empty line
            # after a line end is an event boundary whatever the line ends).
            self._pending = b""
            if self.counting:
                self.frames += data.count(b"\n\n")
            return data
        if not data:
            return b""
        # Up to the last event boundary: a keep-alive comment the server adds
        # while the stream is idle must not land inside a half-sent event.
        end = data.rfind(b"\n\n") + 2
        if b"\r" in data:  # CRLF or CR line ends (§ sse-parsing-rules)
            end = max(end, data.rfind(b"\r\n\r\n") + 4, data.rfind(b"\r\r") + 2)
        if end < 2 or (end == 2 and not data.startswith((b"\n\n", b"\r\r"))):
            return b""
        if end < len(data):
            self._pending = data[end:]
            data = data[:end]
        else:
            self._pending = b""
        if self.counting:
            self.frames += data.count(b"\n\n") or data.count(b"\r\r")
        return data


def _error_frame(fmt: str, event: ev.ErrorEvent, seq: int) -> bytes:
    ingress = translate.get(fmt).ingress
    assert ingress is not None and ingress.error_frame is not None  # each of FORMATS has one
    return ingress.error_frame(event.code, event.message, seq)


class Encoder(HeadedEncode):
    """The encoder of a passthrough request: the upstream's bytes, when its provider
    took the offer; the vendor encoder's output (as without passthrough) when none did.

    ``stream.start`` is held until the first event after it says which: a
    provider takes the offer when it starts, before it yields anything.
    """

    __slots__ = ("offer", "vendor", "_held")

    def __init__(self, offer: Offer, vendor: Callable[[ev.Event], bytes]) -> None:
        self.offer = offer
        self.vendor = vendor
        self._held: ev.Event | None = None

    def __call__(self, event: ev.Event) -> bytes:
        offer = self.offer
        state = offer.state
        if state in _TAKEN:
            # The first event of a chunk carries its events out; the others find none.
            if not offer.fresh:
                data = b""
            elif offer.counting:
                data = offer.take()
            else:
                # take()'s usual case inline: one call less per chunk.
                data = offer._pending
                if data.endswith(b"\n\n"):
                    offer._pending = b""
                    offer.fresh = False
                else:
                    data = offer.take()
            cls = event.__class__
            if cls is ev.ContentDelta:
                return data
            if cls is ev.ErrorEvent and state is S.TAKEN:
                # An error the gateway adds (a cut, a timeout): in the vendor's shape,
                # after the last complete event (half an event is never sent).
                offer.step("own_error")
                offer.discard()
                data += _error_frame(offer.format, cast(ev.ErrorEvent, event), offer.frames)
            elif cls is ev.StreamEnd:
                offer.step("flush")
                data += offer.take()
            return data
        if state is S.OFFERED:
            offer.step("engage")
            if event.__class__ is ev.StreamStart:
                self._held = event
                return b""
        held, self._held = self._held, None
        vendor = self.vendor
        return (vendor(held) if held is not None else b"") + vendor(event)

    async def head(
        self, outbox: Any, loop: asyncio.AbstractEventLoop, headers: list[tuple[bytes, bytes]]
    ) -> tuple[int, list[tuple[bytes, bytes]]]:
        """The response's status and headers: an upstream's error status and body as
        it sent them, else the stream's 200. Waits for the first bytes out (or the
        stream's end) when the offer was taken."""
        if self.offer.taken:
            waiter = outbox.waiter(loop)
            if waiter is not None:
                await waiter
            if self.offer.head is not None:
                return self.offer.head
        return 200, headers
