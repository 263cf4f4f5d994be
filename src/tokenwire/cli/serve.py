"""``tokenwire serve [--config FILE] [--host H] [--port P] [--workers N] [--certfile --keyfile]``.

Runs the gateway on granian (Rust HTTP/1.1 and HTTP/2 server, ASGI interface).
With ``--certfile``/``--keyfile`` it serves TLS 1.3 and negotiates HTTP/2 by
ALPN (§3: HTTP/2 SHOULD be preferred, TLS 1.3 is required in production).
Settings reach the worker processes through environment variables
(``tokenwire.gateway.app.app_from_env``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from ..gateway.config import CONFIG_ENV, LOG_CONTENT_ENV, ConfigError, load
from ..gateway.config_prod import bind_warning
from ._ports import claim_port

_LOG_LEVELS = ("critical", "error", "warning", "info", "debug")


@click.command()
@click.option(
    "--config",
    "config_path",
    type=click.Path(exists=True, dir_okay=False),
    help="TOML config: [server] and [[models]] (docs/gateway.md). Default: demo only.",
)
@click.option("--host", help="Address to bind. [default: config, else 127.0.0.1]")
@click.option(
    "--port", type=click.IntRange(0, 65535), help="Port to bind. [default: config, else 8080]"
)
@click.option(
    "--workers", type=click.IntRange(min=1), help="Worker processes. [default: config, else 1]"
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
    "--log-level",
    type=click.Choice(_LOG_LEVELS),
    default="warning",
    show_default=True,
    help="The HTTP server's own log level (request lines are always logged).",
)
def command(
    config_path: str | None,
    host: str | None,
    port: int | None,
    workers: int | None,
    certfile: str | None,
    keyfile: str | None,
    log_content: bool,
    log_level: str,
) -> None:
    """Run the gateway: the built-in demo model, or the models of a config file.

    Prints the URL, then serves until interrupted. Request logs go to stderr,
    one JSON line per request.
    """
    from granian.constants import HTTPModes, Interfaces
    from granian.log import LogLevels
    from granian.server import Server

    try:
        config = load(config_path)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    settings = config.server
    host = host if host is not None else settings.host
    port = port if port is not None else settings.port
    workers = workers if workers is not None else settings.workers
    certfile = certfile if certfile is not None else settings.certfile
    keyfile = keyfile if keyfile is not None else settings.keyfile
    if (certfile is None) != (keyfile is None):
        raise click.UsageError("--certfile and --keyfile go together")

    # Workers are separate processes: they rebuild the app from these.
    os.environ[CONFIG_ENV] = os.path.abspath(config_path) if config_path else ""
    os.environ[LOG_CONTENT_ENV] = "1" if (log_content or settings.log_content) else "0"

    # A taken port fails here, in one line, instead of being shared (granian
    # binds with SO_REUSEPORT) or failing later with a traceback; --port 0
    # becomes the port the kernel picked, which is what gets announced.
    port = claim_port(host, port)
    scheme = "https" if certfile else "http"
    shown = f"[{host}]" if ":" in host else host
    names = ", ".join(config.model_names)
    click.echo(f"tokenwire gateway on {scheme}://{shown}:{port}  (models: {names})")
    warning = bind_warning(config.production, host)  # production: docs/gateway.md
    if warning is not None:
        click.echo(warning, err=True)
    sys.stdout.flush()

    server = Server(
        "tokenwire.gateway.app:app_from_env",
        address=host,
        port=port,
        interface=Interfaces.ASGI,
        workers=workers,
        http=HTTPModes.auto,
        factory=True,
        ssl_cert=_path(certfile),
        ssl_key=_path(keyfile),
        log_level=LogLevels(log_level),
        log_access=False,
    )
    server.serve()


def _path(value: str | None) -> Path | None:
    return Path(value) if value is not None else None
