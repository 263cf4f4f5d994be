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
Either is reached through one ``transport.Transport``, and one loop streams
the answer: the translated request's and the same-vendor passthrough's
(``passthrough.Offer`` taps the loop for the upstream's bytes).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Callable
from typing import TYPE_CHECKING, Any

from ... import events as ev
from ... import request as rq
from ... import translate
from ...request import Request, echo
from ...server import Exchange, Provider
from ...server.hooks import CountRefused
from ...translate import VendorFormat
from ...translate._aggregate import GATEWAY_REFUSES
from ..upstream import Pool, UpstreamError
from ._wire import IDENTITY, report_unknown, trace_headers
from .passthrough import Offer
from .transport import MAX_ERROR_BODY, HTTPXTransport, PoolTransport, Transport

if TYPE_CHECKING:
    import httpx

__all__ = ["HTTPProvider", "UpstreamClients", "new_client"]

#: The largest compaction answer read (its encrypted summary of a long conversation).
MAX_COMPACTION_BODY = 32 << 20

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


class HTTPProvider(Provider):
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
        self.transport: Transport
        if self.pool is not None:
            self.transport = PoolTransport(
                self.pool, read_timeout=timeout_s, connect_timeout=connect_timeout_s
            )
        else:
            assert client is not None
            import httpx

            self.transport = HTTPXTransport(
                client,
                timeout
                or httpx.Timeout(timeout_s, connect=connect_timeout_s, pool=connect_timeout_s),
            )

    def _options(self) -> dict[str, Any]:
        options: dict[str, Any] = {"base_url": self.base_url, "api_key": self.api_key}
        if self.upstream_model is not None:
            options["upstream_model"] = self.upstream_model
        if self.send_reasoning:
            options["send_reasoning"] = True  # only the openai builder takes it (config check)
        return options

    def generate(self, request: Request) -> AsyncGenerator[ev.Event, None]:
        """Stream the upstream's answer to ``request`` as standard events."""
        return self.serve(request, None)

    async def serve(
        self, request: Request, exchange: Exchange | None
    ) -> AsyncGenerator[ev.Event, None]:
        """``generate`` for one request of the endpoint: the trace context of its
        ``exchange`` goes upstream, and its passthrough offer, when it has one for
        this format, sends the client's own body and taps the upstream's bytes."""
        if self.missing_key is not None:
            yield _error("internal_error", missing_key_message(request.model, self.missing_key))
            return
        fmt = self.format
        built = fmt.build_request(request, **self._options())
        headers, body = built.headers, built.body
        offer: Offer | None = None
        trace: dict[str, str] = {}
        if exchange is not None:
            trace = trace_headers(exchange.context)
            offer = exchange.offer
            if offer is not None and offer.format == fmt.name:
                # passthrough.py: the URL and credentials are the format's; the
                # body and the vendor's protocol headers are the client's.
                offer.attempt()
                # A forwarded x- header never replaces one the format set itself.
                forwarded = offer.headers.items()
                headers |= {k: v for k, v in forwarded if k not in headers or k[:2] != "x-"}
                body = offer.body_for(self.upstream_model or request.model)
            else:
                offer = None
        headers = {**headers, **IDENTITY, **trace}
        # docs/extensions.md: reasoning is carried when asked for, or when the
        # request enabled it at the vendor (the format knows how it says so).
        reasoning = self.reasoning or fmt.wants_reasoning(request)
        translator = fmt.new_translator(
            model=request.model, request_id=request.request_id, reasoning=reasoning
        )
        # docs/extensions.md: tool-call argument deltas, for live UIs, when asked for.
        translator.tool_deltas = request.extension("tokenwire:tool_deltas") is True
        try:
            async with self.transport.stream(built.method, built.url, headers, body) as response:
                status = response.status
                if status >= 300:
                    data = await response.read_bounded(MAX_ERROR_BODY)
                    if offer is not None:
                        offer.answer(status, data, response.header)
                    yield _error(*fmt.http_error(status, data), status)
                    return
                read, feed = response.read, translator.feed
                push = offer.push if offer is not None else None
                if offer is not None:
                    offer.reading()
                try:
                    # The body pieces received since the last read: one (the usual
                    # case) as is; several joined into one, which the translator
                    # feeds for less than one feed each (bench/RESULTS.md, "##
                    # upstream": ~1.7x less per event at 4 events a read, ~2.2x at 16).
                    while pieces := await read():
                        data = pieces[0] if len(pieces) == 1 else b"".join(pieces)
                        if push is not None:
                            push(data)  # kept before it is parsed: the events carry it out
                        for event in feed(data):
                            yield event
                finally:
                    if offer is not None:
                        offer.stopped(ended=translator.done)
                    if translator.done:
                        # The server stops at stream.end, before the body's own
                        # end; read that (it is normally already here) so the
                        # connection goes back to the pool.
                        await response.finish()
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
            report_unknown(self.vendor, request, translator)

    async def count_tokens(self, request: Request) -> int | None:
        """The upstream's own count of ``request``'s input tokens (its counting
        endpoint), or ``None`` when the vendor has none. Raises as
        ``Provider.count_tokens`` says (``UpstreamError`` when unreachable)."""
        count = self.format.count
        if count is None or self.missing_key is not None:
            return None
        vendor_request = count.request(self.format.build_request(request, **self._options()))
        headers = {**vendor_request.headers, **IDENTITY}
        async with self.transport.stream(
            "POST", vendor_request.url, headers, vendor_request.body
        ) as response:
            status, body = response.status, await response.read_bounded(MAX_ERROR_BODY)
        if status >= 300:
            raise CountRefused(status, *self.format.http_error(status, body))
        return count.result(body)

    async def compact(self, body: bytes) -> tuple[int, bytes] | None:
        """Forward a Responses compaction (``POST /v1/responses/compact``): ``body`` as the
        client sent it (its model already renamed) to this upstream's compaction
        endpoint; its ``(status, body)``, or ``None`` when the upstream has none (only an
        OpenAI Responses upstream compacts). Raises ``UpstreamError`` when unreachable.
        """
        if self.format.name != "openai-responses" or self.missing_key is not None:
            return None
        # The URL and credentials of this model's requests, whatever the body holds.
        probe = rq.build(model=self.upstream_model or "model", messages="compact")
        built = self.format.build_request(probe, **self._options())
        url = built.url.split("?", 1)[0] + "/compact"
        headers = {**built.headers, **IDENTITY}
        async with self.transport.stream("POST", url, headers, body) as response:
            return response.status, await response.read_bounded(MAX_COMPACTION_BODY)
