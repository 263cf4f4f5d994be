"""Graceful drain: on SIGTERM, let streams finish for ``drain_s``, then end the rest.

granian stops accepting connections on SIGTERM and waits for the open ones;
it does not tell the app. ``Drain.install`` (run at the app's startup, in the
worker's event loop) adds a Python-level ``SIGTERM``/``SIGINT`` handler next
to granian's own: the C handler still wakes granian's loop handler (the
signal's wakeup fd), and ours starts the drain. With ``serve --workers 1``
(one process, granian's embedded server) the handler it keeps is the one of
``cli/_one_process.py``, which starts the drain too and stops the server only
once the drain is over (``wait``). Then:

1. new requests on kept-alive connections get 503 (``draining``) with
   ``Retry-After``, until the drain is over. With several workers each is a
   granian worker process, whose own signal handler would stop it serving at
   once (closing kept-alive connections); ``hold_worker_stop`` makes that
   stop wait for the drain;
2. the streams in flight get up to ``drain_s`` to finish on their own;
3. then every stream still running is cancelled through ``RoutedProvider``,
   which turns that cancel into an ``error`` event (``overloaded``, retry on
   another replica) followed by ``stream.end``. A resumable stream records
   both, so a client resuming from another replica reads a complete stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Callable
from typing import Any

__all__ = ["Drain", "hold_worker_stop"]

_log = logging.getLogger("tokenwire.gateway")


class Drain:
    """The streams in flight, and the drain that ends them. ``drain_s`` is the grace time."""

    def __init__(self, drain_s: float = 30.0) -> None:
        self.drain_s = drain_s
        self.draining = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self._cut: set[asyncio.Task[Any]] = set()
        self._idle = asyncio.Event()
        self._idle.set()
        self._runner: asyncio.Task[None] | None = None
        self._previous: dict[int, Any] = {}
        self._exit: asyncio.Task[None] | None = None

    # -- RoutedProvider's hook ---------------------------------------------------

    def track(self, task: asyncio.Task[Any]) -> None:
        self._tasks.add(task)
        self._idle.clear()

    def untrack(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        self._cut.discard(task)
        if not self._tasks:
            self._idle.set()

    def cut(self, task: asyncio.Task[Any]) -> bool:
        """Whether ``task`` was cancelled by the drain (and not by its client)."""
        return task in self._cut

    @property
    def active(self) -> int:
        """Streams in flight."""
        return len(self._tasks)

    # -- the drain ---------------------------------------------------------------

    def begin(self) -> asyncio.Task[None]:
        """Start draining (idempotent); returns the task that ends it."""
        if self._runner is None:
            self.draining = True
            self._runner = asyncio.get_running_loop().create_task(self._run())
        return self._runner

    async def _run(self) -> None:
        _log.warning('{"msg": "draining", "streams": %d, "drain_s": %s}', self.active, self.drain_s)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.drain_s):
                await self._idle.wait()
        left = [task for task in self._tasks if not task.done()]
        for task in left:
            self._cut.add(task)
            task.cancel()
        if left:
            _log.warning('{"msg": "drain_time_over", "ended_with_error": %d}', len(left))

    async def wait(self) -> None:
        """Until the drain is over and the cut streams have ended."""
        if self._runner is not None:
            await self._runner
        await self._idle.wait()

    def _exit_after_drain(self, signum: int) -> None:
        async def finish() -> None:
            await self.wait()
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

        self._exit = asyncio.get_running_loop().create_task(finish())

    def install(self, signals: tuple[int, ...] = (signal.SIGTERM, signal.SIGINT)) -> None:
        """Start the drain on ``signals``, keeping whatever handler was there."""
        loop = asyncio.get_running_loop()
        for signum in signals:
            try:
                previous = signal.getsignal(signum)
                signal.signal(signum, self._handler(loop, previous))
            except (ValueError, OSError):  # not the main thread: nothing to install
                return
            self._previous[signum] = previous

    def uninstall(self) -> None:
        """Put the previous handlers back."""
        for signum, previous in self._previous.items():
            with contextlib.suppress(ValueError, OSError, TypeError):
                signal.signal(signum, previous)
        self._previous.clear()

    def _handler(self, loop: asyncio.AbstractEventLoop, previous: Any) -> Callable[..., None]:
        def handle(signum: int, frame: Any) -> None:
            loop.call_soon_threadsafe(self.begin)
            if previous == signal.SIG_DFL:
                # Nobody else handles it: terminate as the default would, after the drain.
                loop.call_soon_threadsafe(self._exit_after_drain, signum)
            elif callable(previous) and previous != signal.SIG_IGN:
                previous(signum, frame)

        return handle


def hold_worker_stop(drain: Drain) -> None:
    """In a granian worker process (``serve --workers N``): its stop waits for ``drain``.

    granian's worker registers a signal handler on its event loop that stops its
    server at once. This wraps the function that registers it (the worker calls
    it after loading the app, so the wrapper is in place by then): a first
    SIGTERM or SIGINT starts the drain, and the server stops once the drain is
    over; a second one stops it at once. The supervisor's kill timeout
    (``shutdown_timeout_s``) fits the drain (config: ``shutdown_timeout_s``).
    Nothing changes where granian is missing or its internals differ.
    """
    try:
        from granian import _signals
    except ImportError:
        return
    register = getattr(_signals, "set_loop_signals", None)
    if register is None or getattr(register, "holds_for_drain", False):
        return

    def set_loop_signals(loop: asyncio.AbstractEventLoop) -> Any:
        stop = register(loop)  # granian's event: set, it stops the worker's server
        received: list[int] = []

        def on_signal(signum: int) -> None:
            received.append(signum)
            if len(received) > 1:
                stop.set()  # a second signal: at once
                return
            drain.begin()

            async def after_drain() -> None:
                await drain.wait()
                stop.set()

            drain._exit = loop.create_task(after_drain())

        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)
            loop.add_signal_handler(signum, on_signal, signum)
        return stop

    set_loop_signals.holds_for_drain = True  # type: ignore[attr-defined]
    _signals.set_loop_signals = set_loop_signals
