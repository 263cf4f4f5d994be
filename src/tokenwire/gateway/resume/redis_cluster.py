"""The follow of ``RedisStore`` on Redis Cluster: one ``XREAD BLOCK`` per stream followed.

On one Redis, ``Follower`` (redis_follow.py) reads every followed stream with a
single ``XREAD`` over all their keys. On Redis Cluster each stream's keys share
one slot (the ``{request_id}`` hash tag) but two streams rarely do, and a
command may not span slots, so here each followed stream has a read of its own:
a task blocked in ``XREAD BLOCK`` on one pooled connection of the node serving
that stream's slot. A node holds one connection per stream resumed from this
replica (the pool's ``max_connections`` per node bounds it); a stream read by
several readers here is still read once, from its furthest-behind reader.

A reader that joins behind the read in flight restarts it (the task is
cancelled: redis-py drops that connection rather than reuse it mid-reply).
Reader presence marks are flushed by one task every ``READER_TOUCH_S``.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from .redis_follow import Commands, Follow
from .redis_scripts import xread_all
from .store import (
    FOLLOW_BLOCK_S,
    READ_BATCH,
    READER_TOUCH_S,
    READER_TTL_S,
    ResumeStoreError,
    StoreUnavailable,
    stop_task,
)

__all__ = ["ClusterFollower"]

#: After a failed read, the pause before the next (the store's health check
#: refuses at once while Redis is marked down, so this is what paces retries).
RETRY_PAUSE_S = 0.1


class ClusterFollower:
    """One ``XREAD BLOCK`` per followed stream (see module doc). ``Follower``'s interface."""

    def __init__(self, store: Commands, client: Any) -> None:
        # ``client``: a ``redis.asyncio.cluster.RedisCluster``.
        self.store = store
        self.client = client
        self.follows: dict[str, list[Follow]] = {}
        self.touches: set[str] = set()
        self._reads: dict[str, asyncio.Task[None]] = {}
        #: The start of each key's read in flight.
        self._starts: dict[str, int] = {}
        self._toucher: asyncio.Task[None] | None = None
        self._stopping = False

    @property
    def idle(self) -> bool:
        """Nothing followed and no presence mark waiting: no loop will write soon."""
        return not self.touches and not self.follows

    async def add(self, follow: Follow) -> None:
        self._stopping = False
        key = follow.key
        self.follows.setdefault(key, []).append(follow)
        loop = asyncio.get_running_loop()
        read = self._reads.get(key)
        if read is not None and not read.done():
            if follow.next >= self._starts.get(key, follow.next):
                return  # the read in flight already covers it
            read.cancel()  # it reads from too late for this reader: start over
        self._reads[key] = loop.create_task(self._read(key))
        if self._toucher is None or self._toucher.done():
            self._toucher = loop.create_task(self._touch_loop())

    def remove(self, follow: Follow) -> None:
        follows = self.follows.get(follow.key)
        if follows is not None and follow in follows:
            follows.remove(follow)
            if not follows:
                del self.follows[follow.key]
                read = self._reads.pop(follow.key, None)
                if read is not None:
                    read.cancel()  # frees its connection now, not after the block
                self._starts.pop(follow.key, None)

    async def _read(self, key: str) -> None:
        while not self._stopping:
            follows = self.follows.get(key)
            if not follows:
                return
            start = min(f.next for f in follows)
            self._starts[key] = start
            command = ["XREAD", "COUNT", READ_BATCH, "BLOCK", round(FOLLOW_BLOCK_S * 1000)]
            try:
                raw = await self.store.command(
                    self.client, [*command, "STREAMS", key, f"0-{start}"]
                )
            except ResumeStoreError as exc:
                if self._stopping:
                    return
                for follow in list(self.follows.get(key, ())):
                    follow.fail(exc)
                await asyncio.sleep(RETRY_PAUSE_S)
                continue
            for read_key, entries in xread_all(raw):
                for follow in self.follows.get(read_key, ()):
                    follow.deliver(entries)

    async def _touch_loop(self) -> None:
        while not self._stopping and (self.follows or self.touches):
            if self.touches:
                touches, self.touches = self.touches, set()
                ttl = round(READER_TTL_S * 1000)
                with contextlib.suppress(ResumeStoreError):
                    await self.store.pipeline(
                        [["SET", self.store.keys(i)[3], "1", "PX", ttl] for i in touches]
                    )
            await asyncio.sleep(READER_TOUCH_S)

    async def aclose(self) -> None:
        self._stopping = True
        tasks = [*self._reads.values()]
        if self._toucher is not None:
            tasks.append(self._toucher)
        for task in tasks:
            await stop_task(task)
        self._reads.clear()
        self._starts.clear()
        self._toucher = None
        for follows in self.follows.values():
            for follow in follows:
                follow.fail(StoreUnavailable("the store was closed"))
        self.follows.clear()
