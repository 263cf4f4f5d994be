"""The binary binding's own transports as httpx transports (docs/binary.md 6.2, 6.3).

``Client(transport="ws")`` and ``Client(transport="webtransport")`` keep the
HTTP client's one flow (``_flow.py``): the flow builds the same requests
(``POST`` the stream, ``GET`` a resume, ``DELETE`` a resumable stream) and
reads the same frames body. Here a stream's ``POST`` becomes a ``REQUEST``
frame and a resume's ``GET`` a ``RESUME`` frame on a carrier of a shared
connection (a WebSocket channel, or a WebTransport stream); the answer's frames
come back as the response body, without channels, as over HTTP. What HTTP says
in headers comes in frames: a ``META`` frame's ``resume_token`` is the
``tokenwire-resume-token`` header, and an ``ERROR`` frame that stands for a
refusal (``"404: unknown model …"``) is that status with its JSON error body,
so the flow raises what it raises over HTTP. Closing the body before its end
is the hang-up: ``CANCEL`` on a channel, a reset WebTransport stream. Every
other request (the ``DELETE``) goes over HTTP to the base URL.

A connection carries the credentials of its handshake (section 6.2), so
requests with other credentials get a connection of their own. A connection
that failed is replaced on the next request (a resume after a cut).

``SyncFramesTransport`` runs the async one on an event loop thread of its
own, for the blocking ``Client``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import Any, Final, Literal, Protocol, TypeAlias, TypeVar
from urllib.parse import parse_qs, unquote

import httpx
import msgspec

from .. import binary
from ..binary import FrameType

__all__ = [
    "FRAMES_TRANSPORTS",
    "AsyncFramesTransport",
    "Carrier",
    "FramesTransportName",
    "Session",
    "SyncFramesTransport",
]

FramesTransportName: TypeAlias = Literal["ws", "webtransport"]
FRAMES_TRANSPORTS: Final[tuple[str, ...]] = ("ws", "webtransport")

#: The content type of a frames body; the binding's transports carry JSON payloads.
_CONTENT_TYPE: Final = f"{binary.MEDIA_TYPE}; payload=json; version=1.0"
#: Per-request headers that are not the connection's credentials.
_NOT_CREDENTIALS: Final = frozenset(
    {
        "host",
        "accept",
        "accept-encoding",
        "content-type",
        "content-length",
        "connection",
        "cache-control",
        "last-event-id",
        "tokenwire-resume-token",
        "user-agent",
    }
)
#: Codes of an ERROR frame that stand for an HTTP status when nothing was streamed yet.
_STATUS_OF_CODE: Final = {"overloaded": 503, "rate_limited": 429}


class Carrier(Protocol):
    """One stream's frames on a connection (a channel, or a stream of its own)."""

    async def next(self) -> binary.Frame | None:
        """The next frame, ``None`` at the stream's end; raises ``httpx.ReadError`` on a cut."""
        ...

    def ready(self) -> list[binary.Frame]:
        """The frames already received, without waiting (a cut or the end stays queued)."""
        ...

    async def cancel(self) -> None:
        """The hang-up: stop the stream (idempotent; nothing after its end)."""
        ...


class Session(Protocol):
    """A connection that carries streams: a WebSocket, or a WebTransport session."""

    @property
    def alive(self) -> bool: ...

    async def open(self, frame_type: FrameType, body: bytes) -> Carrier:
        """Start a stream with its ``REQUEST`` or ``RESUME`` frame."""
        ...

    async def aclose(self) -> None: ...


#: Makes a connected session: (handshake headers, connect timeout) -> Session.
Connect: TypeAlias = Callable[[list[tuple[str, str]], float | None], Coroutine[Any, Any, Session]]


class _Body(httpx.AsyncByteStream):
    """A response body: the carrier's frames, re-encoded without channels."""

    def __init__(self, first: list[binary.Frame], carrier: Carrier) -> None:
        self.first = first
        self.carrier = carrier
        self.ended = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for frame in self.first:
            yield binary.encode_frame(frame.type, frame.body)
        self.first = []
        while not self.ended:
            got = await self.carrier.next()
            if got is None:
                self.ended = True
                return
            # What else has arrived goes in the same chunk: one hand-over per burst,
            # not per frame (the blocking client's loop thread pays per chunk).
            out = []
            for frame in (got, *self.carrier.ready()):
                out.append(binary.encode_frame(frame.type, frame.body))
                if frame.type == FrameType.ERROR:
                    self.ended = True  # the sender sends nothing more on it (section 2)
                    break
            yield b"".join(out)

    async def aclose(self) -> None:
        if not self.ended:
            self.ended = True
            await self.carrier.cancel()


def _resume_body(request: httpx.Request) -> bytes:
    """The ``RESUME`` frame's JSON for the flow's resume ``GET`` (docs/binary.md section 5)."""
    request_id = unquote(request.url.path.rstrip("/").rpartition("/")[2])
    after = request.headers.get("last-event-id")
    if after is None:
        after = next(iter(parse_qs(request.url.query.decode()).get("after", [])), None)
    resume: dict[str, Any] = {"request_id": request_id}
    if after is not None and after.isdigit():
        resume["after"] = int(after)
    token = request.headers.get("tokenwire-resume-token")
    if token is not None:
        resume["token"] = token
    return msgspec.json.encode(resume)


def _timeout(request: httpx.Request, kind: str) -> float | None:
    timeouts = request.extensions.get("timeout")
    value = timeouts.get(kind) if isinstance(timeouts, dict) else None
    return float(value) if isinstance(value, int | float) else None


def _refusal(frame: binary.Frame) -> tuple[int, bytes] | None:
    """The HTTP status and JSON error body an ``ERROR`` frame before any event stands for."""
    try:
        error = msgspec.json.decode(frame.body, type=binary.BindingError)
    except msgspec.DecodeError:
        return None
    found = binary.refusal_of(error.message)
    if found is not None:
        status, message = found
    elif error.code in _STATUS_OF_CODE:
        status, message = _STATUS_OF_CODE[error.code], error.message
    else:
        return None  # a stream-level failure: the body's ERROR frame says it
    body = msgspec.json.encode({"error": {"code": error.code, "message": message}})
    return status, body


class AsyncFramesTransport(httpx.AsyncBaseTransport):
    """Streams over a frames connection, everything else over ``http`` (see the module)."""

    def __init__(
        self,
        connect: Connect,
        *,
        stream_path: str,
        resume_prefix: str,
        http: httpx.AsyncBaseTransport,
    ) -> None:
        self._connect = connect
        self.stream_path = stream_path
        self.resume_prefix = resume_prefix
        self.http = http
        self._sessions: dict[tuple[tuple[str, str], ...], Session] = {}
        self._lock = asyncio.Lock()

    def _frame_of(self, request: httpx.Request) -> tuple[FrameType, bytes] | None:
        path = request.url.path
        if request.method == "POST" and path == self.stream_path:
            return FrameType.REQUEST, b""  # the body, read below
        if request.method == "GET" and path.startswith(self.resume_prefix):
            return FrameType.RESUME, _resume_body(request)
        return None

    async def _session(self, request: httpx.Request) -> Session:
        headers = [
            (name, value)
            for name, value in request.headers.multi_items()
            if name.lower() not in _NOT_CREDENTIALS
        ]
        key = tuple(sorted((name.lower(), value) for name, value in headers))
        async with self._lock:
            session = self._sessions.get(key)
            if session is None or not session.alive:
                if session is not None:
                    await session.aclose()
                session = await self._connect(headers, _timeout(request, "connect"))
                self._sessions[key] = session
            return session

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        found = self._frame_of(request)
        if found is None:
            return await self.http.handle_async_request(request)
        frame_type, body = found
        if frame_type == FrameType.REQUEST:
            body = await request.aread()
        session = await self._session(request)
        carrier = await session.open(frame_type, body)
        try:
            return await self._head(request, carrier)
        except BaseException:
            await carrier.cancel()
            raise

    async def _head(self, request: httpx.Request, carrier: Carrier) -> httpx.Response:
        """Wait for the stream's first frame, as HTTP waits for the response head."""
        async with asyncio.timeout(_timeout(request, "read")):
            first = await carrier.next()
        frames: list[binary.Frame] = []
        token: str | None = None
        if first is not None and first.type == FrameType.META:
            meta = msgspec.json.decode(first.body)
            found = meta.get("resume_token") if isinstance(meta, dict) else None
            token = found if isinstance(found, str) else None
        elif first is not None and first.type == FrameType.ERROR:
            refused = _refusal(first)
            if refused is not None:
                status, error = refused
                return httpx.Response(
                    status,
                    headers=[("content-type", "application/json")],
                    stream=httpx.ByteStream(error),  # unread, as a server's body is
                )
            frames.append(first)
        elif first is not None:
            frames.append(first)
        else:
            # Ended before any frame: nothing to stream.
            return httpx.Response(204, stream=httpx.ByteStream(b""))
        headers: list[tuple[str, str]] = [("content-type", _CONTENT_TYPE)]
        if token is not None:
            headers.append(("tokenwire-resume-token", token))
        return httpx.Response(200, headers=headers, stream=_Body(frames, carrier))

    async def aclose(self) -> None:
        sessions, self._sessions = list(self._sessions.values()), {}
        for session in sessions:
            await session.aclose()
        await self.http.aclose()


T = TypeVar("T")


class _LoopThread:
    """An event loop on a daemon thread of its own, for the blocking client."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(
            target=self.loop.run_forever, name="tokenwire-frames", daemon=True
        )
        self.thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        future = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        try:
            return future.result(timeout)
        except TimeoutError:
            future.cancel()
            raise

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        if not self.thread.is_alive():
            self.loop.close()


class _SyncBody(httpx.SyncByteStream):
    def __init__(self, loop: _LoopThread, response: httpx.Response, request: httpx.Request) -> None:
        self.loop = loop
        self.response = response
        self.request = request
        self.chunks = response.aiter_raw()

    def __iter__(self) -> Iterator[bytes]:
        while True:
            # The flow sets the read timeout after the head (the clocks' backstop).
            timeout = _timeout(self.request, "read")
            try:
                chunk = self.loop.run(_next_or_none(self.chunks), timeout)
            except TimeoutError:
                raise httpx.ReadTimeout("no frame in time", request=self.request) from None
            if chunk is None:
                return
            yield chunk

    def close(self) -> None:
        self.loop.run(self.response.aclose(), 10)


async def _next_or_none(chunks: AsyncIterator[bytes]) -> bytes | None:
    return await anext(chunks, None)


class SyncFramesTransport(httpx.BaseTransport):
    """The blocking twin: ``AsyncFramesTransport`` driven on a loop thread."""

    def __init__(self, make: Callable[[], AsyncFramesTransport]) -> None:
        self._loop = _LoopThread()
        self._transport = self._loop.run(_call(make), 30)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        body = request.read()
        twin = httpx.Request(
            request.method,
            request.url,
            headers=request.headers,
            content=body,
            extensions=request.extensions,
        )
        timeout = _timeout(request, "connect")
        read = _timeout(request, "read")
        limit = None if timeout is None or read is None else timeout + read
        response = self._loop.run(self._transport.handle_async_request(twin), limit)
        if isinstance(response.stream, httpx.AsyncByteStream):
            return httpx.Response(
                response.status_code,
                headers=response.headers,
                stream=_SyncBody(self._loop, response, request),
                extensions=response.extensions,
            )
        return response  # pragma: no cover - every response here has an async body

    def close(self) -> None:
        try:
            self._loop.run(self._transport.aclose(), 10)
        finally:
            self._loop.stop()


async def _call(make: Callable[[], T]) -> T:
    return make()  # built on the loop that runs it (its locks and sessions belong there)
