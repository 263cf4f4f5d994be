"""The binary binding over WebSocket (docs/binary.md section 6.2): many streams, one socket.

Every WebSocket message is one frame with a channel id. Each ``REQUEST`` or
``RESUME`` on a new channel is served by ``channel.serve`` (through the
app's own HTTP routes, with the handshake's headers); its frames go back on
that channel. ``CANCEL`` (or the socket closing) is the stream's hang-up, and
the channel gets an ``ERROR`` frame with code ``cancelled``.

A browser page may open the socket only from the gateway's own origin (an
``Origin`` naming another host is refused): a WebSocket has no CORS preflight.
A connection holds at most ``max_channels`` streams at once; a channel id in
use, a frame that is not one whole frame, or a text message ends it with an
``ERROR`` frame and close code 1002 (protocol error).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, Final

from ... import binary
from ...binary import FrameType
from ...errors import FramingError
from ..asgi import Receive, Scope, Send
from .channel import Channel, Routes, client_headers, serve

__all__ = ["SUBPROTOCOL", "FramesOverWebSocket"]

#: The subprotocol a client offers (docs/binary.md section 10).
SUBPROTOCOL: Final = "llm-stream-frames.v1"
DEFAULT_MAX_CHANNELS: Final = 64


class FramesOverWebSocket(Routes):
    """An ASGI app for ``websocket`` scopes; each channel's stream goes through ``target``."""

    def __init__(self, target: Any = None, *, max_channels: int = DEFAULT_MAX_CHANNELS) -> None:
        super().__init__(target)
        self.max_channels = max_channels

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "websocket":  # pragma: no cover - mounted as a WebSocket route
            return
        # No subprotocol, no binding.
        if await accept(scope, receive, send, subprotocol=SUBPROTOCOL):
            await _Connection(self, scope, send).run(receive)


async def accept(scope: Scope, receive: Receive, send: Send, *, subprotocol: str | None) -> bool:
    """Take a WebSocket's connect and accept it (with ``subprotocol``, which the client
    must offer); ``False`` once refused, or when the client left before connecting.

    A page of another origin may not drive a gateway the browser can reach
    (WebSockets have no CORS preflight, and an open gateway spends the operator's
    provider keys): refused with 1008, a 403 from the server.
    """
    message = await receive()
    if message["type"] != "websocket.connect":
        return False
    offered = subprotocol is None or subprotocol in scope.get("subprotocols", ())
    if not offered or not _same_origin(scope):
        await send({"type": "websocket.close", "code": 1008})
        return False
    answer: dict[str, Any] = {"type": "websocket.accept"}
    if subprotocol is not None:
        answer["subprotocol"] = subprotocol
    await send(answer)
    return True


class _Connection:
    def __init__(self, app: FramesOverWebSocket, scope: Scope, send: Send) -> None:
        self.app = app
        self.base: Scope = {
            "headers": client_headers(scope.get("headers", ())),
            "scheme": "https" if scope.get("scheme") == "wss" else "http",
            "client": scope.get("client"),
            "server": scope.get("server"),
            "state": scope.get("state", {}),
        }
        self._send = send
        self._lock = asyncio.Lock()
        self.channels: dict[int, Channel] = {}
        self.closed = False

    async def send_bytes(self, data: bytes) -> None:
        if self.closed:
            return
        async with self._lock:  # one writer at a time on the socket
            with contextlib.suppress(OSError, RuntimeError):
                await self._send({"type": "websocket.send", "bytes": data})

    async def fail(self, message: str) -> None:
        """A protocol error on the socket: an ERROR frame (channel 0), then close 1002."""
        await self.send_bytes(binary.encode_error("invalid_request", message, channel=0))
        async with self._lock:
            self.closed = True
            with contextlib.suppress(OSError, RuntimeError):
                await self._send({"type": "websocket.close", "code": 1002})

    async def run(self, receive: Receive) -> None:
        try:
            while not self.closed:
                message = await receive()
                if message["type"] == "websocket.disconnect":
                    break
                data = message.get("bytes")
                if data is None:
                    await self.fail("the binding sends binary messages only")
                    break
                await self.frame(data)
        finally:
            self.closed = True
            for channel in self.channels.values():
                channel.hang_up.set()
            tasks = [c.task for c in self.channels.values() if c.task is not None]
            if tasks:
                await asyncio.wait(tasks)

    async def frame(self, data: bytes) -> None:
        decoder = binary.Decoder(max_frame_bytes=self.app.max_frame_bytes, channels=True)
        try:
            frames = decoder.feed(data)
            decoder.close()
        except FramingError as exc:
            await self.fail(str(exc))
            return
        if len(frames) + decoder.skipped != 1:
            count = len(frames) + decoder.skipped
            await self.fail(f"a WebSocket message holds one frame, not {count}")
            return
        if not frames:
            return  # section 2: an extension frame this server does not know, skipped whole
        (frame,) = frames
        channel = frame.channel
        assert channel is not None  # channels=True
        if frame.type == FrameType.PING:
            return
        if frame.type == FrameType.CANCEL:
            existing = self.channels.get(channel)
            if existing is not None:
                existing.cancelled = True
                existing.hang_up.set()
            return
        if frame.type not in (FrameType.REQUEST, FrameType.RESUME):
            await self.fail(f"frame type 0x{frame.type:02x} is not a client's")
            return
        if channel in self.channels:
            await self.fail(f"channel {channel} is in use")
            return
        if len(self.channels) >= self.app.max_channels:
            error = binary.encode_error(
                "overloaded",
                f"at most {self.app.max_channels} streams per connection",
                channel=channel,
            )
            await self.send_bytes(error)
            return
        state = self.channels[channel] = Channel()
        state.task = asyncio.get_running_loop().create_task(self.serve(frame, state))

    async def serve(self, frame: binary.Frame, state: Channel) -> None:
        try:
            await serve(
                self.app, self.base, frame, state, self.send_bytes, closed=lambda: self.closed
            )
        finally:
            assert frame.channel is not None
            del self.channels[frame.channel]


def _same_origin(scope: Scope) -> bool:
    """True without an ``Origin`` (not a browser) or with one naming the ``Host`` itself."""
    origin = host = None
    for name, value in scope.get("headers", ()):
        if name == b"origin":
            origin = value.decode("latin-1")
        elif name == b"host":
            host = value.decode("latin-1")
    if origin is None:
        return True
    return host is not None and origin.partition("://")[2].rstrip("/").lower() == host.lower()
