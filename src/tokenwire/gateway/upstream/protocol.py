"""One upstream HTTP/1.1 connection: an ``asyncio.Protocol`` whose responses httptools parses.

httptools (llhttp, in C) calls back with each piece of the body as it parses
the bytes ``data_received`` got; each piece (a chunk's payload, or a slice of
a ``Content-Length`` or read-until-close body) is kept as the ``bytes`` object
httptools made and handed to the consumer as is, in a list: nothing is copied
on the way (the consumer decides; ``HTTPProvider`` joins a read's pieces into
one ``translator.feed`` when there are several, as measured cheaper).

Limits (a hostile or broken upstream costs a clear error, never unbounded memory):

- the status line and headers: ``MAX_HEAD`` bytes, trailers likewise;
- a chunk-size line (with its extensions): ``MAX_CHUNK_LINE`` bytes, counted
  as the bytes that arrive without any body progress;
- buffered body: above ``HIGH_WATER`` bytes not yet taken by the consumer the
  socket stops being read (``pause_reading``) until the consumer takes them.

The read timeout is the time the consumer waits for the next bytes (httpx's
``read`` timeout): one timer per timeout period, re-armed lazily, not one per chunk.
"""

from __future__ import annotations

import asyncio
from typing import Final, cast

import httptools

from .errors import UpstreamError

__all__ = ["HIGH_WATER", "MAX_CHUNK_LINE", "MAX_HEAD", "Connection"]

#: The status line and the headers of a response (and its trailers), at most.
MAX_HEAD: Final = 64 * 1024
#: Bytes that may arrive with no body progress: a chunk-size line and its extensions.
MAX_CHUNK_LINE: Final = 4096
#: Body bytes buffered for the consumer before the socket stops being read.
HIGH_WATER: Final = 256 * 1024

_RESET: Final = "ReadError: connection reset"
_CLOSED_EARLY: Final = "RemoteProtocolError: the upstream closed the connection mid-response"


class Connection(asyncio.Protocol):
    """A connection to one origin, serving one request at a time.

    ``pool`` code calls ``begin`` to send a request, ``wait_head`` for the
    status and headers, then ``read`` until it returns ``[]`` (the body's
    end); ``reusable`` tells whether the connection may serve another request.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        #: The server closed its side, or the connection is gone.
        self.lost = False
        #: The pool's bookkeeping: origin key, idle timer, counted in the pool's total.
        self.key: tuple[str, str, int] | None = None
        self.idle_timer: asyncio.TimerHandle | None = None
        self.counted = False
        self.on_lost: object = None
        self._parser: httptools.HttpResponseParser | None = None
        self._active = False
        self.timeout = 120.0
        self._timer: asyncio.TimerHandle | None = None
        self._new_response()

    def _new_response(self) -> None:
        self.status = 0
        self.headers: list[tuple[bytes, bytes]] = []
        self.head_done = False
        self.complete = False
        self.keep_alive = False
        #: Bytes of this response seen at all (a reused connection that got none may be retried).
        self.received = 0
        self._delimited = False
        self._interim = False
        self._head_bytes = 0
        self._trailer_bytes = 0
        self._stale = 0
        self._progress = False
        self._pieces: list[bytes] = []
        self._buffered = 0
        self._paused = False
        self._waiter: asyncio.Future[None] | None = None
        self.error: UpstreamError | None = None
        self._wait_start = 0.0
        self._last = 0.0

    # -- asyncio.Protocol ----------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, only alike.
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if not self._active or self.complete:
            # Bytes nobody asked for (an idle connection, or after the response's
            # end): the connection's framing can no longer be trusted.
            self.keep_alive = False
            self.close()
            return
        self._last = self.loop.time()
        self.received += len(data)
        self._progress = False
        parser = self._parser
        assert parser is not None
        try:
            parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(UpstreamError.malformed("an upgrade response to a plain request"))
        except httptools.HttpParserError as exc:
            if self.error is None and not self.complete:
                self._fail(UpstreamError.malformed(f"malformed response ({exc})"))
        if self.error is not None:
            return
        if not self.head_done:
            self._head_bytes += len(data)
            if self._head_bytes > MAX_HEAD:
                self._fail(UpstreamError.malformed(f"response head over {MAX_HEAD} bytes"))
                return
        elif not self._progress and not self.complete:
            self._stale += len(data)
            if self._stale > MAX_CHUNK_LINE:
                self._fail(UpstreamError.malformed(f"chunk-size line over {MAX_CHUNK_LINE} bytes"))
                return
        if self._buffered > HIGH_WATER and not self._paused:
            self._paused = True
            assert self.transport is not None
            self.transport.pause_reading()
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def eof_received(self) -> bool | None:
        self._ended(None)
        return None  # the transport closes itself

    def connection_lost(self, exc: Exception | None) -> None:
        self._ended(exc)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        lost = self.on_lost
        if callable(lost):
            lost(self)

    def _ended(self, exc: Exception | None) -> None:
        self.lost = True
        if not self._active or self.complete or self.error is not None:
            return
        if exc is not None:
            self._fail(UpstreamError(_RESET))
        elif self.head_done and not self._delimited:
            # A body without Content-Length or chunked framing ends with the connection.
            self.complete = True
            self.keep_alive = False
            self._wake()
        else:
            self._fail(UpstreamError(_CLOSED_EARLY))

    # -- httptools callbacks -------------------------------------------------------

    def on_status(self, status: bytes) -> None:
        self._head_bytes += len(status)

    def on_header(self, name: bytes, value: bytes) -> None:
        size = len(name) + len(value) + 4
        if self.head_done:  # a trailer: bounded, then dropped
            self._trailer_bytes += size
            self._progress = True
            if self._trailer_bytes > MAX_HEAD:
                self._fail(UpstreamError.malformed(f"trailers over {MAX_HEAD} bytes"))
            return
        self._head_bytes += size
        self.headers.append((name.lower(), value))

    def on_headers_complete(self) -> None:
        assert self._parser is not None
        status = self._parser.get_status_code()
        if 100 <= status < 200:
            # An interim answer (103 Early Hints): the final one follows.
            self._interim = True
            self.headers = []
            return
        if self._head_bytes > MAX_HEAD:  # all of it in one read
            self._fail(UpstreamError.malformed(f"response head over {MAX_HEAD} bytes"))
            return
        self.status = status
        self.head_done = True
        self._head_bytes = 0
        self._delimited = any(
            name == b"content-length" or name == b"transfer-encoding" for name, _ in self.headers
        )
        self._progress = True

    def on_body(self, body: bytes) -> None:
        self._pieces.append(body)
        self._buffered += len(body)
        self._progress = True
        self._stale = 0

    def on_chunk_header(self) -> None:
        self._progress = True
        self._stale = 0

    def on_message_complete(self) -> None:
        if self._interim:
            self._interim = False
            return
        assert self._parser is not None
        self.keep_alive = self._parser.should_keep_alive()
        self.complete = True
        self._progress = True

    # -- the consumer side ---------------------------------------------------------

    def begin(self, request: bytes, timeout: float) -> None:
        """Send ``request`` (a whole HTTP/1.1 request) and start parsing its response."""
        self._new_response()
        self.timeout = timeout
        self._parser = httptools.HttpResponseParser(self)
        self._active = True
        assert self.transport is not None
        self.transport.write(request)

    def finish(self) -> None:
        """The exchange is over (the connection goes back to the pool or is closed)."""
        self._active = False
        self._parser = None
        self._pieces = []

    @property
    def reusable(self) -> bool:
        """The response was read to its end and the connection may carry another request."""
        return (
            self.complete
            and self.keep_alive
            and not self.lost
            and self.error is None
            and not self._paused
            and self.transport is not None
            and not self.transport.is_closing()
        )

    async def wait_head(self) -> None:
        """Until the status line and headers are in. Raises ``UpstreamError``."""
        while not self.head_done:
            if self.error is not None:
                raise self.error
            await self._wait()

    async def read(self) -> list[bytes]:
        """The body pieces received since the last call, waiting for one; ``[]`` at the end.

        Raises ``UpstreamError`` on a timeout (``read``), a reset or a malformed body.
        """
        while True:
            pieces = self._pieces
            if pieces:
                self._pieces = []
                self._buffered = 0
                if self._paused:
                    self._paused = False
                    assert self.transport is not None
                    self.transport.resume_reading()
                return pieces
            if self.error is not None:
                raise self.error
            if self.complete:
                return pieces
            await self._wait()

    async def _wait(self) -> None:
        loop = self.loop
        waiter = self._waiter = loop.create_future()
        self._wait_start = loop.time()
        if self._timer is None:
            self._timer = loop.call_at(self._wait_start + self.timeout, self._on_timer)
        try:
            await waiter
        finally:
            self._waiter = None

    def _on_timer(self) -> None:
        self._timer = None
        waiter = self._waiter
        if waiter is None or waiter.done():
            return  # nobody is waiting: the next wait arms a new timer
        deadline = max(self._last, self._wait_start) + self.timeout
        if self.loop.time() >= deadline:
            self._fail(UpstreamError.timed_out("read"))
        else:
            self._timer = self.loop.call_at(deadline, self._on_timer)

    def _fail(self, error: UpstreamError) -> None:
        if self.error is None:
            self.error = error
        self.keep_alive = False
        self.close()
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def header(self, name: bytes) -> bytes | None:
        """The first value of header ``name`` (lower case), or ``None``."""
        for key, value in self.headers:
            if key == name:
                return value
        return None

    def close(self) -> None:
        """Close the socket now (a connection that is not reusable)."""
        self.lost = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()
