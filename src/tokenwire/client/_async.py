"""``AsyncClient`` and ``AsyncStream``: the async twin of ``Client`` over ``httpx.AsyncClient``.

The decisions are the stream flow's (``_flow.py``) and the ``Receiver``'s,
shared with the sync client; this module only performs the flow's ops,
awaiting. The first-event and idle clocks are anyio deadlines around each
read, so they work under asyncio and trio alike.
"""

from __future__ import annotations

import builtins
import inspect
import logging
import time
from collections.abc import (
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
)
from typing import Any, Final, TypeAlias

import anyio
import httpx

from .. import errors
from .. import events as ev
from ..request import Request
from . import _flow as ops
from ._common import (
    ErrorBody,
    EventTranslator,
    caused,
    prepare_request,
    send_error,
)
from ._flow import ClientBase, StreamFlow, StreamState
from ._response import ParsedToolCall, Response
from ._transports import FramesFactory

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


class AsyncClient(
    ClientBase[httpx.AsyncClient, httpx.AsyncBaseTransport, AsyncConfirm, AsyncFallback]
):
    """The async twin of ``Client``, over ``httpx.AsyncClient``; same arguments.

    ``confirm`` and ``fallback`` may be plain or async callables, and a
    fallback's body may be an async or a plain iterable of bytes.
    """

    def _new_http(self, *, frames: FramesFactory | None, **options: Any) -> httpx.AsyncClient:
        if frames is not None:
            options["transport"] = frames.build()
        return httpx.AsyncClient(**options, timeout=None)

    def stream(self, request: Request | None = None, **kwargs: Any) -> AsyncStream:
        """An ``AsyncStream`` for ``request`` (or ``request.build(**kwargs)``).

        The request is sent when the stream is entered (``async with``) or
        first iterated. Raises ``TypeError``/``InvalidRequest`` for a bad request.
        """
        stream = AsyncStream(self, prepare_request(request, kwargs, resume=self.resume))
        self._streams.add(stream)
        return stream

    async def create(self, request: Request | None = None, **kwargs: Any) -> Response:
        """Send a request and read its whole stream: ``await stream(...).final()``."""
        async with self.stream(request, **kwargs) as stream:
            return await stream.final()

    async def aclose(self) -> None:
        """Close the streams still open (cancelling them), then the connection pool."""
        for driver in list(self._streams):
            await driver.aclose()
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


def _remaining(deadline: float | None) -> float | None:
    return None if deadline is None else max(deadline - time.monotonic(), 0.0)


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class AsyncStream(StreamState):
    """The async twin of ``Stream``: ``async with`` it, ``async for`` over it."""

    def __init__(self, client: AsyncClient, request: Request) -> None:
        super().__init__(client, request)
        # Apart from the stream, as in ``Stream``: a dropped stream closes at once.
        self._driver = _AsyncDriver(client, self._flow)
        client._streams.add(self._driver)
        self._iterator: AsyncIterator[ev.Event] | None = None

    @property
    def response(self) -> httpx.Response | None:
        """The HTTP response being read; see ``Stream.response``."""
        return self._driver.response

    async def open(self) -> None:
        """Send the request and check the answer; see ``Stream.open``."""
        await self._driver.open()

    async def __aenter__(self) -> AsyncStream:
        try:
            await self.open()
        except BaseException:
            await self.aclose()
            raise
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __aiter__(self) -> AsyncIterator[ev.Event]:
        return self.aiter_events()

    def aiter_events(self) -> AsyncIterator[ev.Event]:
        """Yield typed events as they arrive; see ``Stream.iter_events``."""
        if self._iterator is None:
            self._iterator = self._driver.run()
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
        return self._response()

    async def aclose(self) -> None:
        """Close the connection, cancelling the generation before ``stream.end``.

        Safe to call more than once.
        """
        await self._driver.aclose()


class _AsyncDriver:
    """The I/O of one stream: performs its flow's ops (_flow.py), awaiting."""

    def __init__(self, client: AsyncClient, flow: StreamFlow) -> None:
        self.client = client
        self.flow = flow
        self.response: httpx.Response | None = None
        self._chunks: AsyncIterator[bytes] | None = None
        self._vendor: AsyncIterator[bytes] | None = None
        self._vendor_body: VendorBody | None = None

    async def open(self) -> None:
        steps = self.flow.open()
        result: Any = None
        try:
            while True:
                result = await self._perform(steps.send(result))
        except StopIteration:
            pass

    async def aclose(self) -> None:
        flow = self.flow
        if flow.closed:
            return
        flow.closed = True
        if self.response is not None:
            await self.response.aclose()
            self.response = None
        for name in ("aclose", "close"):
            close = getattr(self._vendor_body, name, None)
            if callable(close):
                await _maybe_await(close())
                break
        cancel = flow.cancel_request()
        if cancel is not None:
            # Shielded: a cancelled task still tells the endpoint to stop.
            with anyio.move_on_after(2.0, shield=True):
                try:
                    await (await self.client._http.send(cancel)).aclose()
                except (httpx.HTTPError, RuntimeError) as exc:  # RuntimeError: pool closed
                    logger.warning(
                        "stream %s: the cancel (DELETE) failed: %s", flow.request.request_id, exc
                    )

    async def run(self) -> AsyncIterator[ev.Event]:
        """The whole stream: the flow's ops performed, its events handed out here
        (one async generator step per event: this one)."""
        # The same loop as ``Stream.run``, awaiting: a generator cannot serve both
        # ``for`` and ``async for``, and each event must be yielded right here (one
        # async generator step per event, bench/client.py), so it is written twice.
        flow = self.flow
        deliver = flow.receiver.deliver
        steps = flow.run()
        result: Any = None
        try:
            await self.open()
            while True:
                op = steps.send(result)
                result = None
                if type(op) is list:
                    for event in op:
                        if flow.closed:  # the caller closed the stream while holding an event
                            break
                        deliver(event)
                        yield event
                else:
                    result = await self._perform(op)
        except StopIteration:
            pass
        except GeneratorExit:
            raise
        except BaseException as exc:
            flow.failure = exc
            raise
        finally:
            steps.close()
            await self.aclose()

    async def _read(self, op: ops.Read) -> bytes | None | ops.Dropped | ops.TimedOut:
        assert self._chunks is not None
        try:
            with anyio.fail_after(_remaining(op.deadline)):
                return await anext(self._chunks, None)
        except (builtins.TimeoutError, httpx.TimeoutException) as exc:
            return ops.TimedOut(exc)
        except httpx.HTTPError as exc:
            return ops.Dropped(f"{type(exc).__name__}: {exc}")

    async def _perform(self, op: ops.Op) -> Any:
        client = self.client
        if type(op) is ops.Read:
            return await self._read(op)
        if isinstance(op, ops.Send):
            return await self._send(op)
        if isinstance(op, ops.Attach):
            self._attach(op.response)
        elif isinstance(op, ops.Close):
            await op.response.aclose()
            if self.response is op.response:
                self.response = None
        elif isinstance(op, ops.ReadErrorBody):
            return await self._error_body(op.response)
        elif isinstance(op, ops.Ask):
            assert client.confirm is not None
            return await _maybe_await(client.confirm(op.call))
        elif isinstance(op, ops.ReadVendor):
            assert self._vendor is not None
            return await anext(self._vendor, None)
        elif isinstance(op, ops.UseFallback):
            assert client.fallback is not None
            vendor, body = await _maybe_await(client.fallback(op.request))
            self._vendor_body = body
            self._vendor = _aiter(body)
            return vendor
        elif isinstance(op, ops.Pause):
            await anyio.sleep(op.seconds)
        return None

    async def _send(self, op: ops.Send) -> httpx.Response | errors.TokenwireError:
        url = op.request.url
        try:
            with anyio.fail_after(_remaining(op.deadline)):
                return await self.client._http.send(op.request, stream=True)
        except httpx.HTTPError as exc:
            return caused(send_error(exc, str(url), phase=op.phase), exc)
        except builtins.TimeoutError as exc:
            message = f"no answer from {url} in time ({op.phase})"
            return caused(errors.TimeoutError(message, phase=op.phase), exc)

    async def _error_body(self, response: httpx.Response) -> bytes:
        body = ErrorBody()
        try:
            async for chunk in response.aiter_raw():
                if body.add(chunk):
                    break
        except httpx.HTTPError:
            pass  # what came is enough to say what went wrong
        finally:
            await response.aclose()
        return bytes(body)

    def _attach(self, response: httpx.Response) -> None:
        self.response = response
        self._chunks = response.aiter_bytes()
        # From here the anyio deadlines keep the first-event and idle clocks.
        timeouts = response.request.extensions.get("timeout")
        if isinstance(timeouts, dict):
            timeouts["read"] = None


async def _aiter(body: VendorBody) -> AsyncIterator[bytes]:
    if isinstance(body, AsyncIterable):
        async for chunk in body:
            yield chunk
    else:
        for chunk in body:
            yield chunk
