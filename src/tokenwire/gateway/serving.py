"""The app ``tokenwire serve`` runs in each worker: the gateway behind the request guard.

``app_from_env`` builds the gateway (``app.app_from_env``) and wraps it in
``tokenwire.server.guard.Guard`` with the ``[server]`` limits of its config: the
body and write deadlines and the memory budgets (docs/gateway.md, "Request
limits and timeouts"). Embedders that serve ``build_app`` themselves can wrap
it the same way.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..server.guard import Guard, Limits
from .config import TIMEOUT_ENV, ServerConfig
from .policy.drain import hold_worker_stop

if TYPE_CHECKING:
    from .policy.drain import Drain

__all__ = ["app_from_env", "drain_of", "guard_limits", "skip_httpx_cli"]


def guard_limits(settings: ServerConfig, environ: Mapping[str, str] = os.environ) -> Limits:
    """The guard's limits from ``[server]``, with ``tokenwire serve``'s flags (``TIMEOUT_ENV``)."""
    given = {key: float(environ[env]) for key, env in TIMEOUT_ENV.items() if environ.get(env)}
    return Limits(
        body_timeout_s=given.get("body_timeout_s", settings.body_timeout_s),
        write_timeout_s=given.get("write_timeout_s", settings.write_timeout_s),
        stream_budget_bytes=settings.stream_budget_bytes,
        memory_budget_bytes=settings.memory_budget_bytes,
    )


def app_from_env() -> Guard:
    """The guarded gateway, configured by the environment (``app.app_from_env``)."""
    skip_httpx_cli()
    from .app import app_from_env as gateway_app_from_env

    app = gateway_app_from_env()
    settings = app.state.gateway.config.server
    limits = guard_limits(settings)

    def set_listeners() -> None:
        limit_unread_connections(limits.write_timeout_s, settings.send_buffer_bytes)

    # A worker process gets its listening socket after the app is built: set
    # it at the first request (that one connection does not inherit the
    # options). With --workers 1 serve sets it as soon as granian binds it.
    guarded = Guard(app, limits, first_request=set_listeners)
    # In a granian worker (--workers N) its stop waits for the drain; with one
    # worker granian's embedded server installs no handler and this is unused.
    hold_worker_stop(drain_of(guarded))
    return guarded


def skip_httpx_cli() -> None:
    """Keep httpx from importing its command-line client in a served gateway.

    ``import httpx`` imports ``httpx._main`` (its ``httpx`` command) whenever
    click is installed, which tokenwire's CLI needs; that pulls in rich and
    pygments, ~2 MB of RSS a gateway never uses. Marking the module absent
    before httpx loads makes httpx define its stub ``main`` instead. Only the
    served process is affected, and only ``httpx.main``.
    """
    if "httpx" not in sys.modules:
        sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]


def drain_of(app: Guard) -> Drain:
    """The drain of the gateway ``app_from_env`` built (``serve --workers 1`` starts it)."""
    drain: Drain = app.app.state.gateway.production.drain  # type: ignore[attr-defined]
    return drain


def limit_unread_connections(write_timeout_s: float, send_buffer_bytes: int) -> int:
    """Bound what a connection whose client does not read costs, in the kernel.

    Set on the listening sockets, so every connection they accept inherits it:

    - ``TCP_USER_TIMEOUT`` (Linux): the guard's write deadline ends the stream,
      but the bytes already handed to the HTTP server stay queued for a socket
      that never drains, and the server has no write timeout of its own. The
      kernel resets a connection whose data stays unacknowledged, or unsent
      behind a zero window, for ``write_timeout_s``; the server then drops it
      and its buffers.
    - ``SO_SNDBUF``: without it the kernel grows a connection's send buffer to
      megabytes, and a never-reading client makes the provider generate that
      much before backpressure stops it: CPU and kernel memory per attacker.

    Returns how many listening sockets were set.
    """
    user_timeout = getattr(socket, "TCP_USER_TIMEOUT", None)
    done = 0
    with contextlib.suppress(OSError):
        fds = [int(fd) for fd in os.listdir("/proc/self/fd")]
        for fd in fds:
            with contextlib.suppress(OSError):
                if not os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                    continue
                sock = socket.socket(fileno=os.dup(fd))
                try:
                    listening = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)
                    if listening and sock.family in (socket.AF_INET, socket.AF_INET6):
                        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send_buffer_bytes)
                        if user_timeout is not None:
                            ms = max(1, round(write_timeout_s * 1000))
                            sock.setsockopt(socket.IPPROTO_TCP, user_timeout, ms)
                        done += 1
                finally:
                    sock.close()
    return done
