"""One HTTP/1.1 connection on httptools: its request cycles, refusals and writes."""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import logging
import socket
import time
from collections import deque
from collections.abc import Coroutine
from http import HTTPStatus
from typing import Any, Final, Protocol, cast
from urllib.parse import unquote

import httptools

from ...errors import TokenwireError
from ..asgi import Message, Scope, json_error
from .settings import (
    BODY_HIGH_WATER,
    MAX_CHUNK_LINE,
    MAX_HEAD,
    MAX_HEADERS,
    WRITE_HIGH_WATER,
    Settings,
)
from .states import (
    CycleMisuse,
    Request,
    RequestEvent,
    Response,
    ResponseEvent,
    next_request,
    next_response,
)

_log = logging.getLogger("tokenwire.h1server")

_ASGI: Final = {"version": "3.0", "spec_version": "2.3"}
_REASONS: Final = {s.value: s.phrase.encode() for s in HTTPStatus}
_NO_BODY: Final = frozenset({204, 304})
_CHUNKED_END: Final = b"0\r\n\r\n"
#: Header names as clients spell them -> the lower-cased name, shared by every request.
_NAMES: Final = {
    spelled: lower
    for lower in (
        b"host",
        b"content-type",
        b"content-length",
        b"accept",
        b"accept-encoding",
        b"user-agent",
        b"authorization",
        b"connection",
        b"x-api-key",
    )
    for spelled in (lower, lower.title(), lower.upper())
}
#: Methods and versions: shared strings.
_VERSIONS: Final = {"1.1": "1.1", "1.0": "1.0"}
_METHODS: Final = {m.encode(): m for m in ("GET", "POST", "HEAD", "PUT", "DELETE", "OPTIONS")}


class _Date:
    """The ``Date`` header (RFC 9110 §6.6.1), formatted once a second."""

    __slots__ = ("second", "value")

    def __init__(self) -> None:
        self.second = -1
        self.value = b""

    def now(self) -> bytes:
        second = int(time.time())
        if second != self.second:
            self.second = second
            self.value = email.utils.formatdate(second, usegmt=True).encode()
        return self.value


_DATE: Final = _Date()


class Refusal(TokenwireError):
    """A request the server answers itself, with ``status`` and ``message`` (control flow)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class Host(Protocol):
    """What a connection needs of the server that accepted it (``H1Server`` is one).

    Declared here so that the connection names no server class: the server
    module imports this one, never the other way round.
    """

    loop: asyncio.AbstractEventLoop
    settings: Settings
    connections: set[Connection]
    addresses: dict[tuple[str, int], tuple[str, int]]
    state: dict[str, Any]
    closing: bool
    calls: int

    def run(self, cycle: _Cycle) -> Coroutine[Any, Any, None]: ...


class _Cycle:
    """One request and its response: what the app's ``receive`` and ``send`` work on.

    Its progress is two states (``states``: the request body toward the app, the
    response from it), moved only by their tables' rows; the flags the protocol
    reads (``complete``, ``done``...) are derived from them. ``chunked``,
    ``keep_alive`` and ``head_only`` are not progress but the framing chosen.
    """

    __slots__ = (
        "conn",
        "scope",
        "chunks",
        "body_size",
        "request",
        "response",
        "waiter",
        "status",
        "headers",
        "chunked",
        "keep_alive",
        "head_only",
    )

    def __init__(
        self, conn: Connection, scope: Scope, keep_alive: bool, expect_continue: bool = False
    ) -> None:
        self.conn = conn
        self.scope = scope
        self.chunks: list[bytes] = []
        self.body_size = 0
        self.request = Request.AWAITING_CONTINUE if expect_continue else Request.RECEIVING
        self.response = Response.IDLE
        self.waiter: asyncio.Future[Message] | None = None
        self.status = 200
        self.headers: list[tuple[bytes, bytes]] = []
        self.chunked = False
        self.keep_alive = keep_alive
        self.head_only = scope["method"] == "HEAD"

    # -- derived from the two states -------------------------------------------------

    @property
    def complete(self) -> bool:
        """The whole request body is in."""
        return self.request is Request.COMPLETE or self.request is Request.DELIVERED

    @property
    def started(self) -> bool:
        """``http.response.start`` came."""
        return self.response is not Response.IDLE

    @property
    def head_sent(self) -> bool:
        return self.response is Response.SENDING or self.response is Response.DONE

    @property
    def done(self) -> bool:
        """The response's last byte was written."""
        return self.response is Response.DONE

    # -- the request side --------------------------------------------------------------

    def body_arrived(self, body: bytes) -> None:
        self.request = next_request(self.request, RequestEvent.BODY)
        self.chunks.append(body)
        self.body_size += len(body)

    def body_ended(self) -> None:
        self.request = next_request(self.request, RequestEvent.ENDED)

    # -- receive -------------------------------------------------------------------

    def receive(self) -> asyncio.Future[Message]:
        """The app's ``receive``: a future, so a caller may ask for it ahead (``guard``)."""
        conn = self.conn
        future: asyncio.Future[Message] = conn.loop.create_future()
        message = self._message()
        if message is not None:
            future.set_result(message)
        else:
            if self.request is Request.AWAITING_CONTINUE:
                # RFC 9110 §10.1.1: the client waits for this before it sends the body.
                self.request = next_request(self.request, RequestEvent.CONTINUE_SENT)
                if conn.transport is not None and not conn.lost:
                    conn.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            self.waiter = future
        return future

    def _message(self) -> Message | None:
        if self.chunks:
            body = self.chunks[0] if len(self.chunks) == 1 else b"".join(self.chunks)
            self.chunks = []
            self.body_size = 0
            self.conn.body_taken()
            more = self.request is not Request.COMPLETE
            if not more:
                self.request = next_request(self.request, RequestEvent.LAST_GIVEN)
            return {"type": "http.request", "body": body, "more_body": more}
        if self.request is Request.COMPLETE:
            self.request = next_request(self.request, RequestEvent.LAST_GIVEN)
            return {"type": "http.request", "body": b"", "more_body": False}
        if self.conn.lost or (self.request is Request.DELIVERED and self.response is Response.DONE):
            return {"type": "http.disconnect"}
        return None

    def wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            message = self._message()
            if message is not None:
                self.waiter = None
                waiter.set_result(message)

    # -- send ------------------------------------------------------------------------

    async def send(self, message: Message) -> None:
        """The app's ``send``: waits while the client does not read (``WRITE_HIGH_WATER``)."""
        kind = message["type"]
        conn = self.conn
        if kind == "http.response.start":
            self.response = next_response(self.response, ResponseEvent.START)
            # Answered without (all of) the body: no 100 is due any more.
            self.request = next_request(self.request, RequestEvent.RESPONSE_STARTED)
            self.status = int(message["status"])
            self.headers = list(message.get("headers", ()))
            # Held back: the head leaves with the first body message, in one write.
            return
        if kind != "http.response.body":
            raise CycleMisuse(f"unexpected ASGI message {kind!r}")
        more: bool = message.get("more_body", False)
        before = self.response
        after = next_response(before, ResponseEvent.MORE if more else ResponseEvent.LAST)
        if conn.lost or conn.transport is None:
            raise OSError("the client went away")  # nothing written: the state stays
        self.response = after
        body: bytes = message.get("body", b"")
        data = self._head(body, more) if before is Response.HELD else b""
        if self.head_only or self.status in _NO_BODY:
            pass
        elif self.chunked:
            if body:
                data += b"%x\r\n" % len(body) + body + b"\r\n"
            if not more:
                data += _CHUNKED_END
        else:
            data += body
        if data:
            conn.transport.write(data)
        if not more:
            # The last bytes are the transport's to deliver: no wait for them (a
            # hang-up watcher woken by ``response_done`` must find the sender done).
            conn.response_done(self)
        elif conn.write_paused:
            await conn.drained()

    def _head(self, body: bytes, more: bool) -> bytes:
        status = self.status
        lines = [b"HTTP/1.1 %d %s\r\n" % (status, _REASONS.get(status, b""))]
        has_length = False
        for name, value in self.headers:
            if b"\r" in value or b"\n" in value or b"\r" in name or b"\n" in name:
                raise RuntimeError("a response header holds CR or LF")  # response splitting
            lower = name.lower()
            if lower == b"content-length":
                has_length = True
            elif lower == b"transfer-encoding":
                continue  # the server frames the body itself
            elif lower == b"connection":
                if b"close" in value.lower():
                    self.keep_alive = False
                continue
            lines += [name, b": ", value, b"\r\n"]
        if not has_length and status not in _NO_BODY and status >= 200:
            if more:
                self.chunked = True
                lines.append(b"transfer-encoding: chunked\r\n")
            else:
                lines.append(b"content-length: %d\r\n" % len(body))
        if not self.complete:
            # The app answered before the body was in: the rest of it cannot be
            # told apart from a next request without reading it all, so close.
            self.keep_alive = False
        if self.conn.server.closing:
            self.keep_alive = False
        lines += [b"date: ", _DATE.now(), b"\r\n"]
        if not self.keep_alive:
            lines.append(b"connection: close\r\n")
        lines.append(b"\r\n")
        return b"".join(lines)


class Connection(asyncio.Protocol):
    """One client connection: parses its requests and runs one ``_Cycle`` at a time."""

    # No __dict__ (asyncio.Protocol has empty slots): an open stream holds one of these.
    __slots__ = (
        "server",
        "loop",
        "transport",
        "parser",
        "lost",
        "write_paused",
        "_drain",
        "reading_paused",
        "cycle",
        "parsing",
        "queued",
        "client",
        "local",
        "timer",
        "body_seen",
        "chunk_headers",
        "url",
        "raw_headers",
        "head_bytes",
        "head_raw",
        "stale",
        "in_head",
        "in_body",
        "chunked",
        "__weakref__",
    )

    def __init__(self, server: Host) -> None:
        self.server = server
        self.loop = server.loop
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpRequestParser(self)
        self.lost = False
        self.write_paused = False
        self._drain: asyncio.Future[None] | None = None
        self.reading_paused = False
        self.cycle: _Cycle | None = None  # the one the app runs now
        self.parsing: _Cycle | None = None  # the one whose request is being parsed
        # Pipelined requests waiting their turn (made when one is: most connections never).
        self.queued: deque[_Cycle] | None = None
        self.client: tuple[str, int] | None = None
        self.local: tuple[str, int] | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.body_seen = 0  # request body bytes parsed on this connection
        self.chunk_headers = 0  # chunk-size lines parsed on this connection
        self._reset_message()

    def _reset_message(self) -> None:
        self.url = b""
        self.raw_headers: list[tuple[bytes, bytes]] = []
        self.head_bytes = 0  # the head's fields as parsed
        self.head_raw = 0  # the bytes that arrived while the head was incomplete
        self.stale = 0
        self.in_head = False
        self.in_body = False
        self.chunked = False

    # -- asyncio.Protocol ----------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        self.transport.set_write_buffer_limits(high=WRITE_HIGH_WATER)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                # No Nagle: a small SSE frame goes out at once, not after the ACK
                # of the previous one (a delayed-ACK stall of up to 40 ms).
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple):
            self.client = (str(peer[0]), int(peer[1]))
        local = transport.get_extra_info("sockname")
        if isinstance(local, tuple):
            # Every connection of a listener has the same local address: one tuple.
            key = (str(local[0]), int(local[1]))
            self.local = self.server.addresses.setdefault(key, key)
        self.server.connections.add(self)
        self._arm(self.server.settings.header_timeout_s)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.server.connections.discard(self)
        self._disarm()
        for cycle in (self.cycle, self.parsing, *(self.queued or ())):
            if cycle is not None:
                cycle.wake()
        drain = self._drain
        if drain is not None and not drain.done():
            drain.set_exception(OSError("the client went away"))
            drain.exception()  # retrieved: nobody may be waiting
        self._drain = None

    def eof_received(self) -> bool | None:
        return None  # a half-closed client is gone: the transport closes

    def pause_writing(self) -> None:
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False
        drain = self._drain
        if drain is not None and not drain.done():
            drain.set_result(None)
        self._drain = None

    async def drained(self) -> None:
        if self.lost:
            raise OSError("the client went away")
        drain = self._drain
        if drain is None or drain.done():  # done: a wait cancelled by a write deadline
            drain = self._drain = self.loop.create_future()
        await drain

    def data_received(self, data: bytes) -> None:
        if self.lost:
            return
        fed = len(data)
        in_body_before = self.in_body
        body_before = self.body_seen
        headers_before = self.chunk_headers
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._refuse(Refusal(501, "protocol upgrades are not served"))
            return
        except httptools.HttpParserError as exc:
            # A refusal raised in a callback comes back wrapped (HttpParserCallbackError).
            cause = exc.__cause__ or exc.__context__
            if isinstance(cause, Refusal):
                self._refuse(cause)
            else:
                # llhttp's strict mode: CL with TE, duplicate CL, obs-fold, bare LF...
                self._refuse(Refusal(400, f"malformed request: {exc}"))
            return
        if self.in_head:
            # A head still arriving (llhttp holds a field until it is whole).
            self.head_raw += fed
            if self.head_raw > MAX_HEAD:
                self._refuse(Refusal(431, f"the request head is over {MAX_HEAD} bytes"))
            return
        if self.in_body and self.chunked:
            # Bytes that were neither body nor a completed chunk-size line: a
            # chunk-size line (and its extensions) still arriving.
            if in_body_before:
                overhead = fed - (self.body_seen - body_before)
            else:
                end = data.find(b"\r\n\r\n")
                overhead = fed - (end + 4) - (self.body_seen - body_before) if end >= 0 else 0
            lines = self.chunk_headers - headers_before
            self.stale = self.stale + overhead if lines == 0 else 0
            if self.stale > MAX_CHUNK_LINE or overhead > (lines + 1) * (MAX_CHUNK_LINE + 2):
                self._refuse(Refusal(400, f"a chunk-size line is over {MAX_CHUNK_LINE} bytes"))

    # -- httptools callbacks -------------------------------------------------------

    def on_message_begin(self) -> None:
        self._reset_message()
        self.in_head = True
        if self.cycle is None:
            self._arm(self.server.settings.header_timeout_s)

    def on_url(self, url: bytes) -> None:
        self.url += url
        self.head_bytes += len(url)
        if self.head_bytes > MAX_HEAD:
            raise Refusal(431, f"the request head is over {MAX_HEAD} bytes")

    def on_header(self, name: bytes, value: bytes) -> None:
        self.head_bytes += len(name) + len(value) + 4
        if self.head_bytes > MAX_HEAD:
            raise Refusal(431, f"the request head is over {MAX_HEAD} bytes")
        if self.in_body:
            return  # a trailer field: counted, not kept (RFC 9110 §6.5.2)
        lower = _NAMES.get(name)  # a common name: one shared bytes object, not one per request
        self.raw_headers.append((name.lower() if lower is None else lower, value))
        if len(self.raw_headers) > MAX_HEADERS:
            raise Refusal(431, f"more than {MAX_HEADERS} header fields")

    def on_headers_complete(self) -> None:
        parser = self.parser
        self.in_head = False
        self.in_body = True
        version = parser.get_http_version()
        version = _VERSIONS.get(version, version)  # a shared string
        if parser.should_upgrade():
            # llhttp would read what follows as the new protocol; this server
            # speaks HTTP/1.1 only (h2c and WebSocket are granian's).
            raise Refusal(501, "protocol upgrades are not served here")
        headers = self.raw_headers
        hosts = 0
        chunked = False
        expect = False
        for name, value in headers:
            if name == b"host":
                hosts += 1
            elif name == b"transfer-encoding":
                if version == "1.0":
                    # RFC 9112 §6.1: Transfer-Encoding in HTTP/1.0 is faulty framing.
                    raise Refusal(400, "Transfer-Encoding in an HTTP/1.0 request")
                if value.strip().lower() != b"chunked":
                    raise Refusal(
                        501,
                        f"Transfer-Encoding {value.decode('latin-1')!r} is "
                        "not served; only chunked",
                    )
                chunked = True
            elif name == b"expect":
                if value.strip().lower() != b"100-continue":
                    raise Refusal(417, "only Expect: 100-continue is understood")
                expect = True
        if version == "1.1" and hosts != 1:
            # RFC 9112 §3.2: exactly one Host in an HTTP/1.1 request.
            raise Refusal(400, "an HTTP/1.1 request needs exactly one Host header field")
        if hosts > 1:
            raise Refusal(400, "more than one Host header field")
        url = httptools.parse_url(self.url)
        self.url = b""
        method = parser.get_method()
        raw_path = url.path or b"/"
        server = self.server
        scope: Scope = {
            "type": "http",
            "asgi": _ASGI,
            "http_version": version,
            "method": _METHODS.get(method) or method.decode("ascii"),
            "scheme": "http",
            "path": unquote(raw_path.decode("latin-1")),
            "raw_path": raw_path,
            "query_string": url.query or b"",
            "root_path": "",
            "headers": headers,
            "client": self.client,
            "server": self.local,
        }
        self.chunked = chunked
        if server.state:
            scope["state"] = server.state.copy()
        keep_alive = parser.should_keep_alive() and not server.closing
        cycle = _Cycle(self, scope, keep_alive, expect)
        self.parsing = cycle
        if self.cycle is None:
            self._disarm()
            self._start(cycle)
        else:
            # Pipelined: it waits for the response before it, and so does the socket.
            if self.queued is None:
                self.queued = deque()
            self.queued.append(cycle)
            self._pause_reading()

    def on_body(self, body: bytes) -> None:
        cycle = self.parsing
        self.body_seen += len(body)
        if cycle is None:
            return
        # A client may send its body without waiting for a 100 (RFC 9110 §10.1.1):
        # then none is due (``states``), least of all one written into the response.
        cycle.body_arrived(body)
        if cycle.body_size > BODY_HIGH_WATER:
            self._pause_reading()
        cycle.wake()

    def on_chunk_header(self) -> None:
        self.chunk_headers += 1

    def on_message_complete(self) -> None:
        self.in_body = False
        cycle = self.parsing
        self.parsing = None
        if cycle is not None:
            cycle.body_ended()
            cycle.wake()

    # -- cycles ----------------------------------------------------------------------

    def _start(self, cycle: _Cycle) -> None:
        self.cycle = cycle
        self.server.calls += 1
        self.loop.create_task(self.server.run(cycle))

    def response_done(self, cycle: _Cycle) -> None:
        """The response's last byte was written: the next request, or the end."""
        if not cycle.keep_alive or self.lost:
            if self.transport is not None:
                self.transport.close()
            return
        cycle.wake()  # a receive() waiting after the body now gets http.disconnect

    def finished(self, cycle: _Cycle) -> None:
        """The app returned (``H1Server.run``)."""
        if self.cycle is cycle:
            self.cycle = None
        if self.lost or self.transport is None:
            return
        if not cycle.done:
            # The app returned without ending its response: cut, not ended, so the
            # client cannot take a truncated stream for a whole one; ``abort``
            # also drops whatever the transport still held for it.
            self.transport.abort()
            return
        if not cycle.keep_alive:
            return
        if self.queued:
            self._start(self.queued.popleft())
            if not self.queued:
                # Reading stopped when this request was queued behind the one
                # that just ended; its body may still be on the way (a client
                # that sent the head before it read the whole previous
                # response): read on, or the body never comes (a 408 later).
                self.body_taken()
        else:
            self._resume_reading()
            if self.server.closing:
                self.transport.close()
            elif self.in_head:
                # The next head began before this app returned: its own deadline.
                self._arm(self.server.settings.header_timeout_s)
            else:
                self._arm(self.server.settings.idle_timeout_s, idle=True)

    def body_taken(self) -> None:
        """Read again once nothing is queued and the body being parsed is under the mark."""
        parsing = self.parsing
        if (
            self.reading_paused
            and not self.queued
            and (parsing is None or parsing.body_size <= BODY_HIGH_WATER)
        ):
            self._resume_reading()

    def _pause_reading(self) -> None:
        if not self.reading_paused and self.transport is not None:
            self.reading_paused = True
            self.transport.pause_reading()

    def _resume_reading(self) -> None:
        if self.reading_paused and self.transport is not None and not self.lost:
            self.reading_paused = False
            self.transport.resume_reading()

    def _arm(self, seconds: float, idle: bool = False) -> None:
        self._disarm()
        self.timer = self.loop.call_later(seconds, self._timed_out, idle)

    def _disarm(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def _timed_out(self, idle: bool) -> None:
        # A head that never completes (slowloris), or an idle keep-alive connection.
        if idle and (self.in_head or self.parsing is not None or self.cycle is not None):
            # Run in the same loop turn as the next request's first bytes, which
            # came first (its cancel came too late): that request is the client's
            # and has a deadline of its own, the head's, now in ``timer``.
            return
        self.timer = None
        if self.cycle is None and self.transport is not None:
            self.transport.close()

    def _refuse(self, refusal: Refusal) -> None:
        """Answer a request the app never sees, then close (its framing is not trusted)."""
        transport = self.transport
        if transport is None or self.lost:
            return
        refused = self.parsing
        self.parsing = None
        self.in_head = self.in_body = False
        current = self.cycle
        if current is not None and (current.head_sent or current is not refused):
            # Mid-response, or a bad pipelined request behind one: no room for an
            # answer of its own.
            self.lost = True
            transport.abort()
            return
        body = json_error(_CODES.get(refusal.status, "invalid_request"), refusal.message)
        head = (
            b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
            b"date: %s\r\nconnection: close\r\n\r\n"
            % (refusal.status, _REASONS.get(refusal.status, b""), len(body), _DATE.now())
        )
        transport.write(head + body)
        transport.close()
        # The app (reading this request's body) sees the client as gone.
        self.lost = True
        if current is not None:
            current.wake()


_CODES: Final = {
    400: "invalid_request",
    408: "request_timeout",
    417: "invalid_request",
    431: "request_too_large",
    500: "internal_error",
    501: "not_implemented",
}
