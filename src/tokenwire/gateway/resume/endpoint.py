"""The route ``/v1/streams/{request_id}``: ``GET`` resumes a stream, ``DELETE`` cancels it.

``GET`` (``Last-Event-ID: N`` or ``?after=N``) replays the stored frames after
seq N, then follows the live ones to ``stream.end``: same bytes, same seqs, no
gap, no duplicate. ``DELETE`` cancels the generation wherever it runs (the
owning replica hears it on a Redis channel, or at its next heartbeat). Both
need the stream's resume token and its creator's credential (``access``);
without them the answer is the 404 of a stream that does not exist, byte for
byte. The ``request_id`` is looked up in the caller's own namespace
(``access.scoped``): another credential's stream of that id is not even
looked at. The app builds the endpoint (``gateway/app.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Iterable
from typing import Final
from urllib.parse import parse_qs

import msgspec

from ... import events as ev
from ... import sse
from ...server import CLEANUP_S, FRAMES, SSE_HEADERS, FramesEncode
from ...server.asgi import (
    Receive,
    Scope,
    Send,
    json_error,
    send_json,
    send_json_error,
)
from ...server.negotiate import Refusal, answer_binding
from ...server.outbox import KEEPALIVE
from .access import allowed
from .manager import ResumeManager
from .store import (
    CANCEL_MESSAGE,
    CANCELLED,
    FOLLOW_BLOCK_S,
    LIVE,
    ORPHAN_MESSAGE,
    READER_TOUCH_S,
    EventsTrimmed,
    ResumeStoreError,
    StoreReader,
    StoreUnavailable,
    StreamNotFound,
    log,
    unscoped,
)

__all__ = ["NOT_FOUND", "ResumeEndpoint", "parse_after"]

#: The one answer for a stream that does not exist and for one the caller may not
#: see (no token, a wrong token, another credential): nothing tells them apart.
NOT_FOUND: Final = json_error("stream_not_found", "no stored stream has this request_id")


def _reframe(stored: bytes, frames: FramesEncode) -> bytes:
    """Stored SSE frames as the binary binding's frames (docs/binary.md): a resume may ask
    for either binding, whichever the stream was first served in."""
    decoder = sse.Decoder(max_event_bytes=len(stored) + 1)
    return b"".join(frames(ev.parse(m.event, m.data)) for m in decoder.feed(stored))


def _accept(scope: Scope) -> bytes | None:
    for name, value in scope.get("headers", ()):
        if name == b"accept":
            return bytes(value)
    return None


async def _not_found(send: Send) -> None:
    await send_json(send, 404, NOT_FOUND)


def parse_after(headers: Iterable[tuple[bytes, bytes]], query_string: bytes) -> int:
    """The seq to resume after: ``Last-Event-ID``, else ``?after=``, else -1 (from the start).

    The header wins: a browser's ``EventSource`` updates it on every
    reconnect, not its URL. Raises ``ValueError`` for a value that is not a
    seq (a non-negative integer, §5.2.1).
    """
    value: str | None = None
    for name, raw in headers:
        if name == b"last-event-id":
            value = raw.decode("latin-1").strip() or None
    if value is None:
        values = parse_qs(query_string.decode("latin-1")).get("after")
        value = values[-1].strip() if values else None
    if value is None:
        return -1
    if not value.isdigit() or not value.isascii() or len(value) > 16:
        raise ValueError(f"{value!r} is not a seq")
    return int(value)


class ResumeEndpoint:
    """ASGI app of ``/v1/streams/{request_id}``: ``GET`` resumes, ``DELETE`` cancels.

    ``GET`` answers 200 ``text/event-stream`` with the stored frames after the
    seq, then the live ones up to ``stream.end``; 204 when the client already
    has ``stream.end`` (a browser ``EventSource`` then stops reconnecting); 400
    for a bad ``Last-Event-ID``/``after``; 404 for an unknown or expired id;
    410 when those events were trimmed (``max_events_per_stream``); 503 when
    the store is unreachable. ``DELETE`` answers 200 ``{"request_id", "status"}``
    once the stream has ended (``cancelled``, or how it ended before), 202
    ``cancelling`` if its replica has not ended it yet, 404 for an unknown id.
    """

    def __init__(self, manager: ResumeManager) -> None:
        self.manager = manager

    async def _allowed(self, scope: Scope, request_id: str) -> bool:
        """Whether the request has the stream's token and its creator's credential.
        Raises ``StoreUnavailable`` (503, whether or not the stream exists)."""
        info = await self.manager.store.info(request_id)
        return info is not None and allowed(info, scope.get("headers", ()))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            raise RuntimeError(f"ResumeEndpoint serves HTTP only, not {scope['type']!r}")
        request_id = str(scope.get("path_params", {}).get("request_id", ""))
        if not request_id:
            request_id = scope.get("path", "").rstrip("/").rpartition("/")[2]
        # From here on, the id of the caller's own stream (access.scoped).
        request_id = self.manager.stream_id(scope.get("headers", ()), request_id)
        method = scope.get("method", "GET")
        await self.manager.start()
        if method in ("GET", "HEAD"):
            await self._resume(scope, receive, send, request_id, head=method == "HEAD")
        elif method == "DELETE":
            await self._cancel(scope, send, request_id)
        else:
            await send_json_error(
                send,
                405,
                "method_not_allowed",
                f"{method} is not allowed",
                headers=[(b"allow", b"GET, HEAD, DELETE")],
            )

    # -- GET ---------------------------------------------------------------------------

    async def _resume(
        self, scope: Scope, receive: Receive, send: Send, request_id: str, *, head: bool
    ) -> None:
        started = time.perf_counter()
        store = self.manager.store
        try:
            after = parse_after(scope.get("headers", ()), scope.get("query_string", b""))
        except ValueError as exc:
            await send_json_error(send, 400, "invalid_request", str(exc), "Last-Event-ID")
            return
        try:
            if not await self._allowed(scope, request_id):
                await _not_found(send)
                return
            reader = await store.open_reader(request_id, after)
        except StreamNotFound:
            await _not_found(send)
            return
        except EventsTrimmed as exc:
            await send_json_error(
                send,
                410,
                "events_trimmed",
                f"the events after seq {after} are no longer all stored "
                f"(the next one kept is seq {exc.first_seq})",
            )
            return
        except StoreUnavailable:
            await send_json_error(
                send, 503, "resume_unavailable", "the resume store cannot be reached"
            )
            return
        try:
            binding = answer_binding(_accept(scope))
            if isinstance(binding, Refusal):  # docs/binary.md section 3: frames nobody writes
                code = "not_acceptable"
                await send_json_error(send, 406, code, binding.message, None, binding.headers)
                return
            frames = FRAMES[binding.payload] if binding.answer == "frames" else None
            await self._serve(
                receive, send, request_id, reader, after, started, head=head, frames=frames
            )
        finally:
            reader.close()

    async def _serve(
        self,
        receive: Receive,
        send: Send,
        request_id: str,
        reader: StoreReader,
        after: int,
        started: float,
        *,
        head: bool,
        frames: FramesEncode | None = None,
    ) -> None:
        if not reader.first and reader.finished:
            await send({"type": "http.response.start", "status": 204, "headers": []})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        headers = SSE_HEADERS if frames is None else frames.headers
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        if head:
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        sent = [0]
        follower = asyncio.get_running_loop().create_task(
            self._follow(send, request_id, reader, after, sent, frames)
        )
        watcher = asyncio.get_running_loop().create_task(_wait_disconnect(receive))
        try:
            await asyncio.wait([follower, watcher], return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (follower, watcher):
                task.cancel()
            await asyncio.wait([follower, watcher], timeout=CLEANUP_S)
        complete = (
            follower.done()
            and not follower.cancelled()
            and follower.exception() is None
            and follower.result()
        )
        if complete:
            with contextlib.suppress(OSError):
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        log(
            logging.INFO,
            "resume",
            request_id=unscoped(request_id),
            after=after,
            events=sent[0],
            complete=bool(complete),
            disconnected=watcher.done() and not watcher.cancelled(),
            duration_ms=round((time.perf_counter() - started) * 1000, 3),
        )

    async def _follow(
        self,
        send: Send,
        request_id: str,
        reader: StoreReader,
        after: int,
        sent: list[int],
        frames: FramesEncode | None = None,
    ) -> bool:
        """Send the stored frames, then the live ones. True once ``stream.end`` went out;
        False when the stream cannot continue (the client resumes again, or gives up)."""
        store = self.manager.store
        clock = time.monotonic
        keepalive_s = self.manager.keepalive_s
        last_sent = last_touch = -math.inf
        entries = reader.first
        seen = after  # the last seq this client has
        while True:
            now = clock()
            if now - last_touch >= READER_TOUCH_S:
                last_touch = now
                with contextlib.suppress(ResumeStoreError):
                    await store.touch_reader(request_id)
            if entries:
                body = b"".join(entry.frame for entry in entries)
                if frames is not None:
                    body = _reframe(body, frames)
                try:
                    await send({"type": "http.response.body", "body": body, "more_body": True})
                except OSError:
                    return False
                sent[0] += len(entries)
                seen = entries[-1].seq
                last_sent = clock()
                if entries[-1].type == "stream.end":
                    return True
            elif clock() - last_sent >= keepalive_s:
                try:
                    idle = KEEPALIVE if frames is None else frames.keepalive
                    await send({"type": "http.response.body", "body": idle, "more_body": True})
                except OSError:
                    return False
                last_sent = clock()
            try:
                entries = await reader.next(min(FOLLOW_BLOCK_S, keepalive_s))
                if not entries:
                    state = await store.state(request_id)
                    if state is None:
                        return False  # expired or discarded meanwhile
                    if state.status != LIVE:
                        # Ended: its last entries may have landed just after the read;
                        # if not, the client asked for more than the stream has.
                        entries = await reader.next(0)
                        if not entries:
                            return False
                    elif not state.owner_alive and request_id not in self.manager.live:
                        # "Every stream ends" (DESIGN.md): the replica generating it is
                        # gone, so end it here; the next read returns that end.
                        await store.close_orphan(request_id, "internal_error", ORPHAN_MESSAGE, seen)
            except ResumeStoreError:
                return False  # gone, trimmed past us, or unreachable: the client resumes again

    # -- DELETE ---------------------------------------------------------------------------

    async def _cancel(self, scope: Scope, send: Send, request_id: str) -> None:
        manager = self.manager
        store = manager.store
        try:
            state = await store.state(request_id)
            if state is None or not await self._allowed(scope, request_id):
                await _not_found(send)
                return
            if state.status == LIVE:
                if not manager.cancel_local(request_id, "cancelled", CANCEL_MESSAGE):
                    if state.owner_alive:
                        await store.request_cancel(request_id)
                    else:
                        await store.close_orphan(request_id, "cancelled", CANCEL_MESSAGE)
                # Wait for its end (the store wakes us), checking the state each
                # time: a wake is a hint, and a Redis announcement can be missed.
                deadline = time.monotonic() + CLEANUP_S + manager.lease_s + 1.0
                while state is not None and state.status == LIVE:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    await store.wait_ended(request_id, min(remaining, FOLLOW_BLOCK_S))
                    state = await store.state(request_id)
        except StoreUnavailable:
            await send_json_error(
                send, 503, "resume_unavailable", "the resume store cannot be reached"
            )
            return
        status = CANCELLED if state is None else state.status
        code = 202 if status == LIVE else 200
        body = {
            "request_id": unscoped(request_id),
            "status": "cancelling" if status == LIVE else status,
        }
        log(logging.INFO, "cancel", request_id=body["request_id"], status=body["status"])
        await send_json(send, code, msgspec.json.encode(body))


async def _wait_disconnect(receive: Receive) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
