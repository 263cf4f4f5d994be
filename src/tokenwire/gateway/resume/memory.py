"""The in-memory store: the default, for one gateway process (docs/scaling.md)."""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Callable, Sequence

from .store import (
    ENTRY_OVERHEAD,
    LIVE,
    READER_TTL_S,
    Append,
    Created,
    Entry,
    EventsTrimmed,
    StoreReader,
    StreamInfo,
    StreamNotFound,
    StreamState,
)

__all__ = ["MemoryStore"]


class _MemStream:
    __slots__ = ("info", "entries", "first_seq", "size", "status", "expires", "changed", "seen")

    def __init__(self, info: StreamInfo) -> None:
        self.info = info
        self.entries: list[Entry] = []
        self.first_seq = 0  # seq of entries[0]; trimming moves it on
        self.size = 0
        self.status = LIVE
        self.expires = math.inf
        self.changed = asyncio.Event()
        self.seen = -math.inf

    @property
    def next_seq(self) -> int:
        return self.first_seq + len(self.entries)

    def wake(self) -> None:
        changed, self.changed = self.changed, asyncio.Event()
        changed.set()


class _MemReader:
    def __init__(self, store: MemoryStore, request_id: str, stream: _MemStream, after: int):
        self._store = store
        self._id = request_id
        self._stream = stream
        self._next = after + 1
        self.first = self._take()
        self.finished = stream.status != LIVE

    def _take(self) -> list[Entry]:
        stream = self._stream
        if self._store._streams.get(self._id) is not stream:
            raise StreamNotFound(self._id)
        if self._next < stream.first_seq:
            raise EventsTrimmed(stream.first_seq)
        out = stream.entries[self._next - stream.first_seq :]
        self._next += len(out)
        return out

    async def next(self, wait_s: float) -> list[Entry]:
        out = self._take()
        stream = self._stream
        if out or wait_s <= 0 or stream.status != LIVE:
            return out
        try:
            async with asyncio.timeout(wait_s):
                await stream.changed.wait()
        except TimeoutError:
            return []
        return self._take()

    def close(self) -> None:
        pass


class MemoryStore:
    """Streams in this process's memory: the default, for one gateway process.

    ``max_events_per_stream``: each stream keeps at least its newest that many
    events (older ones are dropped in slices of an eighth, so trimming is
    cheap). ``max_bytes``: when the frames (plus ``ENTRY_OVERHEAD`` each) pass
    it, finished streams are dropped oldest first; if live ones alone fill it,
    new streams are not recorded (``Created.FULL``). Finished streams expire
    ``ttl_s`` after their end.
    """

    kind = "memory"

    def __init__(
        self,
        *,
        max_events_per_stream: int = 100_000,
        max_bytes: int = 256 << 20,
        ttl_s: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_events = max_events_per_stream
        self.max_bytes = max_bytes
        self.ttl_s = ttl_s
        self._clock = clock
        self._streams: dict[str, _MemStream] = {}
        self.size = 0

    async def start(self, on_cancel: Callable[[str], None]) -> None:
        pass

    async def aclose(self) -> None:
        for stream in self._streams.values():
            stream.wake()
        self._streams.clear()
        self.size = 0

    def _drop(self, request_id: str) -> None:
        stream = self._streams.pop(request_id, None)
        if stream is not None:
            self.size -= stream.size
            stream.wake()

    def _expire(self) -> None:
        now = self._clock()
        for request_id in [k for k, s in self._streams.items() if s.expires <= now]:
            self._drop(request_id)

    def _make_room(self) -> bool:
        self._expire()
        if self.size < self.max_bytes:
            return True
        finished = sorted((s.expires, k) for k, s in self._streams.items() if s.status != LIVE)
        for _expires, request_id in finished:
            self._drop(request_id)
            if self.size < self.max_bytes:
                return True
        return False

    async def create(self, request_id: str, info: StreamInfo) -> Created:
        self._expire()
        if request_id in self._streams:
            return Created.EXISTS
        if not self._make_room():
            return Created.FULL
        self._streams[request_id] = _MemStream(info)
        return Created.CREATED

    async def commit(self, appends: Sequence[Append]) -> set[str]:
        refused: set[str] = set()
        now = self._clock()
        for append in appends:
            stream = self._streams.get(append.request_id)
            if stream is None or stream.status != LIVE:
                refused.add(append.request_id)
                continue
            entries = append.entries
            if append.retry:
                # A repeat of a commit that may have landed: skip what is stored.
                entries = [e for e in entries if e.seq >= stream.next_seq]
                append = append._replace(entries=entries)
            if append.entries and append.entries[0].seq != stream.next_seq:
                refused.add(append.request_id)  # a gap would corrupt every later resume
                continue
            added = sum(len(e.frame) + ENTRY_OVERHEAD for e in append.entries)
            stream.entries += append.entries
            stream.size += added
            self.size += added
            overflow = len(stream.entries) - self.max_events
            if overflow > self.max_events // 8:
                dropped = stream.entries[:overflow]
                del stream.entries[:overflow]
                stream.first_seq += overflow
                freed = sum(len(e.frame) + ENTRY_OVERHEAD for e in dropped)
                stream.size -= freed
                self.size -= freed
            if append.end is not None:
                stream.status = append.end
                stream.expires = now + self.ttl_s
            stream.wake()
        return refused

    async def open_reader(self, request_id: str, after: int) -> StoreReader:
        self._expire()
        stream = self._streams.get(request_id)
        if stream is None:
            raise StreamNotFound(request_id)
        return _MemReader(self, request_id, stream, after)

    async def state(self, request_id: str) -> StreamState | None:
        self._expire()
        stream = self._streams.get(request_id)
        return None if stream is None else StreamState(stream.status, True)

    async def info(self, request_id: str) -> StreamInfo | None:
        self._expire()
        stream = self._streams.get(request_id)
        return None if stream is None else stream.info

    async def wait_ended(self, request_id: str, timeout: float) -> None:
        stream = self._streams.get(request_id)
        if stream is None or stream.status != LIVE:
            return
        # Every commit and every drop wakes the stream's waiters.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await stream.changed.wait()

    async def request_cancel(self, request_id: str) -> bool:
        return False  # one process: the manager's own registry has every live stream

    async def touch_reader(self, request_id: str) -> None:
        stream = self._streams.get(request_id)
        if stream is not None:
            stream.seen = self._clock()

    async def readers_seen(self, request_ids: Sequence[str]) -> set[str]:
        now = self._clock()
        out = set()
        for request_id in request_ids:
            stream = self._streams.get(request_id)
            if stream is not None and now - stream.seen < READER_TTL_S:
                out.add(request_id)
        return out

    async def heartbeat(self, request_ids: Sequence[str]) -> tuple[set[str], set[str]]:
        return set(), set()

    async def close_orphan(self, request_id: str, code: str, message: str, seen: int = -1) -> bool:
        return False  # the owner is this process: it never goes away alone

    async def discard(self, request_id: str) -> None:
        self._drop(request_id)

    async def housekeeping(self) -> None:
        self._expire()
