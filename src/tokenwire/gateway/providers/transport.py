"""How an HTTP provider reaches its upstream: one interface, two implementations.

``Transport.stream(method, url, headers, body)`` sends one request and yields
an ``UpstreamResponse`` once its head is in: the status, the headers, and the
body read piece by piece. It is the one point where a lower library's errors
become the gateway's: every failure to reach or read the upstream is an
``UpstreamError`` (timeouts with their phase), whichever implementation ran,
as httpx's transports map httpcore's exceptions in one place.

- ``PoolTransport``: the gateway's own HTTP/1.1 pool (``gateway.upstream``);
- ``HTTPXTransport``: an ``httpx.AsyncClient`` (the ``http = "2"`` models).
  A request cancelled between its connect and its first byte leaves its new
  connection in httpcore's pool for good (httpcore 1.0.9,
  encode/httpcore#1093): this transport reclaims such orphans on every cancel.

The translated path and the same-vendor passthrough both stream through it
(``http.HTTPProvider.serve``), so what one path learns the other has.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Final, Protocol

from ..upstream import Pool, UpstreamError
from ..upstream.errors import Phase

if TYPE_CHECKING:
    import httpx

__all__ = ["HTTPXTransport", "PoolTransport", "Transport", "UpstreamResponse"]

#: At most this much of an upstream error body is read.
MAX_ERROR_BODY: Final = 64 * 1024
#: After the vendor's end marker, at most this much more body is read, for at
#: most this long, to keep the connection reusable (``UpstreamResponse.finish``).
DRAIN_BYTES: Final = 64 * 1024
DRAIN_S: Final = 0.5

#: httpx's timeouts, by the phase they name.
_PHASES: Final[Mapping[str, Phase]] = {
    "ConnectTimeout": "connect",
    "ReadTimeout": "read",
    "WriteTimeout": "write",
    "PoolTimeout": "pool",
}


class UpstreamResponse(Protocol):
    """One upstream response, its head in."""

    status: int

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (lower case), or ``None``."""
        ...

    async def read(self) -> list[bytes]:
        """The body pieces received since the last call (``[]`` at the body's end)."""
        ...

    async def read_bounded(self, limit: int) -> bytes:
        """At most ``limit`` bytes of the body (an error body, say)."""
        ...

    async def finish(self) -> None:
        """Read what is left after the vendor's end marker (at most ``DRAIN_BYTES``
        for ``DRAIN_S``), so the connection can be reused."""
        ...


class Transport(Protocol):
    """Sends one request; see the module doc."""

    def stream(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes
    ) -> contextlib.AbstractAsyncContextManager[UpstreamResponse]:
        """The response, once its head is in. Raises ``UpstreamError``, and
        ``ValueError`` for a URL or header that cannot be sent."""
        ...


# --- the HTTP/1.1 pool ---------------------------------------------------------------


class _PoolResponse:
    __slots__ = ("status", "header", "read", "_response")

    def __init__(self, response: Any) -> None:
        self._response = response
        self.status: int = response.status
        self.header = response.header
        # The connection's own: no call between the socket's pieces and the loop.
        self.read = response.read

    async def read_bounded(self, limit: int) -> bytes:
        data: bytes = await self._response.read_bounded(limit)
        return data

    async def finish(self) -> None:
        await self._response.drain(DRAIN_BYTES, DRAIN_S)


class PoolTransport:
    """The gateway's HTTP/1.1 pool. It asks for an identity body, and refuses another
    (it has no decoder: a compressed body fed as is would be garbage)."""

    __slots__ = ("pool", "read_timeout", "connect_timeout")

    def __init__(self, pool: Pool, *, read_timeout: float, connect_timeout: float) -> None:
        self.pool = pool
        self.read_timeout = read_timeout
        self.connect_timeout = connect_timeout

    @contextlib.asynccontextmanager
    async def stream(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes
    ) -> AsyncIterator[UpstreamResponse]:
        async with self.pool.stream(
            method,
            url,
            headers,
            body,
            read_timeout=self.read_timeout,
            connect_timeout=self.connect_timeout,
            pool_timeout=self.connect_timeout,
        ) as response:
            encoding = response.header("content-encoding")
            if response.status < 300 and encoding not in (None, "identity"):
                raise UpstreamError.malformed(
                    f"a {encoding[:20]!r} body, though identity was asked for"
                )
            yield _PoolResponse(response)


# --- httpx ---------------------------------------------------------------------------


class _HTTPXResponse:
    __slots__ = ("status", "_response", "_chunks")

    def __init__(self, response: httpx.Response) -> None:
        self._response = response
        self.status = response.status_code
        # An uncompressed body (we ask for one) skips httpx's decoder layer.
        compressed = "content-encoding" in response.headers
        self._chunks = response.aiter_bytes() if compressed else response.aiter_raw()

    def header(self, name: str) -> str | None:
        value: str | None = self._response.headers.get(name)
        return value

    async def read(self) -> list[bytes]:
        with _mapped():
            try:
                return [await self._chunks.__anext__()]
            except StopAsyncIteration:
                return []

    async def read_bounded(self, limit: int) -> bytes:
        body = bytearray()
        with _mapped():
            async for chunk in self._response.aiter_bytes():
                body += chunk
                if len(body) >= limit:
                    break
        return bytes(body[:limit])

    async def finish(self) -> None:
        # An upstream that keeps its body open past its end marker only costs
        # its connection (httpx closes a response that was not read to its end).
        size = 0
        with contextlib.suppress(TimeoutError, UpstreamError):
            async with asyncio.timeout(DRAIN_S):
                while pieces := await self.read():
                    size += len(pieces[0])
                    if size > DRAIN_BYTES:
                        return


@contextlib.contextmanager
def _mapped() -> Iterator[None]:
    """httpx's errors as ``UpstreamError``: the one place they are mapped."""
    import httpx

    try:
        yield
    except httpx.TimeoutException as exc:
        raise UpstreamError.timed_out(_PHASES.get(type(exc).__name__, "read")) from exc
    except httpx.HTTPError as exc:
        # The type names the failure (ConnectError, RemoteProtocolError...), never the URL.
        raise UpstreamError(type(exc).__name__) from exc


class HTTPXTransport:
    """An ``httpx.AsyncClient`` (HTTP/2 where the upstream offers it)."""

    __slots__ = ("client", "timeout")

    def __init__(self, client: httpx.AsyncClient, timeout: httpx.Timeout) -> None:
        self.client = client
        self.timeout = timeout

    @contextlib.asynccontextmanager
    async def stream(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes
    ) -> AsyncIterator[UpstreamResponse]:
        try:
            with _mapped():
                async with self.client.stream(
                    method, url, headers=headers, content=body, timeout=self.timeout
                ) as response:
                    yield _HTTPXResponse(response)
        except asyncio.CancelledError:
            await _reclaim_orphaned_connections(self.client)
            raise


async def _reclaim_orphaned_connections(client: httpx.AsyncClient) -> None:
    """Close pool connections that are in use by no request and can never be reused.

    A connection that no pending request owns and that is neither idle nor
    closed is an orphan of a cancelled request; httpcore's pool would keep it
    (and its socket) forever, and enough of them exhaust ``max_connections``.
    Reads the pool's private state, so any surprise there makes this a no-op.
    """
    pool: Any = getattr(getattr(client, "_transport", None), "_pool", None)
    try:
        owned = {id(r.connection) for r in pool._requests if r.connection is not None}
        orphans = [
            c
            for c in pool._connections
            if id(c) not in owned and not c.is_idle() and not c.is_closed()
        ]
        for connection in orphans:
            pool._connections.remove(connection)
    except Exception:
        return
    for connection in orphans:
        with contextlib.suppress(Exception):
            await asyncio.shield(connection.aclose())
