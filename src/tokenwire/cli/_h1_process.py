"""``tokenwire serve`` with ``[server] engine = "h1"``: tokenwire's own HTTP/1.1 server.

The same one process as ``_one_process.serve_one_process`` (its signal handling,
drain, kill timeout and exit status), with ``tokenwire.server.http1.H1Server`` in
place of granian's embedded server: cleartext HTTP/1.1, parsed and written on
the gateway's own event loop (bench/RESULTS.md, "serving"). TLS (and so HTTP/2
by ALPN) and cleartext HTTP/2 stay on granian: ``serve`` only comes here
without them.

Stopping, in order: the first SIGTERM/SIGINT starts the drain and stops
accepting (idle keep-alive connections close; busy ones close after their
response); the app's lifespan shutdown waits for the drain; then the calls
still answering get what is left of ``shutdown_timeout_s``; then every
connection left is cut.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from typing import TYPE_CHECKING

from ..server.http1 import H1Server, Settings
from ._one_process import InFlight, _runner, _Stopper

if TYPE_CHECKING:
    from ..gateway.policy.drain import Drain
    from ..server.guard import Guard

__all__ = ["serve_h1"]


def listen(host: str, port: int) -> socket.socket:
    """The listening socket (``SO_REUSEADDR``: a port whose old connections are in TIME_WAIT)."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(address)
    sock.listen(1024)
    sock.setblocking(False)
    return sock


def serve_h1(
    app: Guard,
    drain: Drain,
    *,
    host: str,
    port: int,
    settings: Settings,
    shutdown_timeout_s: float,
) -> int:
    """Serve ``app`` on ``host:port`` until a signal stops it; the exit status (0, or 1)."""
    tracked = InFlight(app)

    async def run() -> int:
        loop = asyncio.get_running_loop()
        server = H1Server(app, settings)
        stopped = asyncio.Event()
        stopper = _Stopper(loop, stopped.set, drain, shutdown_timeout_s)
        stopper.install()
        try:
            try:
                sock = listen(host, port)
            except OSError as exc:
                print(f"tokenwire serve: cannot listen on {host}:{port}: {exc}", flush=True)
                return 1
            try:
                await server.startup()
            except Exception as exc:
                print(f"tokenwire serve: the app's startup failed: {exc}", flush=True)
                return 1
            await server.start(sock)
            await stopped.wait()
            server.close()
            # The lifespan shutdown waits for the drain (the streams it ends get
            # their error + stream.end); then the calls still sending.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(stopper.remaining_s()):
                    await server.shutdown()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(stopper.remaining_s()):
                    await tracked.idle()
            if tracked.calls():
                # A call still running after the shutdown timeout (a provider that
                # ignores its cancel): the watchdog's exit, status 1, now.
                stopper._overdue()
            server.abort_all()
            return 0
        finally:
            stopper.cancel()

    return _runner(run)
