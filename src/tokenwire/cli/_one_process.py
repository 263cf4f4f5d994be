"""``tokenwire serve --workers 1``: the gateway and granian in this one process.

granian's ``Server`` is a supervisor process that forks its workers, and each
worker imports the whole gateway again: two Python processes for one worker.
With one worker the supervisor serves no request, so ``serve`` runs granian's
embedded server (``granian.server.embed.Server``) in the command's own process
instead: one import of the gateway, one process, no child.

The embedded server serves the same app with the same HTTP settings, TLS and
lifespan, but leaves some of what the supervisor does to its embedder; this
module does it (docs/gateway.md, "Processes"):

- **Signals.** The embedded server installs no handler. SIGTERM or SIGINT
  starts the gateway's drain (``gateway/policy/drain.py``); the server keeps
  serving until the drain is over, so that a request arriving on a kept-alive
  connection (HTTP/1.1, or a new stream on an HTTP/2 one) is answered 503 with
  ``Retry-After`` by the drain, not dropped: granian's own stop closes idle
  kept-alive connections and answers nothing more on them. Then the server is
  stopped (HTTP/2 connections get GOAWAY), the app's lifespan shutdown runs,
  and the HTTP calls still answering are waited for (their last frames reach
  granian). A second signal ends the process at once.
- **The kill timeout.** The supervisor kills a worker still busy
  ``workers_kill_timeout`` after SIGTERM; the embedded server's own kill
  timeout is an ``asyncio`` timeout, which cannot end a blocked event loop. A
  watchdog thread ends the process (exit status 1) ``shutdown_timeout_s``
  after the first signal instead.
- **Exit status.** The embedded server returns normally when its worker
  failed (the lifespan startup raised, the port could not be bound): that is
  exit status 1 here, 0 after a clean stop.
- **The listening socket's options** (``serving.limit_unread_connections``)
  are set as soon as granian has bound the socket, not at the first request.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..gateway.policy.drain import Drain
    from ..server.guard import Guard

__all__ = ["InFlight", "serve_one_process"]

_log = logging.getLogger("tokenwire.gateway")

#: Of ``shutdown_timeout_s``, what is kept for stopping the server after the drain.
_STOP_RESERVE_S = 1.0
#: How often, and for how long, to look for the listening socket granian binds.
_LISTENER_POLL_S = 0.005
_LISTENER_WAIT_S = 10.0


class InFlight:
    """The HTTP calls in progress, so that shutdown can wait for them.

    A call returns once its last ``send`` has been taken by granian: waiting for
    none to be left lets the frames of the streams the drain ended (``error``,
    ``stream.end``) reach their clients before the process exits. The calls are
    found among the event loop's tasks (granian runs each in its own), by the
    app's ``__call__`` coroutine: no wrapper frame per request, which an open
    stream would hold for its whole life (~0.3 KiB each).
    """

    def __init__(self, app: Guard) -> None:
        self.app = app
        # The code of the coroutine granian runs per call: the app's own (an
        # ``async def`` function) or its class's ``async def __call__``.
        self._code = getattr(app, "__code__", None) or getattr(type(app).__call__, "__code__", None)

    def calls(self) -> list[asyncio.Task[Any]]:
        """The tasks running the app now, but the caller's."""
        current = asyncio.current_task()
        return [
            task for task in asyncio.all_tasks() if task is not current and self._runs_app(task)
        ]

    def _runs_app(self, task: asyncio.Task[Any]) -> bool:
        if self._code is None:
            return False
        coro: Any = task.get_coro()
        while coro is not None:  # granian may wrap the app's coroutine (its access log)
            if getattr(coro, "cr_code", None) is self._code:
                return True
            coro = getattr(coro, "cr_await", None)
        return False

    async def idle(self) -> None:
        """Until no HTTP call is in progress."""
        while calls := self.calls():
            await asyncio.wait(calls)


class _Stopper:
    """The signal handler: first signal drains and stops; a second one ends at once."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        stop: Callable[[], None],
        drain: Drain,
        shutdown_timeout_s: float,
    ) -> None:
        self.loop = loop
        self.stop = stop
        self.drain = drain
        self.shutdown_timeout_s = shutdown_timeout_s
        self.signalled_at: float | None = None
        self._watchdog: threading.Timer | None = None
        self._previous: dict[int, Any] = {}
        self._stopping: asyncio.Task[None] | None = None

    def install(self) -> None:
        # signal.signal, not loop.add_signal_handler: the handler runs even
        # when the event loop is blocked (the second signal must still work).
        # The drain, installed at the app's startup, chains to this handler.
        for signum in (signal.SIGTERM, signal.SIGINT):
            self._previous[signum] = signal.signal(signum, self.handle)

    def handle(self, signum: int, frame: Any) -> None:
        if self.signalled_at is not None:
            # Second signal: end now, as the default action would.
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        self.signalled_at = time.monotonic()
        self._watchdog = threading.Timer(self.shutdown_timeout_s, self._overdue)
        self._watchdog.daemon = True
        self._watchdog.start()
        self.loop.call_soon_threadsafe(self._begin)

    def _begin(self) -> None:
        self.drain.begin()
        self._stopping = self.loop.create_task(self._stop_after_drain())

    async def _stop_after_drain(self) -> None:
        # Bounded: the server must stop (and the lifespan run) before the watchdog.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(max(0.0, self.remaining_s() - _STOP_RESERVE_S)):
                await self.drain.wait()
        self.stop()

    def remaining_s(self) -> float:
        """Seconds left before the watchdog ends the process."""
        if self.signalled_at is None:
            return self.shutdown_timeout_s
        return max(0.0, self.shutdown_timeout_s - (time.monotonic() - self.signalled_at))

    def cancel(self) -> None:
        """Stop the watchdog and put the previous handlers back (the server has stopped)."""
        if self._watchdog is not None:
            self._watchdog.cancel()
        for signum, previous in self._previous.items():
            with contextlib.suppress(ValueError, OSError, TypeError):
                signal.signal(signum, previous)
        self._previous.clear()

    def _overdue(self) -> None:
        # Runs in the watchdog thread: the event loop may be blocked.
        with contextlib.suppress(Exception):
            _log.warning(
                '{"msg": "shutdown_timeout", "shutdown_timeout_s": %s, "effect": "exit now"}',
                self.shutdown_timeout_s,
            )
            for handler in logging.getLogger().handlers + _log.handlers:
                handler.flush()
            sys.stderr.flush()
        os._exit(1)


class _QuietEmbedded(logging.Filter):
    """Drops granian's "Embedded server is experimental!" line: it is the supported path here."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "experimental" not in record.getMessage()


async def _set_listener_options(write_timeout_s: float, send_buffer_bytes: int) -> None:
    from ..gateway.serving import limit_unread_connections

    deadline = time.monotonic() + _LISTENER_WAIT_S
    while not limit_unread_connections(write_timeout_s, send_buffer_bytes):
        if time.monotonic() > deadline:
            return  # the guard's first-request hook tries again
        await asyncio.sleep(_LISTENER_POLL_S)


def serve_one_process(
    app: Guard,
    drain: Drain,
    server_options: dict[str, Any],
    *,
    shutdown_timeout_s: float,
    write_timeout_s: float,
    send_buffer_bytes: int,
) -> int:
    """Serve ``app`` with granian's embedded server until a signal stops it.

    ``server_options`` are the keyword arguments ``granian.server.Server``
    gets (minus those of the supervisor: ``workers``, ``workers_kill_timeout``).
    Returns the exit status: 0 after a clean stop, 1 when the server failed.
    """
    from granian.log import logger as granian_logger
    from granian.server.embed import Server

    tracked = InFlight(app)
    server = Server(app, factory=False, **server_options)
    granian_logger.addFilter(_QuietEmbedded())

    async def run() -> int:
        stopper = _Stopper(asyncio.get_running_loop(), server.stop, drain, shutdown_timeout_s)
        stopper.install()
        listener = asyncio.ensure_future(_set_listener_options(write_timeout_s, send_buffer_bytes))
        try:
            try:
                await server.serve()
            except Exception:
                # The worker failed (granian logged why) and the embedded
                # server's stop re-raises its error: exit status 1, no traceback.
                if not server.interrupt_children:
                    raise
            # The lifespan shutdown waited for the drain; now for the HTTP calls
            # still sending (the frames of the streams it ended).
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(stopper.remaining_s()):
                    await tracked.idle()
        finally:
            listener.cancel()
            stopper.cancel()
        return 1 if server.interrupt_children else 0

    return _runner(run)


def _runner(main: Callable[[], Any]) -> int:
    loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None
    with contextlib.suppress(ImportError):
        import uvloop  # what granian's workers run on when it is installed

        loop_factory = uvloop.new_event_loop
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        status: int = runner.run(main())
    return status
