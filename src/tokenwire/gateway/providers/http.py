"""Vendor upstreams over HTTP: ``HTTPProvider`` and the connections it shares.

Upstream failures become ``error`` events with a §5.3.6 code, decided here
where the upstream's details are known (docs/reference/errors.md, "Errors"):

==============================================  ==================================
upstream answered 429                           ``rate_limited``
upstream answered 503 / 529, or 408 / 504       ``overloaded``
any other error status                          the vendor body's code, else
                                                ``internal_error``
connect / read / write / pool timeout           ``overloaded``
connection refused, reset, DNS failure,         ``internal_error``
a malformed response
==============================================  ==================================

The providers share their connections (``UpstreamClients``): the HTTP/1.1
pool, and httpx only when a ``http = "2"`` model needs it (imported then).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from ... import events as ev
from ... import translate
from ...request import Request, echo
from ...translate import VendorFormat
from ...translate._aggregate import GATEWAY_REFUSES
from ..upstream import Pool, UpstreamError
from . import _wire, passthrough

if TYPE_CHECKING:
    import httpx

__all__ = ["HTTPProvider", "UpstreamClients", "new_client"]

# The shared wire pieces under the names this module always used (tests patch some).
MAX_ERROR_BODY = _wire.MAX_ERROR_BODY
_DRAIN_BYTES = _wire.DRAIN_BYTES
_DRAIN_S = _wire.DRAIN_S
_IDENTITY = _wire.IDENTITY
_read_bounded = _wire.read_bounded
_trace_headers = _wire.trace_headers
_report_unknown = _wire.report_unknown
_finish_body = _wire.finish_body

_log = logging.getLogger("tokenwire.gateway")


def _error(code: str, message: str, status: int | None = None) -> ev.ErrorEvent:
    return ev.ErrorEvent(v=ev.VERSION, seq=0, code=code, message=message, upstream_status=status)


def missing_key_message(model: str, env: str) -> str:
    """The refusal of a model whose upstream key is not set: a 401, which no SDK
    retries (a 500 would be retried, and fail the same way each time), naming
    the variable to set where the gateway runs, not where the client does."""
    return (
        f"{GATEWAY_REFUSES} 401: model {echo(model)} has no upstream key; set {env} in the "
        "gateway's environment and restart it"
    )


def new_client() -> httpx.AsyncClient:
    """An upstream ``httpx.AsyncClient``: HTTP/2 where the upstream offers it, a large pool.

    Timeouts are per request (each model has its own), so none is set here.
    """
    import httpx

    return httpx.AsyncClient(
        http2=True,
        timeout=None,
        limits=httpx.Limits(max_connections=1000, max_keepalive_connections=200),
        follow_redirects=False,
    )


class UpstreamClients:
    """The connections a gateway's providers share: the HTTP/1.1 ``pool``
    (``gateway.upstream``, every ``http = "1.1"`` model) and the ``httpx`` client of
    the ``http = "2"`` models, made when the first of them is built (httpx and h2
    load then, ~6 MB: a gateway without such a model never imports them).

    ``httpx_client`` is a caller's own client for those models (tests, embedders);
    ``aclose`` closes it too.
    """

    def __init__(self, httpx_client: httpx.AsyncClient | None = None) -> None:
        self.pool = Pool(max_connections=1000, max_idle=200)
        self._httpx = httpx_client
        self._on_http2: list[Callable[[httpx.AsyncClient], None]] = []

    @property
    def http2(self) -> httpx.AsyncClient:
        """The shared httpx client (made on first use, with every ``on_http2`` hook applied)."""
        if self._httpx is None:
            self._httpx = new_client()
            for hook in self._on_http2:
                hook(self._httpx)
        return self._httpx

    def on_http2(self, hook: Callable[[httpx.AsyncClient], None]) -> None:
        """Call ``hook`` with the httpx client: now if it exists, else when it is made."""
        self._on_http2.append(hook)
        if self._httpx is not None:
            hook(self._httpx)

    async def aclose(self) -> None:
        try:
            await self.pool.aclose()
        finally:
            if self._httpx is not None:
                await self._httpx.aclose()


class HTTPProvider:
    """A vendor upstream over HTTP + SSE: standard request -> vendor HTTP request -> events.

    ``vendor`` is the ``VendorFormat`` (or its name in ``translate.registry``)
    whose request builder, translator and HTTP error mapping are used. The
    request goes over ``pool`` (the gateway's HTTP/1.1 client,
    ``gateway.upstream``) or, when ``client`` is given instead, over that
    ``httpx.AsyncClient`` (HTTP/2 where the upstream offers it). With neither,
    a pool of the provider's own is made.

    Timeouts: ``timeout_s`` between body reads (and for the head),
    ``connect_timeout_s`` to connect and to wait for a pooled connection; an
    ``httpx.Timeout`` given as ``timeout`` supplies both instead.
    Cancelling ``generate`` (the client hung up) closes the upstream response,
    and with it the upstream connection, at once.
    """

    def __init__(
        self,
        vendor: VendorFormat | str,
        *,
        client: httpx.AsyncClient | None = None,
        pool: Pool | None = None,
        base_url: str,
        api_key: str | None = None,
        upstream_model: str | None = None,
        timeout: httpx.Timeout | None = None,
        timeout_s: float = 120.0,
        connect_timeout_s: float = 10.0,
        reasoning: bool = False,
        send_reasoning: bool = False,
        missing_key: str | None = None,
    ) -> None:
        self.format = vendor if isinstance(vendor, VendorFormat) else translate.get(vendor)
        self.vendor = self.format.name
        self.client = client
        self.pool = pool if pool is not None or client is not None else Pool()
        self.base_url = base_url
        self.api_key = api_key
        self.upstream_model = upstream_model
        if timeout is not None:
            timeout_s = timeout.read if timeout.read is not None else timeout_s
            connect_timeout_s = (
                timeout.connect if timeout.connect is not None else connect_timeout_s
            )
        self.timeout_s = timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.timeout = timeout
        self.reasoning = reasoning
        self.send_reasoning = send_reasoning
        self.missing_key = missing_key

    def _options(self) -> dict[str, Any]:
        options: dict[str, Any] = {"base_url": self.base_url, "api_key": self.api_key}
        if self.upstream_model is not None:
            options["upstream_model"] = self.upstream_model
        if self.send_reasoning:
            options["send_reasoning"] = True  # only the openai builder takes it (config check)
        return options

    async def generate(self, request: Request) -> AsyncIterator[ev.Event]:
        """Stream the upstream's answer to ``request`` as standard events."""
        if self.missing_key is not None:
            yield _error("internal_error", missing_key_message(request.model, self.missing_key))
            return
        fmt = self.format
        offer = passthrough.current(fmt.name)
        if offer is not None:  # the client's own body and stream (providers/passthrough.py)
            async for event in passthrough.generate(self, request, offer):
                yield event
            return
        vendor_request = fmt.build_request(request, **self._options())
        # docs/extensions.md: reasoning is carried when asked for, or when the
        # request enabled it at the vendor (the format knows how it says so).
        reasoning = self.reasoning or fmt.wants_reasoning(request)
        translator = fmt.new_translator(
            model=request.model, request_id=request.request_id, reasoning=reasoning
        )
        # docs/extensions.md: tool-call argument deltas, for live UIs, when asked for.
        translator.tool_deltas = request.extension("tokenwire:tool_deltas") is True
        try:
            pool = self.pool
            if pool is None:
                async for event in self._over_httpx(vendor_request, translator):
                    yield event
                return
            # The HTTP/1.1 path, inline: each event passes one generator, not two.
            fmt = self.format
            headers = {**vendor_request.headers, **_IDENTITY, **_trace_headers()}
            try:
                async with pool.stream(
                    vendor_request.method,
                    vendor_request.url,
                    headers,
                    vendor_request.body,
                    read_timeout=self.timeout_s,
                    connect_timeout=self.connect_timeout_s,
                    pool_timeout=self.connect_timeout_s,
                ) as response:
                    if response.status >= 300:
                        body = await response.read_bounded(MAX_ERROR_BODY)
                        yield _error(*fmt.http_error(response.status, body), response.status)
                        return
                    encoding = response.header("content-encoding")
                    if encoding not in (None, "identity"):
                        # We asked for identity; a compressed body cannot be fed as is.
                        message = (
                            "upstream connection failed (RemoteProtocolError: a "
                            f"{encoding[:20]!r} body, though identity was asked for)"
                        )
                        for event in translator.fail("internal_error", message):
                            yield event
                        return
                    read = response.read
                    feed = translator.feed
                    try:
                        # The body pieces httptools cut from the socket's reads since
                        # the last call: one piece (the usual case) is fed as is; several
                        # are joined into one feed, which costs less than a feed each
                        # (bench/RESULTS.md, "## upstream": ~1.7x less per event at 4
                        # events a read, ~2.2x at 16).
                        while pieces := await read():
                            data = pieces[0] if len(pieces) == 1 else b"".join(pieces)
                            for event in feed(data):
                                yield event
                    finally:
                        if translator.done:
                            # The server stops at stream.end, before the body's own
                            # end; read that (it is normally already here) so the
                            # connection goes back to the pool.
                            await response.drain(_DRAIN_BYTES, _DRAIN_S)
                for event in translator.close():
                    yield event
            except UpstreamError as exc:
                if exc.timeout:
                    message = f"the upstream did not answer in time ({exc.phase} timeout)"
                    for event in translator.fail("overloaded", message):
                        yield event
                else:
                    # A reset or a cut mid-body: the message names the failure, never the URL.
                    # The translator ends the stream, so the vendor's usage so far is kept.
                    message = f"upstream connection failed ({exc.reason})"
                    for event in translator.fail("internal_error", message):
                        yield event
            except ValueError as exc:  # a URL or header the client cannot send
                message = f"upstream request not sent ({exc})"
                for event in translator.fail("internal_error", message):
                    yield event
        finally:
            _report_unknown(self.vendor, request, translator)

    async def count_tokens(self, request: Request) -> tuple[int, bytes] | None:
        """The upstream's own token count for ``request`` (issue 23): the counting
        endpoint's ``(status, body)``, or ``None`` when the vendor has none.

        Raises ``InvalidRequest`` as ``build_request`` does, and ``UpstreamError``
        (or httpx's errors on the HTTP/2 path) when the upstream cannot be reached.
        """
        count = self.format.count
        if count is None or self.missing_key is not None:
            return None
        vendor_request = count.request(self.format.build_request(request, **self._options()))
        headers = {**vendor_request.headers, **_IDENTITY, **_trace_headers()}
        if self.pool is None:
            assert self.client is not None
            answer = await self.client.post(
                vendor_request.url,
                headers=headers,
                content=vendor_request.body,
                timeout=self.timeout_s,
            )
            return answer.status_code, answer.content[:MAX_ERROR_BODY]
        async with self.pool.stream(
            "POST",
            vendor_request.url,
            headers,
            vendor_request.body,
            read_timeout=self.timeout_s,
            connect_timeout=self.connect_timeout_s,
            pool_timeout=self.connect_timeout_s,
        ) as response:
            return response.status, await response.read_bounded(MAX_ERROR_BODY)

    async def _over_httpx(self, vendor_request: Any, translator: Any) -> AsyncIterator[ev.Event]:
        import httpx

        assert self.client is not None
        fmt = self.format
        timeout = self.timeout
        if timeout is None:
            timeout = httpx.Timeout(
                self.timeout_s, connect=self.connect_timeout_s, pool=self.connect_timeout_s
            )
        try:
            async with self.client.stream(
                vendor_request.method,
                vendor_request.url,
                headers={**vendor_request.headers, **_IDENTITY},
                content=vendor_request.body,
                timeout=timeout,
            ) as response:
                if response.status_code >= 300:
                    body = await _read_bounded(response, MAX_ERROR_BODY)
                    yield _error(*fmt.http_error(response.status_code, body), response.status_code)
                    return
                # An uncompressed body (we ask for one) skips httpx's decoder layer.
                compressed = "content-encoding" in response.headers
                chunks = response.aiter_bytes() if compressed else response.aiter_raw()
                feed = translator.feed
                try:
                    async for chunk in chunks:
                        for event in feed(chunk):
                            yield event
                finally:
                    if translator.done:
                        await _finish_body(chunks)
            for event in translator.close():
                yield event
        except httpx.TimeoutException as exc:
            phase = type(exc).__name__.removesuffix("Timeout").lower() or "request"
            message = f"the upstream did not answer in time ({phase} timeout)"
            for event in translator.fail("overloaded", message):
                yield event
        except httpx.HTTPError as exc:
            # A reset or a cut mid-body: the message names the failure, never the URL.
            # The translator ends the stream, so the vendor's usage so far is kept.
            message = f"upstream connection failed ({type(exc).__name__})"
            for event in translator.fail("internal_error", message):
                yield event
        except asyncio.CancelledError:
            # The client hung up. Cancelled between connecting and sending, the
            # request leaves its new connection in the pool, never reused nor
            # closed (httpcore 1.0.9, encode/httpcore#1093): reclaim it.
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
