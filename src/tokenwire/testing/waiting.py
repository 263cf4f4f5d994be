"""Waiting on a condition in tests: ``wait_until`` and its async twin ``async_wait_until``.

A test that sleeps a fixed time either waits too long or, on a loaded machine,
not long enough. These wait for what the test needs instead: they call
``predicate`` until it returns something truthy and return that, checking
often at first and then less often (1 ms doubling to 50 ms), so a quick
condition costs almost nothing and a slow one costs little CPU. ``timeout`` only
bounds a test that would otherwise hang: it is a failure, never a measurement,
so set it generously (the default is 30 s).

Nothing here is imported by the gateway or the protocol core.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Final, TypeVar

from ..errors import TokenwireError

__all__ = ["WaitTimeout", "async_wait_until", "eventually", "wait_for_file", "wait_until"]

T = TypeVar("T")

#: The first and the longest pause between two checks.
FIRST_INTERVAL_S: Final = 0.001
MAX_INTERVAL_S: Final = 0.05


class WaitTimeout(TokenwireError, AssertionError):
    """The condition did not hold within the timeout: a test failure, so an
    ``AssertionError`` too (and in tokenwire's one tree, errors.py)."""


def _intervals(limit: float) -> Callable[[], float]:
    interval = FIRST_INTERVAL_S

    def nxt() -> float:
        nonlocal interval
        current, interval = interval, min(interval * 2, limit)
        return current

    return nxt


def _describe(what: str | Callable[[], str]) -> str:
    return what() if callable(what) else what


def wait_until(
    predicate: Callable[[], T],
    *,
    timeout: float = 30.0,
    what: str | Callable[[], str] = "the condition",
    max_interval: float = MAX_INTERVAL_S,
) -> T:
    """Call ``predicate`` until it returns a truthy value, and return that value.

    Raises ``WaitTimeout`` naming ``what`` (a string, or a callable giving one
    at the time of the failure, e.g. a server's stderr) after ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    pause = _intervals(max_interval)
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise WaitTimeout(f"not within {timeout:g} s: {_describe(what)}")
        time.sleep(pause())


def eventually(
    predicate: Callable[[], object], *, timeout: float = 30.0, max_interval: float = MAX_INTERVAL_S
) -> bool:
    """Whether ``predicate`` held within ``timeout`` (``wait_until`` for an ``assert`` that
    names its own evidence: ``assert eventually(done), state``)."""
    try:
        wait_until(predicate, timeout=timeout, max_interval=max_interval)
    except WaitTimeout:
        return False
    return True


async def async_wait_until(
    predicate: Callable[[], T | Awaitable[T]],
    *,
    timeout: float = 30.0,
    what: str | Callable[[], str] = "the condition",
    max_interval: float = MAX_INTERVAL_S,
) -> T:
    """``wait_until`` on the running event loop; ``predicate`` may be a coroutine function.

    The first check runs at once; between checks the loop runs other tasks, so a
    condition another task makes true is seen without a fixed sleep.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    pause = _intervals(max_interval)
    while True:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if loop.time() > deadline:
            raise WaitTimeout(f"not within {timeout:g} s: {_describe(what)}")
        await asyncio.sleep(pause())


def wait_for_file(
    path: Path,
    parse: Callable[[str], T],
    *,
    timeout: float = 30.0,
    what: str | None = None,
) -> T:
    """``parse(path.read_text())`` once the file exists and parses (another process writes it).

    A half-written file fails to parse (``ValueError``, ``json.JSONDecodeError``
    is one) and is read again, so no pause "to let the write finish" is needed.
    """

    def parsed() -> tuple[T] | None:
        with contextlib.suppress(OSError, ValueError):
            return (parse(path.read_text()),)
        return None

    box = wait_until(parsed, timeout=timeout, what=what or f"{path} written")
    assert box is not None  # wait_until returns only a truthy value
    return box[0]
