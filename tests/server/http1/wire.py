"""The h1 protocol driven in memory: a fake transport and timers the test fires.

``Wire`` holds one ``Connection`` of a real ``H1Server`` (its ``run`` is what
serves each request), but its transport is a recorder and its timers (header,
idle keep-alive) fire only when the test says: a race between a request and a
timer is played in the order the test writes, never left to the clock.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from tokenwire.server.http1 import H1Server, Settings
from tokenwire.server.http1.protocol import Connection
from tokenwire.testing import async_wait_until

App = Callable[[dict[str, Any], Any, Any], Awaitable[None]]
WAIT_S = 30.0  # a bound on every wait, never a measured threshold


class Timer:
    """A ``call_later`` handle that runs when the test fires it."""

    def __init__(self, delay: float, callback: Callable[..., None], args: tuple[Any, ...]) -> None:
        self.delay = delay
        self.callback = callback
        self.args = args
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True

    def fire(self) -> None:
        """Run the callback as the loop would have (a cancelled handle does not run)."""
        if not self.cancelled:
            self.callback(*self.args)


class Loop:
    """The running loop, but ``call_later`` records a ``Timer`` instead of scheduling it."""

    def __init__(self, real: asyncio.AbstractEventLoop) -> None:
        self.real = real
        self.timers: list[Timer] = []

    def call_later(self, delay: float, callback: Callable[..., None], *args: Any) -> Timer:
        timer = Timer(delay, callback, args)
        self.timers.append(timer)
        return timer

    def armed(self) -> list[Timer]:
        return [t for t in self.timers if not t.cancelled]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


class Transport:
    """What ``Connection`` writes, and whether it reads: data fed while reading is
    paused waits, as it would in the kernel, until reading resumes."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.protocol: Connection | None = None
        self.written = bytearray()
        self.reading = True
        self.held: list[bytes] = []
        self.closed = False
        self.aborted = False

    # -- the asyncio.Transport surface Connection uses ------------------------------

    def write(self, data: bytes) -> None:
        assert not self.closed, "a write after close"
        self.written += data

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True
        self.loop.call_soon(self._deliver)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.loop.call_soon(self._lost)

    def abort(self) -> None:
        self.aborted = True
        self.close()

    def is_closing(self) -> bool:
        return self.closed

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 50000), "sockname": ("127.0.0.1", 8080)}.get(
            name, default
        )

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    # -- the client's side ----------------------------------------------------------

    def feed(self, data: bytes) -> None:
        """Bytes from the client: delivered now, or held while reading is paused."""
        self.held.append(data)
        if self.reading:
            self._deliver()

    def hang_up(self) -> None:
        self.close()

    def _deliver(self) -> None:
        while self.reading and self.held and not self.closed and self.protocol is not None:
            self.protocol.data_received(self.held.pop(0))

    def _lost(self) -> None:
        if self.protocol is not None:
            self.protocol.connection_lost(None)


class Wire:
    """One in-memory connection to an ``H1Server`` serving ``app``."""

    def __init__(self, app: App, settings: Settings | None = None) -> None:
        self.server = H1Server(app, settings)
        self.loop = Loop(self.server.loop)
        self.server.loop = self.loop  # type: ignore[assignment]
        self.transport = Transport(self.loop.real)
        self.conn = Connection(self.server)
        self.transport.protocol = self.conn
        self.conn.connection_made(self.transport)  # type: ignore[arg-type]

    async def until(self, predicate: Callable[[], object]) -> None:
        await async_wait_until(predicate, timeout=WAIT_S)

    def responses(self) -> int:
        """Complete responses written so far (Content-Length or chunked bodies)."""
        return len(split_responses(bytes(self.transport.written)))

    async def idle(self) -> None:
        """Until every request this connection started has returned."""
        await self.until(lambda: self.server.calls == 0)


def split_responses(data: bytes) -> list[tuple[int, dict[bytes, bytes], bytes]]:
    """The whole responses in ``data`` (interim 1xx ones skipped)."""
    out = []
    while True:
        end = data.find(b"\r\n\r\n")
        if end < 0:
            return out
        lines = data[:end].split(b"\r\n")
        status = int(lines[0].split(b" ", 2)[1])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            headers[name.strip().lower()] = value.strip()
        rest = data[end + 4 :]
        if 100 <= status < 200:
            data = rest
            continue
        if b"content-length" in headers:
            size = int(headers[b"content-length"])
            if len(rest) < size:
                return out
            body, data = rest[:size], rest[size:]
        elif headers.get(b"transfer-encoding") == b"chunked":
            parts = []
            while True:
                line_end = rest.find(b"\r\n")
                if line_end < 0:
                    return out
                size = int(rest[:line_end].split(b";")[0], 16)
                if len(rest) < line_end + 2 + size + 2:
                    return out
                if size == 0:
                    rest = rest[line_end + 4 :]
                    break
                parts.append(rest[line_end + 2 : line_end + 2 + size])
                rest = rest[line_end + 2 + size + 2 :]
            body, data = b"".join(parts), rest
        else:
            body, data = b"", rest
        out.append((status, headers, body))
