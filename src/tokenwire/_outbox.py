"""The outbox: encoded frames a stream's producer pushed and its sender has not sent yet."""

from __future__ import annotations

import asyncio
from typing import Final

#: An SSE comment: ignored by every conforming decoder, but it keeps proxies
#: and idle timeouts from closing a quiet stream.
KEEPALIVE: Final = b": keep-alive\n\n"
#: Encoded frames queued for one client past this make the provider wait until
#: the sender has handed them to the server: a client that reads slowly gets
#: backpressure (the provider, and its upstream, pause) instead of a gateway
#: that buffers the whole reply in memory.
OUTBOX_HIGH_WATER: Final = 256 * 1024

# --- The outbox: events produced, waiting for one send ---------------------------------


class Outbox:
    """Encoded frames the producer pushed and the sender has not sent yet.

    The producer appends without awaiting; the sender takes everything that
    piled up during its last ``send`` in one go. That is how a whole network
    read's worth of events leaves in one ASGI send. ``last_sent`` (loop time)
    tells the keep-alive task how long the stream has been quiet.
    """

    __slots__ = ("chunks", "size", "closed", "last_sent", "_waiter", "_drained")

    def __init__(self, now: float) -> None:
        self.chunks: list[bytes] = []
        self.size = 0  # bytes in chunks
        self.closed = False
        self.last_sent = now
        self._waiter: asyncio.Future[None] | None = None
        self._drained: asyncio.Future[None] | None = None

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)

    def push(self, data: bytes) -> None:
        if self.closed:
            # Nobody will send it: the stream is over, or (resumable) its client left.
            return
        self.chunks.append(data)
        self.size += len(data)
        if self._waiter is not None:
            self._wake()

    def _release(self) -> None:
        drained = self._drained
        if drained is not None:
            self._drained = None
            if not drained.done():
                drained.set_result(None)

    def close(self) -> None:
        self.closed = True
        self._wake()
        self._release()

    def take(self) -> bytes:
        chunks = self.chunks
        self.chunks = []
        self.size = 0
        if self._drained is not None:
            self._release()
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    async def drained(self) -> None:
        """Wait until the sender has taken the queued frames, or the stream is over."""
        if self.size <= OUTBOX_HIGH_WATER or self.closed:
            return
        drained: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._drained = drained
        try:
            await drained
        finally:
            self._drained = None

    async def wait(self) -> None:
        """Wait until there are frames to send or the stream is over."""
        if self.chunks or self.closed:
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiter = waiter
        try:
            await waiter
        finally:
            self._waiter = None


async def keep_alive(outbox: Outbox, interval: float) -> None:
    """Push an SSE comment whenever the stream has been quiet for ``interval``.

    One timer per stream and interval, rather than one per send: a paced
    stream sends often, and a timer per send would cost a heap push and a
    cancelled entry each time.
    """
    loop = asyncio.get_running_loop()
    while not outbox.closed:
        quiet = loop.time() - outbox.last_sent
        if quiet >= interval:
            if not outbox.chunks:
                outbox.push(KEEPALIVE)
            outbox.last_sent = loop.time()
            quiet = 0.0
        await asyncio.sleep(interval - quiet)
