"""The binary binding over WebSocket (docs/binary.md section 6.2): many streams, one socket.

Every WebSocket message is one frame with a channel id. A ``REQUEST`` on a new
channel becomes an HTTP request to the app's own stream route (``POST
/v1/stream``, ``Accept: application/llm-stream-frames``), a ``RESUME`` one to its
resume route (``GET /v1/streams/{request_id}``), each carrying the handshake's
headers (its credentials included): keys, limits, budgets, routing, logs and
metrics apply to each stream exactly as over HTTP, because it *is* the HTTP
path. The answer's frames go back on the request's channel; an answer that is
not a stream (a 400, 401, 404, 429...) becomes an ``ERROR`` frame on it with
the answer's code and message. ``CANCEL`` (or the socket closing) is the
client hanging up: the route cancels the generation as it does for HTTP, and
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
from collections.abc import Iterable
from typing import Any, Final

import msgspec

from . import binary
from ._asgi import Receive, Scope, Send
from .binary import FrameType
from .errors import FramingError

__all__ = ["SUBPROTOCOL", "FramesOverWebSocket"]

#: The subprotocol a client offers (docs/binary.md section 10).
SUBPROTOCOL: Final = "llm-stream-frames.v1"
DEFAULT_MAX_CHANNELS: Final = 64

#: Handshake headers that do not belong on the per-stream requests.
_HOP_HEADERS: Final = frozenset(
    {
        b"connection",
        b"upgrade",
        b"content-length",
        b"content-type",
        b"accept",
        b"transfer-encoding",
    }
)
_RESUME_TOKEN: Final = b"tokenwire-resume-token"


class _Resume(msgspec.Struct, forbid_unknown_fields=True):
    request_id: str
    after: int = -1
    token: str | None = None


_decode_resume = msgspec.json.Decoder(_Resume).decode
_decode_error = msgspec.json.Decoder(dict[str, Any]).decode


class _Channel:
    """One stream on the socket: the task serving it and how it hangs up."""

    __slots__ = ("task", "cancelled", "hang_up")

    def __init__(self) -> None:
        self.task: asyncio.Task[None] | None = None
        self.cancelled = False
        self.hang_up = asyncio.Event()


class FramesOverWebSocket:
    """An ASGI app for ``websocket`` scopes that runs each channel's stream through ``target``.

    ``target`` is the ASGI app that serves ``stream_path`` and ``resume_path``
    (set it after building that app when the two refer to each other).
    """

    def __init__(
        self,
        target: Any = None,
        *,
        stream_path: str = "/v1/stream",
        resume_path: str = "/v1/streams/{request_id}",
        max_channels: int = DEFAULT_MAX_CHANNELS,
        max_frame_bytes: int = binary.DEFAULT_MAX_FRAME_BYTES,
    ) -> None:
        self.target = target
        self.stream_path = stream_path
        self.resume_path = resume_path
        self.max_channels = max_channels
        self.max_frame_bytes = max_frame_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "websocket":  # pragma: no cover - mounted as a WebSocket route
            return
        message = await receive()
        if message["type"] != "websocket.connect":
            return
        if SUBPROTOCOL not in scope.get("subprotocols", ()) or not _same_origin(scope):
            # No subprotocol, no binding; and a page of another origin may not drive a
            # gateway the browser can reach (WebSockets have no CORS preflight, and an
            # open gateway spends the operator's provider keys). 403 from the server.
            await send({"type": "websocket.close", "code": 1008})
            return
        await send({"type": "websocket.accept", "subprotocol": SUBPROTOCOL})
        await _Connection(self, scope, send).run(receive)


class _Connection:
    def __init__(self, app: FramesOverWebSocket, scope: Scope, send: Send) -> None:
        self.app = app
        self.scope = scope
        self._send = send
        self._lock = asyncio.Lock()
        self.channels: dict[int, _Channel] = {}
        self.headers = [
            (name, value)
            for name, value in scope.get("headers", ())
            if name not in _HOP_HEADERS and not name.startswith(b"sec-websocket-")
        ]
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
                kind = message["type"]
                if kind == "websocket.disconnect":
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
        if len(frames) != 1:
            await self.fail(f"a WebSocket message holds one frame, not {len(frames)}")
            return
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
        if frame.type == FrameType.REQUEST:
            scope, body = self.request_scope(frame.body), frame.body
        else:
            try:
                resume = _decode_resume(frame.body)
            except msgspec.DecodeError as exc:
                error = binary.encode_error("invalid_request", f"RESUME: {exc}", channel=channel)
                await self.send_bytes(error)
                return
            scope, body = self.resume_scope(resume), b""
        state = self.channels[channel] = _Channel()
        state.task = asyncio.get_running_loop().create_task(self.serve(channel, state, scope, body))

    def _base(
        self, method: str, path: str, query: bytes, extra: Iterable[tuple[bytes, bytes]]
    ) -> Scope:
        scope = self.scope
        return {
            "type": "http",
            "asgi": scope.get("asgi", {"version": "3.0"}),
            "http_version": "1.1",
            "method": method,
            "scheme": "https" if scope.get("scheme") == "wss" else "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": query,
            "root_path": "",
            "headers": [*self.headers, *extra],
            "client": scope.get("client"),
            "server": scope.get("server"),
            "state": dict(scope.get("state", {})),
        }

    def request_scope(self, body: bytes) -> Scope:
        return self._base(
            "POST",
            self.app.stream_path,
            b"",
            [
                (b"content-type", b"application/llm-request+json"),
                (b"content-length", str(len(body)).encode()),
                (b"accept", binary.MEDIA_TYPE.encode()),
            ],
        )

    def resume_scope(self, resume: _Resume) -> Scope:
        from urllib.parse import quote

        path = self.app.resume_path.format(request_id=quote(resume.request_id, safe=""))
        extra = [(b"accept", binary.MEDIA_TYPE.encode())]
        if resume.token is not None:
            extra.append((_RESUME_TOKEN, resume.token.encode()))
        query = f"after={resume.after}".encode() if resume.after >= 0 else b""
        return self._base("GET", path, query, extra)

    async def serve(self, channel: int, state: _Channel, scope: Scope, body: bytes) -> None:
        """Run one stream through the target app; relay its frames on ``channel``."""
        sent_body = False
        status = 0
        error_body = bytearray()
        decoder = binary.Decoder(max_frame_bytes=self.app.max_frame_bytes)
        ended = False

        async def receive() -> dict[str, Any]:
            nonlocal sent_body
            if not sent_body:
                sent_body = True
                return {"type": "http.request", "body": body, "more_body": False}
            await state.hang_up.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            nonlocal status, ended
            if message["type"] == "http.response.start":
                status = message["status"]
                for name, value in message.get("headers", ()):
                    if name == _RESUME_TOKEN and status == 200:
                        # What HTTP says in a header, a channel says in a META frame first.
                        meta = msgspec.json.encode({"resume_token": value.decode("latin-1")})
                        await self.send_bytes(
                            binary.encode_frame(FrameType.META, meta, channel=channel)
                        )
                return
            if message["type"] != "http.response.body":
                return
            chunk = message.get("body", b"")
            if status != 200:
                error_body.extend(chunk[: 64 * 1024 - len(error_body)])
                return
            if state.hang_up.is_set():
                raise OSError("the channel hung up")  # as a vanished HTTP client
            for f in decoder.feed(chunk):  # section 6.2: one frame per message
                await self.send_bytes(binary.encode_frame(f.type, f.body, channel=channel))
            if not message.get("more_body", False):
                ended = True

        try:
            await self.app.target(scope, receive, send)
        except Exception:  # the route failed before answering: an ERROR, not a hang
            status = status or 500
        finally:
            del self.channels[channel]
        if state.cancelled:
            await self.send_bytes(
                binary.encode_error("cancelled", "cancelled by the client", channel=channel)
            )
        elif status != 200:
            code, text = _error_of(status, bytes(error_body))
            await self.send_bytes(binary.encode_error(code, text, channel=channel))
        elif not ended and not self.closed:
            await self.send_bytes(
                binary.encode_error("internal_error", "the stream ended early", channel=channel)
            )


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


def _error_of(status: int, body: bytes) -> tuple[str, str]:
    """The code and message of a non-stream answer, from its JSON error body when it has one."""
    try:
        error = _decode_error(body).get("error")
    except msgspec.DecodeError:
        error = None
    if isinstance(error, dict):
        code = error.get("code") or error.get("type")
        message = error.get("message")
        if isinstance(code, str) and isinstance(message, str):
            return code, f"{status}: {message}"
    return (
        "not_found" if status == 404 else "internal_error"
    ), f"the stream route answered {status}"
