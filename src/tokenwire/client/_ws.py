"""The binary binding over WebSocket, client side (docs/binary.md section 6.2).

One socket, many channels: each stream gets a fresh channel id; a reader task
sorts the server's messages (one frame each) into the channels' queues. A
stream's end is its ``stream.end`` event or an ``ERROR`` frame; closing a
channel before that sends ``CANCEL``. When the socket ends, every open
channel reads a cut (``httpx.ReadError``), and the flow resumes on a new one.

Needs the ``websockets`` package (the ``ws`` extra), imported when a client
first connects.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from typing import Any, Final

import httpx

from .. import binary, events
from ..binary import FrameType
from ..errors import EventDecodeError, FramingError

__all__ = ["SUBPROTOCOL", "WebSocketSession", "connect_websocket"]

SUBPROTOCOL: Final = "llm-stream-frames.v1"
#: A stream.end envelope is short; longer EVENT bodies are not parsed to look for it.
_END_PROBE_BYTES: Final = 512


class _Cut:
    """Put in a channel's queue when the socket ended: its reads fail with ``why``."""

    __slots__ = ("why",)

    def __init__(self, why: str) -> None:
        self.why = why


def _is_end(frame: binary.Frame) -> bool:
    """Whether ``frame`` ends its channel's stream: an ERROR, or the ``stream.end`` event."""
    if frame.type == FrameType.ERROR:
        return True
    if frame.type != FrameType.EVENT or len(frame.body) > _END_PROBE_BYTES:
        return False
    if b"stream.end" not in frame.body:
        return False
    try:
        return isinstance(events.parse_envelope(frame.body), events.StreamEnd)
    except EventDecodeError:
        return False


class _Channel:
    def __init__(self, session: WebSocketSession, channel: int) -> None:
        self.session = session
        self.channel = channel
        self.queue: asyncio.Queue[binary.Frame | _Cut] = asyncio.Queue()
        self.ended = False  # the server sent the stream's last frame
        self.closed = False  # we let go of it
        self.held: _Cut | None = None  # a cut met by ``ready``

    async def next(self) -> binary.Frame | None:
        if self.held is not None:
            raise httpx.ReadError(self.held.why)
        if self.ended and self.queue.empty():
            return None
        item = await self.queue.get()
        if isinstance(item, _Cut):
            raise httpx.ReadError(item.why)
        return item

    def ready(self) -> list[binary.Frame]:
        out: list[binary.Frame] = []
        while self.held is None and not self.queue.empty():
            item = self.queue.get_nowait()
            if isinstance(item, _Cut):
                self.held = item  # the next read fails with it
            else:
                out.append(item)
        return out

    async def cancel(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.session.channels.pop(self.channel, None)
        if not self.ended:
            frame = binary.encode_frame(FrameType.CANCEL, channel=self.channel)
            await self.session.send(frame)


class WebSocketSession:
    """One WebSocket connection with its channels."""

    def __init__(self, connection: Any, max_frame_bytes: int) -> None:
        self.connection = connection
        self.max_frame_bytes = max_frame_bytes
        self.channels: dict[int, _Channel] = {}
        self._ids = itertools.count(1)
        self._cut: str | None = None
        self._reader = asyncio.get_running_loop().create_task(self._read())

    @property
    def alive(self) -> bool:
        return self._cut is None

    async def send(self, data: bytes) -> None:
        if self._cut is None:
            with contextlib.suppress(Exception):  # a socket that broke is seen by the reader
                await self.connection.send(data)

    async def open(self, frame_type: FrameType, body: bytes) -> _Channel:
        if self._cut is not None:
            raise httpx.ConnectError(f"the WebSocket is closed: {self._cut}")
        channel = _Channel(self, next(self._ids))
        self.channels[channel.channel] = channel
        await self.send(binary.encode_frame(frame_type, body, channel=channel.channel))
        return channel

    async def _read(self) -> None:
        why = "the WebSocket closed"
        try:
            async for message in self.connection:
                if not isinstance(message, bytes):
                    why = "the server sent a text message"
                    break
                decoder = binary.Decoder(max_frame_bytes=self.max_frame_bytes, channels=True)
                frames = decoder.feed(message)
                decoder.close()
                for frame in frames:
                    self._route(frame)
        except FramingError as exc:
            why = f"the server sent a broken frame: {exc}"
        except Exception as exc:
            why = f"the WebSocket failed: {type(exc).__name__}: {exc}"
        rcvd = getattr(self.connection, "close_code", None)
        self._cut = why if rcvd is None else f"{why} (code {rcvd})"
        for channel in self.channels.values():
            channel.queue.put_nowait(_Cut(self._cut))

    def _route(self, frame: binary.Frame) -> None:
        channel = self.channels.get(frame.channel) if frame.channel is not None else None
        if channel is None:
            return  # a channel we let go of, or the connection's own (channel 0) notice
        if _is_end(frame):
            channel.ended = True
            self.channels.pop(channel.channel, None)
        channel.queue.put_nowait(frame)

    async def aclose(self) -> None:
        self._cut = self._cut or "the client closed the WebSocket"
        with contextlib.suppress(Exception):
            await self.connection.close()
        self._reader.cancel()
        with contextlib.suppress(BaseException):
            await self._reader


async def connect_websocket(
    url: str,
    headers: list[tuple[str, str]],
    timeout: float | None,
    *,
    max_frame_bytes: int,
    ssl: Any = None,
) -> WebSocketSession:
    """Open ``url`` with the binding's subprotocol; raises ``httpx.ConnectError`` when refused."""
    try:
        from websockets.asyncio.client import connect
    except ImportError as exc:  # pragma: no cover - the dev install has it
        raise ImportError(
            "transport='ws' needs the websockets package: pip install 'tokenwire[ws]'"
        ) from exc
    options: dict[str, Any] = {}
    if ssl is not None and url.startswith("wss:"):
        options["ssl"] = ssl
    try:
        connection = await connect(
            url,
            subprotocols=[SUBPROTOCOL],  # type: ignore[list-item]
            additional_headers=headers,
            open_timeout=timeout,
            max_size=max_frame_bytes + binary.HEAD_BYTES + 4,
            compression=None,  # section 9: frames are not compressed (CRIME, BREACH)
            ping_interval=None,  # the server's PING frames keep the stream alive
            **options,
        )
    except (OSError, TimeoutError) as exc:
        raise httpx.ConnectError(f"cannot open {url}: {exc}") from exc
    except Exception as exc:  # websockets' handshake refusals (InvalidStatus...)
        raise httpx.ConnectError(f"{url} refused the WebSocket: {exc}") from exc
    return WebSocketSession(connection, max_frame_bytes)
