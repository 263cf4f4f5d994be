"""``AsyncClient`` and ``AsyncStream``: the async twin of ``Client`` over ``httpx.AsyncClient``.

The decisions are the ``Receiver``'s, shared with the sync client; this module
only differs in how it waits. The first-event and idle clocks are anyio
deadlines around each read, so they work under asyncio and trio alike.
"""

from __future__ import annotations

import builtins
import inspect
import logging
import time
from collections.abc import (
    AsyncGenerator,
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
)
from contextlib import aclosing
from types import TracebackType
from typing import Any, Final, TypeAlias

import anyio
import httpx

from .. import errors
from .. import events as ev
from ..lifecycle import Violation
from ..request import Request, dumps
from ._common import (
    DEFAULT_TIMEOUTS,
    MAX_ERROR_BODY,
    EventTranslator,
    Resumer,
    Timeouts,
    check_content_type,
    make_translator,
    post_headers,
    prepare_request,
    send_error,
    status_error,
    timeout_message,
)
from ._receiver import Receiver
from ._response import ParsedToolCall, RejectedToolCall, Response

__all__ = ["AsyncClient", "AsyncConfirm", "AsyncFallback", "AsyncStream"]

logger: Final = logging.getLogger("tokenwire.client")

VendorBody: TypeAlias = AsyncIterable[bytes] | Iterable[bytes]
#: Asked before a tool marked with side effects is handed out (§8.2); may be async.
AsyncConfirm: TypeAlias = Callable[[ParsedToolCall], bool | Awaitable[bool]]
#: Called on a 415 (§7.2), may be async: returns the vendor (a
#: ``tokenwire.translate`` name or a translator) and that vendor's body.
AsyncFallback: TypeAlias = Callable[
    [Request],
    tuple[str | EventTranslator, VendorBody] | Awaitable[tuple[str | EventTranslator, VendorBody]],
]


class AsyncClient:
    """The async twin of ``Client``, over ``httpx.AsyncClient``; same arguments.

    ``confirm`` and ``fallback`` may be plain or async callables, and a
    fallback's body may be an async or a plain iterable of bytes.
    """

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8080",
        *,
        headers: dict[str, str] | None = None,
        timeout: Timeouts | float | None = DEFAULT_TIMEOUTS,
        strict: bool = False,
        resume: bool = True,
        confirm: AsyncConfirm | None = None,
        fallback: AsyncFallback | None = None,
        http2: bool = False,
        transport: httpx.AsyncBaseTransport | None = None,
        path: str = "/v1/stream",
        resume_path: str = "/v1/streams/{request_id}",
        max_event_bytes: int = 1 << 20,
    ) -> None:
        self.timeout = Timeouts.of(timeout)
        self.strict = strict
        self.resume = resume
        self.confirm = confirm
        self.fallback = fallback
        self.path = path
        self.resume_path = resume_path
        self.max_event_bytes = max_event_bytes
        self._http = httpx.AsyncClient(
            base_url=base_url, headers=headers, http2=http2, transport=transport, timeout=None
        )

    @property
    def base_url(self) -> httpx.URL:
        return self._http.base_url

    def stream(self, request: Request | None = None, **kwargs: Any) -> AsyncStream:
        """An ``AsyncStream`` for ``request`` (or ``request.build(**kwargs)``).

        The request is sent when the stream is entered (``async with``) or
        first iterated. Raises ``TypeError``/``InvalidRequest`` for a bad request.
        """
        return AsyncStream(self, prepare_request(request, kwargs, resume=self.resume))

    async def create(self, request: Request | None = None, **kwargs: Any) -> Response:
        """Send a request and read its whole stream: ``await stream(...).final()``."""
        async with self.stream(request, **kwargs) as stream:
            return await stream.final()

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- HTTP --------------------------------------------------------------

    async def _send(
        self, request: httpx.Request, phase: str, deadline: float | None
    ) -> httpx.Response:
        try:
            with anyio.fail_after(_remaining(deadline)):
                return await self._http.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise send_error(exc, str(request.url), phase=phase) from exc
        except builtins.TimeoutError as exc:
            raise errors.TimeoutError(
                f"no answer from {request.url} in time ({phase})", phase=phase
            ) from exc

    async def _checked(self, response: httpx.Response) -> httpx.Response:
        """Raise for a non-2xx answer or a content type other than text/event-stream."""
        if not response.is_success:
            body = bytearray()
            try:
                async for chunk in response.aiter_raw():
                    body += chunk
                    if len(body) >= MAX_ERROR_BODY:
                        break
            except httpx.HTTPError:
                pass
            finally:
                await response.aclose()
            raise status_error(response, bytes(body[:MAX_ERROR_BODY]))
        try:
            check_content_type(response)
        except errors.RemoteProtocolError:
            await response.aclose()
            raise
        return response


def _remaining(deadline: float | None) -> float | None:
    return None if deadline is None else max(deadline - time.monotonic(), 0.0)


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class AsyncStream:
    """The async twin of ``Stream``: ``async with`` it, ``async for`` over it."""

    def __init__(self, client: AsyncClient, request: Request) -> None:
        self._client = client
        self.request = request
        self._receiver = Receiver(
            request, strict=client.strict, max_event_bytes=client.max_event_bytes
        )
        #: The HTTP response being read (``None`` before sending, between a drop
        #: and a resume, and in fallback mode).
        self.response: httpx.Response | None = None
        self._fallback: tuple[EventTranslator, VendorBody] | None = None
        self._opened = False
        self._closed = False
        self._iterator: AsyncIterator[ev.Event] | None = None
        self._failure: BaseException | None = None
        self._phase = "first_event"
        self._deadline: float | None = None
        self._resumer = Resumer(
            enabled=client.resume, template=client.resume_path, timeouts=client.timeout
        )

    # -- public ------------------------------------------------------------

    @property
    def request_id(self) -> str | None:
        """The ``metadata.request_id`` the request was sent with."""
        return self.request.request_id

    @property
    def violations(self) -> list[Violation]:
        """The lifecycle violations seen so far."""
        return self._receiver.violations

    @property
    def rejected_tool_calls(self) -> list[RejectedToolCall]:
        """Tool calls withheld so far (§8.2), with the reason."""
        return list(self._receiver.builder.rejected)

    async def open(self) -> None:
        """Send the request and check the answer; see ``Stream.open``."""
        if self._opened:
            return
        self._opened = True
        client = self._client
        timeout = client.timeout
        request = client._http.build_request(
            "POST",
            client.path,
            content=dumps(self.request),
            headers=post_headers(),
            timeout=timeout.for_headers(),
        )
        sent = time.monotonic()
        if timeout.first_event is not None:
            self._deadline = sent + timeout.first_event
        response = await client._send(request, "first_event", self._deadline)
        if response.status_code == 415 and client.fallback is not None:
            await response.aclose()
            logger.info("%s answered 415: using the fallback (§7.2)", request.url)
            vendor, chunks = await _maybe_await(client.fallback(self.request))
            self._fallback = (make_translator(vendor, self.request), chunks)
            return
        self._attach(await client._checked(response))

    async def __aenter__(self) -> AsyncStream:
        try:
            await self.open()
        except BaseException:
            await self.aclose()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __aiter__(self) -> AsyncIterator[ev.Event]:
        return self.aiter_events()

    def aiter_events(self) -> AsyncIterator[ev.Event]:
        """Yield typed events as they arrive; see ``Stream.iter_events``."""
        if self._iterator is None:
            self._iterator = self._run()
        return self._iterator

    @property
    async def text_stream(self) -> AsyncIterator[str]:
        """Only the answer's text fragments (reasoning blocks left out)."""
        async for event in self.aiter_events():
            if isinstance(event, ev.ContentDelta) and not event.reasoning:
                yield event.delta.text

    async def final(self) -> Response:
        """Read the rest of the stream and return the ``Response``; see ``Stream.final``."""
        async for _ in self.aiter_events():
            pass
        if self._failure is not None:
            raise self._failure
        if not self._receiver.done:
            raise self._receiver.truncated("the stream was closed before it ended")
        return self._receiver.response()

    async def aclose(self) -> None:
        """Close the connection. Safe to call more than once."""
        if self._closed:
            return
        self._closed = True
        if self.response is not None:
            await self.response.aclose()
        chunks = self._fallback[1] if self._fallback is not None else None
        for name in ("aclose", "close"):
            close = getattr(chunks, name, None)
            if callable(close):
                await _maybe_await(close())
                break

    # -- reading -----------------------------------------------------------

    def _attach(self, response: httpx.Response) -> None:
        self.response = response
        self._receiver.connect()
        # From here the anyio deadlines keep the first-event and idle clocks.
        timeouts = response.request.extensions.get("timeout")
        if isinstance(timeouts, dict):
            timeouts["read"] = None

    async def _run(self) -> AsyncIterator[ev.Event]:
        receiver = self._receiver
        try:
            await self.open()
            while not receiver.done and not self._closed:
                # The readers yield batches, so each event costs one async
                # generator step (here), not one per level.
                if self._fallback is not None:
                    async with aclosing(self._read_fallback(*self._fallback)) as batches:
                        async for batch in batches:
                            for event in self._hand_out(batch):
                                yield event
                    if not receiver.done and not self._closed:
                        raise receiver.truncated("the fallback stream ended before stream.end")
                elif self.response is not None:
                    async with aclosing(self._read_http(self.response)) as batches:
                        async for batch in batches:
                            for event in self._hand_out(batch):
                                yield event
                else:
                    await self._resume()
            if receiver.done:
                receiver.finish()
        except GeneratorExit:
            raise
        except BaseException as exc:
            self._failure = exc
            raise
        finally:
            await self.aclose()

    async def _read_http(self, response: httpx.Response) -> AsyncGenerator[list[ev.Event], None]:
        """Yield batches of checked events; the caller hands each batch out."""
        receiver = self._receiver
        idle = self._client.timeout.idle
        chunks = response.aiter_bytes()
        try:
            while True:
                try:
                    with anyio.fail_after(_remaining(self._deadline)):
                        chunk = await anext(chunks, None)
                except builtins.TimeoutError as exc:
                    raise self._timeout() from exc
                except httpx.TimeoutException as exc:
                    raise self._timeout() from exc
                except httpx.HTTPError as exc:
                    self._resumer.drop = f"{type(exc).__name__}: {exc}"
                    logger.info("stream %s dropped: %s", self.request_id, self._resumer.drop)
                    return
                if chunk is None:
                    receiver.eof()
                    self._resumer.drop = "the connection closed"
                    return
                before = receiver.messages
                events = receiver.feed(chunk)
                if receiver.messages != before:
                    yield await self._confirmed(events)
                    self._phase = "idle"
                    self._deadline = None if idle is None else time.monotonic() + idle
                    if receiver.done or self._closed:
                        return
        finally:
            self.response = None
            await response.aclose()

    def _timeout(self) -> errors.TimeoutError:
        t = self._client.timeout
        phase = self._phase
        seconds = t.first_event if phase == "first_event" else t.idle
        return errors.TimeoutError(timeout_message(phase, seconds, self.request_id), phase=phase)

    async def _read_fallback(
        self, translator: EventTranslator, chunks: VendorBody
    ) -> AsyncGenerator[list[ev.Event], None]:
        """Yield batches of checked events from the vendor body, through its translator."""
        receiver = self._receiver
        if isinstance(chunks, AsyncIterable):
            async for chunk in chunks:
                yield await self._confirmed(receiver.feed_events(translator.feed(chunk)))
                if receiver.done or self._closed:
                    return
        else:
            for chunk in chunks:
                yield await self._confirmed(receiver.feed_events(translator.feed(chunk)))
                if receiver.done or self._closed:
                    return
        yield await self._confirmed(receiver.feed_events(translator.close()))

    async def _confirmed(self, events: list[ev.Event]) -> list[ev.Event]:
        """``events`` less the side-effect tool calls ``confirm`` did not approve (§8.2)."""
        receiver = self._receiver
        if not receiver.side_effects:
            return events
        confirm = self._client.confirm
        out: list[ev.Event] = []
        for event in events:
            call = receiver.needs_confirmation(event)
            if call is not None:
                approved = None if confirm is None else bool(await _maybe_await(confirm(call)))
                if not receiver.confirm(event, approved):
                    continue
            out.append(event)
        return out

    def _hand_out(self, events: list[ev.Event]) -> Iterator[ev.Event]:
        """Deliver ``events`` one by one, then raise an error found after them."""
        receiver = self._receiver
        for event in events:
            if self._closed:  # the caller closed the stream while holding an event
                return
            receiver.deliver(event)
            yield event
        receiver.raise_pending()

    async def _resume(self) -> None:
        """Reconnect with ``Last-Event-ID`` (DESIGN.md) or raise ``StreamTruncated``."""
        receiver = self._receiver
        resumer = self._resumer
        delay = resumer.next_delay(receiver)
        if delay:
            await anyio.sleep(delay)
        request = resumer.request(self._client._http, receiver)
        logger.info("stream %s: resuming after seq %s", self.request_id, receiver.last_seq)
        self._phase = resumer.phase(receiver)
        seconds = resumer.seconds(receiver)
        self._deadline = None if seconds is None else time.monotonic() + seconds
        client = self._client
        try:
            response = await client._send(request, "idle", self._deadline)
        except errors.TransportError as exc:
            resumer.drop = f"resume failed: {exc}"
            return
        problem = resumer.problem(response)
        if problem is not None:
            await response.aclose()
            raise receiver.truncated(problem)
        self._attach(response)
