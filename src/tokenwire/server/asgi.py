"""ASGI plumbing shared by the stream endpoint, the gateway's routes and the resume endpoint.

Pure helpers (JSON error bodies, exception classification; media types are
``negotiate``'s) and the
few I/O helpers every route needs (send a JSON response, read a bounded body,
watch for the client's hang-up while a stream is sent).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any, Final, TypeAlias

import msgspec

from ..errors import ProtocolError, RequestTooLarge, TokenwireError

Scope: TypeAlias = MutableMapping[str, Any]
Message: TypeAlias = MutableMapping[str, Any]
Receive: TypeAlias = Callable[[], Awaitable[Message]]
Send: TypeAlias = Callable[[Message], Awaitable[None]]

# --- Small pure helpers ----------------------------------------------------------------


def json_error(code: str, message: str, path: str | None = None) -> bytes:
    """The JSON error body every error status carries."""
    return msgspec.json.encode({"error": {"code": code, "message": message, "path": path}})


def classify_exception(exc: BaseException) -> tuple[str, str]:
    """The §5.3.6 ``(code, message)`` a provider failure becomes on the wire.

    A ``ProtocolError`` keeps its own code and message; a ``TimeoutError`` is
    ``overloaded`` (the work did not finish in time); anything else is
    ``internal_error`` with a fixed message, so no internal detail leaks.
    """
    if isinstance(exc, ProtocolError):
        return exc.code, exc.message
    if isinstance(exc, TimeoutError):
        return "overloaded", "the model did not answer in time"
    return "internal_error", "internal error"


#: HTTP status -> the error code used in JSON error bodies.
HTTP_ERROR_CODES: Final[dict[int, str]] = {
    400: "invalid_request",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    408: "request_timeout",
    409: "conflict",
    410: "gone",
    413: "request_too_large",
    415: "unsupported_media_type",
    500: "internal_error",
    501: "not_implemented",
    503: "unavailable",
}


# --- ASGI I/O helpers -----------------------------------------------------------------


async def send_json(
    send: Send,
    status: int,
    body: bytes,
    headers: Iterable[tuple[bytes, bytes]] = (),
) -> None:
    """Send a whole JSON response."""
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def send_json_error(
    send: Send,
    status: int,
    code: str,
    message: str,
    path: str | None = None,
    headers: Iterable[tuple[bytes, bytes]] = (),
) -> None:
    """Send an error status with its JSON body ``{"error": {"code", "message", "path"}}``."""
    await send_json(send, status, json_error(code, message, path), headers)


class ClientDisconnected(TokenwireError):
    """The client went away before its request body was read."""


async def read_body(receive: Receive, limit: int, content_length: int | None = None) -> bytes:
    """Read a request body of at most ``limit`` bytes.

    ``content_length`` (the header, when sent) is checked before anything is
    read; otherwise the running size is checked after each chunk, so an
    oversized body is never buffered past ``limit`` plus one chunk.

    Returns the body once ``more_body`` is false or, with ``content_length``,
    once that many bytes are in: an HTTP server may hand over the whole body
    and only then, in a message of its own, say that it ended (granian does;
    waiting for that message costs a round trip to the server's I/O thread
    before the request can be served). Raises ``RequestTooLarge`` over the
    limit and ``ClientDisconnected`` if the client leaves first.
    """
    if content_length is not None and content_length > limit:
        raise RequestTooLarge(
            f"body is {content_length} bytes, over the {limit}-byte limit", path="$"
        )
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnected
        chunk = message.get("body", b"")
        if chunk:
            size += len(chunk)
            if size > limit:
                raise RequestTooLarge(f"body is over the {limit}-byte limit", path="$")
            chunks.append(chunk)
        if not message.get("more_body", False) or size == content_length:
            break
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


# --- The client's hang-up, while a stream is sent -----------------------------------


class HangUp:
    """Waits for the client's hang-up and then cancels the task that sends to it.

    Made by the sending task itself, after the response has started. A
    ``receive`` that fails counts as a hang-up. ``caught`` tells, in the
    sender's ``except CancelledError``, whether the cancel was this one (and
    takes it back); ``stop`` ends the watch when the sending is over.

    When ``receive()`` returns an ``asyncio.Future`` (``tokenwire.server.http1``
    does), the watch is a done-callback on it: no task and no coroutine frame
    per open stream (~1 KiB each); other servers' awaitables get a watcher task.
    """

    __slots__ = ("sender", "task", "fired", "receive", "future")

    def __init__(self, receive: Receive, loop: asyncio.AbstractEventLoop) -> None:
        self.sender: asyncio.Task[object] | None = asyncio.current_task(loop)
        self.fired = False
        self.receive = receive
        self.future: asyncio.Future[Message] | None = None
        self.task: asyncio.Task[None] | None = None
        first = receive()
        if isinstance(first, asyncio.Future):
            self._listen(first)
        else:
            self.task = loop.create_task(self._watch(_unstarted(first)))

    def _listen(self, future: asyncio.Future[Message]) -> None:
        self.future = future
        future.add_done_callback(self._on_message)

    def _on_message(self, future: asyncio.Future[Message]) -> None:
        if future is not self.future or future.cancelled():
            return  # stopped
        self.future = None
        if future.exception() is None and future.result()["type"] != "http.disconnect":
            if self.sender is None:
                return
            try:
                again = self.receive()
            except Exception:
                self._fire()
                return
            if isinstance(again, asyncio.Future):
                self._listen(again)
                return
            self.task = asyncio.get_running_loop().create_task(self._watch(_unstarted(again)))
            return
        self._fire()  # a disconnect, or a receive that failed

    async def _watch(self, first: Awaitable[Message] | None) -> None:
        try:
            message = await (first if first is not None else self.receive())
            while message["type"] != "http.disconnect":
                message = await self.receive()
        except Exception:
            pass  # a receive that failed counts as a hang-up
        self._fire()

    def _fire(self) -> None:
        sender = self.sender
        if sender is not None:
            self.sender = None
            self.fired = True
            sender.cancel()

    def caught(self) -> bool:
        """True (and the cancel undone) when this watch cancelled the sender."""
        if not self.fired:
            return False
        self.fired = False
        task = asyncio.current_task()
        # Undo our cancel only: a server's cancel on top of it still stands.
        return task is None or task.uncancel() == 0

    def stop(self) -> None:
        self.sender = None
        future, self.future = self.future, None
        if future is not None:
            future.remove_done_callback(self._on_message)
            future.cancel()
        if self.task is not None:
            self.task.cancel()

    async def stopped(self) -> None:
        if self.task is not None:
            await asyncio.wait([self.task])


def _unstarted(pending: Awaitable[Message]) -> Awaitable[Message] | None:
    """``None`` for a coroutine (closed: it does nothing until awaited, and a watcher
    cancelled before it runs would leave it never awaited); another awaitable (a
    server's, which may have started fetching) is kept for the watcher to await."""
    if asyncio.iscoroutine(pending):
        pending.close()
        return None
    return pending
