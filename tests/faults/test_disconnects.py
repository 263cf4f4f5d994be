"""Clients that hang up at every point of the lifecycle, 1,000 times: nothing leaks.

Each cycle opens a connection to the gateway, asks the ``paced`` model (a fake
OpenAI upstream streaming 400 words 2 ms apart) for a stream, and hangs up at
one of these points, in turn:

- ``body``: halfway through the request body (the upstream is never called);
- ``request``: right after the whole request, before reading anything;
- ``head``: after the response head;
- ``start``: after ``stream.start``;
- ``first``: after the first ``content.delta``;
- ``middle``: after the 20th ``content.delta``.

Half the hang-ups are a FIN, half a RST (``SO_LINGER`` 0). Afterwards every
upstream request the gateway made was cancelled (the fake saw the hang-up and
never finished a stream), and the worker's open sockets, asyncio tasks and
upstream pool connections (counted in the worker by the ``probe`` model) are
back where they started. (A hang-up between the upstream connect and the
request used to strand that connection in httpx's pool for good:
encode/httpcore#1093, worked around in ``gateway/providers/__init__.py``.)
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
from pathlib import Path

from tests.faults.conftest import MEDIA_TYPE, Faults, probe, request_body

from tokenwire.testing import eventually, processes

CYCLES = 1000
POINTS = ("body", "request", "head", "start", "first", "middle")
_MARKS = {
    "head": b"\r\n\r\n",
    "start": b"event: stream.start",
    "first": b"event: content.delta",
}


def _read_until(sock: socket.socket, mark: bytes, count: int = 1) -> None:
    seen = b""
    while seen.count(mark) < count:
        data = sock.recv(65536)
        assert data, "the gateway closed the stream first"
        seen = seen[-len(mark) :] + data if count == 1 else seen + data


def _cycle(port: int, point: str, rst: bool) -> None:
    body = request_body("paced")
    head = (
        f"POST /v1/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {MEDIA_TYPE}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    try:
        if rst:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        if point == "body":
            sock.sendall(head + body[: len(body) // 2])
            return
        sock.sendall(head + body)
        if point == "request":
            return
        if point == "middle":
            _read_until(sock, b"event: content.delta", 20)
        else:
            _read_until(sock, _MARKS[point])
    finally:
        sock.close()


def _connections(pid: int) -> list[str]:
    """``local -> remote state`` of every TCP socket ``pid`` holds (from /proc/net/tcp*)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
    out = []
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
                f = line.split()
                if f[9] in inodes:
                    local, remote = (int(x.split(":")[1], 16) for x in (f[1], f[2]))
                    out.append(f"{local}->{remote} {_TCP_STATES.get(f[3], f[3])}")
    return sorted(out)


_TCP_STATES = {"01": "ESTABLISHED", "06": "TIME_WAIT", "08": "CLOSE_WAIT", "0A": "LISTEN"}


def _settled(faults: Faults, deadline_s: float = 60.0) -> bool:
    """Wait until the paced upstream has seen every request it got end."""
    fake = faults.fakes["paced"]
    return eventually(
        lambda: len(fake.disconnects) + fake.completed >= len(fake.requests), timeout=deadline_s
    )


def test_a_thousand_hangups_leak_no_task_socket_or_upstream(
    gateway: processes.ServedProcess, faults: Faults
) -> None:
    fake = faults.fakes["paced"]
    # Warm up every path once, so lazily made objects count in the baseline.
    for i, point in enumerate(POINTS):
        _cycle(gateway.port, point, rst=bool(i % 2))
    assert _settled(faults)
    before = probe(gateway)
    requests0, disconnects0, completed0 = len(fake.requests), len(fake.disconnects), fake.completed

    for i in range(CYCLES):
        _cycle(gateway.port, POINTS[i % len(POINTS)], rst=bool((i // len(POINTS)) % 2))

    assert _settled(faults), (len(fake.requests), len(fake.disconnects), fake.completed)
    requests = len(fake.requests) - requests0
    cancelled = len(fake.disconnects) - disconnects0
    # A cycle that read content reached the upstream; an earlier hang-up may
    # be noticed before the upstream is called (then there is nothing to cancel),
    # and "body" never gets that far.
    reached = sum(1 for i in range(CYCLES) if POINTS[i % len(POINTS)] in ("first", "middle"))
    possible = sum(1 for i in range(CYCLES) if POINTS[i % len(POINTS)] != "body")
    assert reached <= requests <= possible
    assert cancelled == requests, "every upstream call was cancelled"
    assert fake.completed == completed0, "no upstream stream ran to its end"

    # The worker is back where it started: no task and no connection left over.
    # (The last hang-ups may still be unwinding: wait, bounded, until they have.)
    after = probe(gateway)

    def unwound() -> bool:
        nonlocal after
        after = probe(gateway)
        return after["tasks"] <= before["tasks"] and after["sockets"] <= before["sockets"] + 2

    eventually(unwound, timeout=5.0, max_interval=0.1)  # the asserts below say what is left
    print(
        f"{CYCLES} hang-ups, {requests} upstream calls cancelled; worker before {before}, "
        f"after {after}"
    )
    assert after["pid"] == before["pid"]
    assert after["tasks"] == before["tasks"]
    # At most a pooled upstream connection more.
    assert after["sockets"] <= before["sockets"] + 2, _connections(after["pid"])
    assert after["threads"] <= before["threads"]
    # No upstream connection is stuck in the pool (encode/httpcore#1093).
    assert after["pool"]["active"] <= before["pool"]["active"], after["pool"]
