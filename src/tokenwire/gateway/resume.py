"""Resumable streams: the event store, the runner that owns their generation, and the
``/v1/streams/{request_id}`` route (docs/scaling.md).

A request opts in with the extension ``"tokenwire:resumable": true`` (or every
standard stream is resumable with ``[resume] default = true``). For such a
stream, ``StreamEndpoint`` hands its events, as the SSE frames it sends
(``id:`` = seq, DESIGN.md), to a ``_Session``; the manager's single flusher
task commits them to a ``Store`` in batches. The generation's task belongs to
the manager, not to the HTTP request, so:

- a hang-up does not cancel it: it goes on for ``grace_s`` without any reader
  (a resume in progress, on any replica, counts as a reader), then it is
  cancelled and the stored stream ends with ``error`` (code ``cancelled``,
  docs/extensions.md) + ``stream.end``;
- ``DELETE /v1/streams/{request_id}`` cancels it explicitly, wherever it runs
  (the owning replica hears it on a Redis channel, or at its next heartbeat);
- ``GET /v1/streams/{request_id}`` (``Last-Event-ID: N`` or ``?after=N``)
  replays the stored frames after seq N, then follows the live ones to
  ``stream.end``: same bytes, same seqs, no gap, no duplicate.

Two stores:

``MemoryStore``
    the default: nothing to run, one process (the gateway worker) only.
``RedisStore``
    Redis Streams through redis-py's asyncio client, shared by any number of
    replicas. One stream key per request, entry ID ``0-<seq+1>`` (so "after
    seq N" is an ID range and a duplicate or out-of-order write is refused by
    Redis itself), ``XADD ... MAXLEN ~`` to bound it, ``XREAD BLOCK`` to follow
    it, a TTL once it ended. The generating replica holds a lease key it
    renews every ``lease_s / 3``; a reader that finds the lease gone on a live
    stream ends it with ``error`` (``internal_error``) + ``stream.end``, so a
    replica that dies mid-generation costs a resuming client at most about
    ``lease_s`` + 1 s. If Redis is unreachable, streams are still served live;
    only resume is off (one log line when it goes, one when it is back).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import functools
import hashlib
import logging
import math
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, Final, NamedTuple, Protocol
from urllib.parse import parse_qs, urlsplit, urlunsplit

import msgspec

from .. import events as ev
from ..errors import InvalidRequest, TokenwireError
from ..request import Request
from ..server import (
    CLEANUP_S,
    KEEPALIVE,
    SSE_HEADERS,
    Receive,
    ResumeConflict,
    Scope,
    Send,
    StreamRecord,
    send_json,
    send_json_error,
)
from .config import ResumeConfig
from .logs import LOGGER_NAME

if TYPE_CHECKING:  # redis is imported only when a Redis store is made (RedisStore)
    import redis.asyncio as aioredis

__all__ = [
    "CANCEL_MESSAGE",
    "EXTENSION",
    "GRACE_MESSAGE",
    "LOST_MESSAGE",
    "ORPHAN_MESSAGE",
    "SHUTDOWN_MESSAGE",
    "Append",
    "Created",
    "Entry",
    "EventsTrimmed",
    "MemoryStore",
    "RedisStore",
    "ResumeEndpoint",
    "ResumeManager",
    "ResumeStoreError",
    "Store",
    "StoreReader",
    "StoreRefused",
    "StoreUnavailable",
    "StreamInfo",
    "StreamNotFound",
    "StreamState",
    "build_manager",
    "closing_entries",
    "parse_after",
]

#: §4.7: the request extension that makes a stream resumable.
EXTENSION: Final = "tokenwire:resumable"

#: Stream states kept by a store. ``live`` while generating, then one of the others.
LIVE: Final = "live"
COMPLETED: Final = "completed"
CANCELLED: Final = "cancelled"
FAILED: Final = "failed"

#: The ``error`` messages a stored stream may end with, besides the provider's own.
CANCEL_MESSAGE: Final = "the stream was cancelled on request (DELETE)"
GRACE_MESSAGE: Final = "nobody read the stream for {grace_s:g} s; the generation was stopped"
ORPHAN_MESSAGE: Final = "the gateway replica generating this stream stopped"
LOST_MESSAGE: Final = "the stream's record was lost, so it cannot be resumed"
SHUTDOWN_MESSAGE: Final = "the gateway is shutting down"

#: A reader counts as present this long after it last said so (every ``READER_TOUCH_S``).
READER_TTL_S: Final = 3.0
READER_TOUCH_S: Final = 1.0
#: The longest a follower waits for new events in one read (its idle checks run between).
FOLLOW_BLOCK_S: Final = 1.0
#: Entries per read.
READ_BATCH: Final = 512
#: Appends per store commit (one Redis pipeline).
COMMIT_BATCH: Final = 256
#: How often the manager checks grace periods and escalates slow cancellations.
TICK_S: Final = 0.25
#: How often the store's own housekeeping runs (expiry; Redis memory check).
HOUSEKEEPING_S: Final = 5.0
#: Longest ``request_id`` a resumable stream may have (it is part of store keys).
MAX_REQUEST_ID: Final = 256
#: Approximate bytes a stored entry costs beyond its frame (the memory store's accounting).
ENTRY_OVERHEAD: Final = 136

logger = logging.getLogger(LOGGER_NAME)
_json = msgspec.json.Encoder()


def _log(level: int, msg: str, **fields: Any) -> None:
    """One JSON line on the gateway logger, like the request log."""
    if logger.isEnabledFor(level):
        logger.log(
            level, _json.encode({"ts": round(time.time(), 3), "msg": msg, **fields}).decode()
        )


# --- Errors -----------------------------------------------------------------------------


class ResumeStoreError(TokenwireError):
    """Base of the resume store's errors (the gateway maps each to an HTTP status)."""


class StoreUnavailable(ResumeStoreError):
    """The store cannot be reached (Redis down): streams go on, resume does not (503)."""


class StoreRefused(ResumeStoreError):
    """The store answered a command with an error (a bug, or Redis out of memory)."""


class StreamNotFound(ResumeStoreError):
    """No stored stream has that ``request_id``: never one, or expired (404)."""


class EventsTrimmed(ResumeStoreError):
    """The events after the requested seq are no longer all stored (410): trimmed
    (``max_events_per_stream``), or never stored by a replica that died.

    ``first_seq`` is the next seq that is stored.
    """

    def __init__(self, first_seq: int) -> None:
        super().__init__(f"the next event stored is seq {first_seq}")
        self.first_seq = first_seq


# --- Values ----------------------------------------------------------------------------------


class Entry(NamedTuple):
    """One stored event: its seq, its type, and the exact SSE frame that was sent."""

    seq: int
    type: str
    frame: bytes


class Append(NamedTuple):
    """Entries to add to one stream; ``end`` is its final state when it ended with them.

    ``first`` marks a stream's first append (the Redis store sets its idle TTL then).
    """

    request_id: str
    entries: list[Entry]
    end: str | None
    first: bool


class StreamInfo(NamedTuple):
    """What a store keeps about a stream besides its events."""

    model: str
    created: int
    owner: str


class StreamState(NamedTuple):
    """A stored stream's state (``live`` or how it ended) and whether its owner is alive."""

    status: str
    owner_alive: bool


class Created(enum.Enum):
    """What ``Store.create`` did."""

    CREATED = "created"
    EXISTS = "exists"  # the request_id is taken
    FULL = "full"  # over max_bytes: serve this stream without resume


class StoreReader(Protocol):
    """Reads one stored stream from a seq on.

    ``first`` is what was stored after that seq when the reader opened;
    ``finished`` says the stream had ended then. ``next`` returns the entries
    stored since, waiting up to ``wait_s`` for some (``[]`` when none came).
    It raises ``EventsTrimmed`` if entries were trimmed before the reader got
    them, ``StreamNotFound`` if the stream is gone, ``StoreUnavailable``.
    ``close`` ends the reader.
    """

    first: list[Entry]
    finished: bool

    async def next(self, wait_s: float) -> list[Entry]: ...

    def close(self) -> None: ...


class Store(Protocol):
    """Where resumable streams live. Every method may raise ``StoreUnavailable``."""

    kind: str

    async def start(self, on_cancel: Callable[[str], None]) -> None:
        """Begin background work; ``on_cancel(request_id)`` hears cancels from other replicas."""
        ...

    async def aclose(self) -> None: ...

    async def create(self, request_id: str, info: StreamInfo) -> Created: ...

    async def commit(self, appends: Sequence[Append]) -> set[str]:
        """Apply ``appends`` in order. Returns the request_ids whose append was refused
        (the stream is gone, ended, or no longer this owner's)."""
        ...

    async def open_reader(self, request_id: str, after: int) -> StoreReader:
        """A reader of the events after seq ``after`` (-1: all). Raises
        ``StreamNotFound``, ``EventsTrimmed``."""
        ...

    async def state(self, request_id: str) -> StreamState | None: ...

    async def request_cancel(self, request_id: str) -> bool:
        """Ask the owning replica to cancel. False when the stream is not live."""
        ...

    async def touch_reader(self, request_id: str) -> None: ...

    async def readers_seen(self, request_ids: Sequence[str]) -> set[str]:
        """Those of ``request_ids`` that a reader touched within ``READER_TTL_S``."""
        ...

    async def heartbeat(self, request_ids: Sequence[str]) -> tuple[set[str], set[str]]:
        """Renew this owner's leases. Returns (cancel requested, no longer ours)."""
        ...

    async def close_orphan(self, request_id: str, code: str, message: str, seen: int = -1) -> bool:
        """End a live stream whose owner is gone with ``error`` + ``stream.end``, after
        the stored events or after seq ``seen`` (what the asking reader has), whichever
        is later (``closing_entries``)."""
        ...

    async def discard(self, request_id: str) -> None:
        """Forget a stream this owner could not record completely."""
        ...

    async def housekeeping(self) -> None: ...


def closing_entries(
    request_id: str,
    info: StreamInfo,
    last: Entry | None,
    code: str,
    message: str,
    seen: int = -1,
) -> list[Entry]:
    """The entries that end a stream cut off after ``last``: ``error`` + ``stream.end``.

    §5.4: after an error open blocks need no ``content.stop``; a stream that
    already has its ``error`` gets only ``stream.end``; an empty one gets its
    ``stream.start`` too. Returns ``[]`` when ``last`` is already ``stream.end``.
    ``seen`` is the last seq the reader asking for the end already has: events
    go to a client before they are stored, so a replica that died may have
    sent more than it stored, and the end must come after what the client has
    (§5.2.1: its seqs go on without a gap or a repeat).
    """
    events: list[ev.KnownEvent]
    if seen > (last.seq if last is not None else -1):
        events = [
            ev.ErrorEvent(v=ev.VERSION, seq=seen + 1, code=code, message=message),
            ev.StreamEnd(v=ev.VERSION, seq=seen + 2, request_id=request_id),
        ]
    elif last is None:
        events = [
            ev.StreamStart(
                v=ev.VERSION, seq=0, model=info.model, created=info.created, request_id=request_id
            ),
            ev.ErrorEvent(v=ev.VERSION, seq=1, code=code, message=message),
            ev.StreamEnd(v=ev.VERSION, seq=2, request_id=request_id),
        ]
    elif last.type == "stream.end":
        return []
    elif last.type == "error":
        events = [ev.StreamEnd(v=ev.VERSION, seq=last.seq + 1, request_id=request_id)]
    else:
        events = [
            ev.ErrorEvent(v=ev.VERSION, seq=last.seq + 1, code=code, message=message),
            ev.StreamEnd(v=ev.VERSION, seq=last.seq + 2, request_id=request_id),
        ]
    return [Entry(event.seq, event.TYPE, ev.dump(event)) for event in events]


def end_status(error_code: str | None) -> str:
    """The final state of a stream whose ``error`` (if any) had ``error_code``."""
    if error_code is None:
        return COMPLETED
    return CANCELLED if error_code == "cancelled" else FAILED


# --- The in-memory store -----------------------------------------------------------------------


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


# --- The Redis store ----------------------------------------------------------------------------

# A replica that lost its lease (a long pause) must never write past an end that a
# reader appended for it. Entry IDs are 0-<seq+1> and Redis refuses an ID that is
# not above the stream's last one, so its next XADD (the same seq as the reader's
# error) fails; a refused commit stops that stream's recording for good. XADD
# NOMKSTREAM keeps an expired or discarded stream from coming back.

#: KEYS meta, lease. ARGV owner, model, created, lease_ms, idle_ms.
_CREATE = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'status', 'live', 'owner', ARGV[1], 'model', ARGV[2],
           'created', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[4])
return 1
"""

#: KEYS meta, stream, lease. ARGV owner, maxlen, end status or '', ttl_ms, idle_ms,
#: first ('1'/'0'), then (id, type, frame) per entry. A script, so that a batch
#: stops at its first refused entry instead of leaving a gap.
_APPEND = """
local first = ARGV[6] == '1'
if first then
  local meta = redis.call('HMGET', KEYS[1], 'status', 'owner')
  if meta[1] ~= 'live' or meta[2] ~= ARGV[1] then return 0 end
end
for i = 7, #ARGV, 3 do
  local id
  if first then
    id = redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[2], ARGV[i],
                    't', ARGV[i + 1], 'f', ARGV[i + 2])
  else
    id = redis.call('XADD', KEYS[2], 'NOMKSTREAM', 'MAXLEN', '~', ARGV[2], ARGV[i],
                    't', ARGV[i + 1], 'f', ARGV[i + 2])
  end
  if not id then return 0 end
end
if ARGV[3] ~= '' then
  local meta = redis.call('HMGET', KEYS[1], 'status', 'owner')
  if meta[1] ~= 'live' or meta[2] ~= ARGV[1] then return 0 end
  redis.call('HSET', KEYS[1], 'status', ARGV[3])
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
  redis.call('PEXPIRE', KEYS[2], ARGV[4])
  redis.call('DEL', KEYS[3])
elseif first then
  redis.call('PEXPIRE', KEYS[2], ARGV[5])
end
return 1
"""

#: KEYS meta, stream, lease. ARGV owner, lease_ms, idle_ms. 0: not ours, 1: ok, 2: cancel.
_HEARTBEAT = """
local meta = redis.call('HMGET', KEYS[1], 'status', 'owner', 'cancel')
if meta[1] ~= 'live' or meta[2] ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[3], ARGV[1], 'PX', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
if meta[3] then return 2 end
return 1
"""

#: KEYS meta. ARGV channel, request_id.
_CANCEL = """
if redis.call('HGET', KEYS[1], 'status') ~= 'live' then return 0 end
redis.call('HSET', KEYS[1], 'cancel', '1')
redis.call('PUBLISH', ARGV[1], ARGV[2])
return 1
"""

#: KEYS meta, lease, stream. ARGV expected top id or '', status, ttl_ms, then
#: (id, type, frame) per entry. 0: not an orphan, -1: the stream moved, 1: closed.
_CLOSE_ORPHAN = """
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
if redis.call('HGET', KEYS[1], 'status') ~= 'live' then return 0 end
local top = redis.call('XREVRANGE', KEYS[3], '+', '-', 'COUNT', 1)
local top_id = ''
if #top > 0 then top_id = top[1][1] end
if top_id ~= ARGV[1] then return -1 end
for i = 4, #ARGV, 3 do
  redis.call('XADD', KEYS[3], ARGV[i], 't', ARGV[i + 1], 'f', ARGV[i + 2])
end
redis.call('HSET', KEYS[1], 'status', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('PEXPIRE', KEYS[3], ARGV[3])
return 1
"""

#: KEYS meta, stream, lease, reader. ARGV owner.
_DISCARD = """
local meta = redis.call('HMGET', KEYS[1], 'status', 'owner')
if meta[1] ~= 'live' or meta[2] ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
return 1
"""

_SCRIPTS: Final = {
    "create": _CREATE,
    "append": _APPEND,
    "heartbeat": _HEARTBEAT,
    "cancel": _CANCEL,
    "close_orphan": _CLOSE_ORPHAN,
    "discard": _DISCARD,
}
_SHAS: Final = {name: hashlib.sha1(body.encode()).hexdigest() for name, body in _SCRIPTS.items()}


async def _stop(task: asyncio.Task[Any], timeout: float = 2.0) -> None:
    """Cancel ``task`` and wait for it, a bounded time (its loop also checks a flag)."""
    for _attempt in range(2):
        task.cancel()
        await asyncio.wait([task], timeout=timeout)
        if task.done():
            return
    _log(logging.ERROR, "resume_task_stuck", task=task.get_name())


def _redis() -> tuple[ModuleType, ModuleType, tuple[type[BaseException], ...]]:
    """redis-py's asyncio client, its exceptions, and the ones meaning "cannot reach
    Redis" (as opposed to a refused command). Imported on first use: a gateway with
    the memory store never loads redis-py."""
    import redis.asyncio as client
    import redis.exceptions as errors

    return client, errors, (errors.ConnectionError, errors.TimeoutError, OSError)


def _redacted(url: str) -> str:
    """``url`` without its password, for logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    user = f"{parts.username}:***@" if parts.username else ":***@"
    return urlunsplit(parts._replace(netloc=user + host))


def _seq_of(entry_id: bytes | str) -> int:
    text = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
    return int(text.partition("-")[2]) - 1


def _entries(raw: Any) -> list[Entry]:
    """Entries from an XRANGE reply: ``[(id, {t, f}), ...]`` (RESP2 or RESP3)."""
    out = []
    for item in raw or ():
        entry_id, fields = item[0], item[1]
        if isinstance(fields, list):  # a raw field list, as we wrote it: t <type> f <frame>
            if fields[0] == b"t" and fields[2] == b"f":
                kind, frame = fields[1], fields[3]
            else:
                pairs = dict(zip(fields[::2], fields[1::2], strict=True))
                kind, frame = pairs[b"t"], pairs[b"f"]
        else:
            kind, frame = fields[b"t"], fields[b"f"]
        out.append(Entry(_seq_of(entry_id), kind.decode(), bytes(frame)))
    return out


def _raw_reply(response: Any, **options: Any) -> Any:
    return response


def _xread_all(raw: Any) -> list[tuple[str, list[Entry]]]:
    """``(key, entries)`` from an XREAD reply: ``[[key, entries], ...]`` (RESP2), a map
    (RESP3), or nil."""
    if not raw:
        return []
    if isinstance(raw, dict):
        items = list(raw.items())
    else:
        items = [(item[0], item[1]) for item in raw]
    out = []
    for key, entries in items:
        if (
            entries
            and isinstance(entries[0], list)
            and entries[0]
            and isinstance(entries[0][0], list | tuple)
        ):
            entries = entries[0]  # some RESP3 shapes nest once more
        out.append((_text(key) or "", _entries(entries)))
    return out


def _error_code(entry: Entry) -> str | None:
    """The code of an ``error`` entry (``None`` for another type)."""
    if entry.type != "error":
        return None
    event = ev.parse("error", entry.frame.partition(b"data: ")[2].rstrip(b"\n"))
    return event.code if isinstance(event, ev.ErrorEvent) else None


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)


class _Health:
    """Whether Redis answers, logged once when it stops and once when it is back.

    After a failure, calls fail fast for ``retry_s`` instead of each waiting on
    a dead connection: a stream start must not pay a connect timeout.
    """

    def __init__(self, where: str, retry_s: float = 1.0) -> None:
        self.where = where
        self.retry_s = retry_s
        self.down_since: float | None = None
        self.retry_at = 0.0
        self.error = ""

    def check(self) -> None:
        if self.down_since is not None and time.monotonic() < self.retry_at:
            raise StoreUnavailable(f"redis at {self.where} is unavailable: {self.error}")

    def failed(self, exc: BaseException) -> StoreUnavailable:
        now = time.monotonic()
        self.retry_at = now + self.retry_s
        self.error = f"{type(exc).__name__}: {exc}"
        if self.down_since is None:
            self.down_since = now
            _log(
                logging.WARNING,
                "resume_store_unavailable",
                backend="redis",
                url=self.where,
                error=self.error,
                effect="streams are served live; resume is off until Redis answers again",
            )
        return StoreUnavailable(f"redis at {self.where} is unavailable: {self.error}")

    def ok(self) -> None:
        if self.down_since is not None:
            _log(
                logging.WARNING,
                "resume_store_available",
                backend="redis",
                url=self.where,
                down_s=round(time.monotonic() - self.down_since, 3),
            )
            self.down_since = None


class _Follow:
    """One reader's place in the multiplexed follow of a replica (``RedisStore``)."""

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


class _RedisReader:
    """A reader fed by its store's multiplexed ``XREAD`` (``RedisStore._follow_loop``)."""

    def __init__(
        self, store: RedisStore, request_id: str, first: list[Entry], finished: bool, after: int
    ) -> None:
        self._store = store
        self.first = first
        self.finished = finished
        self._follow = _Follow(store.keys(request_id)[1], (first[-1].seq if first else after) + 1)

    async def next(self, wait_s: float) -> list[Entry]:
        follow = self._follow
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
        follow = self._follow
        raw = await self._store.call(
            "XRANGE", follow.key, f"0-{follow.next + 1}", "+", "COUNT", READ_BATCH
        )
        follow.deliver(_entries(raw))

    def close(self) -> None:
        self._store.unfollow(self._follow)


class RedisStore:
    """Streams in Redis Streams, shared by every replica (docs/scaling.md).

    Keys per stream: ``tw:{id}:s`` the events (stream entries ``0-<seq+1>`` with fields ``t``
    type, ``f`` frame), ``tw:{id}:m`` a hash (status, owner, model, created,
    cancel), ``tw:{id}:l`` the owner's lease, ``tw:{id}:r`` a reader's
    presence. Cancels go out on the channel ``tw:cancel``.

    Readers do not each block on Redis: one task per replica follows every
    stream read there with a single ``XREAD BLOCK`` over all their keys (on a
    connection of its own, interrupted with ``CLIENT UNBLOCK`` when a reader
    joins) and hands each reader its entries. Reader presence is written the
    same way, once per ``READER_TOUCH_S`` for all of them in one pipeline. One
    Redis (a primary, with replicas if you like) serves all; Redis Cluster is
    not supported (that ``XREAD`` spans slots).

    ``max_bytes`` is compared with Redis's ``used_memory`` every
    ``HOUSEKEEPING_S``: above it, new streams are served without resume.
    """

    kind = "redis"

    def __init__(
        self,
        url: str,
        *,
        owner: str,
        max_events_per_stream: int = 100_000,
        max_bytes: int = 256 << 20,
        ttl_s: float = 300.0,
        lease_s: float = 5.0,
        grace_s: float = 30.0,
        prefix: str = "tw",
        socket_timeout_s: float = 5.0,
        max_connections: int = 10_000,
    ) -> None:
        self.url = url
        self.owner = owner
        self.max_events = max_events_per_stream
        self.max_bytes = max_bytes
        self.ttl_ms = max(1, round(ttl_s * 1000))
        self.lease_ms = max(1, round(lease_s * 1000))
        # An owner renews its keys' TTL with its lease; should it die, they
        # outlive it long enough for a resume to see the stream end.
        self.idle_ms = self.ttl_ms + self.lease_ms + max(1, round(grace_s * 1000))
        self.prefix = prefix
        self.channel = f"{prefix}:cancel"
        client, self._errors, self._unreachable = _redis()
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff

        self.health = _Health(_redacted(url))
        self.full = False
        # Every resume being followed holds a connection in XREAD BLOCK.
        # One quick retry covers a pooled connection that went stale with a
        # Redis restart; anything longer would hold up a stream's start.
        self.redis: aioredis.Redis = client.Redis.from_url(
            url,
            socket_timeout=socket_timeout_s,
            socket_connect_timeout=min(socket_timeout_s, 2.0),
            retry=Retry(NoBackoff(), 1),
            max_connections=max_connections,
            protocol=2,
        )
        self._listener: asyncio.Task[None] | None = None
        # The multiplexed follow: its own connection, since XREAD BLOCK holds it.
        self._follow_client: aioredis.Redis = client.Redis.from_url(
            url,
            socket_timeout=socket_timeout_s,
            socket_connect_timeout=min(socket_timeout_s, 2.0),
            retry=Retry(NoBackoff(), 0),
            single_connection_client=True,
            protocol=2,
        )
        # The follow parses XREAD replies itself: redis-py's callback builds a dict
        # per entry, a good part of a busy replica's CPU.
        self._follow_client.set_response_callback("XREAD", _raw_reply)
        self._follows: dict[str, list[_Follow]] = {}
        self._follower: asyncio.Task[None] | None = None
        self._follow_wake: asyncio.Event | None = None
        self._follow_id: int | None = None  # CLIENT ID of that connection
        self._blocked = False
        self._touches: set[str] = set()
        # Loops check this too: a cancel that lands inside a redis-py call is not
        # always passed on (seen with redis-py 8 on a single-connection client).
        self._stopping = False

    def keys(self, request_id: str) -> tuple[str, str, str, str]:
        """(meta, stream, lease, reader) keys of a stream."""
        base = f"{self.prefix}:{{{request_id}}}"
        return f"{base}:m", f"{base}:s", f"{base}:l", f"{base}:r"

    # -- plumbing ------------------------------------------------------------------

    def _failure(self, exc: BaseException) -> ResumeStoreError:
        """A redis-py error as the store's own: only an outage marks Redis as down."""
        if isinstance(exc, self._errors.MaxConnectionsError):
            return StoreUnavailable(f"no free Redis connection: {exc}")  # busy, not down
        if isinstance(exc, self._unreachable):
            return self.health.failed(exc)
        return StoreRefused(f"{type(exc).__name__}: {exc}")

    async def call(self, *args: Any) -> Any:
        """One command, with the health check around it. Raises ``ResumeStoreError``."""
        return await self._command(self.redis, args)

    async def _command(self, client: aioredis.Redis, args: Sequence[Any]) -> Any:
        self.health.check()
        try:
            result = await client.execute_command(*args)  # type: ignore[no-untyped-call]
        except (self._errors.RedisError, OSError) as exc:
            raise self._failure(exc) from None
        self.health.ok()
        return result

    async def _pipeline(self, commands: Sequence[Sequence[Any]]) -> list[Any]:
        """Run ``commands`` in one round trip; a refused command's result is its exception.

        ``EVALSHA`` is retried once with the scripts loaded when Redis does not
        know them (a restarted server).
        """
        self.health.check()
        try:
            results = await self._run_pipeline(commands)
            if any(isinstance(r, self._errors.NoScriptError) for r in results):
                await self._load_scripts()
                results = await self._run_pipeline(commands)
        except (self._errors.RedisError, OSError) as exc:
            raise self._failure(exc) from None
        self.health.ok()
        return results

    async def _run_pipeline(self, commands: Sequence[Sequence[Any]]) -> list[Any]:
        pipe = self.redis.pipeline(transaction=False)
        for command in commands:
            pipe.execute_command(*command)
        results: list[Any] = await pipe.execute(raise_on_error=False)
        for result in results:
            if isinstance(result, self._unreachable):
                raise result
        return results

    async def _load_scripts(self) -> None:
        for body in _SCRIPTS.values():
            await self.redis.execute_command("SCRIPT", "LOAD", body)  # type: ignore[no-untyped-call]

    @staticmethod
    def _script(name: str, keys: Sequence[str], args: Iterable[Any]) -> list[Any]:
        return ["EVALSHA", _SHAS[name], len(keys), *keys, *args]

    async def _eval(self, name: str, keys: Sequence[str], args: Iterable[Any]) -> Any:
        (result,) = await self._pipeline([self._script(name, keys, args)])
        if isinstance(result, Exception):
            raise StoreRefused(f"{name}: {result}")
        return result

    # -- Store -------------------------------------------------------------------------

    async def start(self, on_cancel: Callable[[str], None]) -> None:
        if self._listener is None:
            self._stopping = False
            self._listener = asyncio.get_running_loop().create_task(self._listen(on_cancel))

    async def _listen(self, on_cancel: Callable[[str], None]) -> None:
        """Hear cancels published by any replica; reconnect after a failure."""
        while not self._stopping:
            pubsub = self.redis.pubsub()
            try:
                await pubsub.subscribe(self.channel)
                async for message in pubsub.listen():
                    if self._stopping:
                        return
                    if message.get("type") == "message":
                        request_id = _text(message.get("data"))
                        if request_id:
                            on_cancel(request_id)
            except self._unreachable as exc:
                self.health.failed(exc)
            finally:
                with contextlib.suppress(Exception):
                    await pubsub.aclose()  # type: ignore[no-untyped-call]
            # Heartbeats pick up cancel flags set meanwhile.
            await asyncio.sleep(1.0)

    async def aclose(self) -> None:
        self._stopping = True
        follower = self._follower
        if follower is not None:
            # Let it stop by itself rather than cancel it in the middle of a command.
            if self._follow_wake is not None:
                self._follow_wake.set()
            if self._blocked and self._follow_id is not None:
                with contextlib.suppress(ResumeStoreError):
                    await self.call("CLIENT", "UNBLOCK", self._follow_id)
            await asyncio.wait([follower], timeout=FOLLOW_BLOCK_S + 1.0)
            if not follower.done():
                await _stop(follower)
        if self._listener is not None:
            await _stop(self._listener)
        self._listener = self._follower = None
        for follows in self._follows.values():
            for follow in follows:
                follow.fail(StoreUnavailable("the store was closed"))
        self._follows.clear()
        with contextlib.suppress(Exception):
            await self._follow_client.aclose()
        with contextlib.suppress(Exception):
            await self.redis.aclose()

    # -- the multiplexed follow ------------------------------------------------------

    async def _follow(self, follow: _Follow) -> None:
        self._follows.setdefault(follow.key, []).append(follow)
        if self._follower is None or self._follower.done():
            self._follow_wake = asyncio.Event()
            self._follower = asyncio.get_running_loop().create_task(self._follow_loop())
        assert self._follow_wake is not None
        self._follow_wake.set()
        if self._blocked and self._follow_id is not None:
            # The loop is blocked on the old set of keys: make it start over.
            with contextlib.suppress(ResumeStoreError):
                await self.call("CLIENT", "UNBLOCK", self._follow_id)

    def unfollow(self, follow: _Follow) -> None:
        follows = self._follows.get(follow.key)
        if follows is not None and follow in follows:
            follows.remove(follow)
            if not follows:
                del self._follows[follow.key]

    async def _follow_loop(self) -> None:
        """One ``XREAD BLOCK`` at a time for every stream read on this replica."""
        wake = self._follow_wake
        assert wake is not None
        next_touch = 0.0
        while not self._stopping:
            if not self._follows:
                wake.clear()
                await wake.wait()
                continue
            now = time.monotonic()
            if self._touches and now >= next_touch:
                next_touch = now + READER_TOUCH_S
                await self._flush_touches()
            # Each key from the furthest-behind reader of it; the others skip what they had.
            starts = {key: min(f.next for f in fs) for key, fs in self._follows.items()}
            try:
                if self._follow_id is None:
                    self._follow_id = await self._follow_command("CLIENT", "ID")
                self._blocked = True
                try:
                    raw = await self._follow_command(
                        "XREAD",
                        "COUNT",
                        READ_BATCH,
                        "BLOCK",
                        round(FOLLOW_BLOCK_S * 1000),
                        "STREAMS",
                        *starts,
                        *(f"0-{start}" for start in starts.values()),
                    )
                finally:
                    self._blocked = False
            except ResumeStoreError as exc:
                self._follow_id = None
                if self._stopping:
                    return
                for follows in list(self._follows.values()):
                    for follow in follows:
                        follow.fail(exc)
                await asyncio.sleep(0.1)
                continue
            for key, entries in _xread_all(raw):
                for follow in self._follows.get(key, ()):
                    follow.deliver(entries)

    async def _follow_command(self, *args: Any) -> Any:
        return await self._command(self._follow_client, args)

    async def _flush_touches(self) -> None:
        touches, self._touches = self._touches, set()
        ttl = round(READER_TTL_S * 1000)
        with contextlib.suppress(ResumeStoreError):
            await self._pipeline([["SET", self.keys(i)[3], "1", "PX", ttl] for i in touches])

    async def create(self, request_id: str, info: StreamInfo) -> Created:
        if self.full:
            return Created.FULL
        meta, _stream, lease, _reader = self.keys(request_id)
        args = [info.owner, info.model, info.created, self.lease_ms, self.idle_ms]
        created = await self._eval("create", [meta, lease], args)
        return Created.CREATED if created == 1 else Created.EXISTS

    async def commit(self, appends: Sequence[Append]) -> set[str]:
        commands: list[list[Any]] = []
        for append in appends:
            meta, stream, lease, _reader = self.keys(append.request_id)
            if len(append.entries) == 1 and not append.first and append.end is None:
                # The common case of a paced stream: one event, one command.
                entry = append.entries[0]
                commands.append(
                    ["XADD", stream, "NOMKSTREAM", "MAXLEN", "~", self.max_events]
                    + [f"0-{entry.seq + 1}", "t", entry.type, "f", entry.frame]
                )
                continue
            args: list[Any] = [
                self.owner,
                self.max_events,
                append.end or "",
                self.ttl_ms,
                self.idle_ms,
                "1" if append.first else "0",
            ]
            for entry in append.entries:
                args += [f"0-{entry.seq + 1}", entry.type, entry.frame]
            commands.append(self._script("append", [meta, stream, lease], args))
        results = await self._pipeline(commands)
        # A script answers 1, an XADD the new ID; nil (no stream), 0 or an error: refused.
        return {
            a.request_id
            for a, r in zip(appends, results, strict=True)
            if r is None or isinstance(r, Exception) or r == 0
        }

    async def open_reader(self, request_id: str, after: int) -> StoreReader:
        meta, stream, _lease, _reader = self.keys(request_id)
        status, raw = await self._pipeline(
            [
                ["HGET", meta, "status"],
                ["XRANGE", stream, f"0-{after + 2}", "+", "COUNT", READ_BATCH],
            ]
        )
        for result in (status, raw):
            if isinstance(result, Exception):
                raise result
        if status is None:
            raise StreamNotFound(request_id)
        first = _entries(raw)
        for expected, entry in enumerate(first, start=after + 1):
            if entry.seq != expected:
                # Trimmed, or a hole a dead replica left (events it sent, never stored).
                raise EventsTrimmed(entry.seq)
        reader = _RedisReader(self, request_id, first, _text(status) != LIVE, after)
        await self._follow(reader._follow)
        return reader

    async def state(self, request_id: str) -> StreamState | None:
        meta, _stream, lease, _reader = self.keys(request_id)
        status, alive = await self._pipeline([["HGET", meta, "status"], ["EXISTS", lease]])
        if status is None or isinstance(status, Exception):
            return None
        return StreamState(_text(status) or LIVE, alive == 1)

    async def request_cancel(self, request_id: str) -> bool:
        meta = self.keys(request_id)[0]
        return bool(await self._eval("cancel", [meta], [self.channel, request_id]) == 1)

    async def touch_reader(self, request_id: str) -> None:
        if not self._touches and not self._follows:
            # Nobody follows here, so no loop will write it soon: now.
            await self._pipeline([["SET", self.keys(request_id)[3], "1", "PX", 3000]])
            return
        self._touches.add(request_id)

    async def readers_seen(self, request_ids: Sequence[str]) -> set[str]:
        if not request_ids:
            return set()
        results = await self._pipeline([["EXISTS", self.keys(i)[3]] for i in request_ids])
        return {i for i, r in zip(request_ids, results, strict=True) if r == 1}

    async def heartbeat(self, request_ids: Sequence[str]) -> tuple[set[str], set[str]]:
        if not request_ids:
            return set(), set()
        commands = []
        for request_id in request_ids:
            meta, stream, lease, _reader = self.keys(request_id)
            args = [self.owner, self.lease_ms, self.idle_ms]
            commands.append(self._script("heartbeat", [meta, stream, lease], args))
        results = await self._pipeline(commands)
        cancel = {i for i, r in zip(request_ids, results, strict=True) if r == 2}
        lost = {i for i, r in zip(request_ids, results, strict=True) if r == 0}
        return cancel, lost

    async def close_orphan(self, request_id: str, code: str, message: str, seen: int = -1) -> bool:
        meta, stream, lease, _reader = self.keys(request_id)
        for _attempt in range(5):
            fields, top = await self._pipeline(
                [
                    ["HMGET", meta, "status", "model", "created"],
                    ["XREVRANGE", stream, "+", "-", "COUNT", 2],
                ]
            )
            if isinstance(fields, Exception) or isinstance(top, Exception):
                return False
            status, model, created = (_text(v) for v in fields)
            if status != LIVE:
                return False
            last = _entries(top)
            info = StreamInfo(model or "", int(created or 0), "")
            top_entry = last[0] if last else None
            entries = closing_entries(request_id, info, top_entry, code, message, seen)
            final = end_status(code)
            if last and last[0].type == "stream.end":
                # Its owner stored the end but died before marking it: mark it as it was.
                final = end_status(_error_code(last[1]) if len(last) > 1 else None)
            top_id = f"0-{last[0].seq + 1}" if last else ""
            args: list[Any] = [top_id, final, self.ttl_ms]
            for entry in entries:
                args += [f"0-{entry.seq + 1}", entry.type, entry.frame]
            result = await self._eval("close_orphan", [meta, lease, stream], args)
            if result != -1:
                return bool(result == 1)
        return False

    async def discard(self, request_id: str) -> None:
        await self._eval("discard", list(self.keys(request_id)), [self.owner])

    async def housekeeping(self) -> None:
        info = await self.call("INFO", "memory")
        used = int(info.get("used_memory", 0)) if isinstance(info, dict) else 0
        self.full = used >= self.max_bytes


# --- One resumable stream ------------------------------------------------------------------------


class _Session:
    """A resumable stream's recording and the generation task the manager owns.

    Implements ``tokenwire.server.ResumeSession``.
    """

    def __init__(self, manager: ResumeManager, request_id: str, info: StreamInfo) -> None:
        self.manager = manager
        self.request_id = request_id
        self.info = info
        self.pending: list[Entry] = []
        self.last: Entry | None = None
        self.error_code: str | None = None
        self.recording = True
        self.first_commit = True
        self.closed = False
        self.end_sent = False
        self.end_committed = False
        self.task: asyncio.Task[None] | None = None
        self.attached = True
        self.last_reader = math.inf  # while attached, the original client is the reader
        self.next_reader_check = 0.0
        self._cancel: tuple[str, str] | None = None
        self.cancel_deadline: float | None = None

    # -- server.ResumeSession --------------------------------------------------------

    def record(self, events: list[ev.Event], frames: list[bytes]) -> None:
        if not self.recording:
            return
        for event, frame in zip(events, frames, strict=True):
            seq = event.seq if event.seq is not None else (self.last.seq + 1 if self.last else 0)
            entry = Entry(seq, event.type, frame)
            self.pending.append(entry)
            self.last = entry
            if isinstance(event, ev.ErrorEvent) and self.error_code is None:
                self.error_code = event.code
        if len(self.pending) > self.manager.max_pending:
            # The store is not keeping up (or hangs): stop recording rather than
            # hold the whole stream in memory.
            self.manager.lose(self)
            return
        self.manager.mark_dirty(self)

    def run(self, task: asyncio.Task[None]) -> None:
        self.task = task
        task.add_done_callback(self._task_done)

    def detach(self) -> None:
        if self.attached and not self.closed:
            self.attached = False
            self.last_reader = self.manager.clock()

    def cancel_reason(self) -> tuple[str, str] | None:
        return self._cancel

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.manager.mark_dirty(self)

    # -- the manager's side -----------------------------------------------------------

    def cancel(self, code: str, message: str) -> bool:
        """Stop the generation; the stream ends with ``error`` ``code``. False if it is over."""
        task = self.task
        if task is None or task.done() or self._cancel is not None:
            return task is not None and not task.done()
        self._cancel = (code, message)
        task.cancel()
        self.cancel_deadline = self.manager.clock() + CLEANUP_S
        return True

    def _task_done(self, task: asyncio.Task[None]) -> None:
        if not self.closed:
            # Cancelled before it ran: nothing ended the stream, so end it here.
            code, message = self._cancel or ("internal_error", "internal error")
            closing = closing_entries(self.request_id, self.info, self.last, code, message)
            if closing:
                self.error_code = self.error_code or code
                self.pending += closing
                self.last = closing[-1]
            self.close()
        self.manager.forget_if_done(self)

    def take(self) -> Append | None:
        """What the next commit should write for this stream, or ``None``."""
        if not self.recording:
            return None
        ending = self.closed and not self.end_sent
        if not self.pending and not ending:
            return None
        entries, self.pending = self.pending, []
        end = None
        if ending:
            self.end_sent = True
            end = end_status(self.error_code)
        first, self.first_commit = self.first_commit, False
        return Append(self.request_id, entries, end, first)


# --- The manager -------------------------------------------------------------------------------


class ResumeManager:
    """Makes streams resumable: implements ``tokenwire.server.Resumption``.

    Owns the live sessions (the cancel registry), the flusher that commits
    their events to the store, and a housekeeping task (grace periods, leases,
    cancels from other replicas, store expiry). ``endpoint`` is the ASGI app of
    ``GET``/``DELETE /v1/streams/{request_id}``. Background tasks start with
    ``start()`` (the app's lifespan) or lazily with the first resumable stream.
    """

    def __init__(
        self,
        store: Store,
        *,
        default: bool = False,
        grace_s: float = 30.0,
        lease_s: float = 5.0,
        keepalive_s: float = 15.0,
        max_pending: int = 100_000,
        replica: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.default = default
        self.grace_s = grace_s
        self.lease_s = lease_s
        self.keepalive_s = keepalive_s
        self.max_pending = max_pending
        self.replica = replica or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.clock = clock
        self.live: dict[str, _Session] = {}
        self._dirty: dict[str, _Session] = {}
        self._wake: asyncio.Event | None = None
        self._flusher: asyncio.Task[None] | None = None
        self._ticker: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closing = False
        self._full_logged = False
        self._discards: set[str] = set()
        self.endpoint = ResumeEndpoint(self)

    # -- lifecycle --------------------------------------------------------------------

    async def start(self) -> None:
        """Start the background tasks in the running loop (idempotent)."""
        loop = asyncio.get_running_loop()
        if self._loop is loop:
            return
        self._loop = loop
        self._closing = False
        self._wake = asyncio.Event()
        self._flusher = loop.create_task(self._flush_loop())
        self._ticker = loop.create_task(self._tick_loop())
        await self.store.start(self._cancel_from_elsewhere)

    async def aclose(self) -> None:
        """Stop every live generation (its stream ends with ``error``), flush, close the store."""
        if self._loop is None:
            await self.store.aclose()
            return
        tasks = []
        for session in list(self.live.values()):
            session.cancel("overloaded", SHUTDOWN_MESSAGE)
            if session.task is not None and not session.task.done():
                tasks.append(session.task)
        if tasks:
            await asyncio.wait(tasks, timeout=CLEANUP_S)
        self._closing = True
        if self._ticker is not None:
            await _stop(self._ticker)
        if self._flusher is not None:
            # It returns once everything recorded is committed.
            assert self._wake is not None
            self._wake.set()
            await asyncio.wait([self._flusher], timeout=CLEANUP_S)
            if not self._flusher.done():
                await _stop(self._flusher)
        self._loop = self._flusher = self._ticker = self._wake = None
        await self.store.aclose()

    # -- server.Resumption -------------------------------------------------------------

    def wants(self, request: Request) -> bool:
        """Whether ``request`` is resumable: its extension, else the configured default."""
        value = request.extension(EXTENSION)
        return value if isinstance(value, bool) else self.default

    async def open(self, request: Request, record: StreamRecord) -> tuple[Request, _Session | None]:
        """See ``tokenwire.server.Resumption.open``."""
        if not self.wants(request):
            return request, None
        await self.start()
        request_id = request.request_id
        if not request_id:
            request_id = str(uuid.uuid4())
            metadata = dict(request.metadata or {})
            metadata["request_id"] = request_id
            request = msgspec.structs.replace(request, metadata=metadata)
        elif len(request_id) > MAX_REQUEST_ID:
            raise InvalidRequest(
                f"a resumable stream's request_id has at most {MAX_REQUEST_ID} characters",
                path="metadata.request_id",
            )
        if request_id in self.live:
            raise _conflict(request_id)
        info = StreamInfo(request.model, int(time.time()), self.replica)
        try:
            created = await self.store.create(request_id, info)
        except StoreUnavailable:
            return request, None  # served live; the store logged why
        if created is Created.EXISTS:
            raise _conflict(request_id)
        if created is Created.FULL:
            if not self._full_logged:
                self._full_logged = True
                _log(logging.WARNING, "resume_store_full", backend=self.store.kind)
            return request, None
        if self._full_logged:
            self._full_logged = False
            _log(logging.WARNING, "resume_store_has_room", backend=self.store.kind)
        session = _Session(self, request_id, info)
        self.live[request_id] = session
        return request, session

    # -- the registry ---------------------------------------------------------------------

    def cancel_local(self, request_id: str, code: str, message: str) -> bool:
        """Cancel a generation running here. False when it is not (or no longer) here."""
        session = self.live.get(request_id)
        return session is not None and session.cancel(code, message)

    def _cancel_from_elsewhere(self, request_id: str) -> None:
        self.cancel_local(request_id, "cancelled", CANCEL_MESSAGE)

    def mark_dirty(self, session: _Session) -> None:
        self._dirty[session.request_id] = session
        if self._wake is not None:
            self._wake.set()

    def lose(self, session: _Session) -> None:
        """Stop recording ``session``: the stored stream could no longer be complete."""
        if not session.recording:
            return
        session.recording = False
        session.pending = []
        # Its partial record goes (a resume then answers 404), now or once the
        # store answers again.
        self._discards.add(session.request_id)
        self.forget_if_done(session)

    async def _discard_lost(self) -> None:
        for request_id in list(self._discards):
            try:
                await self.store.discard(request_id)
            except StoreUnavailable:
                return  # the next tick tries again
            except ResumeStoreError:
                pass  # refused: nothing more to do about it
            self._discards.discard(request_id)

    def forget_if_done(self, session: _Session) -> None:
        task = session.task
        if (task is None or task.done()) and (session.end_committed or not session.recording):
            if self.live.get(session.request_id) is session:
                del self.live[session.request_id]

    # -- the flusher -----------------------------------------------------------------------

    async def _flush_loop(self) -> None:
        wake = self._wake
        assert wake is not None
        while True:
            if not self._dirty:
                if self._closing:
                    return
                await wake.wait()
                wake.clear()
            await self.flush()

    async def flush(self) -> None:
        """Commit everything recorded so far (in batches of ``COMMIT_BATCH`` streams)."""
        while self._dirty:
            batch, self._dirty = self._dirty, {}
            sessions = list(batch.values())
            for start in range(0, len(sessions), COMMIT_BATCH):
                chunk = sessions[start : start + COMMIT_BATCH]
                appends = [(s, a) for s in chunk if (a := s.take()) is not None]
                if not appends:
                    continue
                try:
                    refused = await self.store.commit([a for _s, a in appends])
                except StoreUnavailable:
                    refused = {a.request_id for _s, a in appends}  # the store logged it
                except ResumeStoreError as exc:
                    _log(logging.ERROR, "resume_commit_failed", error=str(exc)[:200])
                    refused = {a.request_id for _s, a in appends}
                for session, append in appends:
                    if append.request_id in refused:
                        self.lose(session)
                    elif append.end is not None:
                        session.end_committed = True
                        self.forget_if_done(session)

    # -- housekeeping ------------------------------------------------------------------------

    async def _tick_loop(self) -> None:
        next_beat = next_house = 0.0
        while not self._closing:
            await asyncio.sleep(TICK_S)
            now = self.clock()
            self._escalate(now)
            steps: list[Callable[[], Awaitable[None]]] = [functools.partial(self._check_grace, now)]
            if self._discards:
                steps.append(self._discard_lost)
            if now >= next_beat:
                next_beat = now + self.lease_s / 3
                steps.append(self._heartbeat)
            if now >= next_house:
                next_house = now + HOUSEKEEPING_S
                steps.append(self.store.housekeeping)
            for step in steps:
                # Each on its own: a failing one must not hold up the others.
                try:
                    await step()
                except StoreUnavailable:
                    pass  # the store logged it; the next tick tries again
                except ResumeStoreError as exc:
                    _log(logging.ERROR, "resume_housekeeping_failed", error=str(exc)[:200])

    def _escalate(self, now: float) -> None:
        for session in self.live.values():
            deadline, task = session.cancel_deadline, session.task
            if deadline is not None and now >= deadline and task is not None:
                session.cancel_deadline = None
                if not task.done():
                    task.cancel()  # a provider gets CLEANUP_S to clean up, as in server.py

    async def _check_grace(self, now: float) -> None:
        due = [
            s
            for s in self.live.values()
            if not s.attached
            and s.task is not None
            and not s.task.done()
            and s._cancel is None
            and now >= s.next_reader_check
        ]
        if not due:
            return
        for session in due:
            session.next_reader_check = now + READER_TOUCH_S
        try:
            seen = await self.store.readers_seen([s.request_id for s in due if s.recording])
        except ResumeStoreError:
            seen = set()  # a store that is down has no readers: the grace period runs on
        for session in due:
            if not session.recording:
                # Its record was lost: nobody can resume it, so nobody will read it.
                session.cancel("cancelled", LOST_MESSAGE)
            elif session.request_id in seen:
                session.last_reader = now
            elif now - session.last_reader >= self.grace_s:
                session.cancel("cancelled", GRACE_MESSAGE.format(grace_s=self.grace_s))

    async def _heartbeat(self) -> None:
        owned = [s.request_id for s in self.live.values() if s.recording and not s.end_committed]
        cancel, lost = await self.store.heartbeat(owned)
        for request_id in cancel:
            self.cancel_local(request_id, "cancelled", CANCEL_MESSAGE)
        for request_id in lost:
            session = self.live.get(request_id)
            if session is not None:
                self.lose(session)


def _conflict(request_id: str) -> ResumeConflict:
    return ResumeConflict(
        "this request_id names a stored stream: resume it with "
        "GET /v1/streams/{request_id}, or send a new request_id"
    )


# --- The route: GET / DELETE /v1/streams/{request_id} ---------------------------------------


def parse_after(headers: Iterable[tuple[bytes, bytes]], query_string: bytes) -> int:
    """The seq to resume after: ``Last-Event-ID``, else ``?after=``, else -1 (from the start).

    The header wins: a browser's ``EventSource`` updates it on every
    reconnect, not its URL. Raises ``ValueError`` for a value that is not a
    seq (a non-negative integer, §5.2.1).
    """
    value: str | None = None
    for name, raw in headers:
        if name == b"last-event-id":
            value = raw.decode("latin-1").strip() or None
    if value is None:
        values = parse_qs(query_string.decode("latin-1")).get("after")
        value = values[-1].strip() if values else None
    if value is None:
        return -1
    if not value.isdigit() or not value.isascii() or len(value) > 16:
        raise ValueError(f"{value!r} is not a seq")
    return int(value)


class ResumeEndpoint:
    """ASGI app of ``/v1/streams/{request_id}``: ``GET`` resumes, ``DELETE`` cancels.

    ``GET`` answers 200 ``text/event-stream`` with the stored frames after the
    seq, then the live ones up to ``stream.end``; 204 when the client already
    has ``stream.end`` (a browser ``EventSource`` then stops reconnecting); 400
    for a bad ``Last-Event-ID``/``after``; 404 for an unknown or expired id;
    410 when those events were trimmed (``max_events_per_stream``); 503 when
    the store is unreachable. ``DELETE`` answers 200 ``{"request_id", "status"}``
    once the stream has ended (``cancelled``, or how it ended before), 202
    ``cancelling`` if its replica has not ended it yet, 404 for an unknown id.
    """

    def __init__(self, manager: ResumeManager) -> None:
        self.manager = manager

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            raise RuntimeError(f"ResumeEndpoint serves HTTP only, not {scope['type']!r}")
        request_id = str(scope.get("path_params", {}).get("request_id", ""))
        if not request_id:
            request_id = scope.get("path", "").rstrip("/").rpartition("/")[2]
        method = scope.get("method", "GET")
        await self.manager.start()
        if method in ("GET", "HEAD"):
            await self._resume(scope, receive, send, request_id, head=method == "HEAD")
        elif method == "DELETE":
            await self._cancel(send, request_id)
        else:
            await send_json_error(
                send,
                405,
                "method_not_allowed",
                f"{method} is not allowed",
                headers=[(b"allow", b"GET, HEAD, DELETE")],
            )

    # -- GET ---------------------------------------------------------------------------

    async def _resume(
        self, scope: Scope, receive: Receive, send: Send, request_id: str, *, head: bool
    ) -> None:
        started = time.perf_counter()
        store = self.manager.store
        try:
            after = parse_after(scope.get("headers", ()), scope.get("query_string", b""))
        except ValueError as exc:
            await send_json_error(send, 400, "invalid_request", str(exc), "Last-Event-ID")
            return
        try:
            reader = await store.open_reader(request_id, after)
        except StreamNotFound:
            await send_json_error(
                send, 404, "stream_not_found", "no stored stream has this request_id"
            )
            return
        except EventsTrimmed as exc:
            await send_json_error(
                send,
                410,
                "events_trimmed",
                f"the events after seq {after} are no longer all stored "
                f"(the next one kept is seq {exc.first_seq})",
            )
            return
        except StoreUnavailable:
            await send_json_error(
                send, 503, "resume_unavailable", "the resume store cannot be reached"
            )
            return
        try:
            await self._serve(receive, send, request_id, reader, after, started, head=head)
        finally:
            reader.close()

    async def _serve(
        self,
        receive: Receive,
        send: Send,
        request_id: str,
        reader: StoreReader,
        after: int,
        started: float,
        *,
        head: bool,
    ) -> None:
        if not reader.first and reader.finished:
            await send({"type": "http.response.start", "status": 204, "headers": []})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
        if head:
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        sent = [0]
        follower = asyncio.get_running_loop().create_task(
            self._follow(send, request_id, reader, after, sent)
        )
        watcher = asyncio.get_running_loop().create_task(_wait_disconnect(receive))
        try:
            await asyncio.wait([follower, watcher], return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (follower, watcher):
                task.cancel()
            await asyncio.wait([follower, watcher], timeout=CLEANUP_S)
        complete = (
            follower.done()
            and not follower.cancelled()
            and follower.exception() is None
            and follower.result()
        )
        if complete:
            with contextlib.suppress(OSError):
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        _log(
            logging.INFO,
            "resume",
            request_id=request_id,
            after=after,
            events=sent[0],
            complete=bool(complete),
            disconnected=watcher.done() and not watcher.cancelled(),
            duration_ms=round((time.perf_counter() - started) * 1000, 3),
        )

    async def _follow(
        self, send: Send, request_id: str, reader: StoreReader, after: int, sent: list[int]
    ) -> bool:
        """Send the stored frames, then the live ones. True once ``stream.end`` went out;
        False when the stream cannot continue (the client resumes again, or gives up)."""
        store = self.manager.store
        clock = time.monotonic
        keepalive_s = self.manager.keepalive_s
        last_sent = last_touch = -math.inf
        entries = reader.first
        seen = after  # the last seq this client has
        while True:
            now = clock()
            if now - last_touch >= READER_TOUCH_S:
                last_touch = now
                with contextlib.suppress(ResumeStoreError):
                    await store.touch_reader(request_id)
            if entries:
                body = b"".join(entry.frame for entry in entries)
                try:
                    await send({"type": "http.response.body", "body": body, "more_body": True})
                except OSError:
                    return False
                sent[0] += len(entries)
                seen = entries[-1].seq
                last_sent = clock()
                if entries[-1].type == "stream.end":
                    return True
            elif clock() - last_sent >= keepalive_s:
                try:
                    await send({"type": "http.response.body", "body": KEEPALIVE, "more_body": True})
                except OSError:
                    return False
                last_sent = clock()
            try:
                entries = await reader.next(min(FOLLOW_BLOCK_S, keepalive_s))
                if not entries:
                    state = await store.state(request_id)
                    if state is None:
                        return False  # expired or discarded meanwhile
                    if state.status != LIVE:
                        # Ended: its last entries may have landed just after the read;
                        # if not, the client asked for more than the stream has.
                        entries = await reader.next(0)
                        if not entries:
                            return False
                    elif not state.owner_alive and request_id not in self.manager.live:
                        # "Every stream ends" (DESIGN.md): the replica generating it is
                        # gone, so end it here; the next read returns that end.
                        await store.close_orphan(request_id, "internal_error", ORPHAN_MESSAGE, seen)
            except ResumeStoreError:
                return False  # gone, trimmed past us, or unreachable: the client resumes again

    # -- DELETE ---------------------------------------------------------------------------

    async def _cancel(self, send: Send, request_id: str) -> None:
        manager = self.manager
        store = manager.store
        try:
            state = await store.state(request_id)
            if state is None:
                await send_json_error(
                    send, 404, "stream_not_found", "no stored stream has this request_id"
                )
                return
            if state.status == LIVE:
                if not manager.cancel_local(request_id, "cancelled", CANCEL_MESSAGE):
                    if state.owner_alive:
                        await store.request_cancel(request_id)
                    else:
                        await store.close_orphan(request_id, "cancelled", CANCEL_MESSAGE)
                deadline = time.monotonic() + CLEANUP_S + manager.lease_s + 1.0
                while state is not None and state.status == LIVE:
                    if time.monotonic() >= deadline:
                        break
                    await asyncio.sleep(0.02)
                    state = await store.state(request_id)
        except StoreUnavailable:
            await send_json_error(
                send, 503, "resume_unavailable", "the resume store cannot be reached"
            )
            return
        status = CANCELLED if state is None else state.status
        code = 202 if status == LIVE else 200
        body = {"request_id": request_id, "status": "cancelling" if status == LIVE else status}
        _log(logging.INFO, "cancel", request_id=request_id, status=body["status"])
        await send_json(send, code, msgspec.json.encode(body))


async def _wait_disconnect(receive: Receive) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return


# --- Construction ---------------------------------------------------------------------------------


def build_manager(config: ResumeConfig, *, keepalive_s: float = 15.0) -> ResumeManager:
    """The ``ResumeManager`` for a ``[resume]`` table: its store, limits and timings."""
    replica = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    store: Store
    if config.backend == "redis":
        assert config.url is not None  # config.parse checked it
        store = RedisStore(
            config.url,
            owner=replica,
            max_events_per_stream=config.max_events_per_stream,
            max_bytes=config.max_bytes,
            ttl_s=config.ttl_s,
            lease_s=config.lease_s,
            grace_s=config.grace_s,
        )
    else:
        store = MemoryStore(
            max_events_per_stream=config.max_events_per_stream,
            max_bytes=config.max_bytes,
            ttl_s=config.ttl_s,
        )
    return ResumeManager(
        store,
        default=config.default,
        grace_s=config.grace_s,
        lease_s=config.lease_s,
        keepalive_s=keepalive_s,
        max_pending=config.max_events_per_stream,
        replica=replica,
    )
