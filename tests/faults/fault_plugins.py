"""A debug-only provider the fault tests load into the gateway (``provider = "python"``).

``Probe`` answers every request with one ``content.delta`` whose text is a JSON
snapshot of the worker it runs in: its asyncio tasks, open sockets and
threads. That is how the tests count tasks inside the gateway's worker
process without a debug route in the gateway itself. It is only ever
configured by ``tests/faults/conftest.py``.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import threading
from collections.abc import AsyncIterator

from tokenwire import events as ev
from tokenwire.request import Request


def _sockets() -> int:
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                count += 1
        except OSError:
            pass
    return count


def _upstream_pool() -> dict[str, int]:
    """Connections of the worker's upstream pools, by state: the gateway's httpx pool
    and its HTTP/1.1 pool (``gateway.upstream.Pool``, ``http = "1.1"`` models)."""
    import httpcore

    from tokenwire.gateway.upstream import Pool

    states: dict[str, int] = {"idle": 0, "active": 0}
    for obj in gc.get_objects():
        if isinstance(obj, httpcore.AsyncConnectionPool):
            for connection in obj.connections:
                states["idle" if connection.is_idle() else "active"] += 1
            states["requests"] = len(obj._requests)
        elif isinstance(obj, Pool):
            stats = obj.stats()
            states["idle"] += stats["idle"]
            states["active"] += stats["active"]
            states["waiting"] = states.get("waiting", 0) + stats["waiting"]
    return states


class Probe:
    """One delta: ``{"tasks", "sockets", "threads", "pool", "pid"}`` of the serving worker
    (``pool``: the upstream connection pool's idle and active connections)."""

    async def generate(self, request: Request) -> AsyncIterator[ev.Event]:
        # Let cancelled tasks of earlier requests finish unwinding first (one loop
        # turn; the test's bounded wait for the counts covers anything slower).
        await asyncio.sleep(0)
        gc.collect()
        snapshot = {
            "tasks": len(asyncio.all_tasks()),
            "sockets": _sockets(),
            "threads": threading.active_count(),
            "pool": _upstream_pool(),
            "pid": os.getpid(),
            "firehose_made": Firehose.made,
        }
        delta = ev.Delta(text=json.dumps(snapshot))
        yield ev.ContentDelta(v="1.0", seq=0, index=0, role="assistant", delta=delta)


class Firehose:
    """``count`` deltas of 100 bytes of text, made one at a time and as fast as
    they are taken: a provider that holds no reply in memory, so any growth of
    the worker while it streams is the gateway's own buffering."""

    #: Deltas made so far by every Firehose of the worker (``Probe`` reports it).
    made = 0

    def __init__(self, count: int = 1_000_000) -> None:
        self.count = count

    async def generate(self, request: Request) -> AsyncIterator[ev.Event]:
        delta = ev.Delta(text="x" * 100)
        for i in range(self.count):
            if i % 64 == 0:
                await asyncio.sleep(0)  # one loop turn: hand the loop back, as the demo does
            Firehose.made += 1
            yield ev.ContentDelta(v="1.0", seq=0, index=0, role="assistant", delta=delta)
