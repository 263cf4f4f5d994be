"""``StreamEndpoint``: the ASGI app that serves a provider as an LLM-Stream endpoint."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Final, TypeAlias, cast

from .. import events as ev
from .. import request as rq
from .._suggest import did_you_mean
from ..errors import InvalidRequest, RequestTooLarge
from ..request import Request
from ..writer import Writer, estimate_tokens
from .asgi import (
    HTTP_ERROR_CODES,
    ClientDisconnected,
    HangUp,
    Receive,
    Scope,
    Send,
    classify_exception,
    read_body,
    send_json,
    send_json_error,
)
from .encoders import FRAMES, SSE_HEADERS, Encode, FramesEncode
from .exchange import Exchange
from .hooks import (
    Admission,
    HeadedEncode,
    HeldAnswer,
    Ingress,
    Observer,
    Provider,
    ProviderLookup,
    ResumeConflict,
    ResumeSession,
    Resumption,
    StreamRecord,
    Tee,
    hooked,
)
from .negotiate import Refusal, negotiate
from .outbox import KeepAlive, Outbox
from .stream import _one_step, _Owner, _RequestOwns, _SessionOwns

if TYPE_CHECKING:  # the protocols the endpoint calls out to, named in its signatures
    from .hooks import (
        Admission,
        Ingress,
        Observer,
        Provider,
        ProviderLookup,
        ResumeSession,
        Resumption,
        Tee,
    )

#: Default request body limit: 4 MiB, the same as ``request.parse``.
DEFAULT_MAX_BODY_BYTES: Final = 4 << 20
#: Default idle interval before an SSE comment keep-alive.
DEFAULT_KEEPALIVE_S: Final = 15.0


# --- The endpoint -------------------------------------------------------------------------

#: An accepted request: what to stream, from which provider, how to encode it.
_Accepted: TypeAlias = "tuple[Request, Provider, Encode, ResumeSession | None]"


def _lookup_for(providers: Provider | Mapping[str, Provider] | ProviderLookup) -> ProviderLookup:
    if isinstance(providers, Mapping):
        return providers.get
    if hasattr(providers, "generate"):  # one provider (maybe generate-only): not a lookup
        single = hooked(providers)
        return lambda _model: single
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
        exchange = Exchange.from_scope(scope)
        record = StreamRecord(self.route or exchange.path, exchange)
        try:
            accepted = await self._handle(exchange, receive, send, record)
            if accepted is not None:
                # _handle's frame (the request body with it) is gone by now:
                # an open stream keeps only what it streams from.
                await self._stream(receive, send, record, exchange, *accepted)
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
        if self.ingress is not None and record.format != "standard":
            body = self.ingress.error_body(status, code, message, path)
            await send_json(send, status, body, headers)
            return
        await send_json_error(send, status, code, message, path, headers)

    async def _handle(
        self, exchange: Exchange, receive: Receive, send: Send, record: StreamRecord
    ) -> _Accepted | None:
        """Read and check the request; what to stream, or ``None`` once answered.

        The steps: negotiate (the body's format and the answer's binding),
        read, parse, admit, route (the provider), resume (a resumable stream's
        session); ``_stream`` then streams.
        """
        if self.ingress is not None:
            record.format = self.ingress.name  # until the body says it is the standard's
        if exchange.method != "POST":
            await self._reject(send, record, 405, "use POST", headers=[(b"allow", b"POST")])
            return None
        accept = exchange.accept

        # §7.2, §7.3 and docs/binary.md section 7: one decision for body and answer.
        ingress = self.ingress
        binding = negotiate(
            exchange.content_type,
            accept,
            request_type=rq.MEDIA_TYPE,
            vendor_types=ingress.media_types if ingress is not None else (),
        )
        if isinstance(binding, Refusal):
            await self._reject(
                send, record, binding.status, binding.message, headers=list(binding.headers)
            )
            return None
        if not binding.vendor_body:
            ingress = None
        record.format = ingress.name if ingress is not None else "standard"

        try:
            if exchange.length_error is not None:
                raise exchange.length_error  # answered below, as any unreadable body
            body = await read_body(receive, self.max_body_bytes, exchange.length)
            standard: Encode = ev.dump if binding.answer != "frames" else FRAMES[binding.payload]
            if ingress is None:
                request = rq.parse(body, max_bytes=self.max_body_bytes, max_depth=self.max_depth)
                encode: Encode = standard
            else:
                request, vendor_encode = ingress.parse(body, exchange)
                encode = vendor_encode if binding.answer == "vendor" else standard
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
        if admission is not None and not await admission.admit(exchange, request, send, record):
            return None

        found = self.lookup(request.model)
        if found is None:
            await self._reject(
                send,
                record,
                404,
                f"unknown model {rq.echo(request.model)}{self._served_hint(request.model)}",
                code="model_not_found",
                path="model",
            )
            return None
        provider = hooked(found)
        # A provider may refuse a request it can never serve before the stream
        # starts (the demo's token cap): a 400 naming the field, not a 200 stream.
        try:
            provider.check_request(request)
        except InvalidRequest as exc:
            await self._reject(send, record, 400, exc.reason, path=exc.path)
            return None
        session: ResumeSession | None = None
        if self.resumption is not None and (encode is ev.dump or isinstance(encode, FramesEncode)):
            # Only a stream answered in the standard can be resumed: the resume
            # route replays standard events.
            try:
                request, session = await self.resumption.open(request, record, exchange.headers)
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
        exchange: Exchange,
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
        outbox = Outbox(loop.time(), exchange.account)
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
        producer = loop.create_task(
            self._produce(provider, request, exchange, writer, owner, record)
        )
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
                if isinstance(encode, HeadedEncode):
                    # An encoder may answer with the upstream's own status line
                    # (gateway/providers/passthrough.py: an upstream error as it was sent).
                    status, headers = await encode.head(outbox, loop, headers)
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
            # A client that leaves once it has the whole stream (an agent closing right
            # after the final event, while the provider still closes its upstream) is
            # done, not gone: only one that leaves with events unmade or unsent hung up.
            whole = writer.ended and outbox.size == 0
            await owner.release(producer, record, hung_up=hung_up and not whole)
            if hangup is not None:
                await hangup.stopped()
            record.events = writer.next_seq

    async def _produce(
        self,
        provider: Provider,
        request: Request,
        exchange: Exchange,
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
            iterator = provider.serve(request, exchange)
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


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
