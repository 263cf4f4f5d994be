"""A pool of upstream HTTP/1.1 connections, keyed by ``(scheme, host, port)``.

- **Reuse**: a connection goes back to the pool only when its response was
  read to the end and the server did not say ``Connection: close``; anything
  else (a cancelled request, an error, a body left unread) closes it at once,
  so no connection is ever left half-read or orphaned.
- **Bounds**: at most ``max_connections`` open (a request beyond waits up to
  its pool timeout), at most ``max_idle`` idle ones kept, each at most
  ``idle_expiry_s`` (httpx's defaults: 1000 / 200 / 5 s).
- **A stale idle connection**: one the server closed while it was idle leaves
  the pool when its close is seen; if the close crosses our request, so that
  a reused connection ends before one byte of the response, the request is sent
  once more on a new connection (the server closed it without reading it).
- **TLS** for ``https``: ``ssl.create_default_context()`` (certificates and
  host names verified), ALPN ``http/1.1``.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import re
import socket
import ssl
from collections import deque
from collections.abc import AsyncIterator, Mapping
from typing import Final
from urllib.parse import urlsplit

from .errors import UpstreamError
from .protocol import Connection

__all__ = ["Pool", "Response"]

Key = tuple[str, str, int]

_DEFAULT_PORTS: Final = {"http": 80, "https": 443}
#: Characters that would let a header value end its line (header injection), and a name.
_UNSAFE: Final = re.compile("[\r\n\0]")
_UNSAFE_NAME: Final = re.compile("[\r\n\0:]")


class Response:
    """An upstream response: ``status``, ``headers`` (lower-case names) and its body.

    The body is read with ``read()`` (a list of ``bytes`` pieces, ``[]`` at its
    end), ``read_bounded(limit)`` or ``drain(max_bytes, max_s)``.
    """

    __slots__ = ("status", "headers", "read", "_connection")

    def __init__(self, connection: Connection) -> None:
        self._connection = connection
        self.status = connection.status
        self.headers = connection.headers
        self.read = connection.read

    def header(self, name: str) -> str | None:
        """The first value of header ``name``, or ``None``."""
        value = self._connection.header(name.lower().encode("latin-1"))
        return None if value is None else value.decode("latin-1")

    async def read_bounded(self, limit: int) -> bytes:
        """At most ``limit`` bytes of the body (an error body, say)."""
        body = bytearray()
        while len(body) < limit:
            pieces = await self.read()
            if not pieces:
                break
            for piece in pieces:
                body += piece
        return bytes(body[:limit])

    async def drain(self, max_bytes: int, max_s: float) -> None:
        """Read what is left of the body, at most ``max_bytes`` for ``max_s``, to keep
        the connection reusable; a body still open after that costs only its connection."""
        size = 0
        with contextlib.suppress(TimeoutError, UpstreamError):
            async with asyncio.timeout(max_s):
                while size <= max_bytes:
                    pieces = await self.read()
                    if not pieces:
                        return
                    size += sum(map(len, pieces))


class Pool:
    """Keep-alive HTTP/1.1 connections to upstream origins (see the module docstring)."""

    def __init__(
        self,
        *,
        max_connections: int = 1000,
        max_idle: int = 200,
        idle_expiry_s: float = 5.0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.max_connections = max_connections
        self.max_idle = max_idle
        self.idle_expiry_s = idle_expiry_s
        self._ssl = ssl_context
        self._idle: dict[Key, list[Connection]] = {}
        self._idle_count = 0
        self._open = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._loop: asyncio.AbstractEventLoop | None = None
        #: Connections opened so far (a test or bench can check reuse).
        self.opened = 0

    # -- state -----------------------------------------------------------------

    def stats(self) -> dict[str, int]:
        """``{"open", "idle", "active", "waiting", "opened"}`` connections (and waiters)."""
        return {
            "open": self._open,
            "idle": self._idle_count,
            "active": self._open - self._idle_count,
            "waiting": len(self._waiters),
            "opened": self.opened,
        }

    def ssl_context(self) -> ssl.SSLContext:
        if self._ssl is None:
            context = ssl.create_default_context()
            context.set_alpn_protocols(["http/1.1"])
            self._ssl = context
        return self._ssl

    async def aclose(self) -> None:
        """Close every idle connection (active ones close when their request ends)."""
        for idle in self._idle.values():
            for connection in idle:
                self._drop(connection)
        self._idle.clear()
        self._idle_count = 0

    # -- one request -------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def stream(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        body: bytes,
        *,
        read_timeout: float,
        connect_timeout: float,
        pool_timeout: float,
    ) -> AsyncIterator[Response]:
        """Send one request and yield its ``Response`` once the head is in.

        On leaving the block the connection goes back to the pool when the body
        was read to its end (and the server keeps it alive), else it is closed.
        Raises ``UpstreamError`` (timeouts, refused or reset connections,
        malformed responses) and ``ValueError`` for a URL or header it cannot send.
        """
        key, target, authority = _target(url)
        request = _request_bytes(method, target, authority, headers, body)

        connection, reused = await self._acquire(key, connect_timeout, pool_timeout)
        try:
            connection.begin(request, read_timeout)
            try:
                await connection.wait_head()
            except UpstreamError as exc:
                if exc.timeout or not (reused and connection.received == 0):
                    raise
                # The server closed the idle connection as our request went out.
                self._drop(connection)
                connection, _ = await self._acquire(key, connect_timeout, pool_timeout, fresh=True)
                connection.begin(request, read_timeout)
                await connection.wait_head()
            yield Response(connection)
        except BaseException:
            # A consumer that stops after the body's end (the gateway closes its
            # provider at ``stream.end``: GeneratorExit here) leaves a connection as
            # good as a finished one; one left mid-body may have bytes in flight.
            if connection.reusable:
                self._release(connection)
            else:
                self._drop(connection)
            raise
        else:
            self._release(connection)

    # -- the pool ------------------------------------------------------------------

    async def _acquire(
        self, key: Key, connect_timeout: float, pool_timeout: float, *, fresh: bool = False
    ) -> tuple[Connection, bool]:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            # Connections belong to the loop that opened them: a new loop starts afresh.
            self._idle.clear()
            self._idle_count = 0
            self._open = 0
            self._waiters.clear()
            self._loop = loop
        deadline: float | None = None
        while True:
            if not fresh:
                connection = self._take_idle(key)
                if connection is not None:
                    return connection, True
            if self._open < self.max_connections:
                break
            if self._idle_count:
                self._evict_one()  # an idle connection to another origin makes room
                continue
            if deadline is None:
                deadline = loop.time() + pool_timeout
            await self._wait_for_slot(loop, deadline)
        self._open += 1
        try:
            connection = await self._connect(loop, key, connect_timeout)
        except BaseException:
            self._open -= 1
            self._wake_waiter()
            raise
        connection.counted = True
        connection.key = key
        connection.on_lost = self._on_lost
        self.opened += 1
        return connection, False

    def _take_idle(self, key: Key) -> Connection | None:
        idle = self._idle.get(key)
        while idle:
            connection = idle.pop()
            self._idle_count -= 1
            if connection.idle_timer is not None:
                connection.idle_timer.cancel()
                connection.idle_timer = None
            transport = connection.transport
            if not connection.lost and transport is not None and not transport.is_closing():
                return connection
            self._drop(connection)
        return None

    async def _wait_for_slot(self, loop: asyncio.AbstractEventLoop, deadline: float) -> None:
        """Until a connection is released or closed; ``UpstreamError`` past ``deadline``."""
        waiter = loop.create_future()
        self._waiters.append(waiter)
        try:
            async with asyncio.timeout_at(deadline):
                await waiter
        except TimeoutError:
            raise UpstreamError.timed_out("pool") from None
        finally:
            with contextlib.suppress(ValueError):
                self._waiters.remove(waiter)

    def _evict_one(self) -> None:
        for idle in self._idle.values():
            if idle:
                connection = idle.pop(0)  # the oldest
                self._idle_count -= 1
                self._drop(connection)
                return

    def _wake_waiter(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    async def _connect(
        self, loop: asyncio.AbstractEventLoop, key: Key, timeout: float
    ) -> Connection:
        scheme, host, port = key
        context = self.ssl_context() if scheme == "https" else None
        try:
            async with asyncio.timeout(timeout):
                _, protocol = await loop.create_connection(
                    lambda: Connection(loop),
                    host,
                    port,
                    ssl=context,
                    server_hostname=host if context is not None else None,
                )
        except TimeoutError:
            raise UpstreamError.timed_out("connect") from None
        except ssl.SSLError as exc:
            raise UpstreamError(f"ConnectError: TLS failed ({exc.reason or 'handshake'})") from None
        except socket.gaierror:
            raise UpstreamError("ConnectError: name resolution failed") from None
        except OSError as exc:
            raise UpstreamError(f"ConnectError: {_os_reason(exc)}") from None
        return protocol

    def _release(self, connection: Connection) -> None:
        connection.finish()
        if (
            not connection.reusable
            or self._idle_count >= self.max_idle
            or connection.loop is not self._loop
        ):
            self._drop(connection)
            return
        assert connection.key is not None
        self._idle.setdefault(connection.key, []).append(connection)
        self._idle_count += 1
        connection.idle_timer = connection.loop.call_later(
            self.idle_expiry_s, self._expire, connection
        )
        self._wake_waiter()

    def _expire(self, connection: Connection) -> None:
        connection.idle_timer = None
        self._unidle(connection)
        self._drop(connection)

    def _unidle(self, connection: Connection) -> None:
        idle = self._idle.get(connection.key) if connection.key is not None else None
        if idle and connection in idle:
            idle.remove(connection)
            self._idle_count -= 1
            if connection.idle_timer is not None:
                connection.idle_timer.cancel()
                connection.idle_timer = None

    def _on_lost(self, connection: Connection) -> None:
        if connection.loop is self._loop:
            self._unidle(connection)
        self._uncount(connection)

    def _drop(self, connection: Connection) -> None:
        """Close ``connection`` and stop counting it."""
        connection.finish()
        connection.close()
        self._uncount(connection)

    def _uncount(self, connection: Connection) -> None:
        if connection.counted:
            connection.counted = False
            if connection.loop is self._loop:
                self._open -= 1
                self._wake_waiter()


@functools.lru_cache(maxsize=1024)
def _target(url: str) -> tuple[Key, str, str]:
    """``(origin key, request target, Host value)`` of ``url`` (a model's URLs repeat)."""
    parts = urlsplit(url)
    scheme = parts.scheme
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        raise ValueError("the upstream URL must be http:// or https:// with a host")
    host = parts.hostname
    port = parts.port or _DEFAULT_PORTS[scheme]
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    authority = host if ":" not in host else f"[{host}]"
    if parts.port is not None and parts.port != _DEFAULT_PORTS[scheme]:
        authority = f"{authority}:{port}"
    return (scheme, host, port), target, authority


def _os_reason(exc: OSError) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if exc.errno is not None and exc.errno in errno.errorcode:
        return (exc.strerror or errno.errorcode[exc.errno]).lower()
    return "connection failed"  # several addresses, each failing its own way


def _request_bytes(
    method: str, target: str, authority: str, headers: Mapping[str, str], body: bytes
) -> bytes:
    lines = [f"{method} {target} HTTP/1.1", f"host: {authority}"]
    names = set()
    for name, value in headers.items():
        if _UNSAFE.search(value) is not None or _UNSAFE_NAME.search(name) is not None:
            raise ValueError(f"header {name!r} has a line break or a colon in it")
        lines.append(f"{name}: {value}")
        names.add(name.lower())
    if "content-length" not in names and (body or method in ("POST", "PUT", "PATCH")):
        lines.append(f"content-length: {len(body)}")
    if "accept" not in names:
        lines.append("accept: */*")
    if "user-agent" not in names:
        lines.append("user-agent: tokenwire")
    head = "\r\n".join(lines).encode("latin-1", "strict") + b"\r\n\r\n"
    return head + body if body else head
