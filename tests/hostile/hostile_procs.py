"""Shared helpers of the hostile-client tests: a real ``tokenwire serve`` and raw sockets.

``serve(server=...)`` runs ``tokenwire serve`` (its own process group, a free
127.0.0.1 port, always stopped) with this directory importable, so the
``python`` providers below can be configured:

=============  ==============================================================
``firehose``   endless 1 KiB deltas made on demand, holding nothing: any
               growth of the worker while it streams is the gateway's buffering
``budget``     one delta: the worker's memory accounting (``_outbox.BUDGET``,
               sends in flight), for diagnosis (bench/RESULTS.md, "storm")
``demo``       the built-in demo model
=============  ==============================================================

The socket helpers speak HTTP/1.1 by hand, because the attacks (a request
that never finishes, a client that never reads) are exactly what an HTTP
client library will not do.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from tokenwire import events as ev
from tokenwire.request import Request
from tokenwire.testing import processes, wait_until

HERE = Path(__file__).resolve().parent
MEDIA_TYPE = "application/llm-request+json"
#: Every wait in these tests is on a condition, bounded by this (a loaded 2-core machine).
DEADLINE_S = 60.0


class Firehose:
    """Endless 1 KiB deltas, each made when the last was taken (``provider = "python"``)."""

    async def generate(self, request: Request) -> AsyncIterator[ev.Event]:
        delta = ev.Delta(text="x" * 1024)
        i = 0
        while True:
            i += 1
            if i % 64 == 0:
                await asyncio.sleep(0)  # one loop turn: hand the loop back, as the demo does
            yield ev.ContentDelta(v="1.0", seq=0, index=0, role="assistant", delta=delta)


def config(server: Mapping[str, Any] = {}) -> str:  # noqa: B006 - never mutated
    models = {
        "firehose": {"provider": "python", "factory": "hostile_procs:Firehose"},
        "budget": {"provider": "python", "factory": "hostile_procs:BudgetProbe"},
    }
    return processes.gateway_config(models, server)


@contextlib.contextmanager
def serve(server: Mapping[str, Any] = {}) -> Iterator[processes.ServedProcess]:  # noqa: B006
    """``tokenwire serve`` (one worker) with ``[server]`` keys ``server``; stopped on exit."""
    path = os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))
    with processes.serve_gateway(config(server), env={"PYTHONPATH": path}) as gateway:
        yield gateway


def body(model: str = "firehose", text: str = "Hello", **fields: Any) -> bytes:
    data: dict[str, Any] = {"version": "1.0", "stream": True, "model": model}
    data["messages"] = [{"role": "user", "content": text}]
    data.update(fields)
    return json.dumps(data).encode()


def head(
    content: bytes, *, path: str = "/v1/stream", content_type: str = MEDIA_TYPE, extra: str = ""
) -> bytes:
    """The request head of a POST of ``content``."""
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {len(content)}\r\n{extra}\r\n"
    ).encode()


def connect(port: int, *, rcvbuf: int | None = None) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf is not None:
        # Set before connect, so the window the server sees is small from the start.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.settimeout(DEADLINE_S)
    sock.connect(("127.0.0.1", port))
    return sock


def read_until_closed(sock: socket.socket, limit: int = 1 << 20) -> bytes:
    """Everything the server sends until it closes the connection (bounded by DEADLINE_S)."""
    received = b""
    deadline = time.monotonic() + DEADLINE_S
    while len(received) < limit:
        sock.settimeout(max(0.1, deadline - time.monotonic()))
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            break
        if not chunk:
            break
        received += chunk
    return received


def is_closed(sock: socket.socket) -> bool:
    """True once the peer closed (or reset) the connection; never blocks."""
    sock.setblocking(False)
    try:
        chunk = sock.recv(65536, socket.MSG_PEEK)
    except BlockingIOError:
        return False
    except (ConnectionResetError, BrokenPipeError):
        return True
    finally:
        sock.setblocking(True)
    return chunk == b""


def wait_for(condition: Callable[[], bool], what: str, deadline_s: float = DEADLINE_S) -> None:
    """Wait until ``condition`` holds; fail naming ``what`` after ``deadline_s``."""
    wait_until(condition, timeout=deadline_s, what=what)


def status_of(response: bytes) -> int:
    parts = response.split(b" ", 2)
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0


def rss_mib(gateway: processes.ServedProcess) -> float:
    """The serving process tree's resident memory, from /proc."""
    return processes.rss_kib(gateway.pids()) / 1024


class BudgetProbe:
    """One delta: the worker's ``{"queued", "in_flight", "sending"}`` memory accounting."""

    async def generate(self, request: Request) -> AsyncIterator[ev.Event]:
        from tokenwire.server import guard as _guard
        from tokenwire.server import outbox as _outbox

        snapshot = {
            "queued": _outbox.BUDGET.queued,
            "in_flight": _outbox.BUDGET.in_flight,
            "sending": len(_guard._SENDING),
        }
        yield ev.ContentDelta(
            v="1.0", seq=0, index=0, role="assistant", delta=ev.Delta(text=json.dumps(snapshot))
        )
