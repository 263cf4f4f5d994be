"""The Connect binding of the standard, served (docs/bindings.md): ``LLMStreamService/Stream``.

``POST /tokenwire.llmstream.v1.LLMStreamService/Stream`` with
``application/connect+proto`` or ``application/connect+json`` (Connect's
server-streaming protocol), or ``application/grpc-web+proto`` (gRPC-web):
the request is one ``StreamRequest`` message carrying the §4 envelope as
JSON text; the answer is the standard's events, one ``Event`` message each
(``tokenwire/proto/llm_stream.proto``), then Connect's end-stream envelope
(gRPC-web: its trailers frame).

The stream runs through the app's own HTTP stream route, as a WebSocket
channel's does (``channel.serve``): keys, limits, budgets and logs apply as
over HTTP. A refusal of that route (400, 401, 404, 429...) becomes the
end-stream error with the Connect code of its status; a stream that fails
midway ends the §5.4 way, with ``error`` and ``stream.end`` events, and a
clean end-stream. The client leaving is a hang-up.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Final

import msgspec

from ... import binary
from ...binary import FrameType
from ...errors import RequestTooLarge, TokenwireError
from ...translate import _protowire as pw
from ...translate.connect import (
    SERVICE_PATHS,
    EnvelopeDecoder,
    encode_envelope,
    encode_event,
    end_stream,
)
from ...translate.connect.framing import gunzip
from ..asgi import ClientDisconnected, Receive, Scope, Send, read_body, send_json_error
from .channel import Channel, Routes, client_headers, serve

__all__ = ["CONNECT_PATH", "ConnectStream", "connect_code", "grpc_status"]

#: The RPC's path (docs/bindings.md).
CONNECT_PATH: Final = SERVICE_PATHS["standard"]
#: Request Content-Type -> (protocol, codec).
_PROTOCOLS: Final = {
    "application/connect+proto": ("connect", "proto"),
    "application/connect+json": ("connect", "json"),
    "application/grpc-web": ("grpc-web", "proto"),
    "application/grpc-web+proto": ("grpc-web", "proto"),
}
#: HTTP status of the stream route's refusal -> the Connect code a client sees.
_CODE_OF_STATUS: Final = {
    400: "invalid_argument",
    401: "unauthenticated",
    403: "permission_denied",
    404: "not_found",
    406: "invalid_argument",
    408: "deadline_exceeded",
    409: "already_exists",
    413: "resource_exhausted",
    415: "invalid_argument",
    429: "resource_exhausted",
    503: "unavailable",
}
#: A binding ERROR frame's §5.3.6 code -> the Connect code.
_CODE_OF_ERROR: Final = {
    "cancelled": "canceled",
    "overloaded": "unavailable",
    "rate_limited": "resource_exhausted",
    "invalid_request": "invalid_argument",
    "not_found": "not_found",
}
#: Connect code -> gRPC status number (gRPC-web's trailers).
_GRPC_STATUS: Final = {
    "canceled": 1,
    "unknown": 2,
    "invalid_argument": 3,
    "deadline_exceeded": 4,
    "not_found": 5,
    "already_exists": 6,
    "permission_denied": 7,
    "resource_exhausted": 8,
    "failed_precondition": 9,
    "aborted": 10,
    "out_of_range": 11,
    "unimplemented": 12,
    "internal": 13,
    "unavailable": 14,
    "data_loss": 15,
    "unauthenticated": 16,
}
_FLAG_GRPC_TRAILERS: Final = 0x80


class _StreamRequest(msgspec.Struct):
    request: str = ""


_decode_json_request = msgspec.json.Decoder(_StreamRequest).decode


def connect_code(error: binary.BindingError) -> tuple[str, str]:
    """The Connect code and message of a binding ``ERROR`` (a refusal names its status)."""
    found = binary.refusal_of(error.message)
    if found is not None:
        status, message = found
        fallback = "internal" if status >= 500 else "invalid_argument"
        return _CODE_OF_STATUS.get(status, fallback), message
    return _CODE_OF_ERROR.get(error.code, "internal"), error.message


def grpc_status(code: str | None) -> int:
    """The gRPC status number of a Connect code (0: no error)."""
    return 0 if code is None else _GRPC_STATUS.get(code, 2)


class _BadCall(Exception):
    """The call's request is not one ``StreamRequest`` message."""


def _request_json(message: bytes, codec: str) -> bytes:
    """The §4 envelope a ``StreamRequest`` message carries. Raises ``_BadCall``."""
    try:
        if codec == "json":
            return _decode_json_request(message).request.encode()
        for number, _wire, value in pw.decode_fields(message):
            if number == 1 and isinstance(value, bytes):
                return value
    except (msgspec.DecodeError, TokenwireError) as exc:
        raise _BadCall(f"StreamRequest does not decode: {exc}") from None
    return b""


class ConnectStream:
    """The ASGI app of ``CONNECT_PATH``; each call's stream goes through ``routes``."""

    def __init__(self, routes: Routes) -> None:
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = scope.get("headers", ())
        content_type = next((v for k, v in headers if k == b"content-type"), b"")
        essence = content_type.decode("latin-1").split(";", 1)[0].strip().lower()
        found = _PROTOCOLS.get(essence)
        if found is None:
            accepted = ", ".join(_PROTOCOLS)
            await send_json_error(
                send,
                415,
                "unsupported_media_type",
                f"Content-Type must be one of {accepted}, got {essence or 'none'!r}",
                headers=[(b"accept-post", accepted.encode())],
            )
            return
        protocol, codec = found
        encoding = next(
            (v for k, v in headers if k in (b"connect-content-encoding", b"grpc-encoding")), None
        )
        call = _Call(send, protocol, codec)
        if encoding not in (None, b"identity", b"gzip"):
            name = encoding.decode("latin-1")
            await call.finish("unimplemented", f"request compression {name!r} is not served")
            return
        limit = self.routes.max_frame_bytes + binary.HEAD_BYTES
        try:
            body = await read_body(receive, limit)
        except (ClientDisconnected, RequestTooLarge) as exc:
            await call.finish("resource_exhausted", str(exc) or "the request ended early")
            return
        decoder = EnvelopeDecoder(max_message_bytes=self.routes.max_frame_bytes)
        try:
            envelopes = decoder.feed(body)
            if decoder.pending or len(envelopes) != 1 or envelopes[0].end_stream:
                raise _BadCall("the request must be exactly one message")
            (envelope,) = envelopes
            message = envelope.data
            if envelope.compressed:
                if encoding != b"gzip":
                    raise _BadCall("a compressed message without its encoding header")
                message = gunzip(message, self.routes.max_frame_bytes)
            request = _request_json(message, codec)
        except (_BadCall, TokenwireError) as exc:
            await call.finish("invalid_argument", str(exc))
            return
        base: Scope = {
            "headers": client_headers(headers),
            "scheme": scope.get("scheme", "http"),
            "client": scope.get("client"),
            "server": scope.get("server"),
            "state": scope.get("state", {}),
        }
        state = Channel()
        watch = asyncio.get_running_loop().create_task(_hang_up_on_disconnect(receive, state))
        try:
            frame = binary.Frame(FrameType.REQUEST, request)
            await serve(self.routes, base, frame, state, call.write, closed=lambda: call.gone)
        finally:
            watch.cancel()
            with contextlib.suppress(BaseException):
                await watch
        if not state.hang_up.is_set():
            await call.finish(*call.error)


async def _hang_up_on_disconnect(receive: Receive, state: Channel) -> None:
    with contextlib.suppress(Exception):
        while (await receive())["type"] != "http.disconnect":
            pass
    state.hang_up.set()


class _Call:
    """One call's response: its head once, an envelope per event, the end."""

    def __init__(self, send: Send, protocol: str, codec: str) -> None:
        self.send = send
        self.protocol = protocol
        self.codec = codec
        self.started = False
        self.gone = False
        self.resume_token: str | None = None
        #: The end-stream error (code, message), or (None, "") for a clean end.
        self.error: tuple[str | None, str] = (None, "")

    async def _start(self) -> None:
        if self.started:
            return
        self.started = True
        media = f"application/{self.protocol}+{self.codec}".encode()
        headers = [(b"content-type", media)]
        if self.resume_token is not None:
            headers.append((b"tokenwire-resume-token", self.resume_token.encode("latin-1")))
        await self.send({"type": "http.response.start", "status": 200, "headers": headers})

    async def _body(self, data: bytes, more: bool = True) -> None:
        try:
            await self.send({"type": "http.response.body", "body": data, "more_body": more})
        except OSError:
            self.gone = True
            raise

    async def write(self, data: bytes) -> None:
        """One frame of the stream (``channel.serve`` writes them one by one)."""
        decoder = binary.Decoder(max_frame_bytes=len(data))
        for frame in decoder.feed(data):
            if frame.type == FrameType.EVENT:
                await self._start()
                message = encode_event(binary.decode_event(frame.body), self.codec)
                await self._body(encode_envelope(message))
            elif frame.type == FrameType.META:
                token = msgspec.json.decode(frame.body).get("resume_token")
                self.resume_token = token if isinstance(token, str) else None
            elif frame.type == FrameType.ERROR:
                try:
                    error = msgspec.json.decode(frame.body, type=binary.BindingError)
                except msgspec.DecodeError:
                    error = binary.BindingError(code="internal_error", message="internal error")
                self.error = connect_code(error)

    async def finish(self, code: str | None, message: str) -> None:
        """The end of the call: Connect's end-stream envelope, or gRPC-web's trailers."""
        await self._start()
        if self.protocol == "grpc-web":
            trailers = f"grpc-status: {grpc_status(code)}\r\n"
            if code is not None:
                trailers += f"grpc-message: {_percent(message)}\r\n"
            end = encode_envelope(trailers.encode(), flags=_FLAG_GRPC_TRAILERS)
        else:
            end = end_stream(None if code is None else {"code": code, "message": message})
        with contextlib.suppress(OSError):
            await self._body(end, more=False)


def _percent(text: str) -> str:
    """gRPC's percent-encoding of ``grpc-message`` (printable ASCII but ``%`` as is)."""
    return "".join(
        c if 0x20 <= ord(c) <= 0x7E and c != "%" else "".join(f"%{b:02X}" for b in c.encode())
        for c in text
    )
