"""The resume store's contract: its values, its errors, and the ``Store`` protocol.

Every store (``memory.MemoryStore``, ``redis.RedisStore``) keeps, per resumable
stream, its events as the exact SSE frames that were sent (``id:`` = seq,
DESIGN.md), what it is (``StreamInfo``: model, owner, and the digests that bind
it to its creator, docs/scaling.md "Security") and whether it is live. The
conformance test (tests/resume/test_store_conformance.py) runs the same
script against each of them.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, Final, NamedTuple, Protocol

import msgspec

from ... import events as ev
from ...errors import TokenwireError
from ..telemetry.logs import LOGGER_NAME, bounded

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
#: The entries a session on the Redis store keeps after committing them, to write
#: back those a failed-over Redis lost (docs/scaling.md, "What a failover loses").
REPLAY_TAIL: Final = 64
#: After a commit found the store unreachable, the pause before the next try (its
#: events wait in the session, bounded by ``max_events_per_stream``).
COMMIT_RETRY_S: Final = 0.25
#: Lease renewals per ``lease_s``. A lease lives ``lease_s`` past the renewal after
#: its last one, so a renewal an outage held up (retried every ``TICK_S``) comes
#: in time when the outage was shorter than ``lease_s``.
RENEWALS_PER_LEASE: Final = 3
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


def log(level: int, msg: str, **fields: Any) -> None:
    """One JSON line on the gateway logger, like the request log (its strings cut,
    ``telemetry.logs.bounded``: a ``request_id`` from a path can be any length)."""
    if logger.isEnabledFor(level):
        line = bounded({"ts": round(time.time(), 3), "msg": msg, **fields})
        logger.log(level, _json.encode(line).decode())


# --- Errors -----------------------------------------------------------------------------


class ResumeStoreError(TokenwireError):
    """Base of the resume store's errors (the gateway maps each to an HTTP status)."""


class StoreUnavailable(ResumeStoreError):
    """The store cannot be reached (Redis down): streams go on, resume does not (503)."""


class Unreached(StoreUnavailable):
    """Some of a batch (a commit, a heartbeat) could not reach Redis: the streams
    in ``pending`` live on a node that is down. The others were done, and
    ``result`` is what the method returns for them. On Redis Cluster one dead
    primary holds up only the streams in its slots."""

    def __init__(self, message: str, pending: set[str], result: Any) -> None:
        super().__init__(message)
        self.pending = pending
        self.result = result


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
    ``retry``: an earlier commit of (some of) these may have landed or not (the
    store was unreachable): what is stored already is skipped, not refused.
    ``replay``: the stream's last entries committed before (the session keeps a
    few, ``REPLAY_TAIL``), for a store that can lose acknowledged writes (a Redis
    primary that died before replicating them): it writes back those it lacks.
    """

    request_id: str
    entries: list[Entry]
    end: str | None
    first: bool
    retry: bool = False
    replay: Sequence[Entry] = ()


class StreamInfo(NamedTuple):
    """What a store keeps about a stream besides its events.

    ``owner`` is the replica generating it. ``token`` and ``credential`` bind it
    to the request that made it (``access``): the digest of its resume token,
    and of the credential headers that request carried (``""``: none). Only
    digests are kept, never the token or the credential.
    """

    model: str
    created: int
    owner: str
    token: str = ""
    credential: str = ""


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
        (the stream is gone, ended, or no longer this owner's). Raises ``Unreached``
        when some could not be written (their ``result``: the refused of the rest)."""
        ...

    async def open_reader(self, request_id: str, after: int) -> StoreReader:
        """A reader of the events after seq ``after`` (-1: all). Raises
        ``StreamNotFound``, ``EventsTrimmed``."""
        ...

    async def state(self, request_id: str) -> StreamState | None: ...

    async def info(self, request_id: str) -> StreamInfo | None:
        """What ``create`` stored for the stream, or ``None`` when there is none."""
        ...

    async def wait_ended(self, request_id: str, timeout: float) -> None:
        """Return once the stream may have ended (or is gone), or after ``timeout``.

        A hint, not a guarantee: the caller checks ``state`` again.
        """
        ...

    async def request_cancel(self, request_id: str) -> bool:
        """Ask the owning replica to cancel. False when the stream is not live."""
        ...

    async def touch_reader(self, request_id: str) -> None: ...

    async def readers_seen(self, request_ids: Sequence[str]) -> set[str]:
        """Those of ``request_ids`` that a reader touched within ``READER_TTL_S``."""
        ...

    async def heartbeat(self, request_ids: Sequence[str]) -> tuple[set[str], set[str]]:
        """Renew this owner's leases. Returns (cancel requested, no longer ours).
        Raises ``Unreached`` when some could not be renewed (``result``: the pair
        for the rest)."""
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


def unscoped(stream_id: str) -> str:
    """The client's ``request_id`` of a stored stream's id (``access.scoped``)."""
    if stream_id.startswith("k:"):
        return stream_id.split(":", 2)[2]
    if stream_id.startswith("a:"):
        return stream_id[2:]
    return stream_id


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
    (§5.2.1: its seqs go on without a gap or a repeat). ``request_id`` is the
    stored id; the events echo the client's (``unscoped``).
    """
    request_id = unscoped(request_id)
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


async def stop_task(task: asyncio.Task[Any], timeout: float = 2.0) -> None:
    """Cancel ``task`` and wait for it, a bounded time (its loop also checks a flag)."""
    for _attempt in range(2):
        task.cancel()
        await asyncio.wait([task], timeout=timeout)
        if task.done():
            return
    log(logging.ERROR, "resume_task_stuck", task=task.get_name())
