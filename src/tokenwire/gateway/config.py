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
"""

from __future__ import annotations

import math
import os
import tomllib
from collections.abc import Mapping
from typing import Any, Final

import msgspec

from .. import _guard, server

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "PROVIDERS",
    "Config",
    "ConfigError",
    "ModelConfig",
    "RESUME_BACKENDS",
    "ResumeConfig",
    "ServerConfig",
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
#: A connection's kernel send buffer (SO_SNDBUF; the kernel doubles it).
DEFAULT_SEND_BUFFER_BYTES: Final = 128 * 1024
_GUARD: Final = _guard.Limits()

#: Provider kinds besides the vendor formats of ``tokenwire.translate.VENDORS``.
BUILTIN_PROVIDERS: Final = frozenset({"demo", "python"})

#: Vendors served over plain HTTP by ``providers.HTTPProvider``.
HTTP_VENDORS: Final = frozenset(
    {"openai", "openai-responses", "mistral", "anthropic", "gemini", "cohere"}
)

#: Bindings with a provider of their own (WebSocket; Connect with its idle end and
#: one connection per call), configured through ``options``; see docs/bindings.md.
BINDING_PROVIDERS: Final = frozenset({"signalr", "connect"})

#: Every ``provider`` value a model may name.
PROVIDERS: Final = BUILTIN_PROVIDERS | HTTP_VENDORS | BINDING_PROVIDERS

#: Where resumable streams are kept: in the worker's memory, or in Redis Streams.
RESUME_BACKENDS: Final = frozenset({"memory", "redis"})

#: URL schemes redis-py connects to.
_REDIS_SCHEMES: Final = ("redis://", "rediss://", "unix://")


class ConfigError(ValueError):
    """The configuration is not valid; the message names the key (``models[1].provider``)."""


class ServerConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[server]``: where and how to listen, and the per-request limits."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    workers: int = 1
    certfile: str | None = None
    keyfile: str | None = None
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


class ModelConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One ``[[models]]`` entry: a model name and the provider that serves it.

    - vendor providers (``openai``, ``anthropic``...): ``base_url``,
      ``api_key_env``, ``upstream_model``, ``timeout_s`` (idle read timeout),
      ``connect_timeout_s``, ``reasoning`` (carry reasoning text, §extension);
    - ``demo``: ``delay_ms``;
    - ``python``: ``factory = "module:callable"``, called with ``options`` as
      keyword arguments, returning a provider (docs/gateway.md, "Plugins");
    - ``signalr`` / ``connect``: ``options`` (``hub_url``, ``method``, ``mapping``;
      ``service_path``, ``codec``, ``mapping``...), see docs/bindings.md.
    """

    name: str
    provider: str
    base_url: str | None = None
    api_key_env: str | None = None
    upstream_model: str | None = None
    timeout_s: float = 120.0
    connect_timeout_s: float = 10.0
    reasoning: bool = False
    delay_ms: float = 0.0
    factory: str | None = None
    options: dict[str, Any] = {}

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
      replica stopped renewing it is ended with an ``error`` on resume.
    """

    default: bool = False
    backend: str = "memory"
    url: str | None = None
    grace_s: float = 30.0
    ttl_s: float = 300.0
    max_events_per_stream: int = 100_000
    max_bytes: int = 256 << 20
    lease_s: float = 5.0


class Config(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The whole file. ``models`` always includes ``demo`` after ``parse``."""

    server: ServerConfig = ServerConfig()
    models: list[ModelConfig] = []
    resume: ResumeConfig = ResumeConfig()

    def model(self, name: str) -> ModelConfig | None:
        """The entry for model ``name``, or ``None``."""
        for model in self.models:
            if model.name == name:
                return model
        return None

    @property
    def model_names(self) -> list[str]:
        """Every served model name, in file order (``demo`` last unless named)."""
        return [model.name for model in self.models]


def _fail(where: str, message: str) -> ConfigError:
    return ConfigError(f"{where}: {message}")


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
    if not (math.isfinite(model.delay_ms) and model.delay_ms >= 0):
        raise _fail(f"{where}.delay_ms", "must be a number >= 0")


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


def parse(data: Mapping[str, Any]) -> Config:
    """Build a ``Config`` from a decoded TOML document (a dict).

    Returns the config, with the built-in ``demo`` model added when no entry
    is named ``demo``. Raises ``ConfigError`` naming the offending key.
    """
    for i, entry in enumerate(data.get("models", []) or []):
        if isinstance(entry, Mapping) and "api_key" in entry:
            raise _fail(
                f"models[{i}].api_key",
                "keys are never written in the config: name an environment variable "
                "with api_key_env",
            )
    try:
        config = msgspec.convert(data, Config, strict=True)
    except msgspec.ValidationError as exc:
        text = str(exc)
        where, _, message = text.rpartition(" - at `$")
        if where:
            text = f"{message.rstrip('`').lstrip('.')}: {where}"
        raise ConfigError(text) from None
    _check_server(config.server)
    _check_resume(config.resume)
    seen: set[str] = set()
    for i, model in enumerate(config.models):
        _check_model(i, model)
        if model.name in seen:
            raise _fail(f"models[{i}].name", f"duplicate model name {model.name!r}")
        seen.add(model.name)
    if "demo" not in seen:
        demo = ModelConfig(name="demo", provider="demo")
        config = msgspec.structs.replace(config, models=[*config.models, demo])
    return config


def load(path: str | os.PathLike[str] | None) -> Config:
    """Read a TOML config file; ``None`` gives the default (``demo`` only).

    Raises ``ConfigError`` for an unreadable file, invalid TOML or an invalid setting.
    """
    if path is None:
        return parse({})
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except OSError as exc:
        raise ConfigError(f"{path}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    try:
        return parse(data)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
