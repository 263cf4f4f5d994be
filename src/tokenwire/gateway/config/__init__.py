"""The gateway's TOML configuration (DESIGN.md, "Gateway surface").

::

    [server]
    host = "127.0.0.1"
    port = 8080

    [[models]]
    name = "fast"                       # what clients put in "model"
    provider = "openai"                 # a vendor format, "demo" or "python"
    base_url = "https://api.example.com/v1"
    api_key_env = "EXAMPLE_API_KEY"     # keys only ever come from the environment
    upstream_model = "gpt-4o-mini"

    [resume]                            # resumable streams (docs/scaling.md)
    default = false                     # true: every standard stream is resumable
    backend = "memory"                  # or "redis" (several replicas share it)
    url = "redis://127.0.0.1:6379/0"

Read with the standard library's ``tomllib``. Unknown keys are errors (a typo
must not silently drop a setting), and a literal ``api_key`` is refused: keys
come from the environment variable named by ``api_key_env`` only. The ``demo``
model is always served, whether the file names it or not.

May import: the core and ``tokenwire.server``; nothing else of the gateway (it is
the gateway's lowest layer, ``tests/test_layers.py``).
"""

from __future__ import annotations

import math
import os
import re
import tomllib
from collections.abc import Mapping
from typing import Any, Final

import msgspec

from ... import server
from ..._secrets import SECRET_HEADERS
from ..._suggest import did_you_mean
from ...errors import TokenwireError
from ...server import guard
from . import production as config_prod  # production keys (docs/gateway.md, "Production")
from .responses_websocket import ResponsesWebSocketConfig

__all__ = [
    "BINDING_KEYS",
    "BINDING_PROVIDERS",
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "MAPPINGS",
    "PROVIDERS",
    "Config",
    "ConfigError",
    "ModelConfig",
    "RESUME_BACKENDS",
    "ResumeConfig",
    "ServerConfig",
    "TranslateConfig",
    "drain_problem",
    "load",
    "parse",
]

#: How ``tokenwire serve`` hands its settings to the server's worker processes.
#: They live here, not in ``app``, so that the serving parent process never
#: imports the gateway itself (start-up time and RSS: bench/RESULTS.md).
CONFIG_ENV: Final = "TOKENWIRE_GATEWAY_CONFIG"
LOG_CONTENT_ENV: Final = "TOKENWIRE_LOG_CONTENT"
#: ``[server]`` keys the workers take from the environment over the file:
#: how ``tokenwire serve --body-timeout/--write-timeout`` reach them.
TIMEOUT_ENV: Final = {
    "body_timeout_s": "TOKENWIRE_BODY_TIMEOUT_S",
    "write_timeout_s": "TOKENWIRE_WRITE_TIMEOUT_S",
}

DEFAULT_HOST: Final = "127.0.0.1"
DEFAULT_PORT: Final = 8080
#: A request head (request line and headers) must arrive within this.
DEFAULT_HEADER_TIMEOUT_S: Final = 10.0
#: HTTP/2: a connection whose peer answers no ping for this long is closed.
DEFAULT_IDLE_TIMEOUT_S: Final = 60.0
#: After SIGTERM/SIGINT a worker that has not stopped within this is killed.
DEFAULT_SHUTDOWN_TIMEOUT_S: Final = 10.0
#: What a shutdown needs beyond ``drain_s``: sending the cut streams' ``error`` +
#: ``stream.end`` (made as soon as they are cancelled), the resume store's last
#: commit, the telemetry's bounded flush, stopping the server. Without
#: ``shutdown_timeout_s`` in the file it is at least ``drain_s`` + this.
DRAIN_MARGIN_S: Final = 2.0
#: A connection's kernel send buffer (SO_SNDBUF; the kernel doubles it).
DEFAULT_SEND_BUFFER_BYTES: Final = 128 * 1024
#: The largest request head: HTTP/2's decoded header list (HPACK can inflate a few
#: bytes on the wire into this much), HTTP/1.1's request line and headers. Bounded:
#: granian's HTTP/2 default of 16 MiB per stream let 45 KB pin 79 MB.
DEFAULT_MAX_HEADER_BYTES: Final = 16 * 1024
#: hyper's least HTTP/1.1 buffer: it refuses a smaller one.
MIN_MAX_HEADER_BYTES: Final = 8192
#: HTTP/2 streams open at once on one connection (granian's default: 200).
DEFAULT_HTTP2_MAX_STREAMS: Final = 100
#: ``cleartext_http2`` with TLS: there ALPN offers HTTP/2 already (§3).
CLEARTEXT_HTTP2_WITH_TLS: Final = (
    "only without TLS: with certfile/keyfile, HTTP/2 is offered by ALPN (remove it)"
)
_GUARD: Final = guard.Limits()

#: Provider kinds besides the vendor formats of ``tokenwire.translate.VENDORS``.
BUILTIN_PROVIDERS: Final = frozenset({"demo", "python"})

#: Vendors served over plain HTTP by ``providers.HTTPProvider``.
HTTP_VENDORS: Final = frozenset(
    {"openai", "openai-responses", "mistral", "anthropic", "gemini", "cohere"}
)

#: Bindings with a provider of their own (WebSocket; Connect with its idle end and
#: one connection per call), configured by keys of their model entry; docs/bindings.md.
BINDING_PROVIDERS: Final = frozenset({"signalr", "connect"})

#: The model keys that only a binding provider reads, and which providers read them.
BINDING_KEYS: Final[dict[str, frozenset[str]]] = {
    "hub_url": frozenset({"signalr"}),
    "method": frozenset({"signalr"}),
    "negotiate": frozenset({"signalr"}),
    "server_timeout_s": frozenset({"signalr"}),
    "keepalive_s": frozenset({"signalr"}),
    "max_record_bytes": frozenset({"signalr"}),
    "service_path": frozenset({"connect"}),
    "codec": frozenset({"connect"}),
    "http2": frozenset({"connect"}),
    "h2c": frozenset({"connect"}),
    "idle_timeout_s": frozenset({"connect"}),
    "compression": frozenset({"connect"}),
    "max_message_bytes": frozenset({"connect"}),
    "mapping": BINDING_PROVIDERS,
    "headers": BINDING_PROVIDERS,
}
#: The values each binding's ``mapping`` may take (the first is the default).
MAPPINGS: Final = {"signalr": ("stream", "copilot"), "connect": ("text", "standard")}

#: Every ``provider`` value a model may name.
PROVIDERS: Final = BUILTIN_PROVIDERS | HTTP_VENDORS | BINDING_PROVIDERS

#: Where resumable streams are kept: in the worker's memory, or in Redis Streams.
RESUME_BACKENDS: Final = frozenset({"memory", "redis"})

#: URL schemes redis-py connects to.
_REDIS_SCHEMES: Final = ("redis://", "rediss://", "unix://")


class ConfigError(TokenwireError, ValueError):
    """The configuration is not valid; the message names the key (``models[1].provider``)."""


class ServerConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[server]``: where and how to listen, and the per-request limits."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    workers: int = 1
    certfile: str | None = None
    keyfile: str | None = None
    #: Without TLS: also serve HTTP/2 with prior knowledge (h2c). Off: HTTP/1.1
    #: only, ~12 KiB less per connection (docs/gateway.md, "TLS and HTTP/2").
    cleartext_http2: bool = False
    max_body_bytes: int = server.DEFAULT_MAX_BODY_BYTES
    keepalive_s: float = server.DEFAULT_KEEPALIVE_S
    log_content: bool = False
    # Hostile clients (docs/gateway.md, "Request limits and timeouts"):
    header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_S
    body_timeout_s: float = _GUARD.body_timeout_s
    write_timeout_s: float = _GUARD.write_timeout_s
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S
    shutdown_timeout_s: float = DEFAULT_SHUTDOWN_TIMEOUT_S
    stream_budget_bytes: int = _GUARD.stream_budget_bytes
    memory_budget_bytes: int = _GUARD.memory_budget_bytes
    send_buffer_bytes: int = DEFAULT_SEND_BUFFER_BYTES
    #: docs/binary.md 6.3: also serve WebTransport (HTTP/3, UDP) on this port, at
    #: ``/v1/wt``; needs certfile/keyfile, one worker and the ``webtransport`` extra.
    webtransport_port: int | None = None
    # Request heads (docs/gateway.md, "Security"):
    max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES
    http2_max_concurrent_streams: int = DEFAULT_HTTP2_MAX_STREAMS

    #: What serves cleartext HTTP/1.1 (``SERVER_ENGINES``): "granian", or "h1"
    #: (``tokenwire.server.http1``, one process; TLS and h2c stay on granian).
    engine: str = "granian"


#: ``[server] engine`` values (bench/RESULTS.md, "serving").
SERVER_ENGINES: Final = frozenset({"granian", "h1"})


class MetricsConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[metrics]``: who may read ``GET /metrics`` (docs/gateway.md, "Security").

    ``/metrics`` names every model and its traffic. Without ``[[keys]]`` it is
    open on the serving port, as a Prometheus scraper expects. With keys it is
    closed there (404) unless opened: ``keys``, ids of ``[[keys]]`` that may
    read it; or ``listen``, a ``host:port`` of its own (the usual Prometheus
    practice: a private address), which then serves it to whoever reaches it.
    """

    keys: list[str] = []
    listen: str | None = None

    def address(self) -> tuple[str, int] | None:
        """``listen`` as (host, port); ``None`` when unset."""
        if self.listen is None:
            return None
        host, _, port = self.listen.rpartition(":")
        return host.strip("[]"), int(port)


class TranslateConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[translate]`` (and a model's ``translate``): how a vendor body crosses to
    an upstream of another format (docs/translation.md, "Adaptation").

    ``strict``: refuse, with a 400 naming the JSON path, every field the
    adaptation table would map or drop; by default they are adapted and
    reported (the ``tokenwire-adapted`` header, the log line, a metric).
    ``signing_key_env`` is read from the file's ``[translate]`` only.
    """

    strict: bool = False
    #: The environment variable holding the key of the reasoning signatures the
    #: gateway mints for another vendor's reasoning (``None``: a random key per
    #: process, so replicas and restarts do not recognise each other's).
    signing_key_env: str | None = None


class ModelConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One ``[[models]]`` entry: a model name and the provider that serves it.

    - vendor providers (``openai``, ``anthropic``...): ``base_url``,
      ``api_key_env``, ``upstream_model``, ``timeout_s`` (idle read timeout),
      ``connect_timeout_s``, ``reasoning`` (carry reasoning text, §extension),
      ``http`` (``"1.1"``: the gateway's HTTP/1.1 client, the default; ``"2"``:
      httpx, HTTP/2 where the upstream offers it; docs/reference/config.md, "Upstream connections");
    - ``demo``: ``delay_ms``;
    - ``python``: ``factory = "module:callable"``, called with ``options`` as
      keyword arguments, returning a provider (docs/reference/config.md, "Plugins");
    - ``signalr``: ``hub_url`` (required), ``method``, ``mapping``, ``negotiate``,
      ``api_key_env`` (the Bearer access token), ``server_timeout_s``,
      ``keepalive_s``, ``connect_timeout_s``, ``headers``, ``reasoning``,
      ``max_record_bytes``;
    - ``connect``: ``base_url`` (required), ``service_path``, ``codec``,
      ``mapping``, ``http2``, ``h2c``, ``idle_timeout_s``, ``timeout_s``,
      ``connect_timeout_s``, ``compression``, ``api_key_env``, ``headers``,
      ``reasoning``, ``max_message_bytes`` (docs/bindings.md, "Gateway providers").

    For ``signalr`` and ``connect``, ``parse`` folds the keys that are set into
    ``options``, which is what their provider receives.
    """

    name: str
    provider: str
    base_url: str | None = None
    api_key_env: str | None = None
    upstream_model: str | None = None
    timeout_s: float = 120.0
    connect_timeout_s: float = 10.0
    reasoning: bool = False
    #: openai: send earlier turns' reasoning back as ``reasoning_content`` (DeepSeek,
    #: vLLM and other OpenAI-compatible servers take it; api.openai.com does not).
    send_reasoning: bool = False
    #: The upstream client: "1.1" (gateway.upstream, HTTP/1.1) or "2" (httpx with HTTP/2).
    http: str = "1.1"
    delay_ms: float = 0.0
    factory: str | None = None
    options: dict[str, Any] = {}
    # signalr and connect (BINDING_KEYS); None: the provider's default.
    hub_url: str | None = None
    method: str | None = None
    mapping: str | None = None
    negotiate: bool | None = None
    server_timeout_s: float | None = None
    keepalive_s: float | None = None
    max_record_bytes: int | None = None
    service_path: str | None = None
    codec: str | None = None
    http2: bool | None = None
    h2c: bool | None = None
    idle_timeout_s: float | None = None
    compression: str | None = None
    max_message_bytes: int | None = None
    headers: dict[str, str] = {}
    #: This model's ``[translate]`` settings; ``None``: the file's ``[translate]``.
    translate: TranslateConfig | None = None

    def api_key(self, environ: Mapping[str, str] = os.environ) -> str | None:
        """The key from the environment variable ``api_key_env`` names, or ``None``."""
        return environ.get(self.api_key_env) if self.api_key_env else None


class ResumeConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[resume]``: resumable streams, ``GET``/``DELETE /v1/streams/{request_id}``.

    - ``default``: every standard stream is resumable, not only those whose
      request sets ``"tokenwire:resumable": true`` (``false`` there opts out);
    - ``backend``: ``memory`` (one process) or ``redis`` (replicas share ``url``);
    - ``grace_s``: how long a resumable stream keeps generating with nobody reading;
    - ``ttl_s``: how long a finished stream can still be resumed;
    - ``max_events_per_stream``: the newest events kept per stream (older ones
      are trimmed; a resume from before them answers 410);
    - ``max_bytes``: above this (the memory store's frames, or Redis's
      ``used_memory``) new streams are served without resume;
    - ``lease_s``: a replica's lease on the streams it generates; a stream whose
      replica stopped renewing it is ended with an ``error`` on resume;
    - ``cluster``: ``url`` is a node of a Redis Cluster (docs/scaling.md).
    """

    default: bool = False
    backend: str = "memory"
    url: str | None = None
    grace_s: float = 30.0
    ttl_s: float = 300.0
    max_events_per_stream: int = 100_000
    max_bytes: int = 256 << 20
    lease_s: float = 5.0
    cluster: bool = False


class Config(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The whole file. ``models`` always includes ``demo`` after ``parse``."""

    server: ServerConfig = ServerConfig()
    models: list[ModelConfig] = []
    resume: ResumeConfig = ResumeConfig()
    metrics: MetricsConfig = MetricsConfig()
    translate: TranslateConfig = TranslateConfig()
    #: [[keys]], [limits], [telemetry], routing keys, [server] drain_s (config_prod).
    production: config_prod.ProductionConfig = config_prod.ProductionConfig()
    #: The Responses API's WebSocket mode: what one socket may hold.
    responses_websocket: ResponsesWebSocketConfig = ResponsesWebSocketConfig()

    def model(self, name: str) -> ModelConfig | None:
        """The entry for model ``name``, or ``None``."""
        for model in self.models:
            if model.name == name:
                return model
        return None

    def strict_translation(self, name: str) -> bool:
        """Whether model ``name`` refuses every adaptation (its ``translate``, else the file's)."""
        model = self.model(name)
        own = model.translate if model is not None else None
        return (own or self.translate).strict

    @property
    def model_names(self) -> list[str]:
        """Every served model name, in file order (``demo`` last unless named)."""
        return [model.name for model in self.models]


def _fail(where: str, message: str) -> ConfigError:
    return ConfigError(f"{where}: {message}")


def drain_problem(drain_s: float, shutdown_timeout_s: float) -> str | None:
    """Why ``shutdown_timeout_s`` would cut a drain of ``drain_s`` short, or ``None``.

    The process is ended ``shutdown_timeout_s`` after SIGTERM, whatever it is
    doing: a stream still in its drain would stop with no ``error`` and no
    ``stream.end``. So the drain, and what follows it, must fit.
    """
    need = drain_s + DRAIN_MARGIN_S
    if shutdown_timeout_s < need:
        return (
            f"{shutdown_timeout_s:g} s would cut the drain (drain_s = {drain_s:g}): it must be "
            f"at least drain_s + {DRAIN_MARGIN_S:g} = {need:g}, or drain_s smaller"
        )
    return None


def _fit_shutdown(config: Config, explicit: bool) -> Config:
    """Refuse a ``shutdown_timeout_s`` that cuts the drain; one not given is made to fit."""
    server, drain_s = config.server, config.production.drain_s
    problem = drain_problem(drain_s, server.shutdown_timeout_s)
    if problem is None:
        return config
    if explicit:
        raise _fail("server.shutdown_timeout_s", problem)
    fitted = msgspec.structs.replace(server, shutdown_timeout_s=drain_s + DRAIN_MARGIN_S)
    return msgspec.structs.replace(config, server=fitted)


def _check_model(i: int, model: ModelConfig) -> None:
    where = f"models[{i}]"
    if not model.name:
        raise _fail(f"{where}.name", "must not be empty")
    if model.provider not in PROVIDERS:
        known = ", ".join(sorted(PROVIDERS))
        raise _fail(f"{where}.provider", f"unknown provider {model.provider!r} (known: {known})")
    if model.provider in HTTP_VENDORS and not model.base_url:
        raise _fail(f"{where}.base_url", f"required for provider {model.provider!r}")
    if model.provider == "python":
        if not model.factory or ":" not in model.factory:
            raise _fail(f"{where}.factory", 'required for provider "python": "module:callable"')
    for key in ("timeout_s", "connect_timeout_s"):
        value = getattr(model, key)
        if not (math.isfinite(value) and value > 0):
            raise _fail(f"{where}.{key}", "must be a number > 0")
    if model.http not in HTTP_VERSIONS:
        raise _fail(f"{where}.http", f'must be "1.1" or "2", got {model.http!r}')
    if not (math.isfinite(model.delay_ms) and model.delay_ms >= 0):
        raise _fail(f"{where}.delay_ms", "must be a number >= 0")
    if model.provider in BINDING_PROVIDERS:
        _check_binding(where, model)


def _check_binding(where: str, model: ModelConfig) -> None:
    """The keys of a ``signalr`` or ``connect`` entry (docs/bindings.md)."""
    provider = model.provider
    if provider == "signalr":
        if model.base_url is not None:
            raise _fail(f"{where}.base_url", 'not used by provider "signalr": set hub_url')
        if not model.hub_url:
            raise _fail(f"{where}.hub_url", 'required for provider "signalr"')
        if not model.hub_url.startswith(("http://", "https://", "ws://", "wss://")):
            raise _fail(f"{where}.hub_url", "must be an http(s):// or ws(s):// URL")
    else:
        if not model.base_url:
            raise _fail(f"{where}.base_url", 'required for provider "connect"')
        if not model.base_url.startswith(("http://", "https://")):
            raise _fail(f"{where}.base_url", "must be an http:// or https:// URL")
        if model.service_path is not None and not model.service_path.startswith("/"):
            raise _fail(f"{where}.service_path", 'must start with "/"')
        if model.codec is not None and model.codec not in ("json", "proto"):
            raise _fail(f"{where}.codec", f"must be json or proto, got {model.codec!r}")
        if model.compression is not None and model.compression not in ("gzip", "identity"):
            raise _fail(
                f"{where}.compression", f"must be gzip or identity, got {model.compression!r}"
            )
    mappings = MAPPINGS[provider]
    if model.mapping is not None and model.mapping not in mappings:
        raise _fail(
            f"{where}.mapping",
            f"must be {' or '.join(mappings)} for provider {provider!r}, got {model.mapping!r}",
        )
    for key in ("server_timeout_s", "keepalive_s", "idle_timeout_s"):
        value = getattr(model, key)
        if value is not None and not (math.isfinite(value) and value > 0):
            raise _fail(f"{where}.{key}", "must be a number > 0")
    for key in ("max_record_bytes", "max_message_bytes"):
        value = getattr(model, key)
        if value is not None and value < 1:
            raise _fail(f"{where}.{key}", "must be >= 1")
    for name in model.headers:
        # Credential headers (``tokenwire._secrets``) are never literal in the file.
        if name.lower() in SECRET_HEADERS:
            raise _fail(
                f"{where}.headers.{name}",
                "credentials are never written in the config: name an environment "
                "variable with api_key_env",
            )


def _binding_options(model: ModelConfig) -> dict[str, Any]:
    """What a ``signalr``/``connect`` provider receives: the keys set, by its names."""
    keys = [k for k, providers in BINDING_KEYS.items() if model.provider in providers]
    options: dict[str, Any] = {k: getattr(model, k) for k in keys}
    if model.provider == "signalr":
        # The connect provider gets these from the entry itself (providers.build_provider).
        options |= {
            "hub_url": model.hub_url,
            "api_key_env": model.api_key_env,
            "connect_timeout_s": model.connect_timeout_s,
            "reasoning": model.reasoning,
        }
    return {k: v for k, v in options.items() if v is not None and v != {}}


def _lift_binding_options(i: int, entry: Any) -> Any:
    """A ``signalr``/``connect`` entry's ``[models.options]`` read as keys of the entry.

    The keys of the entry are the documented form; an options table (the
    earlier form) names the same settings, so it is checked the same way.
    """
    if not isinstance(entry, Mapping) or entry.get("provider") not in BINDING_PROVIDERS:
        return entry
    options = entry.get("options")
    if not isinstance(options, Mapping):
        return entry
    both = sorted(set(options) & set(entry))
    if both:
        raise _fail(f"models[{i}].options.{both[0]}", "also set as a key of the model entry")
    lifted = {k: v for k, v in entry.items() if k != "options"}
    return lifted | dict(options)


#: Keys that only one vendor's request builder reads (not lifted into ``options``),
#: or that only the HTTP vendors' provider reads.
_VENDOR_KEYS: Final[dict[str, frozenset[str]]] = {
    "send_reasoning": frozenset({"openai"}),
    "http": HTTP_VENDORS,
}
#: ``http``: which client talks to the upstream (docs/reference/config.md, "Upstream connections").
HTTP_VERSIONS: Final = ("1.1", "2")


def _check_keys(i: int, entry: Mapping[str, Any]) -> None:
    """A key on a model whose provider does not read it is an error, not ignored."""
    provider = entry.get("provider")
    for key in entry:
        providers = BINDING_KEYS.get(key) or _VENDOR_KEYS.get(key)
        if providers is not None and provider not in providers:
            only = " or ".join(repr(p) for p in sorted(providers))
            raise _fail(f"models[{i}].{key}", f"only for provider {only}, not {provider!r}")


def _check_server(cfg: ServerConfig) -> None:
    if not 0 <= cfg.port <= 65535:
        raise _fail("server.port", "must be from 0 to 65535")
    if cfg.workers < 1:
        raise _fail("server.workers", "must be >= 1")
    if cfg.max_body_bytes < 1:
        raise _fail("server.max_body_bytes", "must be >= 1")
    for key in (
        "keepalive_s",
        "header_timeout_s",
        "body_timeout_s",
        "write_timeout_s",
        "idle_timeout_s",
        "shutdown_timeout_s",
    ):
        value = getattr(cfg, key)
        if not (math.isfinite(value) and value > 0):
            raise _fail(f"server.{key}", "must be a number > 0")
    for key in ("stream_budget_bytes", "memory_budget_bytes", "send_buffer_bytes"):
        if getattr(cfg, key) < 1:
            raise _fail(f"server.{key}", "must be >= 1")
    if (cfg.certfile is None) != (cfg.keyfile is None):
        raise _fail("server.certfile", "certfile and keyfile go together")
    if cfg.webtransport_port is not None:
        if not 0 <= cfg.webtransport_port <= 65535:
            raise _fail("server.webtransport_port", "must be a port, 0 to 65535")
        if cfg.certfile is None:
            raise _fail("server.webtransport_port", "WebTransport needs certfile and keyfile")
        if cfg.workers != 1:
            raise _fail("server.webtransport_port", "WebTransport is served by one worker only")
    if cfg.cleartext_http2 and cfg.certfile is not None:
        raise _fail("server.cleartext_http2", CLEARTEXT_HTTP2_WITH_TLS)
    if not MIN_MAX_HEADER_BYTES <= cfg.max_header_bytes <= 16 << 20:
        raise _fail("server.max_header_bytes", f"must be from {MIN_MAX_HEADER_BYTES} to 16 MiB")
    if cfg.http2_max_concurrent_streams < 1:
        raise _fail("server.http2_max_concurrent_streams", "must be >= 1")
    if cfg.engine not in SERVER_ENGINES:
        known = ", ".join(sorted(SERVER_ENGINES))
        raise _fail("server.engine", f"unknown engine {cfg.engine!r} (known: {known})")


def _check_resume(cfg: ResumeConfig) -> None:
    if cfg.backend not in RESUME_BACKENDS:
        known = ", ".join(sorted(RESUME_BACKENDS))
        raise _fail("resume.backend", f"unknown backend {cfg.backend!r} (known: {known})")
    if cfg.backend == "redis":
        if not cfg.url:
            raise _fail("resume.url", 'required for backend "redis"')
        if not cfg.url.startswith(_REDIS_SCHEMES):
            raise _fail("resume.url", "must be a redis://, rediss:// or unix:// URL")
    for key in ("grace_s", "ttl_s", "lease_s"):
        value = getattr(cfg, key)
        if not (math.isfinite(value) and value > 0):
            raise _fail(f"resume.{key}", "must be a number > 0")
    if cfg.max_events_per_stream < 1:
        raise _fail("resume.max_events_per_stream", "must be >= 1")
    if cfg.max_bytes < 1:
        raise _fail("resume.max_bytes", "must be >= 1")


def deployment_models(
    model: ModelConfig, routing: config_prod.RoutingConfig
) -> list[tuple[ModelConfig, float]]:
    """``(ModelConfig, weight)`` of each deployment of ``model``.

    No ``deployments``: the entry itself, with the entry's ``weight``. Raises
    ``ConfigProblem`` when a deployment is not a valid model entry.
    """
    if not routing.deployments:
        return [(model, routing.weight)]
    base = msgspec.structs.asdict(model)
    out: list[tuple[ModelConfig, float]] = []
    for j, deployment in enumerate(routing.deployments):
        fields = {k: v for k, v in deployment.items() if k != "weight"}
        where = f"model {model.name!r} deployments[{j}]"
        merged = config_prod.convert({**base, **fields}, ModelConfig, where)
        try:
            _check_model(j, merged)
        except ConfigError as exc:
            config_prod.refuse(where, str(exc).removeprefix(f"models[{j}]."))
        out.append((merged, float(deployment.get("weight", 1.0))))
    return out


def attach(config: Config, production: config_prod.ProductionConfig) -> Config:
    """``config`` with ``production`` checked and attached."""
    config_prod.check(production, config.model_names, config.resume.url)
    for model in config.models:
        deployment_models(model, production.routing_for(model.name))
    return msgspec.structs.replace(config, production=production)


def parse(data: Mapping[str, Any]) -> Config:
    """Build a ``Config`` from a decoded TOML document (a dict).

    Returns the config, with the built-in ``demo`` model added when no entry
    is named ``demo``. Raises ``ConfigError`` naming the offending key.
    """
    try:
        data, production = config_prod.split(data)
    except config_prod.ConfigProblem as exc:
        raise ConfigError(_key_hint(str(exc))) from None
    models = data.get("models", []) or []
    if isinstance(models, list):
        models = [_lift_binding_options(i, entry) for i, entry in enumerate(models)]
        data = {**data, "models": models}
    for i, entry in enumerate(models):
        if not isinstance(entry, Mapping):
            continue
        for secret in ("api_key", "access_token"):
            if secret in entry:
                raise _fail(
                    f"models[{i}].{secret}",
                    "keys are never written in the config: name an environment variable "
                    "with api_key_env",
                )
        _check_keys(i, entry)
    try:
        config = msgspec.convert(data, Config, strict=True)
    except msgspec.ValidationError as exc:
        text = str(exc)
        where, _, message = text.rpartition(" - at `$")
        if where:
            text = f"{message.rstrip('`').lstrip('.')}: {where}"
        raise ConfigError(_key_hint(text)) from None
    _check_server(config.server)
    _check_resume(config.resume)
    bound = config.responses_websocket.problem()
    if bound is not None:
        raise _fail(f"responses_websocket.{bound[0]}", bound[1])
    seen: set[str] = set()
    for i, model in enumerate(config.models):
        _check_model(i, model)
        if model.name in seen:
            raise _fail(f"models[{i}].name", f"duplicate model name {model.name!r}")
        seen.add(model.name)
    config = msgspec.structs.replace(
        config,
        models=[
            msgspec.structs.replace(m, options=_binding_options(m))
            if m.provider in BINDING_PROVIDERS
            else m
            for m in config.models
        ],
    )
    if "demo" not in seen:
        demo = ModelConfig(name="demo", provider="demo")
        config = msgspec.structs.replace(config, models=[*config.models, demo])
    try:
        config = attach(config, production)
    except config_prod.ConfigProblem as exc:
        raise ConfigError(str(exc)) from None
    listen = config.metrics.listen
    if listen is not None:
        host, _, port = listen.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise _fail(
                "metrics.listen",
                f'{listen!r} is not host:port; write e.g. "127.0.0.1:9464"',
            )
    key_ids = {key.id for key in config.production.keys}
    for j, key_id in enumerate(config.metrics.keys):
        if key_id not in key_ids:
            raise _fail(f"metrics.keys[{j}]", f"no [[keys]] entry has id {key_id!r}")
    server = data.get("server")
    return _fit_shutdown(config, isinstance(server, Mapping) and "shutdown_timeout_s" in server)


def _known_keys(table: str) -> list[str]:
    """The keys a table of the file takes (production keys included), for suggestions."""

    def fields(kind: Any) -> list[str]:
        return [f.encode_name for f in msgspec.structs.fields(kind)]

    production = ["keys", "limits", "telemetry"]
    known = {
        "": [f for f in fields(Config) if f != "production"] + production,
        "server": fields(ServerConfig) + ["drain_s"],
        "models": fields(ModelConfig) + fields(config_prod.RoutingConfig) + list(BINDING_KEYS),
        "resume": fields(ResumeConfig),
        "translate": fields(TranslateConfig),
        "responses_websocket": fields(ResponsesWebSocketConfig),
        "keys": fields(config_prod.KeyConfig),
        "limits": fields(config_prod.LimitsConfig),
        "telemetry": fields(config_prod.TelemetryConfig),
    }
    return known.get(table, [])


_UNKNOWN_FIELD: Final = re.compile(
    r"^(?:(?P<where>[^:]*): )?Object contains unknown field `(?P<key>[^`]*)`$"
)


def _key_hint(text: str) -> str:
    """msgspec's "unknown field" error plus the key that was meant."""
    m = _UNKNOWN_FIELD.match(text)
    if m is None:
        return text
    where = m.group("where") or ""
    table = re.sub(r"\[\d+\]", "", where)  # models[2] -> models
    known = _known_keys(table)
    # The closest key when one is close, else every key the table takes.
    hint = did_you_mean(m.group("key"), known) or did_you_mean(
        m.group("key"), known, listing="known keys"
    )
    return f"{text}{hint}"


#: A config file is a few KiB; anything past this is not one (every parser has a limit).
MAX_CONFIG_BYTES: Final = 1 << 20


def _decode_toml(path: str, raw: bytes) -> dict[str, Any]:
    """The TOML document in ``raw``; a ``ConfigError`` in words for what is not one
    (binary and deeply nested files gave tracebacks)."""
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: larger than {MAX_CONFIG_BYTES} bytes: not a config file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path}: not UTF-8 text (byte {exc.start}): a config file is TOML"
        ) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    except RecursionError:  # tomllib recurses per nested array or inline table
        raise ConfigError(f"{path}: invalid TOML: nested too deeply") from None


def load(path: str | os.PathLike[str] | None) -> Config:
    """Read a TOML config file; ``None`` gives the default (``demo`` only).

    Raises ``ConfigError`` for an unreadable file, invalid TOML or an invalid setting.
    """
    if path is None:
        return parse({})
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"{path}: {exc.strerror or exc}") from None
    data = _decode_toml(str(path), raw)
    try:
        return parse(data)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
