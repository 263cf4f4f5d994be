"""Same-vendor passthrough (issue 23 item 4): the vendor's request and stream, untouched.

When a vendor route's body (``/v1/messages``, ``/v1/responses``,
``/v1/chat/completions``) is for a model whose every deployment and fallback is
an ``http-sse`` upstream of that same vendor format, the ingress makes an
``Offer`` (``FormatIngress.parse``) and the upstream's ``HTTPProvider`` takes it:

- **request**: the client's body bytes go upstream as they came, with only
  ``model`` changed to the upstream's name (``rename_model``; nothing is
  re-encoded). Server tools, ``container``, ``mcp_servers``, context management
  and follow-up items of any type travel, including types added after today.
  The client's ``anthropic-beta`` / ``anthropic-version`` / ``openai-beta``
  headers go with it (``ForwardHeaders``).
- **response**: the upstream's stream bytes reach the client unchanged
  (``Encoder`` sends them instead of the vendor encoder's output). The same
  chunks are fed to the vendor's translator, as when translating, so the
  standard events still drive usage, keys and limits, metrics, OpenTelemetry,
  the request log and (a client that asks for the standard) resumable streams.
  An upstream error status reaches the client with the upstream's own status
  and body (``Encoder.head``, the server's one hook). A stream the upstream
  breaks mid-way ends with an error in the vendor's own shape
  (``error_frame``), never a hung connection.
- the standard ``Request`` the rest of the gateway sees is parsed from the body
  with what the standard does not model left out (``lenient``); only the
  upstream ever sees the body itself.

The order of events per chunk is what makes it cost no more than translating:
the chunk is kept (``Offer.push``), the translator parses it, and the first
event the chunk produces carries the chunk's complete SSE events out
(``Offer.take``); the vendor encoder is never run (bench/passthrough.py).

The request side (``Routes``, ``rename_model``, ``lenient``) is
``passthrough_request``; this module is the stream side and the provider's path.

Across vendors the ingress translates, and what the standard does not carry is
adapted by one table (``translate.adapt``): mapped, dropped or refused, every
map and drop reported.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextvars import ContextVar
from typing import Any, Final, cast

import msgspec

from ... import events as ev
from ...request import Request
from ..upstream import UpstreamError
from .passthrough_request import (
    FORMATS,
    Routes,
    eligible,
    lenient,
    rename_model,
)

#: The ``http.HTTPProvider`` a passthrough runs in (``http`` imports this module,
#: so the class is not imported back: no circle).
HTTPProvider = Any

__all__ = [
    "FORMATS",
    "Encoder",
    "ForwardHeaders",
    "Offer",
    "Routes",
    "clear",
    "current",
    "eligible",
    "error_frame",
    "generate",
    "lenient",
    "rename_model",
]

#: Client request headers that are part of the vendor's protocol, per format.
_FORWARDED: Final[Mapping[str, tuple[bytes, ...]]] = {
    "anthropic": (b"anthropic-beta", b"anthropic-version"),
    "openai-responses": (b"openai-beta",),
    "openai": (b"openai-beta",),
}

#: Upstream error-answer headers the client gets with the upstream's status.
_ERROR_HEADERS: Final = ("retry-after", "x-should-retry", "request-id", "x-request-id")

_decode = msgspec.json.decode
_encode = msgspec.json.encode

_OFFER: ContextVar[Offer | None] = ContextVar("tokenwire_passthrough_offer", default=None)
_HEADERS: ContextVar[Iterable[tuple[bytes, bytes]]] = ContextVar(
    "tokenwire_passthrough_headers", default=()
)


class ForwardHeaders:
    """An ASGI app that hands the request's headers to ``Offer`` (what is forwarded)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        token = _HEADERS.set(scope.get("headers", ()))
        try:
            await self.app(scope, receive, send)
        finally:
            _HEADERS.reset(token)


# --- the offer: one request's body and stream -----------------------------------------


class Offer:
    """One passthrough request: its body, and the upstream's bytes on their way out.

    Made by the ingress (``make``), taken by the ``HTTPProvider`` of the same
    format. ``engaged`` says the client reads the vendor stream (the encoder has
    run): only then are the upstream's bytes kept. The provider sets ``covered``
    while it yields events parsed from those bytes, and ``closed`` once they hold
    the vendor stream's end (its end marker, its error, an error body): an error
    event outside that is the gateway's own, written in the vendor's shape.
    """

    __slots__ = (
        "format",
        "raw",
        "obj",
        "headers",
        "engaged",
        "taken",
        "covered",
        "closed",
        "whole",
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
        self.engaged = False
        self.taken = False
        self.covered = False
        self.closed = False
        self.whole = False  # the pending bytes go out whole (an error body, the end)
        self.head: tuple[int, list[tuple[bytes, bytes]]] | None = None
        self.frames = 0  # SSE events passed so far (Responses numbers its events)
        self.counting = fmt == "openai-responses"
        self.fresh = False  # bytes pushed since the last take
        self._pending = b""

    @classmethod
    def make(cls, fmt: str, raw: bytes, obj: dict[str, Any]) -> Offer:
        """An offer for this request, made current for its provider."""
        wanted = _FORWARDED.get(fmt, ())
        headers = {
            name.decode("latin-1"): value.decode("latin-1")
            for name, value in _HEADERS.get()
            if name in wanted
        }
        offer = cls(fmt, raw, obj, headers)
        _OFFER.set(offer)
        return offer

    def body_for(self, upstream_model: str) -> bytes:
        """The body to send upstream: the client's, ``model`` renamed."""
        return rename_model(self.raw, self.obj, upstream_model)

    def reset(self) -> None:
        """A new attempt (routing retries): forget the previous one's bytes."""
        self.taken = self.engaged
        self.covered = self.closed = self.whole = False
        self.head = None
        self.frames = 0
        self.fresh = False
        self._pending = b""

    def discard(self) -> None:
        """Forget the bytes not sent yet (the rest of an event the upstream cut)."""
        self._pending = b""
        self.fresh = False

    def push(self, data: bytes) -> None:
        if self.taken:
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


def current(fmt: str) -> Offer | None:
    """The offer of the request being served, when it is for format ``fmt``."""
    offer = _OFFER.get()
    return offer if offer is not None and offer.format == fmt else None


def clear() -> None:
    """No offer for the request being parsed (it is translated)."""
    _OFFER.set(None)


# --- the vendor's own error shape, for the errors the gateway adds ---------------------


def error_frame(fmt: str, event: ev.ErrorEvent, seq: int = 0) -> bytes:
    """The in-stream error the vendor itself sends, for an error the gateway adds
    (the upstream cut mid-stream, a timeout): the SDK raises it as the vendor's."""
    from ...translate.openai import ERROR_TYPES as OPENAI_ERRORS

    if fmt == "anthropic":
        from ...translate.anthropic import ERROR_TYPES

        error = {"type": ERROR_TYPES.get(event.code, "api_error"), "message": event.message}
        return b"event: error\ndata: %s\n\n" % _encode({"type": "error", "error": error})
    etype, code = OPENAI_ERRORS.get(event.code, ("server_error", event.code))
    if fmt == "openai-responses":
        payload = {
            "type": "error",
            "sequence_number": seq,
            "code": code,
            "message": event.message,
            "param": None,
        }
        return b"event: error\ndata: %s\n\n" % _encode(payload)
    err = {"message": event.message, "type": etype, "param": None, "code": code}
    return b"data: %s\n\n" % _encode({"error": err})


class Encoder:
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
        if offer.taken:
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
            if cls is ev.ErrorEvent and not offer.covered and not offer.closed:
                # An error the gateway adds (a cut, a timeout): in the vendor's shape,
                # after the last complete event (half an event is never sent).
                offer.closed = True
                offer.discard()
                data += error_frame(offer.format, cast(ev.ErrorEvent, event), offer.frames)
            elif cls is ev.StreamEnd:
                offer.whole = True
                data += offer.take()
            return data
        if not offer.engaged:
            offer.engaged = True
            if event.__class__ is ev.StreamStart:
                self._held = event
                return b""
        held, self._held = self._held, None
        vendor = self.vendor
        return (vendor(held) if held is not None else b"") + vendor(event)

    async def head(
        self, outbox: Any, loop: Any, headers: list[tuple[bytes, bytes]]
    ) -> tuple[int, list[tuple[bytes, bytes]]]:
        """The response's status and headers (``server.StreamEndpoint``'s hook): an
        upstream's error status and body as it sent them, else the stream's 200.
        Waits for the first bytes out (or the stream's end) when the offer was taken."""
        if self.offer.taken:
            waiter = outbox.waiter(loop)
            if waiter is not None:
                await waiter
            if self.offer.head is not None:
                return self.offer.head
        return 200, headers


# --- the provider side ----------------------------------------------------------------


async def generate(
    provider: HTTPProvider, request: Request, offer: Offer
) -> AsyncIterator[ev.Event]:
    """``HTTPProvider.generate`` for a request that passes through (see module doc)."""
    from ._wire import DRAIN_BYTES as _DRAIN_BYTES
    from ._wire import DRAIN_S as _DRAIN_S
    from ._wire import IDENTITY as _IDENTITY
    from ._wire import MAX_ERROR_BODY
    from ._wire import report_unknown as _report_unknown
    from ._wire import trace_headers as _trace_headers

    fmt = provider.format
    offer.reset()
    # URL and credentials as the format builds them; the body is the client's.
    built = fmt.build_request(request, **provider._options())
    headers = {**built.headers, **offer.headers, **_IDENTITY, **_trace_headers()}
    body = offer.body_for(provider.upstream_model or request.model)
    reasoning = provider.reasoning or fmt.wants_reasoning(request)
    translator = fmt.new_translator(
        model=request.model, request_id=request.request_id, reasoning=reasoning
    )
    translator.tool_deltas = request.extension("tokenwire:tool_deltas") is True
    feed, push = translator.feed, offer.push

    def error_answer(status: int, data: bytes, header: Callable[[str], str | None]) -> ev.Event:
        # The upstream's status and body, as it sent them (Encoder.head).
        out = [(b"content-type", (header("content-type") or "application/json").encode())]
        out += [(n.encode(), v.encode()) for n in _ERROR_HEADERS if (v := header(n)) is not None]
        offer.head = (status, out)
        push(data)
        offer.whole = offer.closed = offer.covered = True
        code, message = fmt.http_error(status, data)
        return ev.ErrorEvent(v=ev.VERSION, seq=0, code=code, message=message)

    try:
        pool = provider.pool
        if pool is None:
            async for event in _over_httpx(provider, built.url, headers, body, translator, offer):
                yield event
            return
        try:
            async with pool.stream(
                built.method,
                built.url,
                headers,
                body,
                read_timeout=provider.timeout_s,
                connect_timeout=provider.connect_timeout_s,
                pool_timeout=provider.connect_timeout_s,
            ) as response:
                if response.status >= 300:
                    data = await response.read_bounded(MAX_ERROR_BODY)
                    yield error_answer(response.status, data, response.header)
                    return
                encoding = response.header("content-encoding")
                if encoding not in (None, "identity"):
                    message = (
                        "upstream connection failed (RemoteProtocolError: a "
                        f"{encoding[:20]!r} body, though identity was asked for)"
                    )
                    for event in translator.fail("internal_error", message):
                        yield event
                    return
                read = response.read
                # Every event yielded in this loop is parsed from the bytes pushed.
                offer.covered = True
                try:
                    while pieces := await read():
                        data = pieces[0] if len(pieces) == 1 else b"".join(pieces)
                        push(data)
                        for event in feed(data):
                            yield event
                finally:
                    offer.covered = False
                    if translator.done:
                        offer.closed = True  # the upstream's own end marker is in
                        await response.drain(_DRAIN_BYTES, _DRAIN_S)
            for event in translator.close():
                yield event
        except UpstreamError as exc:
            offer.covered = False
            if exc.timeout:
                message = f"the upstream did not answer in time ({exc.phase} timeout)"
                for event in translator.fail("overloaded", message):
                    yield event
            else:
                message = f"upstream connection failed ({exc.reason})"
                for event in translator.fail("internal_error", message):
                    yield event
        except ValueError as exc:
            message = f"upstream request not sent ({exc})"
            for event in translator.fail("internal_error", message):
                yield event
    finally:
        offer.covered = False
        _report_unknown(provider.vendor, request, translator)


async def _over_httpx(
    provider: HTTPProvider,
    url: str,
    headers: dict[str, str],
    body: bytes,
    translator: Any,
    offer: Offer,
) -> AsyncIterator[ev.Event]:
    """The ``http = "2"`` path (httpx), as ``HTTPProvider._over_httpx``."""
    import httpx

    from ._wire import MAX_ERROR_BODY
    from ._wire import finish_body as _finish_body
    from ._wire import read_bounded as _read_bounded

    assert provider.client is not None
    timeout = provider.timeout or httpx.Timeout(
        provider.timeout_s, connect=provider.connect_timeout_s, pool=provider.connect_timeout_s
    )
    fmt = provider.format
    try:
        async with provider.client.stream(
            "POST", url, headers=headers, content=body, timeout=timeout
        ) as response:
            if response.status_code >= 300:
                data = await _read_bounded(response, MAX_ERROR_BODY)
                out = [
                    (
                        b"content-type",
                        response.headers.get("content-type", "application/json").encode(),
                    )
                ]
                out += [
                    (n.encode(), response.headers[n].encode())
                    for n in _ERROR_HEADERS
                    if n in response.headers
                ]
                offer.head = (response.status_code, out)
                offer.push(data)
                offer.whole = offer.closed = offer.covered = True
                code, message = fmt.http_error(response.status_code, data)
                yield ev.ErrorEvent(v=ev.VERSION, seq=0, code=code, message=message)
                return
            compressed = "content-encoding" in response.headers
            chunks = response.aiter_bytes() if compressed else response.aiter_raw()
            feed, push = translator.feed, offer.push
            offer.covered = True
            try:
                async for data in chunks:
                    push(data)
                    for event in feed(data):
                        yield event
            finally:
                offer.covered = False
                if translator.done:
                    offer.closed = True
                if translator.done:
                    await _finish_body(chunks)
        for event in translator.close():
            yield event
    except httpx.TimeoutException as exc:
        phase = type(exc).__name__.removesuffix("Timeout").lower() or "request"
        for event in translator.fail(
            "overloaded", f"the upstream did not answer in time ({phase} timeout)"
        ):
            yield event
    except httpx.HTTPError as exc:
        for event in translator.fail(
            "internal_error", f"upstream connection failed ({type(exc).__name__})"
        ):
            yield event
