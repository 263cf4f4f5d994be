"""tokenwire's own HTTP/1.1 server: an asyncio protocol on httptools, serving an ASGI app.

``tokenwire serve`` runs it for cleartext HTTP/1.1 when ``[server] engine = "h1"``
(TLS and HTTP/2 stay on granian: ALPN, h2). It exists because of what it
removes (bench/RESULTS.md, "serving"):

- **No hand-offs.** The request is parsed, and the response written, on the
  event loop that runs the app: no hop to a server's I/O threads and back
  (granian's, ~0.35 ms of the first token).
- **Backpressure the app sees.** ``send`` returns once the transport has the
  bytes, and waits while its buffer is over ``WRITE_HIGH_WATER``: a client that
  stops reading makes ``send`` wait, so the request guard's write deadline
  (``guard``) ends the stream, and ``abort`` drops what was buffered for it.
- **Coalesced writes.** ``http.response.start`` is held until the first body
  message: the head and the first events leave in one write (one segment).

Refusals (RFC 9112; each is a 4xx with a JSON body naming the problem, then
``Connection: close``; nothing of the request reaches the app): llhttp's strict
mode refuses Content-Length with Transfer-Encoding (§6.3), a duplicate or
non-numeric Content-Length, obs-fold (§5.2), bare LF or CR line ends (§2.2),
malformed chunk sizes; this module adds a Transfer-Encoding other than
``chunked`` (501), Transfer-Encoding in HTTP/1.0 (§6.1), a missing or repeated
Host (§3.2), heads over ``MAX_HEAD`` bytes or ``MAX_HEADERS`` fields (431) and
chunk-size lines over ``MAX_CHUNK_LINE`` bytes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Awaitable, Callable
from typing import Any

from ..asgi import json_error
from .lifespan import Lifespan
from .protocol import Connection, _Cycle
from .settings import MAX_CHUNK_LINE, MAX_HEAD, MAX_HEADERS, WRITE_HIGH_WATER, Settings

_log = logging.getLogger("tokenwire.h1server")


__all__ = [
    "MAX_CHUNK_LINE",
    "MAX_HEAD",
    "MAX_HEADERS",
    "WRITE_HIGH_WATER",
    "H1Server",
    "Settings",
]


class H1Server:
    """Serves ``app`` (ASGI 3) over HTTP/1.1 on the running event loop.

    ``start`` listens, ``startup``/``shutdown`` run the app's lifespan, ``close``
    stops accepting and closes idle connections, ``idle`` waits for the calls in
    progress. ``cli/_one_process.py`` drives them for ``tokenwire serve``.
    """

    def __init__(
        self, app: Callable[..., Awaitable[None]], settings: Settings | None = None
    ) -> None:
        self.app = app
        self.settings = settings if settings is not None else Settings()
        self.loop = asyncio.get_running_loop()
        self.connections: set[Connection] = set()
        self.addresses: dict[tuple[str, int], tuple[str, int]] = {}
        self.state: dict[str, Any] = {}
        self.closing = False
        self.calls = 0
        self._servers: list[asyncio.AbstractServer] = []
        self._idle: asyncio.Event = asyncio.Event()
        self._idle.set()
        self._lifespan: Lifespan | None = None

    async def start(self, sock: socket.socket) -> None:
        """Serve connections accepted on the listening socket ``sock``."""
        self._listener_options(sock)
        server = await self.loop.create_server(lambda: Connection(self), sock=sock, backlog=1024)
        self._servers.append(server)

    def _listener_options(self, sock: socket.socket) -> None:
        settings = self.settings
        with contextlib.suppress(OSError):
            if settings.send_buffer_bytes:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, settings.send_buffer_bytes)
            user_timeout = getattr(socket, "TCP_USER_TIMEOUT", None)
            if user_timeout is not None:
                # The kernel resets a connection whose data stays unacknowledged this long.
                ms = max(1, round(settings.write_timeout_s * 1000))
                sock.setsockopt(socket.IPPROTO_TCP, user_timeout, ms)

    async def run(self, cycle: _Cycle) -> None:
        """One request through the app (a task of its own)."""
        self._idle.clear()
        conn = cycle.conn
        try:
            await self.app(cycle.scope, cycle.receive, cycle.send)
        except Exception as exc:
            if not (conn.lost and isinstance(exc, OSError)):  # not just a client gone
                _log.exception("the app raised while serving %s", cycle.scope.get("path"))
            if not cycle.started and not conn.lost:
                cycle.keep_alive = False
                with contextlib.suppress(Exception):
                    body = json_error("internal_error", "internal error")
                    await cycle.send(
                        {
                            "type": "http.response.start",
                            "status": 500,
                            "headers": [(b"content-type", b"application/json")],
                        }
                    )
                    await cycle.send({"type": "http.response.body", "body": body})
        finally:
            if not cycle.started and not cycle.done and not conn.lost:
                # The app returned without answering.
                cycle.keep_alive = False
                with contextlib.suppress(Exception):
                    await cycle.send({"type": "http.response.start", "status": 500})
                    await cycle.send({"type": "http.response.body", "body": b""})
            self.calls -= 1
            if self.calls == 0:
                self._idle.set()
            conn.finished(cycle)

    # -- lifespan and stopping -----------------------------------------------------

    async def startup(self) -> None:
        """Run the app's lifespan startup (an app without lifespan support is served as is)."""
        self._lifespan = Lifespan(self.app, self.state)
        await self._lifespan.startup()

    async def shutdown(self) -> None:
        if self._lifespan is not None:
            await self._lifespan.shutdown()

    def close(self) -> None:
        """Stop accepting; close the idle connections; busy ones close after their response."""
        self.closing = True
        for server in self._servers:
            server.close()
        for conn in list(self.connections):
            if conn.cycle is None and conn.parsing is None and conn.transport is not None:
                conn.transport.close()

    async def idle(self) -> None:
        """Until no call is in progress."""
        await self._idle.wait()

    def abort_all(self) -> None:
        for conn in list(self.connections):
            if conn.transport is not None:
                conn.transport.abort()
