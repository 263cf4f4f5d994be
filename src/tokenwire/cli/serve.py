"""``tokenwire serve [--config FILE] [--host H] [--port P] [--workers N] [--certfile --keyfile]``.

Runs the gateway on granian (Rust HTTP/1.1 and HTTP/2 server, ASGI interface).
With ``--certfile``/``--keyfile`` it serves TLS 1.3 and negotiates HTTP/2 by
ALPN (§3: HTTP/2 SHOULD be preferred, TLS 1.3 is required in production);
without TLS it serves HTTP/1.1 only, unless ``[server] cleartext_http2`` asks
for h2c too (``http_mode``).
With ``--workers 1`` (the default) the gateway runs in this process, on
granian's embedded server (``cli/_one_process.py``); with more, granian's
supervisor forks the workers, and settings reach them through environment
variables (``tokenwire.gateway.app.app_from_env``). docs/gateway.md, "Processes".
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..gateway.config import (
    CLEARTEXT_HTTP2_WITH_TLS,
    CONFIG_ENV,
    LOG_CONTENT_ENV,
    SERVER_ENGINES,
    TIMEOUT_ENV,
    Config,
    ConfigError,
    ServerConfig,
    load,
)
from ..gateway.config.production import bind_warning
from ..gateway.telemetry.logs import LOG_FORMAT_ENV, LOG_FORMATS
from ._limits import concurrent_requests, raise_open_files
from ._ports import claim_port

if TYPE_CHECKING:
    from granian.constants import HTTPModes

    from ..gateway.policy.drain import Drain
    from ..server.guard import Guard

_LOG_LEVELS = ("critical", "error", "warning", "info", "debug")
#: Overrides ``[server] engine`` ("granian" or "h1").
ENGINE_ENV = "TOKENWIRE_SERVER_ENGINE"


@click.command()
@click.option(
    "--config",
    "config_path",
    type=click.Path(exists=True, dir_okay=False),
    help="TOML config (docs/reference/config.md): [server], [[models]] (with their routing "
    "keys), [resume], [[keys]], [limits], [metrics], [telemetry], [translate] and "
    "[responses_websocket]. "
    "Default: demo only.",
)
@click.option("--host", help="Address to bind. [default: config, else 127.0.0.1]")
@click.option(
    "--port", type=click.IntRange(0, 65535), help="Port to bind. [default: config, else 8080]"
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    help="Worker processes; 1 serves in this one process. [default: config, else 1]",
)
@click.option(
    "--certfile", type=click.Path(exists=True, dir_okay=False), help="TLS certificate (PEM)."
)
@click.option("--keyfile", type=click.Path(exists=True, dir_okay=False), help="TLS key (PEM).")
@click.option(
    "--log-content",
    is_flag=True,
    default=False,
    help="Log prompts and completions (redacted by default, §8.1).",
)
@click.option(
    "--log-format",
    type=click.Choice(LOG_FORMATS),
    default="auto",
    show_default=True,
    help="Request log lines: text for a person, json one object a line; auto is text "
    "on a terminal, json otherwise.",
)
@click.option(
    "--log-level",
    type=click.Choice(_LOG_LEVELS),
    default="warning",
    show_default=True,
    help="The HTTP server's own log level (request lines are always logged).",
)
@click.option(
    "--header-timeout",
    type=click.FloatRange(min=0, min_open=True),
    help="Seconds a request head may take to arrive. [default: config, else 10]",
)
@click.option(
    "--body-timeout",
    type=click.FloatRange(min=0, min_open=True),
    help="Seconds a request body may take to arrive (then 408). [default: config, else 30]",
)
@click.option(
    "--write-timeout",
    type=click.FloatRange(min=0, min_open=True),
    help="Seconds a client may read nothing before its stream is ended. [default: config, else 30]",
)
@click.option(
    "--shutdown-timeout",
    type=click.FloatRange(min=0, min_open=True),
    help="Seconds a worker has to stop after SIGTERM before it is killed. "
    "[default: config, else 10]",
)
def command(
    config_path: str | None,
    host: str | None,
    port: int | None,
    workers: int | None,
    certfile: str | None,
    keyfile: str | None,
    log_content: bool,
    log_format: str,
    log_level: str,
    header_timeout: float | None,
    body_timeout: float | None,
    write_timeout: float | None,
    shutdown_timeout: float | None,
) -> None:
    """Run the gateway: the built-in demo model, or the models of a config file.

    Prints the URL, then serves until interrupted. Request logs go to stderr,
    one line per request: for a person on a terminal, JSON otherwise (--log-format).
    """
    # granian's allocator (jemalloc) keeps freed pages (10 s decay, purged only
    # when it is busy): after a storm of stalled clients the workers would stay
    # at their peak. Give freed pages back at once. jemalloc reads this once,
    # when granian loads; the forked workers inherit it. A user's own setting wins.
    os.environ.setdefault("_RJEM_MALLOC_CONF", _JEMALLOC_CONF)
    from granian.constants import Interfaces
    from granian.http import HTTP1Settings, HTTP2Settings
    from granian.log import LogLevels

    try:
        config = load(config_path)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    settings = _with_timeouts(
        config.server,
        header_timeout_s=header_timeout,
        body_timeout_s=body_timeout,
        write_timeout_s=write_timeout,
        shutdown_timeout_s=shutdown_timeout,
    )
    if shutdown_timeout is not None:
        from ..gateway.config import drain_problem

        problem = drain_problem(config.production.drain_s, shutdown_timeout)
        if problem is not None:
            raise click.ClickException(f"--shutdown-timeout: {problem}")
    host = host if host is not None else settings.host
    port = port if port is not None else settings.port
    workers = workers if workers is not None else settings.workers
    certfile = certfile if certfile is not None else settings.certfile
    keyfile = keyfile if keyfile is not None else settings.keyfile
    if (certfile is None) != (keyfile is None):
        raise click.UsageError("--certfile and --keyfile go together")
    if certfile is not None and settings.cleartext_http2:
        raise click.ClickException(f"server.cleartext_http2: {CLEARTEXT_HTTP2_WITH_TLS}")
    # engine = "h1": tokenwire's own HTTP/1.1 server, one process, cleartext only
    # (TLS and h2c stay on granian: the hybrid; bench/RESULTS.md, "serving").
    # ENGINE_ENV, when set, wins over the config (a deployment's, or a test run's, choice).
    engine = os.environ.get(ENGINE_ENV) or settings.engine
    if engine not in SERVER_ENGINES:
        raise click.ClickException(f"{ENGINE_ENV}: unknown engine {engine!r} (known: granian, h1)")
    own_h1 = engine == "h1" and certfile is None and not settings.cleartext_http2
    if own_h1 and workers != 1:
        # h1 is one process; several workers are granian's supervisor and its workers.
        click.echo(
            f'server.engine = "h1" serves one process: {workers} workers run on granian', err=True
        )
        own_h1 = False

    # Workers are separate processes: they rebuild the app from these (and
    # with one process, app_from_env reads them here).
    os.environ[CONFIG_ENV] = os.path.abspath(config_path) if config_path else ""
    os.environ[LOG_CONTENT_ENV] = "1" if (log_content or settings.log_content) else "0"
    os.environ[LOG_FORMAT_ENV] = log_format
    for key, value in _timeout_env(settings).items():
        os.environ[key] = value

    # A taken port fails here, in one line, instead of being shared (granian
    # binds with SO_REUSEPORT) or failing later with a traceback; --port 0
    # becomes the port the kernel picked, which is what gets announced.
    port = claim_port(host, port)

    options: dict[str, Any] = dict(
        address=host,
        port=port,
        interface=Interfaces.ASGI,
        # Not granian's 1,024 requests at once per worker: as many as open files allow.
        backpressure=concurrent_requests(raise_open_files()),
        http=http_mode(tls=certfile is not None, cleartext_http2=settings.cleartext_http2),
        # granian's Server listens with a backlog of 1024, its embedded one with 128.
        backlog=1024,
        ssl_cert=_path(certfile),
        ssl_key=_path(keyfile),
        log_level=LogLevels(log_level),
        log_access=False,
        # A request head that never completes closes its connection (slowloris).
        # A head over max_header_bytes is refused (431), on both protocols.
        http1_settings=HTTP1Settings(
            header_read_timeout=_ms(settings.header_timeout_s),
            max_buffer_size=settings.max_header_bytes,
        ),
        # HTTP/2: a peer that answers no ping within the idle timeout is dropped.
        http2_settings=HTTP2Settings(
            keep_alive_interval=_ms(settings.idle_timeout_s),
            keep_alive_timeout=max(1, math.ceil(settings.idle_timeout_s)),
            max_headers_size=settings.max_header_bytes,
            max_concurrent_streams=settings.http2_max_concurrent_streams,
        ),
    )
    if workers == 1:
        # One process: the gateway is built here and served by granian's
        # embedded server, with no supervisor (cli/_one_process.py).
        from ..gateway.serving import app_from_env, drain_of, guard_limits
        from ._one_process import serve_one_process

        try:
            app = app_from_env()
        except ValueError as exc:  # a plugin that does not load (providers.build_provider)
            raise click.ClickException(str(exc)) from None
        _announce(config, host, port, certfile)
        if own_h1:
            status = _serve_h1(app, drain_of(app), settings, host, port)
            sys.exit(status)
        status = serve_one_process(
            app,
            drain_of(app),
            options,
            shutdown_timeout_s=settings.shutdown_timeout_s,
            write_timeout_s=guard_limits(settings).write_timeout_s,
            send_buffer_bytes=settings.send_buffer_bytes,
        )
        sys.exit(status)

    from granian.server import Server

    _announce(config, host, port, certfile)
    server = Server(
        # The gateway behind the request guard (body/write deadlines, memory budgets).
        "tokenwire.gateway.serving:app_from_env",
        workers=workers,
        factory=True,
        # SIGTERM always ends a worker: one still busy (a stream producing, or
        # a blocked event loop) after this is killed.
        workers_kill_timeout=max(1, math.ceil(settings.shutdown_timeout_s)),
        **options,
    )
    server.serve()


def http_mode(*, tls: bool, cleartext_http2: bool) -> HTTPModes:
    """granian's HTTP mode: HTTP/1.1 only without TLS, unless cleartext HTTP/2 is asked for.

    §3: HTTP/2 SHOULD be preferred, and TLS is required in production: with
    TLS, ALPN picks HTTP/2 or HTTP/1.1 (``auto``). Without TLS, HTTP/2 is only
    spoken with prior knowledge (h2c), which no browser does, and granian's
    ``auto`` mode, which detects it, costs ~12 KiB more per connection than
    HTTP/1.1 alone (bench/RESULTS.md, "load").
    """
    from granian.constants import HTTPModes

    return HTTPModes.auto if tls or cleartext_http2 else HTTPModes.http1


def _serve_h1(app: Guard, drain: Drain, settings: ServerConfig, host: str, port: int) -> int:
    from ..gateway.serving import guard_limits
    from ..server.http1 import Settings
    from ._h1_process import serve_h1

    h1 = Settings(
        header_timeout_s=settings.header_timeout_s,
        idle_timeout_s=settings.idle_timeout_s,
        write_timeout_s=guard_limits(settings).write_timeout_s,
        send_buffer_bytes=settings.send_buffer_bytes,
    )
    return serve_h1(
        app,
        drain,
        host=host,
        port=port,
        settings=h1,
        shutdown_timeout_s=settings.shutdown_timeout_s,
    )


def _announce(config: Config, host: str, port: int, certfile: str | None) -> None:
    """The URL line, the playground's address and a line per model whose key is
    not set, on stdout, before serving (then the production bind warning)."""
    for line in banner(config, host, port, certfile, os.environ):
        click.echo(line)
    warning = bind_warning(config.production, host)  # production: docs/gateway.md
    if warning is not None:
        click.echo(warning, err=True)
    sys.stdout.flush()


def banner(
    config: Config, host: str, port: int, certfile: str | None, environ: Mapping[str, str]
) -> list[str]:
    """What ``serve`` prints before serving: where it listens, where a browser goes,
    and each model that will refuse (401) because its key variable is not set."""
    scheme = "https" if certfile else "http"
    shown = f"[{host}]" if ":" in host else host
    names = ", ".join(config.model_names)
    lines = [f"tokenwire gateway on {scheme}://{shown}:{port}  (models: {names})"]
    # A wildcard bind is reached by a browser on this machine at the loopback.
    local = {"0.0.0.0": "127.0.0.1", "::": "[::1]"}.get(host, shown)
    lines.append(f"  playground: {scheme}://{local}:{port}/  (open it in a browser)")
    for model in config.models:
        if model.api_key_env and model.api_key(environ) is None:
            lines.append(
                f"  model {model.name!r} has no key: set {model.api_key_env} and restart "
                "the gateway (until then it answers 401)"
            )
    return lines


_JEMALLOC_CONF = "background_thread:true,dirty_decay_ms:0,muzzy_decay_ms:0,retain:false"


def _with_timeouts(settings: ServerConfig, **overrides: float | None) -> ServerConfig:
    import msgspec

    given = {key: value for key, value in overrides.items() if value is not None}
    return msgspec.structs.replace(settings, **given) if given else settings


def _timeout_env(settings: ServerConfig) -> dict[str, str]:
    return {env: repr(float(getattr(settings, key))) for key, env in TIMEOUT_ENV.items()}


def _ms(seconds: float) -> int:
    return max(1, round(seconds * 1000))


def _path(value: str | None) -> Path | None:
    return Path(value) if value is not None else None
