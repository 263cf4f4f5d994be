"""Providers the gateway routes to: the protocol, vendor upstreams over HTTP, plugins.

A provider is anything with ``generate(request) -> AsyncIterator[Event]``
(``tokenwire.server.Provider``). The gateway builds one per configured model:

- ``demo``: the built-in ``DemoModel``;
- a vendor format (``openai``, ``anthropic``, ``gemini``...): the provider of
  its ``VendorFormat.transport`` (``PROVIDERS_BY_TRANSPORT``), built with the
  format. ``http-sse`` is ``HTTPProvider``, which sends the format's request
  with a shared ``httpx.AsyncClient`` and feeds the response body to its
  translator; ``signalr`` and ``connect`` have providers of their own;
- ``python``: a plugin, ``factory = "module:callable"`` called with the model's
  ``options`` as keyword arguments.

Upstream failures become ``error`` events with a §5.3.6 code, decided here
where the upstream's details are known (docs/gateway.md, "Errors"):

==============================================  ==================================
upstream answered 429                           ``rate_limited``
upstream answered 503 / 529, or 408 / 504       ``overloaded``
any other error status                          the vendor body's code, else
                                                ``internal_error``
connect / read / write / pool timeout           ``overloaded``
connection refused, reset, DNS failure          ``internal_error``
==============================================  ==================================
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any, Final

import httpx

from .. import events as ev
from .. import translate
from ..request import Request
from ..server import Provider
from ..translate import Transport, VendorFormat, status_error
from .config import Config, ModelConfig
from .demo import DemoModel
from .logs import log_unknown_events
from .metrics import UNKNOWN_EVENTS

__all__ = [
    "PROVIDERS_BY_TRANSPORT",
    "HTTPProvider",
    "Provider",
    "build_providers",
    "load_factory",
    "new_client",
    "status_error",
]

_log = logging.getLogger("tokenwire.gateway")

#: At most this much of an upstream error body is read.
MAX_ERROR_BODY: Final = 64 * 1024
#: After the vendor's end marker, at most this much more body is read, for at
#: most this long, to keep the connection reusable (``_finish_body``).
_DRAIN_BYTES: Final = 64 * 1024
_DRAIN_S: Final = 0.5

#: Compression buys nothing on a stream of small events and costs a decoding pass.
_IDENTITY: Final = {"accept-encoding": "identity"}


def _error(code: str, message: str) -> ev.ErrorEvent:
    return ev.ErrorEvent(v=ev.VERSION, seq=0, code=code, message=message)


async def _read_bounded(response: httpx.Response, limit: int) -> bytes:
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) >= limit:
            break
    return bytes(body[:limit])


def new_client() -> httpx.AsyncClient:
    """The shared upstream client: HTTP/2 where the upstream offers it, a large pool.

    Timeouts are per request (each model has its own), so none is set here.
    """
    return httpx.AsyncClient(
        http2=True,
        timeout=None,
        limits=httpx.Limits(max_connections=1000, max_keepalive_connections=200),
        follow_redirects=False,
    )


class HTTPProvider:
    """A vendor upstream over HTTP + SSE: standard request -> vendor HTTP request -> events.

    ``vendor`` is the ``VendorFormat`` (or its name in ``translate.registry``)
    whose request builder, translator and HTTP error mapping are used.
    Cancelling ``generate`` (the client hung up) closes the upstream response,
    and with it the upstream connection, at once.
    """

    def __init__(
        self,
        vendor: VendorFormat | str,
        *,
        client: httpx.AsyncClient,
        base_url: str,
        api_key: str | None = None,
        upstream_model: str | None = None,
        timeout: httpx.Timeout | None = None,
        reasoning: bool = False,
        send_reasoning: bool = False,
        missing_key: str | None = None,
    ) -> None:
        self.format = vendor if isinstance(vendor, VendorFormat) else translate.get(vendor)
        self.vendor = self.format.name
        self.client = client
        self.base_url = base_url
        self.api_key = api_key
        self.upstream_model = upstream_model
        self.timeout = timeout if timeout is not None else httpx.Timeout(120.0, connect=10.0)
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
            yield _error("internal_error", "the gateway has no upstream credentials for this model")
            return
        fmt = self.format
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
            async with self.client.stream(
                vendor_request.method,
                vendor_request.url,
                headers={**vendor_request.headers, **_IDENTITY},
                content=vendor_request.body,
                timeout=self.timeout,
            ) as response:
                if response.status_code >= 300:
                    body = await _read_bounded(response, MAX_ERROR_BODY)
                    yield _error(*fmt.http_error(response.status_code, body))
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
                        # The server stops at stream.end, before the body's own
                        # end; read that (it is normally already here) so the
                        # connection goes back to the pool instead of being
                        # closed and dialled again for the next request.
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
        finally:
            _report_unknown(self.vendor, request, translator)


def _report_unknown(vendor: str, request: Request, translator: Any) -> None:
    """docs/extensions.md: count the vendor event types the translator skipped, log once."""
    counts = getattr(translator, "unknown_types", None)
    if counts:
        UNKNOWN_EVENTS.add(vendor, counts)
        log_unknown_events(vendor, request.request_id, counts)


async def _finish_body(chunks: AsyncIterator[bytes]) -> None:
    """Read what is left of a response body, at most ``_DRAIN_BYTES`` for ``_DRAIN_S``.

    An upstream that keeps its body open past its end marker only costs its
    connection (httpx closes a response that was not read to its end).
    """
    size = 0
    with contextlib.suppress(TimeoutError, httpx.HTTPError):
        async with asyncio.timeout(_DRAIN_S):
            async for chunk in chunks:
                size += len(chunk)
                if size > _DRAIN_BYTES:
                    return


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


def load_factory(spec: str) -> Callable[..., Any]:
    """The callable named by ``"package.module:attribute"``.

    Raises ``ValueError`` when the spec is malformed, the module cannot be
    imported, or the attribute is missing or not callable.
    """
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"factory must be 'module:callable', got {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"cannot import {module_name!r}: {exc}") from None
    target: Any = module
    for part in attribute.split("."):
        target = getattr(target, part, None)
        if target is None:
            raise ValueError(f"{module_name!r} has no attribute {attribute!r}")
    if not callable(target):
        raise ValueError(f"{spec!r} is not callable")
    return target  # type: ignore[no-any-return]


def _timeout(model: ModelConfig) -> httpx.Timeout:
    return httpx.Timeout(
        model.timeout_s, connect=model.connect_timeout_s, pool=model.connect_timeout_s
    )


def _http_provider(model: ModelConfig, client: httpx.AsyncClient, fmt: VendorFormat) -> Provider:
    assert model.base_url is not None  # checked by config.parse
    api_key = model.api_key()
    missing = None
    if model.api_key_env and api_key is None:
        missing = model.api_key_env
        _log.warning(
            '{"msg": "missing api key", "model": "%s", "api_key_env": "%s"}',
            model.name,
            model.api_key_env,
        )
    return HTTPProvider(
        fmt,
        client=client,
        base_url=model.base_url,
        api_key=api_key,
        upstream_model=model.upstream_model,
        timeout=_timeout(model),
        reasoning=model.reasoning,
        send_reasoning=model.send_reasoning,
        missing_key=missing,
    )


def _signalr_provider(model: ModelConfig, client: httpx.AsyncClient, fmt: VendorFormat) -> Provider:
    from .signalr_provider import SignalRProvider

    return SignalRProvider(model_name=model.name, options=dict(model.options), vendor=fmt)


def _connect_provider(model: ModelConfig, client: httpx.AsyncClient, fmt: VendorFormat) -> Provider:
    from .connect_provider import ConnectProvider

    opts: dict[str, Any] = {
        "base_url": model.base_url,
        "timeout_s": model.timeout_s,
        "connect_timeout_s": model.connect_timeout_s,
        "reasoning": model.reasoning,
        **model.options,
    }
    if model.api_key():
        opts["api_key"] = model.api_key()
    return ConnectProvider(model_name=model.name, options=opts, vendor=fmt)


#: ``VendorFormat.transport`` -> how a model of that format is served.
PROVIDERS_BY_TRANSPORT: Final[
    dict[Transport, Callable[[ModelConfig, httpx.AsyncClient, VendorFormat], Provider]]
] = {
    "http-sse": _http_provider,
    "signalr": _signalr_provider,
    "connect": _connect_provider,
}


def build_provider(model: ModelConfig, client: httpx.AsyncClient) -> Provider:
    """The provider for one configured model. Raises ``ValueError`` for a bad plugin."""
    if model.provider == "demo":
        return DemoModel(delay_ms=model.delay_ms)
    if model.provider == "python":
        assert model.factory is not None  # checked by config.parse
        factory = load_factory(model.factory)
        try:
            provider = factory(**model.options)
        except Exception as exc:
            raise ValueError(f"{model.factory!r} failed: {exc!r}") from exc
        if not isinstance(provider, Provider):
            raise ValueError(f"{model.factory!r} did not return a provider (no generate method)")
        return provider
    if model.provider in translate.registry:
        fmt = translate.get(model.provider)
        return PROVIDERS_BY_TRANSPORT[fmt.transport](model, client, fmt)
    raise ValueError(f"unknown provider {model.provider!r}")


def build_providers(config: Config, client: httpx.AsyncClient) -> dict[str, Provider]:
    """Model name -> provider for every configured model (``demo`` included).

    Raises ``ValueError`` naming the model when a plugin cannot be loaded.
    """
    providers: dict[str, Provider] = {}
    for model in config.models:
        try:
            providers[model.name] = build_provider(model, client)
        except ValueError as exc:
            raise ValueError(f"model {model.name!r}: {exc}") from None
    return providers
