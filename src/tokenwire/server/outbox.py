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
#: Queued bytes one stream may hold at most (a producer that ignores
#: backpressure, or one giant event): past it the stream is ended.
DEFAULT_STREAM_BUDGET: Final = 4 << 20
_UNBOUNDED: Final = 1 << 62
#: A backlog is handed to the server in sends of about this size (``Outbox.take``).
SEND_SLICE: Final = 32 * 1024
#: A backlog's frames are kept in buffers of about this many bytes (``Outbox.push``).
COALESCE: Final = 8 * 1024
#: The high-water mark while the process is over its memory budget: every
#: stream still flows, but none may queue more than this.
LOW_WATER: Final = 16 * 1024

# --- Memory accounting: every stream's queued and in-flight bytes ------------------------


class MemoryBudget:
    """The bytes every stream of this process holds for its client.

    ``queued``: frames in outboxes, not yet handed to the server;
    ``in_flight``: bytes handed to the server's ``send`` that has not returned
    (the client is not reading them). The request guard (``guard``) refuses
    new streams while ``total`` is over its budget.
    """

    __slots__ = ("queued", "in_flight")

    def __init__(self) -> None:
        self.queued = 0
        self.in_flight = 0

    @property
    def total(self) -> int:
        return self.queued + self.in_flight


#: This process's totals (one event loop per worker process).
BUDGET: Final = MemoryBudget()


class StreamAccount:
    """One request's outboxes and limits, made by the request guard for the request.

    The guard leaves it in the request's scope (``exchange.ACCOUNT_KEY``); an
    ``Outbox`` made for the request joins it (``Outbox(now, account)``), so the
    guard can end that stream's queue when its client stops reading (``end``),
    and the outbox takes its per-stream budget from here.
    """

    __slots__ = ("outboxes", "stream_budget", "memory_budget", "overflowed")

    def __init__(
        self, stream_budget: int = DEFAULT_STREAM_BUDGET, memory_budget: int | None = None
    ) -> None:
        self.outboxes: list[Outbox] = []
        self.stream_budget = stream_budget
        #: Over this (``BUDGET.total``), every stream's high-water mark drops to ``LOW_WATER``.
        self.memory_budget = memory_budget if memory_budget is not None else _UNBOUNDED
        #: An outbox went over ``stream_budget``: the stream must not end cleanly.
        self.overflowed = False

    def end(self) -> None:
        """Close every outbox of the request and drop what they queued."""
        for outbox in self.outboxes:
            outbox.close(drop=True)


# --- The outbox: events produced, waiting for one send ---------------------------------


class Outbox:
    """Encoded frames the producer pushed and the sender has not sent yet.

    The producer appends without awaiting; the sender takes everything that
    piled up during its last ``send`` in one go. That is how a whole network
    read's worth of events leaves in one ASGI send. ``last_sent`` (loop time)
    tells the keep-alive timer how long the stream has been quiet.
    """

    __slots__ = (
        "chunks",
        "size",
        "closed",
        "last_sent",
        "budget",
        "keepalive",
        "_memory_budget",
        "_account",
        "_waiter",
        "_drained",
    )

    def __init__(self, now: float, account: StreamAccount | None = None) -> None:
        self.chunks: list[bytes | bytearray] = []
        self.size = 0  # bytes in chunks
        self.closed = False
        self.last_sent = now
        #: What a quiet stream gets: an SSE comment, or the binary binding's PING frame.
        self.keepalive = KEEPALIVE
        self._account = account
        # Without a guard there is no way to cut the stream visibly: no budget.
        self.budget = account.stream_budget if account is not None else _UNBOUNDED
        self._memory_budget = account.memory_budget if account is not None else _UNBOUNDED
        if account is not None:
            account.outboxes.append(self)
        self._waiter: asyncio.Future[None] | None = None
        self._drained: asyncio.Future[None] | None = None

    def __del__(self) -> None:
        # Frames nobody took (a stream whose client left) stop counting with it.
        BUDGET.queued -= self.size

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
        size = len(data)
        if self.size + size > self.budget:
            # Over the per-stream budget: end the stream rather than hold more.
            # The guard then aborts the connection instead of ending it
            # cleanly, so the client can tell the stream was cut.
            if self._account is not None:
                self._account.overflowed = True
            self.close(drop=True)
            return
        chunks = self.chunks
        if not chunks:
            chunks.append(data)  # the common case: the sender takes it as is
        else:
            # A backlog (a client reading slower than the model writes): frames
            # go into a few buffers of about COALESCE bytes, not one small bytes
            # object each. Thousands of small objects per stalled stream fill
            # the allocator's arenas; when the streams end, a few long-lived
            # objects allocated among them keep those arenas, and the process's
            # memory, from coming back (bench/RESULTS.md, "storm").
            tail = chunks[-1]
            if type(tail) is bytearray and len(tail) < COALESCE:
                tail += data
            else:
                chunks.append(bytearray(data))
        self.size += size
        BUDGET.queued += size
        if self._waiter is not None:
            self._wake()

    def _release(self) -> None:
        drained = self._drained
        if drained is not None:
            self._drained = None
            if not drained.done():
                drained.set_result(None)

    def close(self, *, drop: bool = False) -> None:
        """No more frames; with ``drop``, forget those not sent yet (a client that left)."""
        self.closed = True
        if drop and self.chunks:
            BUDGET.queued -= self.size
            self.chunks = []
            self.size = 0
        self._wake()
        self._release()

    def take(self) -> bytes:
        """The frames to send now: all of them, or (a backlog) about ``SEND_SLICE`` bytes.

        A client that reads slowly builds a backlog; handing it to the server
        in slices keeps what the server buffers for that client (it accepts a
        few sends ahead of the socket) near a few slices rather than a few
        backlogs. Once the stream is closed everything goes, so the final
        send carries the end of the stream.
        """
        chunks = self.chunks
        if self.size > SEND_SLICE and not self.closed and len(chunks) > 1:
            taken = 0
            count = 0
            for chunk in chunks:
                taken += len(chunk)
                count += 1
                if taken >= SEND_SLICE:
                    break
            self.chunks = chunks[count:]
            chunks = chunks[:count]
            self.size -= taken
            BUDGET.queued -= taken
        else:
            self.chunks = []
            BUDGET.queued -= self.size
            self.size = 0
        if self._drained is not None and self.size <= self.high_water():
            self._release()
        return bytes(chunks[0]) if len(chunks) == 1 else b"".join(chunks)

    def high_water(self) -> int:
        """Queued bytes past which the producer should wait (``drained``).

        ``OUTBOX_HIGH_WATER``; ``LOW_WATER`` while the process is over its
        memory budget, so that clients that do not read stop adding to it.
        """
        return LOW_WATER if BUDGET.total > self._memory_budget else OUTBOX_HIGH_WATER

    def full(self) -> bool:
        """The producer should ``await drained()`` before making more."""
        return self.size > self.high_water()

    async def drained(self) -> None:
        """Wait until the sender has taken the queued frames, or the stream is over."""
        if self.size <= self.high_water() or self.closed:
            return
        drained: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._drained = drained
        try:
            await drained
        finally:
            self._drained = None

    def waiter(self, loop: asyncio.AbstractEventLoop) -> asyncio.Future[None] | None:
        """A future done when there are frames to send or the stream is over;
        ``None`` when that is already so. The sender awaits it directly: no
        coroutine per wait."""
        if self.chunks or self.closed:
            return None
        waiter: asyncio.Future[None] = loop.create_future()
        self._waiter = waiter
        return waiter


#: Keep-alive ticks per interval: a quiet stream's comment goes out after
#: ``interval`` to ``interval * (1 + 1/KEEPALIVE_TICKS)`` of quiet.
KEEPALIVE_TICKS: Final = 4


class KeepAlive:
    """Push an SSE comment to every stream that has been quiet for ``interval``.

    One loop timer for all the streams of an endpoint (on one loop), ticking
    every ``interval / KEEPALIVE_TICKS`` while any is open: a stream costs a
    set entry, not a task, coroutine or timer of its own (10,000 slow streams
    hold 10,000 of those), and a send costs nothing (a paced stream sends
    often; a timer per send would cost a heap push and a cancelled entry each
    time). ``add`` a stream's outbox when it opens, ``discard`` it when it is over.
    """

    __slots__ = ("interval", "tick", "loop", "outboxes", "handle")

    def __init__(self, interval: float, loop: asyncio.AbstractEventLoop) -> None:
        self.interval = interval
        self.tick = interval / KEEPALIVE_TICKS
        self.loop = loop
        self.outboxes: set[Outbox] = set()
        self.handle: asyncio.TimerHandle | None = None

    def add(self, outbox: Outbox) -> None:
        self.outboxes.add(outbox)
        if self.handle is None:
            self.handle = self.loop.call_at(self.loop.time() + self.tick, self._fire)

    def discard(self, outbox: Outbox) -> None:
        self.outboxes.discard(outbox)
        handle = self.handle
        if not self.outboxes and handle is not None:
            self.handle = None
            handle.cancel()

    def _fire(self) -> None:
        now = self.loop.time()
        quiet_since = now - self.interval
        for outbox in self.outboxes:
            if outbox.last_sent <= quiet_since and not outbox.closed:
                if not outbox.chunks:
                    outbox.push(outbox.keepalive)
                outbox.last_sent = now
        self.handle = self.loop.call_at(now + self.tick, self._fire) if self.outboxes else None
