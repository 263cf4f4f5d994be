"""The resume manager: which streams are resumable, their sessions, and the tasks
that commit their events and run their housekeeping (docs/scaling.md).

The generation's task of a resumable stream belongs to the manager, not to the
HTTP request, so a hang-up does not cancel it: it goes on for ``grace_s``
without any reader (a resume in progress, on any replica, counts as a reader),
then it is cancelled and the stored stream ends with ``error`` (code
``cancelled``, docs/extensions.md) + ``stream.end``. A single flusher task
commits every session's new events to the ``Store`` in batches.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable

import msgspec

from ...errors import InvalidRequest
from ...request import Request
from ...server import CLEANUP_S, ResumeConflict, StreamRecord
from ..config import ResumeConfig
from .access import credential_digest, new_token, same_caller, scoped, token_digest
from .memory import MemoryStore
from .redis import RedisStore
from .session import RECORDING, TERMINAL, UNREAD, Session
from .store import (
    CANCEL_MESSAGE,
    COMMIT_BATCH,
    COMMIT_RETRY_S,
    EXTENSION,
    GRACE_MESSAGE,
    HOUSEKEEPING_S,
    LOST_MESSAGE,
    MAX_REQUEST_ID,
    READER_TOUCH_S,
    RENEWALS_PER_LEASE,
    REPLAY_TAIL,
    SHUTDOWN_MESSAGE,
    TICK_S,
    Append,
    Created,
    ResumeStoreError,
    Store,
    StoreUnavailable,
    StreamInfo,
    Unreached,
    log,
    stop_task,
)

__all__ = ["ResumeManager", "build_manager"]


class ResumeManager:
    """Makes streams resumable: implements ``tokenwire.server.Resumption``.

    Owns the live sessions (the cancel registry), the flusher that commits
    their events to the store, and a housekeeping task (grace periods, leases,
    cancels from other replicas, store expiry). Background tasks start with
    ``start()`` (the app's lifespan) or lazily with the first resumable stream.
    The app serves ``GET``/``DELETE /v1/streams/{request_id}`` with an
    ``endpoint.ResumeEndpoint`` of it.
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
        # Only a store that can lose acknowledged writes (Redis failing over) needs a tail.
        self.replay_tail = REPLAY_TAIL if store.kind == "redis" else 0
        self.replica = replica or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.clock = clock
        self.live: dict[str, Session] = {}
        self._dirty: dict[str, Session] = {}
        self._wake: asyncio.Event | None = None
        self._flusher: asyncio.Task[None] | None = None
        self._ticker: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closing = False
        self._full_logged = False
        self._discards: set[str] = set()
        #: A renewal held up by an outage: tried again every tick, not every
        #: lease_s / RENEWALS_PER_LEASE (store.RENEWALS_PER_LEASE).
        self._renew_now = False

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
            await stop_task(self._ticker)
        if self._flusher is not None:
            # It returns once everything recorded is committed.
            assert self._wake is not None
            self._wake.set()
            await asyncio.wait([self._flusher], timeout=CLEANUP_S)
            if not self._flusher.done():
                await stop_task(self._flusher)
        self._loop = self._flusher = self._ticker = self._wake = None
        await self.store.aclose()

    # -- server.Resumption -------------------------------------------------------------

    def wants(self, request: Request) -> bool:
        """Whether ``request`` is resumable: its extension, else the configured default."""
        value = request.extension(EXTENSION)
        return value if isinstance(value, bool) else self.default

    async def open(
        self,
        request: Request,
        record: StreamRecord,
        headers: Iterable[tuple[bytes, bytes]] = (),
    ) -> tuple[Request, Session | None]:
        """See ``tokenwire.server.Resumption.open``.

        ``headers`` are the POST's: a credential among them binds the stream to
        it, and the ``request_id`` is the caller's own (``access.scoped``: one
        namespace per credential). A ``request_id`` the same caller already uses
        is a conflict (409); another caller's use of it changes nothing in the
        answer (docs/scaling.md "Security").
        """
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
        credential = credential_digest(headers)
        # The caller's own namespace (access.scoped): another caller's stream with
        # this request_id is another stream, so the answer cannot tell it exists.
        stream_id = scoped(credential, request_id)
        live = self.live.get(stream_id)
        if live is not None:
            return self._taken(request, live.info, credential)
        token = new_token()
        info = StreamInfo(
            request.model, int(time.time()), self.replica, token_digest(token), credential
        )
        try:
            created = await self.store.create(stream_id, info)
            if created is Created.EXISTS:
                return self._taken(request, await self.store.info(stream_id), credential)
        except StoreUnavailable:
            return request, None  # served live; the store logged why
        if created is Created.FULL:
            if not self._full_logged:
                self._full_logged = True
                log(logging.WARNING, "resume_store_full", backend=self.store.kind)
            return request, None
        if self._full_logged:
            self._full_logged = False
            log(logging.WARNING, "resume_store_has_room", backend=self.store.kind)
        session = Session(self, stream_id, info, token)
        self.live[stream_id] = session
        return request, session

    @staticmethod
    def _taken(
        request: Request, stored: StreamInfo | None, credential: str
    ) -> tuple[Request, Session | None]:
        """A POST whose ``request_id`` is in use: 409 for its own caller, else served live."""
        if stored is None or same_caller(stored, credential):
            raise _conflict()
        return request, None

    @staticmethod
    def stream_id(headers: Iterable[tuple[bytes, bytes]], request_id: str) -> str:
        """The store's id of the stream ``request_id`` of the caller with ``headers``
        (its own namespace, ``access.scoped``)."""
        return scoped(credential_digest(headers), request_id)

    # -- the registry ---------------------------------------------------------------------

    def cancel_local(self, request_id: str, code: str, message: str) -> bool:
        """Cancel a generation running here. False when it is not (or no longer) here."""
        session = self.live.get(request_id)
        return session is not None and session.cancel(code, message)

    def _cancel_from_elsewhere(self, request_id: str) -> None:
        self.cancel_local(request_id, "cancelled", CANCEL_MESSAGE)

    def mark_dirty(self, session: Session) -> None:
        self._dirty[session.request_id] = session
        if self._wake is not None:
            self._wake.set()

    def lose(self, session: Session) -> None:
        """Stop recording ``session``: the stored stream could no longer be complete."""
        if not session.lose():
            return
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

    def forget_if_done(self, session: Session) -> None:
        if session.state in TERMINAL:
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
                except Unreached as exc:
                    # Some streams' node is down (one Cluster primary): those wait in
                    # their sessions, the others are done.
                    refused = exc.result
                    self._requeue([(s, a) for s, a in appends if a.request_id in exc.pending])
                    appends = [(s, a) for s, a in appends if a.request_id not in exc.pending]
                    await asyncio.sleep(COMMIT_RETRY_S)
                except StoreUnavailable:
                    # Unreachable (a restart, a failover): the events wait in their
                    # sessions and go in the next commit, which skips what landed.
                    self._requeue(appends)
                    await asyncio.sleep(COMMIT_RETRY_S)
                    continue
                except ResumeStoreError as exc:
                    log(logging.ERROR, "resume_commit_failed", error=str(exc)[:200])
                    refused = {a.request_id for _s, a in appends}
                for session, append in appends:
                    if append.request_id in refused:
                        self.lose(session)
                    elif append.end is not None:
                        session.committed()
                        self.forget_if_done(session)

    def _requeue(self, appends: list[tuple[Session, Append]]) -> None:
        """Appends the store could not reach: back to their sessions, for the next commit."""
        for session, append in appends:
            session.requeue(append)
            if session.recording:
                self._dirty[session.request_id] = session

    # -- housekeeping ------------------------------------------------------------------------

    async def _tick_loop(self) -> None:
        next_beat = next_house = 0.0
        while not self._closing:
            await asyncio.sleep(TICK_S)
            now = self.clock()
            steps: list[Callable[[], Awaitable[None]]] = [functools.partial(self._check_grace, now)]
            if self._discards:
                steps.append(self._discard_lost)
            if now >= next_beat or self._renew_now:
                next_beat = now + self.lease_s / RENEWALS_PER_LEASE
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
                    log(logging.ERROR, "resume_housekeeping_failed", error=str(exc)[:200])

    async def _check_grace(self, now: float) -> None:
        due = [
            s
            for s in self.live.values()
            if s.state in UNREAD
            and s.task is not None
            and not s.task.done()
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
        owned = [s.request_id for s in self.live.values() if s.state in RECORDING]
        # Until it succeeds: each tick (a lease must outlast an outage shorter than it).
        self._renew_now = True
        try:
            cancel, lost = await self.store.heartbeat(owned)
            self._renew_now = False
        except Unreached as exc:
            # Renewed, except the streams whose node is down: those again next tick.
            cancel, lost = exc.result
        for request_id in cancel:
            self.cancel_local(request_id, "cancelled", CANCEL_MESSAGE)
        for request_id in lost:
            session = self.live.get(request_id)
            if session is not None:
                self.lose(session)


def _conflict() -> ResumeConflict:
    return ResumeConflict(
        "this request_id names a stored stream: resume it with "
        "GET /v1/streams/{request_id}, or send a new request_id"
    )


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
            cluster=config.cluster,
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
