"""The ASGI toolkit: serve any ``generate(request)`` provider as an LLM-Stream endpoint.

A provider author writes one async generator::

    class Echo:
        async def generate(self, request: Request) -> AsyncIterator[Event]:
            yield ContentDelta(v="1.0", seq=0, index=0, role="assistant",
                               delta=Delta(text=request.messages[-1].text))

    app = StreamEndpoint(Echo())          # an ASGI app; mount it anywhere

and ``StreamEndpoint`` does the rest of the standard:

- 405 unless POST; 415 unless the Content-Type essence is
  ``application/llm-request+json`` (§7.2);
- 413 over ``max_body_bytes``, from ``Content-Length`` before reading and while
  reading otherwise, so an oversized body is never buffered whole;
- 400 for invalid JSON or an invalid envelope (§4), naming the field or byte offset;
- 404 for a model no provider serves;
- then ``text/event-stream`` with ``Cache-Control: no-cache``: every event the
  provider yields goes through a ``Writer`` (so ``seq``/``v`` are always right
  and the stream always ends with ``stream.end``), is encoded once, and every
  event already produced is flushed in one ASGI ``send``;
- a client hang-up cancels the generator (and whatever upstream call it was
  awaiting) at once; idle streams get ``: keep-alive`` comments;
- an exception or timeout in the provider becomes ``error`` + ``stream.end``
  with a §5.3.6 code, never a traceback on the wire.

A ``resumption`` hook (the gateway's resume store, docs/scaling.md) may take
a stream over: its events are recorded as they are sent, and the generation
outlives the request, so a hang-up no longer cancels it and the client can
come back for the rest (``GET /v1/streams/{request_id}``).

Every error status carries a JSON body ``{"error": {"code", "message", "path"}}``.

Hooks: ``observers`` see every request (``opened`` when a stream starts,
``closed`` when the request is done, with a ``StreamRecord``); an observer may
return a ``Tee`` from ``opened`` to see every event the stream emits. That is
the seam for metrics, logs, and a resume store.

The module needs no web framework: ``StreamEndpoint`` is a plain ASGI app.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import types
from collections.abc import AsyncIterator, Callable, Generator, Iterable, Mapping, Sequence
from typing import Final, Protocol, TypeAlias, cast, runtime_checkable

from . import binary
from . import events as ev
from . import request as rq
from ._asgi import (
    HTTP_ERROR_CODES,
    ClientDisconnected,
    HangUp,
    Receive,
    Scope,
    Send,
    classify_exception,
    frames_payload,
    media_type_essence,
    read_body,
    send_json,
    send_json_error,
    wants_standard,
)
from ._outbox import KeepAlive, Outbox
from ._suggest import did_you_mean
from .errors import InvalidRequest, RequestTooLarge, TokenwireError
from .request import Request
from .writer import Writer, estimate_tokens

__all__ = [
    "DEFAULT_KEEPALIVE_S",
    "Admission",
    "DEFAULT_MAX_BODY_BYTES",
    "Encode",
    "FRAMES",
    "FramesEncode",
    "HeldAnswer",
    "Ingress",
    "Observer",
    "Provider",
    "ProviderLookup",
    "ResumeConflict",
    "ResumeSession",
    "Resumption",
    "StreamEndpoint",
    "StreamRecord",
    "Tee",
]


#: An event encoder: one standard event -> the bytes to put on the wire.
Encode: TypeAlias = Callable[[ev.Event], bytes]

#: Default request body limit: 4 MiB, the same as ``request.parse``.
DEFAULT_MAX_BODY_BYTES: Final = 4 << 20
#: Default idle interval before an SSE comment keep-alive.
DEFAULT_KEEPALIVE_S: Final = 15.0
#: How long a cancelled provider may take to clean up before it is cancelled again.
CLEANUP_S: Final = 5.0

#: Response headers of every stream. ``no-cache`` and ``X-Accel-Buffering: no``
#: keep intermediaries (nginx in particular) from buffering the events (§3).
SSE_HEADERS: Final[list[tuple[bytes, bytes]]] = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


class FramesEncode:
    """The ``Encode`` of the binary binding (docs/binary.md): frames instead of SSE.

    A stream answered with it sends ``headers`` and ``PING`` frames as its
    keep-alive; the events, their order and their seqs are the same.
    """

    __slots__ = ("payload", "headers", "keepalive")

    def __init__(self, payload: binary.Payload) -> None:
        self.payload = payload
        media_type = f"{binary.MEDIA_TYPE}; payload={payload}; version={ev.VERSION}"
        self.headers = [(b"content-type", media_type.encode()), *SSE_HEADERS[1:]]
        self.keepalive = binary.encode_frame(binary.FrameType.PING)

    def __call__(self, event: ev.Event) -> bytes:
        return binary.encode_event(event, payload=self.payload)


#: One encoder per payload encoding, made once.
FRAMES: Final[dict[str, FramesEncode]] = {p: FramesEncode(p) for p in binary.PAYLOADS}

# --- Protocols -------------------------------------------------------------------


@runtime_checkable
class Provider(Protocol):
    """Anything that turns a request into standard events.

    ``generate`` is an async generator. It may yield any standard event with
    any ``seq`` (the server restamps them); it needs no ``stream.start`` or
    ``stream.end`` (the server adds them), and it may simply raise on failure.
    A provider may also have ``check_request(request)``, raising
    ``InvalidRequest`` for a request it will never serve: the endpoint then
    answers 400 naming the field instead of starting a stream.
    """

    def generate(self, request: Request) -> AsyncIterator[ev.Event]: ...


#: How an endpoint finds the provider for a model name (``None``: unknown model).
ProviderLookup: TypeAlias = Callable[[str], Provider | None]


class Tee(Protocol):
    """Sees every event a stream emits, in order, already stamped."""

    def write(self, events: list[ev.Event]) -> None: ...

    def close(self) -> None: ...


class Observer(Protocol):
    """Per-request hooks of a ``StreamEndpoint``.

    ``opened`` runs when a stream starts (after the request was accepted) and
    may return a ``Tee``; ``closed`` runs once for every request, streamed or
    rejected. Neither may block; exceptions they raise are swallowed.
    """

    def opened(self, record: StreamRecord) -> Tee | None: ...

    def closed(self, record: StreamRecord) -> None: ...


class ResumeConflict(TokenwireError):
    """A resumable request's ``request_id`` already names a stored stream (409)."""


class ResumeSession(Protocol):
    """One resumable stream's link to a resume store, for the generation's lifetime.

    The endpoint sends ``headers`` with the stream's answer (the gateway's
    resume token); it calls ``record`` with every event it emits (stamped, in
    order) and that event's SSE frame; ``run`` hands over the generation's task,
    which the session may cancel (explicit cancel, grace period over) after
    setting ``cancel_reason``; ``detach`` says that the client that made the
    request is gone (the generation goes on; it may be said more than once);
    ``close`` runs once when the generation is over and every event has been
    recorded.
    """

    headers: Sequence[tuple[bytes, bytes]]

    def record(self, events: list[ev.Event], frames: list[bytes]) -> None: ...

    def run(self, task: asyncio.Task[None]) -> None: ...

    def detach(self) -> None: ...

    def cancel_reason(self) -> tuple[str, str] | None: ...

    def close(self) -> None: ...


class Resumption(Protocol):
    """Decides which streams are resumable and opens their sessions."""

    async def open(
        self, request: Request, record: StreamRecord, headers: Iterable[tuple[bytes, bytes]]
    ) -> tuple[Request, ResumeSession | None]:
        """The request to serve (its ``request_id`` filled in when it is resumable)
        and its session, or ``None`` for a stream served the classic way.
        ``headers`` are the request's (a resume store may bind the stream to
        the caller's credential).

        Raises ``ResumeConflict`` when the ``request_id`` is taken, and
        ``InvalidRequest`` for a ``request_id`` a store cannot keep.
        """
        ...


class Admission(Protocol):
    """Admits a parsed request before it is routed (the gateway's keys, models, limits).

    ``admit`` sees the request as it will be served: its ``model`` is the one
    the provider lookup takes, so what it checks is what runs (one resolution
    per request, every route and body type alike). It answers a refused
    request itself (and sets ``record.status``) and returns ``False``.
    """

    async def admit(
        self, scope: Scope, request: Request, send: Send, record: StreamRecord
    ) -> bool: ...


class Ingress(Protocol):
    """A vendor request format accepted on a dual-format route (§7.3).

    ``parse`` turns the vendor body into a standard ``Request`` and an encoder
    that writes standard events back in the vendor's own stream format. It
    raises ``InvalidRequest`` (``.path`` naming the field) for a bad body.
    """

    name: str
    media_types: frozenset[str]

    def parse(self, body: bytes) -> tuple[Request, Encode]: ...


class HeldAnswer:
    """An ``Encode`` whose response head waits until the answer decides it (issue 23).

    A vendor route's whole (non-streaming) answer is known at ``stream.end``;
    a vendor stream whose upstream fails before the first token is answered
    with the upstream's status, not 200 and an error event. The endpoint
    sends the response head once ``head`` is set: ``(status, headers)``, or
    ``(200, None)`` for the stream's own SSE head. ``__call__`` returns no
    bytes before ``head`` is set. ``keepalive``: SSE comments may go out
    once the head is sent (a stream's, not a JSON body's). ``after``: the
    encoder that takes over once the head is sent, so the rest of a stream
    costs what it cost before (no extra call per event).
    """

    __slots__ = ("head", "keepalive", "after")

    def __init__(self) -> None:
        self.head: tuple[int, list[tuple[bytes, bytes]] | None] | None = None
        self.keepalive = False
        self.after: Encode | None = None

    def __call__(self, event: ev.Event) -> bytes:
        raise NotImplementedError


# --- Per-request record --------------------------------------------------------------


class StreamRecord:
    """What an endpoint saw of one request; filled in as the request goes.

    Times are ``time.perf_counter()`` values. ``events`` counts the events the
    stream produced; ``error_code`` is the HTTP error code of a rejected
    request or the §5.3.6 code of a stream's ``error`` event.
    """

    __slots__ = (
        "route",
        "format",
        "model",
        "request",
        "status",
        "error_code",
        "error_path",
        "error_message",
        "exception",
        "events",
        "started",
        "first_event",
        "ended",
        "disconnected",
    )

    def __init__(self, route: str) -> None:
        self.route = route
        self.format = "standard"
        self.model: str | None = None
        self.request: Request | None = None
        self.status = 0
        self.error_code: str | None = None
        self.error_path: str | None = None
        #: May quote the request body or user content: log it only with consent (§8.1).
        self.error_message: str | None = None
        self.exception: BaseException | None = None
        self.events = 0
        self.started = time.perf_counter()
        self.first_event: float | None = None
        self.ended: float | None = None
        self.disconnected = False

    @property
    def request_id(self) -> str | None:
        """The request's ``metadata.request_id`` (§4.6), when it was parsed."""
        return self.request.request_id if self.request is not None else None

    @property
    def duration(self) -> float | None:
        """Seconds from the request's arrival to its end."""
        return None if self.ended is None else self.ended - self.started

    @property
    def time_to_first_event(self) -> float | None:
        """Seconds from the request's arrival to the provider's first event."""
        return None if self.first_event is None else self.first_event - self.started


# --- The endpoint -------------------------------------------------------------------------

#: An accepted request: what to stream, from which provider, how to encode it.
_Accepted: TypeAlias = "tuple[Request, Provider, Encode, ResumeSession | None]"


def _lookup_for(providers: Provider | Mapping[str, Provider] | ProviderLookup) -> ProviderLookup:
    if isinstance(providers, Provider):
        single = providers
        return lambda _model: single
    if isinstance(providers, Mapping):
        return providers.get
    return providers


class StreamEndpoint:
    """An ASGI app serving ``POST`` LLM-Stream requests from one or more providers.

    ``providers`` is one ``Provider`` (serving every model name), a mapping of
    model name to provider, or a function ``model -> Provider | None``.
    ``ingress`` adds a vendor request format (§7.3): its bodies are answered
    in the vendor's stream format unless the client asks for the standard
    with ``Accept: text/event-stream; profile="llm-stream-1.0"``, and standard
    bodies (``application/llm-request+json``) are always accepted too.
    ``admission`` sees each parsed request before its provider is looked up,
    and may refuse it (the gateway's keys, models and limits: ``Admission``).
    """

    def __init__(
        self,
        providers: Provider | Mapping[str, Provider] | ProviderLookup,
        *,
        ingress: Ingress | None = None,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        max_depth: int = rq.DEFAULT_MAX_DEPTH,
        keepalive_s: float = DEFAULT_KEEPALIVE_S,
        observers: Sequence[Observer] = (),
        classify: Callable[[BaseException], tuple[str, str]] = classify_exception,
        route: str = "",
        resumption: Resumption | None = None,
        admission: Admission | None = None,
    ) -> None:
        if keepalive_s <= 0:
            raise ValueError("keepalive_s must be > 0")
        self.lookup = _lookup_for(providers)
        #: The served names, for the unknown-model error (known for a mapping only).
        self._served = providers if isinstance(providers, Mapping) else None
        self.ingress = ingress
        self.max_body_bytes = max_body_bytes
        self.max_depth = max_depth
        self.keepalive_s = keepalive_s
        self.observers = tuple(observers)
        self.classify = classify
        self.route = route
        self.resumption = resumption
        self.admission = admission
        self._keepalive: KeepAlive | None = None

    # -- ASGI entry -----------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            # Served directly by an ASGI server: nothing to start or stop.
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            raise RuntimeError(f"StreamEndpoint serves HTTP only, not {scope['type']!r}")
        record = StreamRecord(self.route or scope.get("path", ""))
        try:
            accepted = await self._handle(scope, receive, send, record)
            if accepted is not None:
                # _handle's frame (the request body with it) is gone by now:
                # an open stream keeps only what it streams from.
                await self._stream(receive, send, record, *accepted)
        finally:
            record.ended = time.perf_counter()
            for observer in self.observers:
                with contextlib.suppress(Exception):
                    observer.closed(record)

    def _served_hint(self, model: str) -> str:
        """``: did you mean "demo"? (served: ...)`` when the served names are known."""
        if self._served is None:
            return ""
        return did_you_mean(model, self._served, listing="served", quote=rq.echo)

    async def _reject(
        self,
        send: Send,
        record: StreamRecord,
        status: int,
        message: str,
        *,
        code: str | None = None,
        path: str | None = None,
        headers: Iterable[tuple[bytes, bytes]] = (),
    ) -> None:
        code = code or HTTP_ERROR_CODES.get(status, "invalid_request")
        record.status, record.error_code, record.error_path = status, code, path
        record.error_message = message
        # A vendor route answers its vendor's error shape (its SDK's exceptions),
        # unless the body was the standard's.
        error_body = getattr(self.ingress, "error_body", None)
        if error_body is not None and record.format != "standard":
            body: bytes = error_body(status, code, message, path)
            await send_json(send, status, body, headers)
            return
        await send_json_error(send, status, code, message, path, headers)

    async def _handle(
        self, scope: Scope, receive: Receive, send: Send, record: StreamRecord
    ) -> _Accepted | None:
        """Read and check the request; what to stream, or ``None`` once answered."""
        if self.ingress is not None:
            record.format = self.ingress.name  # until the body says it is the standard's
        if scope.get("method", "POST") != "POST":
            await self._reject(send, record, 405, "use POST", headers=[(b"allow", b"POST")])
            return None
        content_type = accept = length = None
        for name, value in scope.get("headers", ()):
            if name == b"content-type":
                content_type = value
            elif name == b"accept":
                accept = value
            elif name == b"content-length":
                length = value

        # §7.2: the media type selects the standard; a dual-format route also
        # takes its vendor's bodies (§7.3).
        essence = media_type_essence(content_type)
        ingress = self.ingress
        if essence == rq.MEDIA_TYPE:
            ingress = None
        elif ingress is None or essence not in ingress.media_types:
            accepted = [rq.MEDIA_TYPE, *sorted(ingress.media_types if ingress else ())]
            await self._reject(
                send,
                record,
                415,
                f"Content-Type must be {' or '.join(accepted)}, got {essence or 'none'!r} (§7.2)",
                headers=[(b"accept-post", ", ".join(accepted).encode())],
            )
            return None
        record.format = ingress.name if ingress is not None else "standard"

        try:
            content_length = int(length) if length is not None else None
        except ValueError:
            await self._reject(send, record, 400, "Content-Length is not a number")
            return None
        try:
            body = await read_body(receive, self.max_body_bytes, content_length)
            # docs/binary.md section 7: the binary binding when Accept prefers it.
            frames = frames_payload(accept)
            standard: Encode = ev.dump if frames is None else FRAMES[frames]
            if ingress is None:
                request = rq.parse(body, max_bytes=self.max_body_bytes, max_depth=self.max_depth)
                encode: Encode = standard
            else:
                request, vendor_encode = ingress.parse(body)
                wanted = frames is not None or wants_standard(accept)
                encode = standard if wanted else vendor_encode
        except ClientDisconnected:
            # The body stream broke: the client left, or sent framing the HTTP
            # server could not read. Answer anyway; if nobody listens, no harm.
            record.status, record.disconnected = 499, True
            with contextlib.suppress(Exception):
                await send_json_error(
                    send, 400, "invalid_request", "the request body ended early", "$"
                )
            return None
        except InvalidRequest as exc:
            status = 413 if isinstance(exc, RequestTooLarge) else 400
            await self._reject(send, record, status, exc.reason, path=exc.path)
            return None
        record.request, record.model = request, request.model
        admission = self.admission
        if admission is not None and not await admission.admit(scope, request, send, record):
            return None

        provider = self.lookup(request.model)
        if provider is None:
            await self._reject(
                send,
                record,
                404,
                f"unknown model {rq.echo(request.model)}{self._served_hint(request.model)}",
                code="model_not_found",
                path="model",
            )
            return None
        # A provider may refuse a request it can never serve before the stream
        # starts (the demo's token cap): a 400 naming the field, not a 200 stream.
        check = getattr(provider, "check_request", None)
        if check is not None:
            try:
                check(request)
            except InvalidRequest as exc:
                await self._reject(send, record, 400, exc.reason, path=exc.path)
                return None
        session: ResumeSession | None = None
        if self.resumption is not None and (encode is ev.dump or isinstance(encode, FramesEncode)):
            # Only a stream answered in the standard can be resumed: the resume
            # route replays standard events.
            try:
                request, session = await self.resumption.open(
                    request, record, scope.get("headers", ())
                )
            except ResumeConflict as exc:
                await self._reject(
                    send,
                    record,
                    409,
                    str(exc),
                    code="request_id_in_use",
                    path="metadata.request_id",
                )
                return None
            except InvalidRequest as exc:
                await self._reject(send, record, 400, exc.reason, path=exc.path)
                return None
            record.request = request
        return request, provider, encode, session

    # -- the stream ----------------------------------------------------------------

    def _open_tees(self, record: StreamRecord) -> Sequence[Tee]:
        tees: list[Tee] = []
        for observer in self.observers:
            with contextlib.suppress(Exception):
                tee = observer.opened(record)
                if tee is not None:
                    tees.append(tee)
        return tees or ()  # most streams have none: no list kept for them

    async def _stream(
        self,
        receive: Receive,
        send: Send,
        record: StreamRecord,
        request: Request,
        provider: Provider,
        encode: Encode,
        session: ResumeSession | None,
    ) -> None:
        """Serve one stream. Who owns its generation decides what a hang-up does:
        the request (it cancels the generation) or a resume session (it only
        detaches; the generation goes on, recorded, docs/scaling.md)."""
        record.status = 200
        # docs/extensions.md: a stream cut or failed after output still reports
        # usage, estimated (the prompt: one token per 4 characters of its text).
        writer = Writer(model=request.model, request_id=request.request_id, estimate_usage=True)
        prompt_chars = sum(len(message.text) for message in request.messages)
        writer.note_usage(input_tokens=estimate_tokens(prompt_chars), estimated=True)
        loop = asyncio.get_running_loop()
        outbox = Outbox(loop.time())
        tees = self._open_tees(record)
        owner: _Owner = (
            _RequestOwns(outbox, tees, encode)
            if session is None
            else _SessionOwns(outbox, tees, session, writer, encode)
        )
        frames = encode if isinstance(encode, FramesEncode) else None
        if frames is not None:
            outbox.keepalive = frames.keepalive
        # §5.3.1: stream.start goes out at once, "the endpoint has accepted the request".
        owner.emit(writer.start())
        producer = loop.create_task(self._produce(provider, request, writer, owner, record))
        if session is not None:
            # Done callbacks run even for a task cancelled before its first step,
            # which runs none of its own cleanup.
            producer.add_done_callback(owner.finished)
        owner.adopt(producer)
        keepalive = self._keepalive
        if keepalive is None or keepalive.loop is not loop:
            # One timer for all the endpoint's streams (per event loop).
            keepalive = self._keepalive = KeepAlive(self.keepalive_s, loop)
        held = encode if isinstance(encode, HeldAnswer) else None
        if held is None:
            keepalive.add(outbox)
        hangup: HangUp | None = None
        hung_up = True
        try:
            # The producer's first step goes first: it builds and writes the
            # upstream request, then waits for the upstream, and the response
            # start and the watcher are made while the upstream works (off the
            # first token's path). stream.start is queued already and still
            # leaves first, with the response start (§5.3.1).
            await _one_step()
            headers = [*(SSE_HEADERS if frames is None else frames.headers), *owner.headers]
            status = 200
            if held is not None:
                # The head waits for the answer: the watcher watches meanwhile.
                hangup = HangUp(receive, loop)
                while held.head is None:
                    waiter = outbox.waiter(loop)
                    if waiter is None:
                        break  # frames (so a head) or the end
                    await waiter
                status, own = held.head or (500, [(b"content-length", b"0")])
                record.status = status
                if own is not None:
                    headers = own
                if held.keepalive:
                    keepalive.add(outbox)
                if held.after is not None and isinstance(owner, _RequestOwns):
                    owner.encode = held.after  # the stream's own encoder from here on
            else:
                # The request's own task sends; one watcher task waits for the
                # hang-up and cancels the sending (as starlette's StreamingResponse
                # races ``listen_for_disconnect``, with one task less per stream).
                hangup = HangUp(receive, loop)
                head = getattr(encode, "head", None)
                if head is not None:
                    # An encoder may answer with the upstream's own status line
                    # (gateway/providers/passthrough.py: an upstream error as it was sent).
                    status, headers = await head(outbox, loop, headers)
            await send({"type": "http.response.start", "status": status, "headers": headers})
            now = loop.time
            while True:  # inline, not a coroutine of its own: one frame less per stream
                waiter = outbox.waiter(loop)
                if waiter is not None:
                    await waiter
                last = outbox.closed
                data = outbox.take()
                # Everything produced while the previous send was in flight leaves now.
                await send({"type": "http.response.body", "body": data, "more_body": not last})
                outbox.last_sent = now()
                if last:
                    break
            hung_up = False
        except asyncio.CancelledError:
            if hangup is None or not hangup.caught():
                raise  # not the hang-up's cancel: the server's (cleanup below)
        except OSError:
            pass  # the ASGI server reports a vanished client by failing send()
        finally:
            keepalive.discard(outbox)
            if hangup is not None:
                hangup.stop()
            await owner.release(producer, record, hung_up=hung_up)
            if hangup is not None:
                await hangup.stopped()
            record.events = writer.next_seq

    async def _produce(
        self,
        provider: Provider,
        request: Request,
        writer: Writer,
        owner: _Owner,
        record: StreamRecord,
    ) -> None:
        """Drive the provider; every event goes through the writer, then out.

        A deliberate cancel (``owner.cancel_reason()``: a DELETE, a grace period
        over) still ends the stream with ``error`` + ``stream.end`` for whoever
        reads it.
        """
        emit, outbox, add = owner.emit, owner.outbox, writer.add
        try:
            iterator = provider.generate(request)
            try:
                async for event in iterator:
                    cls = event.__class__
                    if cls is ev.StreamStart:
                        continue  # already sent; the server owns the stream's framing
                    first = record.first_event is None
                    if first:
                        record.first_event = time.perf_counter()
                    if cls is ev.ErrorEvent and record.error_code is None:
                        record.error_code = cast(ev.ErrorEvent, event).code
                        record.error_message = cast(ev.ErrorEvent, event).message
                    emit(add(event))
                    if writer.ended:
                        break
                    if first:
                        # The first event leaves now, not after the rest of the
                        # upstream's read (a short reply: all of it, and the
                        # provider's cleanup): the sender runs before the
                        # provider goes on. Once a stream, so later events
                        # still leave in batches.
                        await _one_step()
                    if outbox.full():
                        await outbox.drained()  # a slow client: backpressure
            finally:
                aclose = getattr(iterator, "aclose", None)
                if aclose is not None:
                    await aclose()
            if not writer.ended:
                emit(writer.end())
        except asyncio.CancelledError:
            task = asyncio.current_task()
            reason = owner.cancel_reason()
            if reason is not None:
                emit(writer.fail(*reason))
            elif task is not None and not task.cancelling() and not record.disconnected:
                # The provider raised CancelledError on its own: the client is
                # still there and still gets a complete stream.
                emit(writer.fail("internal_error", "internal error"))
            raise
        except Exception as exc:
            # §5.3.6: a failure becomes error + stream.end, never a broken stream.
            code, message = self.classify(exc)
            record.exception = exc
            if record.error_code is None and not writer.errored:
                record.error_code, record.error_message = code, message
            emit(writer.fail(code, message))
        finally:
            outbox.close()


# --- Who owns a stream's generation --------------------------------------------------------


class _Owner:
    """The part of a stream that depends on who owns its generation.

    ``emit`` is the one place every event passes through on its way out (the
    tees see stamped events, so seq can serve Last-Event-ID); ``release`` runs
    when the request is over, hung up or not.
    """

    __slots__ = ("outbox", "tees")

    headers: Sequence[tuple[bytes, bytes]] = ()

    def __init__(self, outbox: Outbox, tees: Sequence[Tee]) -> None:
        self.outbox = outbox
        self.tees = tees

    def _tee(self, batch: list[ev.Event]) -> None:
        for tee in self.tees:
            try:
                tee.write(batch)
            except Exception:  # a broken observer must not break the stream
                pass

    def _close_tees(self) -> None:
        for tee in self.tees:
            with contextlib.suppress(Exception):
                tee.close()

    def emit(self, batch: list[ev.Event]) -> None:
        raise NotImplementedError

    def cancel_reason(self) -> tuple[str, str] | None:
        return None

    def adopt(self, producer: asyncio.Task[None]) -> None:
        pass

    def finished(self, producer: asyncio.Task[None]) -> None:
        """The producer's task is over (its done callback; resumable streams only)."""

    async def release(
        self, producer: asyncio.Task[None], record: StreamRecord, *, hung_up: bool
    ) -> None:
        raise NotImplementedError


class _RequestOwns(_Owner):
    """The request owns the generation: a hang-up cancels it at once."""

    __slots__ = ("encode",)

    def __init__(self, outbox: Outbox, tees: Sequence[Tee], encode: Encode) -> None:
        super().__init__(outbox, tees)
        self.encode = encode

    def emit(self, batch: list[ev.Event]) -> None:
        self._tee(batch)
        encode = self.encode
        data = encode(batch[0]) if len(batch) == 1 else b"".join([encode(e) for e in batch])
        if data:
            self.outbox.push(data)

    async def release(
        self, producer: asyncio.Task[None], record: StreamRecord, *, hung_up: bool
    ) -> None:
        if hung_up:
            record.disconnected = True
            self.outbox.close()
        # Cancel once. A second cancel would interrupt the provider's own
        # cleanup (closing its upstream response), leaving the upstream
        # connection open; a provider gets CLEANUP_S to finish it. The endpoint
        # cancels the producer only here, so it cancels unconditionally:
        # ``producer.cancelling()`` also counts cancels that code inside the
        # provider made and will undo (anyio's happy-eyeballs connect, under
        # httpx, cancels the task it runs in once an attempt wins and
        # uncancels it when its scope exits), and a hang-up in that window
        # would otherwise leave the upstream stream running to its end.
        if not producer.done():
            producer.cancel()
        await asyncio.wait([producer], timeout=CLEANUP_S)
        if not producer.done():
            producer.cancel()
            await asyncio.wait([producer])
        self._close_tees()


class _SessionOwns(_Owner):
    """A resume session owns the generation: a hang-up only detaches the request.

    Each event is encoded once, as the standard frame that goes out and into
    the store (its SSE ``id:`` is its seq). The session's runner decides when
    the generation stops: its end, an explicit cancel, or the grace period.
    """

    __slots__ = ("session", "headers", "writer", "encode")

    def __init__(
        self,
        outbox: Outbox,
        tees: Sequence[Tee],
        session: ResumeSession,
        writer: Writer,
        encode: Encode = ev.dump,
    ) -> None:
        super().__init__(outbox, tees)
        self.session = session
        self.headers = session.headers
        self.writer = writer
        self.encode = encode

    def emit(self, batch: list[ev.Event]) -> None:
        # The store keeps SSE frames whatever the binding (a resume may ask for
        # either); a client on the binary binding gets its own frames.
        frames = [ev.dump(event) for event in batch]
        self.session.record(batch, frames)
        self._tee(batch)
        if self.encode is not ev.dump:
            frames = [self.encode(event) for event in batch]
        if frames:
            self.outbox.push(frames[0] if len(frames) == 1 else b"".join(frames))

    def cancel_reason(self) -> tuple[str, str] | None:
        return self.session.cancel_reason()

    def adopt(self, producer: asyncio.Task[None]) -> None:
        self.session.run(producer)

    def finished(self, producer: asyncio.Task[None]) -> None:
        writer = self.writer
        self.outbox.close()
        if not writer.ended:
            # "Every stream ends", the stored one too, whoever is reading.
            code, message = self.session.cancel_reason() or ("internal_error", "internal error")
            with contextlib.suppress(Exception):
                self.emit(writer.fail(code, message))
        self._close_tees()
        self.session.close()

    async def release(
        self, producer: asyncio.Task[None], record: StreamRecord, *, hung_up: bool
    ) -> None:
        if hung_up or not producer.done():
            # Disconnect is not cancel (docs/scaling.md): the session owns it now.
            record.disconnected = True
            self.outbox.close()
            self.session.detach()


@types.coroutine
def _one_step() -> Generator[None, None, None]:
    """Yield to the event loop once (``asyncio.sleep(0)`` without its checks)."""
    yield


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
