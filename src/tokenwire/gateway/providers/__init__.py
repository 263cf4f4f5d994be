"""Providers the gateway routes to: the protocol, vendor upstreams over HTTP, plugins.

A provider is anything with ``generate(request) -> AsyncIterator[Event]``
(``tokenwire.server.Provider``). The gateway builds one per configured model:

- ``demo``: the built-in ``DemoModel``;
- a vendor format (``openai``, ``anthropic``, ``gemini``...): the provider of
  its ``VendorFormat.transport`` (``PROVIDERS_BY_TRANSPORT``), built with the
  format. ``http-sse`` is ``HTTPProvider``, which sends the format's request
  over the shared connections (``UpstreamClients``) and feeds the response
  body to its translator; ``signalr`` and ``connect`` have providers of their own;
- ``python``: a plugin, ``factory = "module:callable"`` called with the model's
  ``options`` as keyword arguments.

Modules: ``http`` (``HTTPProvider``, ``UpstreamClients``; the error-mapping table),
``signalr``, ``connect``, ``demo``, ``plugin`` (``load_factory``), ``_options``
(option checks the binding providers share), ``passthrough`` and
``passthrough_request`` (same-vendor passthrough: the client's body and the
upstream's bytes).

May import: the core, ``tokenwire.translate``, ``tokenwire.server``, and of the
gateway ``config``, ``context``, ``telemetry`` and ``upstream``; never ``policy``,
``resume`` or the app.

The providers share their connections (``UpstreamClients``): the HTTP/1.1
pool, and httpx only when a ``http = "2"`` model needs it (imported then).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Final

from ... import translate
from ...server import Provider
from ...server.hooks import hooked
from ...translate import Transport, VendorFormat, status_error
from ..config import Config, ModelConfig
from .demo import DemoModel
from .http import HTTPProvider, UpstreamClients, new_client
from .plugin import load_factory

__all__ = [
    "PROVIDERS_BY_TRANSPORT",
    "HTTPProvider",
    "Provider",
    "build_provider",
    "build_providers",
    "load_factory",
    "UpstreamClients",
    "new_client",
    "status_error",
]

_log = logging.getLogger("tokenwire.gateway")


def _http_provider(model: ModelConfig, clients: UpstreamClients, fmt: VendorFormat) -> Provider:
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
    # docs/reference/config.md, "Upstream connections": http = "2" keeps httpx (HTTP/2).
    over_httpx = model.http == "2"
    return HTTPProvider(
        fmt,
        client=clients.http2 if over_httpx else None,
        pool=None if over_httpx else clients.pool,
        base_url=model.base_url,
        api_key=api_key,
        upstream_model=model.upstream_model,
        timeout_s=model.timeout_s,
        connect_timeout_s=model.connect_timeout_s,
        reasoning=model.reasoning,
        send_reasoning=model.send_reasoning,
        missing_key=missing,
    )


def _signalr_provider(model: ModelConfig, clients: UpstreamClients, fmt: VendorFormat) -> Provider:
    from .signalr import SignalRProvider

    return SignalRProvider(model_name=model.name, options=dict(model.options), vendor=fmt)


def _connect_provider(model: ModelConfig, clients: UpstreamClients, fmt: VendorFormat) -> Provider:
    from .connect import ConnectProvider

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
    dict[Transport, Callable[[ModelConfig, UpstreamClients, VendorFormat], Provider]]
] = {
    "http-sse": _http_provider,
    "signalr": _signalr_provider,
    "connect": _connect_provider,
}


def build_provider(model: ModelConfig, clients: UpstreamClients) -> Provider:
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
        if not callable(getattr(provider, "generate", None)):
            raise ValueError(f"{model.factory!r} did not return a provider (no generate method)")
        return hooked(provider)  # a plugin may have generate only: the other hooks' defaults
    if model.provider in translate.registry:
        fmt = translate.get(model.provider)
        return PROVIDERS_BY_TRANSPORT[fmt.transport](model, clients, fmt)
    raise ValueError(f"unknown provider {model.provider!r}")


def build_providers(config: Config, clients: UpstreamClients) -> dict[str, Provider]:
    """Model name -> provider for every configured model (``demo`` included).

    Raises ``ValueError`` naming the model when a plugin cannot be loaded.
    """
    providers: dict[str, Provider] = {}
    for model in config.models:
        try:
            providers[model.name] = build_provider(model, clients)
        except ValueError as exc:
            raise ValueError(f"model {model.name!r}: {exc}") from None
    return providers
