"""The production settings of the gateway config (docs/gateway.md, "Production").

::

    [server]
    drain_s = 30.0                      # SIGTERM: streams get this long to finish

    [[keys]]                            # inbound keys; none: the gateway is open
    id = "team-a"
    hash = "sha256:9f86d0..."           # from `tokenwire keys create`
    models = ["demo"]                   # empty or absent: every model
    requests_per_minute = 60
    tokens_per_minute = 100000
    token_budget = 5000000              # lifetime total (input + output)

    [limits]
    backend = "memory"                  # or "redis" (replicas share the counters)
    url = "redis://127.0.0.1:6379/0"    # default: [resume] url

    [[models]]
    name = "fast"
    provider = "openai"
    ...
    fallbacks = ["backup"]              # tried in order when every deployment failed
    retries = 2                         # extra attempts before the first token (default 0)
    deployments = [                     # weighted load balancing over one model name
      { base_url = "https://a.example/v1", weight = 3 },
      { base_url = "https://b.example/v1", api_key_env = "B_KEY", weight = 1 },
    ]

    [telemetry]                         # OpenTelemetry (also the standard OTEL_* variables)
    enabled = true
    endpoint = "http://127.0.0.1:4318"

``split`` takes these keys out of the decoded TOML document before the rest is
validated by ``config.parse``, so each module only knows its own keys.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any, Final

import msgspec

from ...errors import TokenwireError

__all__ = [
    "KeyConfig",
    "LimitsConfig",
    "ProductionConfig",
    "RoutingConfig",
    "TelemetryConfig",
    "bind_warning",
    "check",
    "convert",
    "refuse",
    "split",
]

#: Keys of a ``[[models]]`` entry that belong to reliability routing.
ROUTING_KEYS: Final = frozenset(
    {
        "fallbacks",
        "deployments",
        "weight",
        "retries",
        "retry_backoff_s",
        "retry_backoff_max_s",
        "breaker_failures",
        "breaker_cooldown_s",
    }
)

LIMIT_BACKENDS: Final = frozenset({"memory", "redis"})
_KEY_ID: Final = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")
_HASH: Final = re.compile(r"^sha256:[0-9a-f]{64}$")


class ConfigProblem(TokenwireError, ValueError):
    """One invalid production setting; the message names the key."""


class KeyConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One ``[[keys]]`` entry: an inbound key's hash and what it may do."""

    id: str
    hash: str
    models: list[str] = []
    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None
    token_budget: int | None = None


class LimitsConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[limits]``: where the per-key counters live."""

    backend: str = "memory"
    url: str | None = None
    #: Redis Cluster: the ``url`` names one node, the client discovers the rest.
    cluster: bool = False
    prefix: str = "tokenwire:limits"
    #: Redis unreachable: serve (``true``) or refuse with 503 (``false``).
    fail_open: bool = True
    #: What a request without ``max_tokens`` reserves for its output at admission
    #: (a stream that passes it asks for more as it goes).
    reserve_tokens: int = 1024


class TelemetryConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[telemetry]``: OpenTelemetry export over OTLP/HTTP.

    ``enabled = None`` follows the standard variables: export when
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``..._TRACES_ENDPOINT``) is set and
    ``OTEL_SDK_DISABLED`` is not ``true``.
    """

    enabled: bool | None = None
    endpoint: str | None = None
    service_name: str = "tokenwire-gateway"
    export_interval_s: float = 5.0


class RoutingConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The routing keys of one ``[[models]]`` entry."""

    fallbacks: list[str] = []
    #: Each a table of model keys (``provider``, ``base_url``, ``api_key_env``,
    #: ``upstream_model``...) overriding the entry's own, plus ``weight``.
    deployments: list[dict[str, Any]] = []
    weight: float = 1.0
    retries: int = 0
    retry_backoff_s: float = 0.1
    retry_backoff_max_s: float = 2.0
    breaker_failures: int = 5
    breaker_cooldown_s: float = 30.0


class ProductionConfig(msgspec.Struct, frozen=True, kw_only=True):
    """Everything ``split`` took out of the document."""

    keys: list[KeyConfig] = []
    limits: LimitsConfig = LimitsConfig()
    telemetry: TelemetryConfig = TelemetryConfig()
    routing: dict[str, RoutingConfig] = {}
    drain_s: float = 30.0

    def routing_for(self, model: str) -> RoutingConfig:
        """The routing settings of ``model`` (the defaults when it names none)."""
        return self.routing.get(model) or _DEFAULT_ROUTING


_DEFAULT_ROUTING: Final = RoutingConfig()


def convert(value: Any, kind: type[Any], where: str) -> Any:
    try:
        return msgspec.convert(value, kind, strict=True)
    except msgspec.ValidationError as exc:
        text = str(exc)
        message, _, at = text.rpartition(" - at `$")
        if message:
            field = at.rstrip("`")
            joined = where + (field if field.startswith((".", "[")) or not field else f".{field}")
            return refuse(joined, message)
        return refuse(where, text)


def refuse(where: str, message: str) -> Any:
    raise ConfigProblem(f"{where}: {message}")


def split(data: Mapping[str, Any]) -> tuple[dict[str, Any], ProductionConfig]:
    """The document without the production keys, and those keys parsed.

    Raises ``ConfigProblem`` naming the key for an invalid production setting.
    """
    rest = dict(data)
    if "production" in rest:
        refuse("production", "unknown table (the production keys live in [[keys]], [limits]...)")
    keys = convert(rest.pop("keys", []), list[KeyConfig], "keys")
    limits = convert(rest.pop("limits", {}), LimitsConfig, "limits")
    telemetry = convert(rest.pop("telemetry", {}), TelemetryConfig, "telemetry")
    drain_s = 30.0
    server = rest.get("server")
    if isinstance(server, Mapping) and "drain_s" in server:
        server = dict(server)
        drain_s = convert(server.pop("drain_s"), float, "server.drain_s")
        rest["server"] = server
    routing: dict[str, RoutingConfig] = {}
    models = rest.get("models")
    if isinstance(models, list):
        cleaned = []
        for i, entry in enumerate(models):
            if isinstance(entry, Mapping) and ROUTING_KEYS & entry.keys():
                entry = dict(entry)
                own = {k: entry.pop(k) for k in ROUTING_KEYS & entry.keys()}
                name = entry.get("name")
                parsed = convert(own, RoutingConfig, f"models[{i}]")
                if isinstance(name, str):
                    routing[name] = parsed
            cleaned.append(entry)
        rest["models"] = cleaned
    production = ProductionConfig(
        keys=keys, limits=limits, telemetry=telemetry, routing=routing, drain_s=drain_s
    )
    return rest, production


def check(production: ProductionConfig, model_names: list[str], resume_url: str | None) -> None:
    """Cross-checks once the models are known. Raises ``ConfigProblem`` naming the key."""
    if not (math.isfinite(production.drain_s) and production.drain_s >= 0):
        refuse("server.drain_s", "must be a number >= 0")
    seen_ids: set[str] = set()
    seen_hashes: set[str] = set()
    for i, key in enumerate(production.keys):
        where = f"keys[{i}]"
        if not _KEY_ID.match(key.id):
            refuse(f"{where}.id", "1 to 64 of A-Z a-z 0-9 . _ : - (no braces: it is a hash tag)")
        if key.id in seen_ids:
            refuse(f"{where}.id", f"duplicate key id {key.id!r}")
        if not _HASH.match(key.hash):
            refuse(f"{where}.hash", 'must be "sha256:" and 64 hex digits (tokenwire keys create)')
        if key.hash in seen_hashes:
            refuse(f"{where}.hash", "the same key hash is configured twice")
        seen_ids.add(key.id)
        seen_hashes.add(key.hash)
        for j, model in enumerate(key.models):
            if model not in model_names:
                refuse(f"{where}.models[{j}]", f"unknown model {model!r}")
        for field in ("requests_per_minute", "tokens_per_minute"):
            value = getattr(key, field)
            if value is not None and not (math.isfinite(value) and value > 0):
                refuse(f"{where}.{field}", "must be a number > 0")
        if key.token_budget is not None and key.token_budget < 1:
            refuse(f"{where}.token_budget", "must be >= 1")
    limits = production.limits
    if limits.backend not in LIMIT_BACKENDS:
        refuse("limits.backend", f"unknown backend {limits.backend!r} (known: memory, redis)")
    if limits.backend == "redis" and not (limits.url or resume_url):
        refuse("limits.url", 'required for backend "redis" (or set [resume] url)')
    url = limits.url or ""
    if url and not url.startswith(("redis://", "rediss://", "unix://")):
        refuse("limits.url", "must be a redis://, rediss:// or unix:// URL")
    if limits.cluster and limits.backend != "redis":
        refuse("limits.cluster", 'needs backend = "redis"')
    if "{" in limits.prefix or "}" in limits.prefix:
        refuse("limits.prefix", "must not contain braces (the key id is the hash tag)")
    if limits.reserve_tokens < 1:
        refuse("limits.reserve_tokens", "must be >= 1")
    telemetry = production.telemetry
    if not (math.isfinite(telemetry.export_interval_s) and telemetry.export_interval_s > 0):
        refuse("telemetry.export_interval_s", "must be a number > 0")
    for name, routing in production.routing.items():
        where = f"models[{model_names.index(name)}]" if name in model_names else name
        for j, fallback in enumerate(routing.fallbacks):
            if fallback not in model_names:
                refuse(f"{where}.fallbacks[{j}]", f"unknown model {fallback!r}")
            if fallback == name:
                refuse(f"{where}.fallbacks[{j}]", "a model cannot fall back to itself")
        if routing.retries < 0:
            refuse(f"{where}.retries", "must be >= 0")
        for field in ("retry_backoff_s", "retry_backoff_max_s", "breaker_cooldown_s"):
            value = getattr(routing, field)
            if not (math.isfinite(value) and value >= 0):
                refuse(f"{where}.{field}", "must be a number >= 0")
        if routing.breaker_failures < 1:
            refuse(f"{where}.breaker_failures", "must be >= 1")
        if not (math.isfinite(routing.weight) and routing.weight > 0):
            refuse(f"{where}.weight", "must be a number > 0")
        for j, deployment in enumerate(routing.deployments):
            weight = deployment.get("weight", 1.0)
            if not isinstance(weight, int | float) or not weight > 0:
                refuse(f"{where}.deployments[{j}].weight", "must be a number > 0")
            if "name" in deployment:
                refuse(f"{where}.deployments[{j}].name", "a deployment takes the model's name")
            if "api_key" in deployment:
                refuse(
                    f"{where}.deployments[{j}].api_key",
                    "keys are never written in the config: use api_key_env",
                )


_LOOPBACK: Final = frozenset({"127.0.0.1", "::1", "localhost"})


def bind_warning(production: ProductionConfig, host: str) -> str | None:
    """The one warning line for an open gateway on a non-loopback address, or ``None``."""
    if production.keys or host in _LOOPBACK or host.startswith("127."):
        return None
    return (
        f"warning: binding {host} with no [[keys]] configured: anyone who can reach this "
        "address can spend the configured provider keys (tokenwire keys create)"
    )
