"""The app ``tokenwire serve`` runs in each worker: the gateway behind the request guard.

``app_from_env`` builds the gateway (``app.app_from_env``) and wraps it in
``tokenwire._guard.Guard`` with the ``[server]`` limits of its config: the
body and write deadlines and the memory budgets (docs/gateway.md, "Request
limits and timeouts"). Embedders that serve ``build_app`` themselves can wrap
it the same way.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Mapping

from .._guard import Guard, Limits
from .app import app_from_env as gateway_app_from_env
from .config import TIMEOUT_ENV, ServerConfig

__all__ = ["app_from_env", "guard_limits"]


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
    app = gateway_app_from_env()
    limits = guard_limits(app.state.gateway.config.server)
    # The worker gets its listening socket after the app is built: set it at
    # the first request (that one connection does not inherit the option).
    return Guard(
        app, limits, first_request=lambda: abort_unread_connections(limits.write_timeout_s)
    )


def abort_unread_connections(seconds: float) -> int:
    """Make the kernel drop connections whose client has read nothing for ``seconds``.

    The guard's write deadline ends the stream, but the bytes already handed
    to the HTTP server stay queued for a socket that never drains, and the
    server has no write timeout of its own. ``TCP_USER_TIMEOUT`` (Linux) on
    the listening sockets, inherited by every connection they accept, makes
    the kernel reset a connection whose sent data stays unacknowledged, or
    unsent behind a zero window, that long; the server then drops it and its
    buffers. Returns how many listening sockets were set (0 off Linux).
    """
    option = getattr(socket, "TCP_USER_TIMEOUT", None)
    if option is None:
        return 0
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
                        sock.setsockopt(socket.IPPROTO_TCP, option, max(1, round(seconds * 1000)))
                        done += 1
                finally:
                    sock.close()
    return done
