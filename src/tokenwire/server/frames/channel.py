"""One stream of the binary binding carried by a transport of its own (docs/binary.md 6.2, 6.3).

A client's ``REQUEST`` (or ``RESUME``) frame becomes an in-process HTTP request
to the app's own stream route (``POST /v1/stream``, ``Accept:
application/llm-stream-frames``), or its resume route (``GET
/v1/streams/{request_id}``), with the transport's handshake headers, its
credentials included: keys, limits, budgets, routing, logs and metrics apply
to the stream exactly as over HTTP, because it *is* the HTTP path. The
answer's frames go to ``write``; an answer that is not a stream (400, 401,
404, 429...) becomes an ``ERROR`` frame with its code and message; a hang-up
(``Channel.hang_up``) is the HTTP client leaving. The WebSocket binding
(``websocket``) and the WebTransport one (``webtransport``) are two transports of
this.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any, Final, TypeAlias
from urllib.parse import quote

import msgspec

from ... import binary
from ...binary import FrameType

__all__ = ["Channel", "Routes", "client_headers", "serve"]

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
Scope: TypeAlias = MutableMapping[str, Any]
_MAX_ERROR_BODY: Final = 64 * 1024


class _Resume(msgspec.Struct, forbid_unknown_fields=True):
    request_id: str
    after: int = -1
    token: str | None = None


_decode_resume = msgspec.json.Decoder(_Resume).decode
_decode_error = msgspec.json.Decoder(dict[str, Any]).decode


class Channel:
    """One stream's state: the task serving it and how it hangs up."""

    __slots__ = ("task", "cancelled", "hang_up", "route_done")

    def __init__(self) -> None:
        self.task: asyncio.Task[None] | None = None
        self.cancelled = False
        self.hang_up = asyncio.Event()
        #: The route answered: what is written now (its closing ERROR) is the
        #: transport's own, past the request guard's write deadline, so a writer
        #: must not wait on the client for it.
        self.route_done = False


class Routes:
    """Where streams go: ``target`` (the ASGI app), its stream and resume paths, the frame limit.

    ``target`` may be set after building, when the app and the transport refer
    to each other.
    """

    def __init__(
        self,
        target: Any = None,
        *,
        stream_path: str = "/v1/stream",
        resume_path: str = "/v1/streams/{request_id}",
        max_frame_bytes: int = binary.DEFAULT_MAX_FRAME_BYTES,
    ) -> None:
        self.target = target
        self.stream_path = stream_path
        self.resume_path = resume_path
        self.max_frame_bytes = max_frame_bytes


def client_headers(headers: Iterable[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """The handshake's headers that each stream's request carries (credentials among them)."""
    return [
        (name, value)
        for name, value in headers
        if name not in _HOP_HEADERS and not name.startswith((b"sec-websocket-", b":"))
    ]


def _http_scope(
    base: Scope, method: str, path: str, query: bytes, extra: list[tuple[bytes, bytes]]
) -> Scope:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": base.get("scheme", "http"),
        "path": path,
        "raw_path": path.encode(),
        "query_string": query,
        "root_path": "",
        "headers": [*base.get("headers", ()), *extra],
        "client": base.get("client"),
        "server": base.get("server"),
        "state": dict(base.get("state", {})),
    }


Write = Callable[[bytes], Awaitable[None]]


async def serve(
    routes: Routes,
    base: Scope,
    frame: binary.Frame,
    state: Channel,
    write: Write,
    *,
    closed: Callable[[], bool] = lambda: False,
) -> None:
    """Serve the stream ``frame`` (a ``REQUEST`` or ``RESUME``) asks for, writing its frames.

    ``base`` gives the requests' ``headers`` (already ``client_headers``),
    ``scheme``, ``client`` and ``server``. Frames carry ``frame.channel``.
    """
    channel = frame.channel
    accept = (b"accept", binary.MEDIA_TYPE.encode())
    if frame.type == FrameType.REQUEST:
        body = frame.body
        extra = [
            (b"content-type", b"application/llm-request+json"),
            (b"content-length", str(len(body)).encode()),
            accept,
        ]
        scope = _http_scope(base, "POST", routes.stream_path, b"", extra)
    else:
        try:
            resume = _decode_resume(frame.body)
        except msgspec.DecodeError as exc:
            await write(binary.encode_error("invalid_request", f"RESUME: {exc}", channel=channel))
            return
        body = b""
        extra = [accept]
        if resume.token is not None:
            extra.append((_RESUME_TOKEN, resume.token.encode()))
        path = routes.resume_path.format(request_id=quote(resume.request_id, safe=""))
        query = f"after={resume.after}".encode() if resume.after >= 0 else b""
        scope = _http_scope(base, "GET", path, query, extra)

    sent_body = False
    status = 0
    error_body = bytearray()
    decoder = binary.Decoder(max_frame_bytes=routes.max_frame_bytes)
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
                    # What HTTP says in a header, the binding says in a META frame first.
                    meta = msgspec.json.encode({"resume_token": value.decode("latin-1")})
                    await write(binary.encode_frame(FrameType.META, meta, channel=channel))
            return
        if message["type"] != "http.response.body":
            return
        chunk = message.get("body", b"")
        if status != 200:
            error_body.extend(chunk[: _MAX_ERROR_BODY - len(error_body)])
            return
        if state.hang_up.is_set():
            raise OSError("the stream hung up")  # as a vanished HTTP client
        for f in decoder.feed(chunk):  # 6.2: one frame per message
            await write(binary.encode_frame(f.type, f.body, channel=channel))
        if not message.get("more_body", False):
            ended = True

    try:
        await routes.target(scope, receive, send)
    except Exception:  # the route failed before answering: an ERROR, not a hang
        status = status or 500
    state.route_done = True
    if state.cancelled:
        await write(binary.encode_error("cancelled", "cancelled by the client", channel=channel))
    elif status != 200:
        code, text = _error_of(status, bytes(error_body))
        await write(binary.encode_error(code, text, channel=channel))
    elif not ended and not closed():
        await write(
            binary.encode_error("internal_error", "the stream ended early", channel=channel)
        )


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
            return code, binary.refusal_message(status, message)
    return (
        "not_found" if status == 404 else "internal_error"
    ), f"the stream route answered {status}"
