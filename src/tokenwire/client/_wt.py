"""The binary binding over WebTransport, client side (docs/binary.md section 6.3), on aioquic.

One HTTP/3 session (extended CONNECT to the session path, the credentials in
its headers); one bidirectional stream per request: the client writes one
``REQUEST`` (or ``RESUME``) frame and finishes its side, the server writes the
stream's frames without channels and finishes. Resetting the stream is the
hang-up. When the QUIC connection ends, every open stream reads a cut.

Needs aioquic (the ``webtransport`` extra), imported when a client first connects.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from typing import Any
from urllib.parse import urlsplit

import httpx

from .. import binary
from ..binary import FrameType
from ..errors import FramingError

__all__ = ["connect_webtransport"]


class _Stream:
    """One request's bidirectional stream: its decoder and the frames read so far."""

    def __init__(self, session: _Session, stream_id: int) -> None:
        self.session = session
        self.stream_id = stream_id
        self.decoder = binary.Decoder(max_frame_bytes=session.max_frame_bytes)
        self.queue: asyncio.Queue[binary.Frame | None | str] = asyncio.Queue()
        self.done = False  # FIN or reset seen, or we let go of it

    def received(self, data: bytes, end: bool) -> None:
        try:
            for frame in self.decoder.feed(data):
                self.queue.put_nowait(frame)
            if end:
                self.decoder.close()
                self.queue.put_nowait(None)
        except FramingError as exc:
            self.queue.put_nowait(f"the server sent a broken frame: {exc}")
            end = True
        if end:
            self.done = True
            self.session.streams.pop(self.stream_id, None)

    async def next(self) -> binary.Frame | None:
        item = await self.queue.get()
        if isinstance(item, str):
            self.queue.put_nowait(item)  # every later read fails the same way
            raise httpx.ReadError(item)
        if item is None:
            self.queue.put_nowait(None)
        return item

    def ready(self) -> list[binary.Frame]:
        out: list[binary.Frame] = []
        while not self.queue.empty():
            item = self.queue.get_nowait()
            if not isinstance(item, binary.Frame):
                self.queue.put_nowait(item)  # the end or a cut: every later read sees it
                break
            out.append(item)
        return out

    async def cancel(self) -> None:
        if self.done:
            return
        self.done = True
        self.session.streams.pop(self.stream_id, None)
        self.session.reset(self.stream_id)


class _Session:
    """The QUIC connection's protocol and the WebTransport session on it."""

    def __init__(self, protocol: Any, max_frame_bytes: int) -> None:
        self.protocol = protocol
        self.max_frame_bytes = max_frame_bytes
        self.streams: dict[int, _Stream] = {}
        #: Every stream this session opened, read or let go: their bytes never reach H3.
        self.opened: set[int] = set()
        self.session_id: int | None = None
        self.status: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.cut: str | None = None
        self.stack = contextlib.AsyncExitStack()

    @property
    def alive(self) -> bool:
        return self.cut is None

    def ended(self, why: str) -> None:
        if self.cut is not None:
            return
        self.cut = why
        if not self.status.done():
            self.status.set_exception(httpx.ConnectError(why))
        for stream in list(self.streams.values()):
            stream.queue.put_nowait(why)
        self.streams.clear()

    async def open(self, frame_type: FrameType, body: bytes) -> _Stream:
        if self.cut is not None or self.session_id is None:
            raise httpx.ConnectError(f"the WebTransport session is closed: {self.cut}")
        protocol = self.protocol
        stream_id = protocol.h3.create_webtransport_stream(self.session_id, is_unidirectional=False)
        stream = self.streams[stream_id] = _Stream(self, stream_id)
        self.opened.add(stream_id)
        protocol._quic.send_stream_data(
            stream_id, binary.encode_frame(frame_type, body), end_stream=True
        )
        protocol.transmit()
        return stream

    def reset(self, stream_id: int) -> None:
        if self.cut is not None:
            return
        with contextlib.suppress(Exception):  # a stream the server already finished
            self.protocol._quic.reset_stream(stream_id, 0)
        with contextlib.suppress(Exception):
            self.protocol._quic.stop_stream(stream_id, 0)
        self.protocol.transmit()

    async def aclose(self) -> None:
        self.ended("the client closed the WebTransport session")
        await self.stack.aclose()


def _protocol_class() -> Any:
    from aioquic.asyncio.protocol import QuicConnectionProtocol
    from aioquic.h3.connection import H3Connection
    from aioquic.h3.events import HeadersReceived, WebTransportStreamDataReceived
    from aioquic.quic.events import ConnectionTerminated, StreamDataReceived, StreamReset

    class Protocol(QuicConnectionProtocol):
        session: _Session

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.h3 = H3Connection(self._quic, enable_webtransport=True)

        def quic_event_received(self, event: Any) -> None:
            session = self.session
            if isinstance(event, StreamDataReceived) and event.stream_id in session.opened:
                # A stream we opened: aioquic's client-side H3 does not mark it as a
                # WebTransport one, so its bytes are read here, before H3 sees them
                # (it would read them as HTTP/3 frames and close the connection),
                # and dropped once we let go of the stream.
                stream = session.streams.get(event.stream_id)
                if stream is not None:
                    stream.received(event.data, event.end_stream)
                if event.end_stream:
                    session.opened.discard(event.stream_id)
                return
            if isinstance(event, StreamReset) and event.stream_id in session.opened:
                session.opened.discard(event.stream_id)
                stream = session.streams.pop(event.stream_id, None)
                if stream is not None:
                    stream.done = True
                    stream.queue.put_nowait("the server reset the stream")
                return
            if isinstance(event, ConnectionTerminated):
                session.ended(
                    f"the QUIC connection ended: {event.reason_phrase or 'closed'}"
                    f" (code {event.error_code})"
                )
                return
            for h3_event in self.h3.handle_event(event):
                if isinstance(h3_event, HeadersReceived) and h3_event.stream_id == (
                    session.session_id
                ):
                    status = int(dict(h3_event.headers).get(b":status", b"0"))
                    if not session.status.done():
                        session.status.set_result(status)
                    if h3_event.stream_ended:
                        session.ended(f"the server ended the session ({status})")
                elif isinstance(h3_event, WebTransportStreamDataReceived):
                    stream = session.streams.get(h3_event.stream_id)
                    if stream is not None:
                        stream.received(h3_event.data, h3_event.stream_ended)

        def connection_lost(self, exc: Exception | None) -> None:
            super().connection_lost(exc)
            self.session.ended("the QUIC connection was lost")

    return Protocol


async def connect_webtransport(
    url: str,
    headers: list[tuple[str, str]],
    timeout: float | None,
    *,
    max_frame_bytes: int,
    cafile: str | None = None,
    verify: bool = True,
) -> _Session:
    """Open a WebTransport session at ``url`` (``https://host:port/path``).

    Raises ``httpx.ConnectError`` when the QUIC handshake fails or the
    CONNECT is refused (its status named).
    """
    try:
        from aioquic.asyncio.client import connect
        from aioquic.h3.connection import H3_ALPN
        from aioquic.quic.configuration import QuicConfiguration
    except ImportError as exc:  # pragma: no cover - the dev install has it
        raise ImportError(
            "transport='webtransport' needs aioquic: pip install 'tokenwire[webtransport]'"
        ) from exc
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 443
    configuration = QuicConfiguration(
        is_client=True,
        alpn_protocols=H3_ALPN,
        server_name=host,
        max_datagram_frame_size=65536,
    )
    if cafile is not None:
        configuration.load_verify_locations(cafile)
    if not verify:
        configuration.verify_mode = ssl.CERT_NONE
    protocol_class = _protocol_class()
    holder: dict[str, _Session] = {}

    def create(*args: Any, **kwargs: Any) -> Any:
        protocol = protocol_class(*args, **kwargs)
        protocol.session = holder["session"]
        return protocol

    session = holder["session"] = _Session(None, max_frame_bytes)
    authority = parts.netloc.rpartition("@")[2]
    try:
        async with asyncio.timeout(timeout):
            protocol: Any = await session.stack.enter_async_context(
                connect(
                    host,
                    port,
                    configuration=configuration,
                    create_protocol=create,
                    wait_connected=True,
                )
            )
            session.protocol = protocol
            session.session_id = protocol._quic.get_next_available_stream_id()
            protocol.h3.send_headers(
                session.session_id,
                [
                    (b":method", b"CONNECT"),
                    (b":scheme", b"https"),
                    (b":authority", authority.encode()),
                    (b":path", (parts.path or "/").encode()),
                    (b":protocol", b"webtransport"),
                    *((name.lower().encode(), value.encode()) for name, value in headers),
                ],
            )
            protocol.transmit()
            status = await session.status
    except BaseException as exc:
        await session.stack.aclose()
        if isinstance(exc, OSError | TimeoutError | ConnectionError):
            raise httpx.ConnectError(f"cannot open {url}: {exc or type(exc).__name__}") from exc
        raise
    if status != 200:
        await session.aclose()
        raise httpx.ConnectError(f"{url} refused the WebTransport session: {status}")
    return session
