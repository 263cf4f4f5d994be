"""The multiplexed follow of ``RedisStore``: one ``XREAD BLOCK`` per replica for every
stream resumed there, instead of a blocked connection per reader.

``Follower`` runs one task with a connection of its own (``XREAD BLOCK`` holds
it). A reader that joins interrupts the blocked read with ``CLIENT UNBLOCK``, so
the next read includes its key. Each key is read from its furthest-behind
reader; every reader (``Follow``) keeps only what it still needs. Reader
presence marks (``touch``) are written by the same task, once per
``READER_TOUCH_S`` for all of them in one pipeline.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from .redis_scripts import entries_of, xread_all
from .store import (
    FOLLOW_BLOCK_S,
    READ_BATCH,
    READER_TOUCH_S,
    READER_TTL_S,
    Entry,
    EventsTrimmed,
    ResumeStoreError,
    StoreUnavailable,
    stop_task,
)

if TYPE_CHECKING:
    import redis.asyncio as aioredis

__all__ = ["Follow", "Follower", "RedisReader"]


class Commands(Protocol):
    """What the follower needs of its store."""

    def keys(self, request_id: str) -> tuple[str, str, str, str]: ...

    async def call(self, *args: Any) -> Any: ...

    async def command(self, client: aioredis.Redis, args: Sequence[Any]) -> Any: ...

    async def pipeline(self, commands: Sequence[Sequence[Any]]) -> list[Any]: ...


class Following(Protocol):
    """What a reader needs of its follower (``Follower``, or ``ClusterFollower``)."""

    def remove(self, follow: Follow) -> None: ...


class Follow:
    """One reader's place in the multiplexed follow."""

    __slots__ = ("key", "next", "entries", "changed", "error")

    def __init__(self, key: str, next_seq: int) -> None:
        self.key = key
        self.next = next_seq  # the seq this reader needs next
        self.entries: list[Entry] = []
        self.changed = asyncio.Event()
        self.error: ResumeStoreError | None = None

    def deliver(self, entries: list[Entry]) -> None:
        for entry in entries:
            if entry.seq < self.next:
                continue  # read for another follower of the same stream, or already had
            if entry.seq > self.next:
                self.error = EventsTrimmed(entry.seq)  # trimmed before we got them
                break
            self.entries.append(entry)
            self.next += 1
        self.changed.set()

    def fail(self, error: ResumeStoreError) -> None:
        self.error = error
        self.changed.set()


class RedisReader:
    """A ``StoreReader`` fed by the follower."""

    def __init__(
        self, store: Commands, follower: Following, key: str, first: list[Entry], finished: bool
    ) -> None:
        self._store = store
        self._follower = follower
        self.first = first
        self.finished = finished
        self.follow = Follow(key, -1)

    def start_after(self, after: int) -> None:
        self.follow.next = (self.first[-1].seq if self.first else after) + 1

    async def next(self, wait_s: float) -> list[Entry]:
        follow = self.follow
        if not follow.entries and follow.error is None:
            if wait_s <= 0:
                await self._catch_up()
            else:
                follow.changed.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(wait_s):
                        await follow.changed.wait()
        if follow.error is not None and not follow.entries:
            raise follow.error
        out, follow.entries = follow.entries, []
        return out

    async def _catch_up(self) -> None:
        """Read directly what is stored beyond this reader (the follow may lag a round)."""
        follow = self.follow
        raw = await self._store.call(
            "XRANGE", follow.key, f"0-{follow.next + 1}", "+", "COUNT", READ_BATCH
        )
        follow.deliver(entries_of(raw))

    def close(self) -> None:
        self._follower.remove(self.follow)


class Follower:
    """One ``XREAD BLOCK`` at a time for every stream read on this replica."""

    def __init__(self, store: Commands, client: aioredis.Redis) -> None:
        self.store = store
        self.client = client
        self.follows: dict[str, list[Follow]] = {}
        self.touches: set[str] = set()
        self._task: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        self._client_id: int | None = None  # CLIENT ID of that connection
        self._blocked = False
        # The loop checks this too: a cancel that lands inside a redis-py call is
        # not always passed on (seen with redis-py 8 on a single-connection client).
        self._stopping = False

    @property
    def idle(self) -> bool:
        """Nothing followed and no presence mark waiting: no loop will write soon."""
        return not self.touches and not self.follows

    async def add(self, follow: Follow) -> None:
        self.follows.setdefault(follow.key, []).append(follow)
        if self._task is None or self._task.done():
            self._stopping = False
            self._wake = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._loop())
        assert self._wake is not None
        self._wake.set()
        await self._unblock()  # blocked on the old set of keys: start over

    def remove(self, follow: Follow) -> None:
        follows = self.follows.get(follow.key)
        if follows is not None and follow in follows:
            follows.remove(follow)
            if not follows:
                del self.follows[follow.key]

    async def _unblock(self) -> None:
        if self._blocked and self._client_id is not None:
            with contextlib.suppress(ResumeStoreError):
                await self.store.call("CLIENT", "UNBLOCK", self._client_id)

    async def aclose(self) -> None:
        self._stopping = True
        task = self._task
        if task is not None:
            # Let it stop by itself rather than cancel it in the middle of a command.
            if self._wake is not None:
                self._wake.set()
            await self._unblock()
            await asyncio.wait([task], timeout=FOLLOW_BLOCK_S + 1.0)
            if not task.done():
                await stop_task(task)
        self._task = None
        for follows in self.follows.values():
            for follow in follows:
                follow.fail(StoreUnavailable("the store was closed"))
        self.follows.clear()

    async def _loop(self) -> None:
        wake = self._wake
        assert wake is not None
        next_touch = 0.0
        while not self._stopping:
            if not self.follows:
                wake.clear()
                await wake.wait()
                continue
            now = time.monotonic()
            if self.touches and now >= next_touch:
                next_touch = now + READER_TOUCH_S
                await self._flush_touches()
            # Each key from the furthest-behind reader of it; the others skip what they had.
            starts = {key: min(f.next for f in fs) for key, fs in self.follows.items()}
            try:
                if self._client_id is None:
                    self._client_id = await self.store.command(self.client, ["CLIENT", "ID"])
                self._blocked = True
                try:
                    raw = await self.store.command(
                        self.client,
                        [
                            "XREAD",
                            "COUNT",
                            READ_BATCH,
                            "BLOCK",
                            round(FOLLOW_BLOCK_S * 1000),
                            "STREAMS",
                            *starts,
                            *(f"0-{start}" for start in starts.values()),
                        ],
                    )
                finally:
                    self._blocked = False
            except ResumeStoreError as exc:
                self._client_id = None
                if self._stopping:
                    return
                for follows in list(self.follows.values()):
                    for follow in follows:
                        follow.fail(exc)
                await asyncio.sleep(0.1)  # a short pause before trying Redis again
                continue
            for key, entries in xread_all(raw):
                for follow in self.follows.get(key, ()):
                    follow.deliver(entries)

    async def _flush_touches(self) -> None:
        touches, self.touches = self.touches, set()
        ttl = round(READER_TTL_S * 1000)
        with contextlib.suppress(ResumeStoreError):
            await self.store.pipeline(
                [["SET", self.store.keys(i)[3], "1", "PX", ttl] for i in touches]
            )
