"""The Redis store: Redis Streams through redis-py's asyncio client, shared by any
number of replicas (docs/scaling.md).

One stream key per request, entry ID ``0-<seq+1>`` (so "after seq N" is an ID
range and a duplicate or out-of-order write is refused by Redis itself),
``XADD ... MAXLEN ~`` to bound it, ``XREAD BLOCK`` to follow it, a TTL once it
ended. The generating replica holds a lease key it renews every
``lease_s / 3``. If Redis is unreachable, streams are still served live; only
resume is off, and only for the streams on the node that failed: health is
kept per node (redis_health.py), commands go in one pipeline per node, and
while a node is down a watcher re-reads the slot map and asks the slots'
current owner, so a promoted replica is used without waiting for traffic.
redis-py is imported when a ``RedisStore`` is made, never by a gateway on the
memory store.

``cluster=True`` runs it on Redis Cluster: every key of a stream carries the
``{request_id}`` hash tag, so each script and pipeline step touches one slot;
the follow reads each stream on its own (redis_cluster.py) instead of one
``XREAD`` across keys, which Cluster refuses (CROSSSLOT). Cancels and ends go
out with ``PUBLISH``, which Cluster forwards to every node.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from .redis_cluster import ClusterFollower
from .redis_follow import Follower, RedisReader
from .redis_health import Health
from .redis_scripts import (
    SCRIPTS,
    SHAS,
    entries_of,
    error_code_of,
    key_of,
    load_redis,
    raw_reply,
    redacted,
    text_of,
)
from .store import (
    LIVE,
    READ_BATCH,
    RENEWALS_PER_LEASE,
    Append,
    Created,
    Entry,
    EventsTrimmed,
    ResumeStoreError,
    StoreReader,
    StoreRefused,
    StoreUnavailable,
    StreamInfo,
    StreamNotFound,
    StreamState,
    Unreached,
    closing_entries,
    end_status,
    log,
    stop_task,
)

if TYPE_CHECKING:  # redis is imported only when a Redis store is made
    import redis.asyncio as aioredis

__all__ = ["RedisStore"]

#: While a node is down: how often the slot map is read again and the nodes now
#: serving its slots are asked (a promoted replica is used within this, plus a
#: round trip, of its promotion).
WATCH_S = 0.25
#: The owner of a slot this client has no node for (no slot map yet, or uncovered).
UNKNOWN_NODE = "?"


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
    Redis (a primary, with replicas if you like) serves all.

    ``cluster=True``: Redis Cluster (see module doc); ``url`` is any node's,
    and each stream followed here has a read (a connection) of its own.

    ``max_bytes`` is compared with Redis's ``used_memory`` every
    ``HOUSEKEEPING_S``: above it, new streams are served without resume (on
    Cluster: the fullest primary's).
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
        cluster: bool = False,
    ) -> None:
        self.url = url
        self.owner = owner
        self.max_events = max_events_per_stream
        self.max_bytes = max_bytes
        self.ttl_ms = max(1, round(ttl_s * 1000))
        # A lease lives lease_s past the renewal after its last (RENEWALS_PER_LEASE).
        self.lease_ms = max(1, round(lease_s * 1000 * (1 + 1 / RENEWALS_PER_LEASE)))
        # An owner renews its keys' TTL with its lease; should it die, they
        # outlive it long enough for a resume to see the stream end.
        self.idle_ms = self.ttl_ms + self.lease_ms + max(1, round(grace_s * 1000))
        self.prefix = prefix
        self.channel = f"{prefix}:cancel"
        #: Every stream's end is announced here, so a DELETE waits for it, not polls.
        self.ended_channel = f"{prefix}:ended"
        self._ended: dict[str, set[asyncio.Event]] = {}
        client, self._errors, self._unreachable = load_redis()
        #: What a redis-py call may raise (a Cluster's slot errors are not RedisErrors).
        self._redis_errors = (self._errors.RedisError, self._errors.RedisClusterException, OSError)
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff

        self.health = Health(redacted(url))
        self.full = False
        self.cluster = cluster
        # Loops check this too: a cancel that lands inside a redis-py call is not
        # always passed on (seen with redis-py 8 on a single-connection client).
        self._stopping = False
        self._listener: asyncio.Task[None] | None = None
        self._watcher: asyncio.Task[None] | None = None
        #: Set while the listener is subscribed (tests wait on it, not on a sleep).
        self.listening = asyncio.Event()
        self.follower: Follower | ClusterFollower
        if cluster:
            from redis.asyncio.cluster import RedisCluster

            # max_connections is per node here. A dead primary: redis-py re-reads the
            # slots and tries again (a few times, briefly); then it is an outage.
            self.redis: Any = RedisCluster.from_url(
                url,
                socket_timeout=socket_timeout_s,
                socket_connect_timeout=min(socket_timeout_s, 2.0),
                max_connections=max_connections,
                # One quick retry (with the slot map re-read): a dead primary is then
                # an outage at once, and the flusher keeps the events until it is over.
                retry=Retry(NoBackoff(), 1),
                protocol=2,
            )
            # The follow parses XREAD replies itself (see below); nothing else sends XREAD.
            self.redis.set_response_callback("XREAD", raw_reply)
            self._follow_client: Any = self.redis
            self.follower = ClusterFollower(self, self.redis)
            return
        # Every resume being followed holds a connection in XREAD BLOCK.
        # One quick retry covers a pooled connection that went stale with a
        # Redis restart; anything longer would hold up a stream's start.
        self.redis = client.Redis.from_url(
            url,
            socket_timeout=socket_timeout_s,
            socket_connect_timeout=min(socket_timeout_s, 2.0),
            retry=Retry(NoBackoff(), 1),
            max_connections=max_connections,
            protocol=2,
        )
        # The multiplexed follow: its own connection, since XREAD BLOCK holds it.
        # One quick retry too: idle through a Redis restart, that connection is stale,
        # and its first read must not mark a Redis that is back as down again.
        self._follow_client = client.Redis.from_url(
            url,
            socket_timeout=socket_timeout_s,
            socket_connect_timeout=min(socket_timeout_s, 2.0),
            retry=Retry(NoBackoff(), 1),
            single_connection_client=True,
            protocol=2,
        )
        # The follow parses XREAD replies itself: redis-py's callback builds a dict
        # per entry, a good part of a busy replica's CPU.
        self._follow_client.set_response_callback("XREAD", raw_reply)
        self.follower = Follower(self, self._follow_client)

    def keys(self, request_id: str) -> tuple[str, str, str, str]:
        """(meta, stream, lease, reader) keys of a stream."""
        base = f"{self.prefix}:{{{request_id}}}"
        return f"{base}:m", f"{base}:s", f"{base}:l", f"{base}:r"

    # -- plumbing ------------------------------------------------------------------

    def _node_of(self, key: str | None) -> tuple[str, int]:
        """The node serving ``key``'s slot as this client knows it now, and the slot
        (-1: a command without a key). One Redis: its URL and slot 0."""
        if not self.cluster:
            return self.health.where, 0
        if key is None:
            return UNKNOWN_NODE, -1
        slot: int = self.redis.keyslot(key)
        return self._owner(slot), slot

    def _owner(self, slot: int) -> str:
        try:
            return str(self.redis.nodes_manager.get_node_from_slot(slot).name)
        except self._redis_errors:  # no slot map yet, or the slot is uncovered
            return UNKNOWN_NODE

    def _slots_of(self, node: str) -> set[int]:
        """The slots ``node`` serves in this client's slot map."""
        cache = self.redis.nodes_manager.slots_cache
        return {slot for slot, nodes in cache.items() if nodes and nodes[0].name == node}

    def _failure(self, exc: BaseException, node: str, slots: Iterable[int]) -> ResumeStoreError:
        """A redis-py error as the store's own: only an outage marks the node as down."""
        if isinstance(exc, self._errors.MaxConnectionsError):
            return StoreUnavailable(f"no free Redis connection: {exc}")  # busy, not down
        if isinstance(exc, self._unreachable):
            error = self.health.failed(node, exc, (s for s in slots if s >= 0))
            self._watch_while_down()
            return error
        return StoreRefused(f"{type(exc).__name__}: {exc}")

    def _answered(self, key: str | None, slots: Iterable[int]) -> None:
        # Looked up after the command: after a MOVED, the node that answered.
        self.health.ok(self._node_of(key)[0], [s for s in slots if s >= 0])

    async def call(self, *args: Any) -> Any:
        """One command, with the health check around it. Raises ``ResumeStoreError``."""
        return await self._command(self.redis, args)

    async def command(self, client: aioredis.Redis, args: Sequence[Any]) -> Any:
        """One command on ``client``, with the health check around it."""
        return await self._command(client, args)

    async def pipeline(self, commands: Sequence[Sequence[Any]]) -> list[Any]:
        """``commands`` in one round trip per node (see ``_pipeline``)."""
        return await self._pipeline(commands)

    async def _command(self, client: aioredis.Redis, args: Sequence[Any]) -> Any:
        key = key_of(args)
        node, slot = self._node_of(key)
        self.health.check(node)
        try:
            try:
                result = await client.execute_command(*args)  # type: ignore[no-untyped-call]
            except self._unreachable:
                if not await self._answers(node):
                    raise
                # The node answers: one connection went bad (a read cancelled
                # mid-reply), or the client's slot map did. Read the map again and
                # try once more (the store sends only reads this way).
                await self._refresh_slot_map()
                result = await client.execute_command(*args)  # type: ignore[no-untyped-call]
        except self._redis_errors as exc:
            raise await self._outage(exc, node, [slot]) from None
        self._answered(key, [slot])
        return result

    async def _outage(
        self, exc: BaseException, node: str, slots: Iterable[int]
    ) -> ResumeStoreError:
        """``_failure``, except that a Cluster node which still answers ``PING`` is not
        marked down: the error was a connection's or the client's, not the node's."""
        if self.cluster and isinstance(exc, self._unreachable) and await self._answers(node):
            return StoreUnavailable(f"{type(exc).__name__}: {exc}")
        return self._failure(exc, node, slots)

    async def _refresh_slot_map(self) -> None:
        if self.cluster:
            nodes = self.redis.nodes_manager
            # Asked in turn: every node known, so that a seed list left with dead
            # nodes after failovers (the URL's own node among them) still finds one.
            for name, node in list(nodes.nodes_cache.items()):
                nodes.startup_nodes.setdefault(name, node)
            with contextlib.suppress(*self._redis_errors):
                await nodes.initialize()

    async def _answers(self, node: str) -> bool:
        """Whether Cluster node ``node`` answers a ``PING`` now (after a connection error:
        an outage, or one bad connection)."""
        target = self.redis.get_node(node_name=node) if self.cluster else None
        if target is None:
            return False
        try:
            await self.redis.execute_command("PING", target_nodes=target)
        except self._redis_errors:
            return False
        return True

    async def _pipeline(self, commands: Sequence[Sequence[Any]]) -> list[Any]:
        """Run ``commands``, one round trip per node; a refused command's result is its
        exception, and so is (a ``StoreUnavailable``) that of a command for a node
        that is down. Raises ``StoreUnavailable`` when no command reached its node.

        On Cluster each node's commands go on their own, so a dead primary holds up
        only the commands for its slots. ``EVALSHA`` is retried once with the
        scripts loaded when Redis does not know them (a restarted server, a
        promoted replica).
        """
        groups: dict[str, list[int]] = {}
        keys: list[str | None] = []
        slots: list[int] = []
        for i, command in enumerate(commands):
            key = key_of(command)
            node, slot = self._node_of(key)
            groups.setdefault(node, []).append(i)
            keys.append(key)
            slots.append(slot)
        results: list[Any] = [None] * len(commands)

        async def run(node: str, indices: list[int]) -> None:
            group_slots = {slots[i] for i in indices}
            try:
                self.health.check(node)
                got = await self._run_group([commands[i] for i in indices], keys[indices[0]])
            except StoreUnavailable as exc:
                got = [exc] * len(indices)
            except self._redis_errors as exc:
                # A node that still answers is not down: these wait for the next try
                # (a write is not sent twice here; the next commit skips what landed).
                error = await self._outage(exc, node, group_slots)
                if not isinstance(error, StoreUnavailable):
                    raise error from None
                got = [error] * len(indices)
            else:
                self._answered(keys[indices[0]], group_slots)
            for i, result in zip(indices, got, strict=True):
                results[i] = result

        if len(groups) == 1:
            await run(*next(iter(groups.items())))
        else:
            done = await asyncio.gather(
                *(run(node, indices) for node, indices in groups.items()), return_exceptions=True
            )
            for outcome in done:
                if isinstance(outcome, BaseException):
                    raise outcome
        unreached = [r for r in results if isinstance(r, StoreUnavailable)]
        if unreached and len(unreached) == len(results):
            raise unreached[0]
        return results

    async def _run_group(self, commands: Sequence[Sequence[Any]], key: str | None) -> list[Any]:
        results = await self._run_pipeline(commands)
        if any(isinstance(r, self._errors.NoScriptError) for r in results):
            await self._load_scripts(key)
            results = await self._run_pipeline(commands)
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

    async def _load_scripts(self, key: str | None) -> None:
        for body in SCRIPTS.values():
            if self.cluster:
                # The node of the commands that needed them (a replica just promoted
                # has none); a dead primary elsewhere must not stop this one's.
                target = self.redis.get_node_from_key(key) if key else self.redis.PRIMARIES
                await self.redis.execute_command("SCRIPT LOAD", body, target_nodes=target)
            else:
                await self.redis.execute_command("SCRIPT", "LOAD", body)

    # -- while a node is down ------------------------------------------------------

    def _watch_while_down(self) -> None:
        if self._stopping or (self._watcher is not None and not self._watcher.done()):
            return
        self._watcher = asyncio.get_running_loop().create_task(self._watch())

    async def _watch(self) -> None:
        """Until every node answers: read the slot map again and ask the nodes now
        serving the failed slots, so a node's return (or its replica's promotion) is
        seen, and logged, with no traffic to wait for."""
        while not self._stopping and not self.health.available:
            await asyncio.sleep(WATCH_S)
            await self._refresh_slot_map()
            for node, down in list(self.health.down.items()):
                await self._probe(node, down.slots)

    async def _probe(self, node: str, slots: set[int]) -> None:
        """``PING`` the node serving each of ``slots`` now (``node`` itself: once its
        fail-fast pause is over); an answer marks it, and the slots, healthy."""
        if not self.cluster:
            owners = {node: slots}
        else:
            owners = {}
            for slot in slots or ():
                owners.setdefault(self._owner(slot), set()).add(slot)
        for owner, served in owners.items():
            if owner == UNKNOWN_NODE or not self.health.due(owner):
                continue
            try:
                if self.cluster:
                    target = self.redis.get_node(node_name=owner)
                    if target is None:
                        continue  # gone from the slot map: a later read has its heir
                    await self.redis.execute_command("PING", target_nodes=target)
                else:
                    await self.redis.execute_command("PING")
            except self._redis_errors as exc:
                if isinstance(exc, self._unreachable):
                    self.health.failed(owner, exc, served)
                continue
            self.health.ok(owner, served)

    @staticmethod
    def _script(name: str, keys: Sequence[str], args: Iterable[Any]) -> list[Any]:
        return ["EVALSHA", SHAS[name], len(keys), *keys, *args]

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
        """Hear cancels published by any replica; reconnect after a failure. Its node's
        failures and answers count in the health like any command's."""
        while not self._stopping:
            pubsub = None
            node, slot = UNKNOWN_NODE, -1
            try:
                if self.cluster:
                    # Its pubsub picks a node from the slot map: load the map first.
                    await self.redis.initialize()
                # On Cluster: the node of the channel's slot; PUBLISH reaches every node.
                node, slot = self._node_of(self.channel)
                self.health.check(node)
                pubsub = self.redis.pubsub()
                await pubsub.subscribe(self.channel, self.ended_channel)
                async for message in pubsub.listen():
                    if self._stopping:
                        return
                    if message.get("type") == "subscribe" and not self.listening.is_set():
                        # Confirmed by its node (a subscribe may connect lazily): an answer.
                        self._answered(self.channel, [slot])
                        self.listening.set()
                    if message.get("type") != "message":
                        continue
                    request_id = text_of(message.get("data"))
                    if not request_id:
                        continue
                    if text_of(message.get("channel")) == self.ended_channel:
                        for ended in self._ended.get(request_id, ()):
                            ended.set()
                    else:
                        on_cancel(request_id)
            except StoreUnavailable:
                pass  # its node is down: the watcher tells when it is back
            except self._unreachable as exc:
                await self._outage(exc, node, [slot])
            except self._redis_errors:
                pass  # a Cluster mid-failover (CLUSTERDOWN, a stale slot map): try again
            finally:
                self.listening.clear()
                if pubsub is not None:
                    with contextlib.suppress(Exception):
                        await pubsub.aclose()
            # Heartbeats pick up cancel flags set meanwhile.
            await asyncio.sleep(1.0)

    async def aclose(self) -> None:
        self._stopping = True
        await self.follower.aclose()
        if self._listener is not None:
            await stop_task(self._listener)
        self._listener = None
        if self._watcher is not None:
            await stop_task(self._watcher)
        self._watcher = None
        if self._follow_client is not self.redis:
            with contextlib.suppress(Exception):
                await self._follow_client.aclose()
        with contextlib.suppress(Exception):
            await self.redis.aclose()

    async def create(self, request_id: str, info: StreamInfo) -> Created:
        if self.full:
            return Created.FULL
        meta, _stream, lease, _reader = self.keys(request_id)
        args = [info.owner, info.model, info.created, self.lease_ms, self.idle_ms]
        args += [info.token, info.credential]
        created = await self._eval("create", [meta, lease], args)
        return Created.CREATED if created == 1 else Created.EXISTS

    def _append(self, append: Append, entries: Sequence[Entry], retry: bool) -> list[Any]:
        """The command writing ``entries`` of ``append`` (see ``APPEND``'s modes)."""
        # Always the script (one command per commit all the same): its gap check
        # catches what a failed-over or crashed Redis lost, and the session's
        # replay fills it.
        meta, stream, lease, _reader = self.keys(append.request_id)
        args: list[Any] = [
            self.owner,
            self.max_events,
            append.end or "",
            self.ttl_ms,
            self.idle_ms,
            "1" if append.first else "0",
            "1" if retry else "0",
        ]
        for entry in entries:
            args += [f"0-{entry.seq + 1}", entry.type, entry.frame]
        return self._script("append", [meta, stream, lease], args)

    async def commit(self, appends: Sequence[Append]) -> set[str]:
        commands = [self._append(a, a.entries, a.retry) for a in appends]
        # Announce the ends (a DELETE may be waiting for one, on any replica).
        commands += [
            ["PUBLISH", self.ended_channel, a.request_id] for a in appends if a.end is not None
        ]
        results = (await self._pipeline(commands))[: len(appends)]
        # A gap: the stream lacks entries this replica committed (a primary that died
        # before replicating them). Write back what the session still holds of them.
        gaps = [i for i, r in enumerate(results) if isinstance(r, int) and r == -2]
        if gaps:
            again = []
            for i in gaps:
                append = appends[i]
                first = append.entries[0].seq
                replay = [e for e in append.replay if e.seq < first] + append.entries
                again.append(self._append(append, replay, True))
            try:
                replayed: list[Any] = await self._pipeline(again)
            except StoreUnavailable as exc:
                replayed = [exc] * len(again)
            for i, result in zip(gaps, replayed, strict=True):
                results[i] = result
            log(logging.WARNING, "resume_store_replayed", streams=len(gaps))
        # A script answers 1, an XADD the new ID; nil (no stream), 0, -2 or an error: refused.
        refused = {
            a.request_id
            for a, r in zip(appends, results, strict=True)
            if r is None
            or (isinstance(r, Exception) and not isinstance(r, StoreUnavailable))
            or (isinstance(r, int) and r in (0, -2))
        }
        _raise_unreached(appends, results, refused)
        return refused

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
        first = entries_of(raw)
        for expected, entry in enumerate(first, start=after + 1):
            if entry.seq != expected:
                # Trimmed, or a hole a dead replica left (events it sent, never stored).
                raise EventsTrimmed(entry.seq)
        reader = RedisReader(self, self.follower, stream, first, text_of(status) != LIVE)
        reader.start_after(after)
        await self.follower.add(reader.follow)
        return reader

    async def state(self, request_id: str) -> StreamState | None:
        meta, _stream, lease, _reader = self.keys(request_id)
        status, alive = await self._pipeline([["HGET", meta, "status"], ["EXISTS", lease]])
        if status is None or isinstance(status, Exception):
            return None
        return StreamState(text_of(status) or LIVE, alive == 1)

    async def info(self, request_id: str) -> StreamInfo | None:
        meta = self.keys(request_id)[0]
        fields = await self.call(
            "HMGET", meta, "status", "model", "created", "owner", "token", "cred"
        )
        status, model, created, owner, token, credential = (text_of(v) for v in fields)
        if status is None:
            return None
        return StreamInfo(
            model or "", int(created or 0), owner or "", token or "", credential or ""
        )

    async def wait_ended(self, request_id: str, timeout: float) -> None:
        ended = asyncio.Event()
        waiters = self._ended.setdefault(request_id, set())
        waiters.add(ended)
        try:
            # Registered first, then checked: an end announced in between still wakes us.
            state = await self.state(request_id)
            if state is None or state.status != LIVE:
                return
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await ended.wait()
        finally:
            waiters.discard(ended)
            if not waiters:
                self._ended.pop(request_id, None)

    async def request_cancel(self, request_id: str) -> bool:
        meta = self.keys(request_id)[0]
        return bool(await self._eval("cancel", [meta], [self.channel, request_id]) == 1)

    async def touch_reader(self, request_id: str) -> None:
        if self.follower.idle:
            # Nobody follows here, so no loop will write it soon: now.
            await self._pipeline([["SET", self.keys(request_id)[3], "1", "PX", 3000]])
            return
        self.follower.touches.add(request_id)

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
        unreached = [r for r in results if isinstance(r, StoreUnavailable)]
        if unreached:
            pairs = zip(request_ids, results, strict=True)
            pending = {i for i, r in pairs if isinstance(r, StoreUnavailable)}
            raise Unreached(str(unreached[0]), pending, (cancel, lost))
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
            status, model, created = (text_of(v) for v in fields)
            if status != LIVE:
                return False
            last = entries_of(top)
            info = StreamInfo(model or "", int(created or 0), "")
            top_entry = last[0] if last else None
            entries = closing_entries(request_id, info, top_entry, code, message, seen)
            final = end_status(code)
            if last and last[0].type == "stream.end":
                # Its owner stored the end but died before marking it: mark it as it was.
                final = end_status(error_code_of(last[1]) if len(last) > 1 else None)
            top_id = f"0-{last[0].seq + 1}" if last else ""
            args: list[Any] = [top_id, final, self.ttl_ms]
            for entry in entries:
                args += [f"0-{entry.seq + 1}", entry.type, entry.frame]
            result = await self._eval("close_orphan", [meta, lease, stream], args)
            if result == 1:
                await self._pipeline([["PUBLISH", self.ended_channel, request_id]])
            if result != -1:
                return bool(result == 1)
        return False

    async def discard(self, request_id: str) -> None:
        if await self._eval("discard", list(self.keys(request_id)), [self.owner]) == 1:
            await self._pipeline([["PUBLISH", self.ended_channel, request_id]])

    async def housekeeping(self) -> None:
        if not self.cluster:
            self.full = used_memory_of(await self.call("INFO", "memory")) >= self.max_bytes
            return
        # Each primary on its own: one that is down (or still listed after its death)
        # counts for itself only, and one that answers is healthy, with its slots.
        used = 0
        for node in list(self.redis.get_primaries()):
            if not self.health.due(node.name):
                continue
            try:
                info = await self.redis.execute_command("INFO", "memory", target_nodes=node)
            except self._redis_errors as exc:
                await self._outage(exc, node.name, self._slots_of(node.name))
                continue
            self.health.ok(node.name, self._slots_of(node.name))
            used = max(used, used_memory_of(info))
        self.full = used >= self.max_bytes


def used_memory_of(info: Any) -> int:
    """``used_memory`` of an ``INFO memory`` reply: one server's, or on Cluster (a
    reply per node) the largest, since one full node is enough to refuse writes."""
    if not isinstance(info, dict):
        return 0
    if "used_memory" in info:
        return int(info["used_memory"])
    return max((used_memory_of(node) for node in info.values()), default=0)


def _raise_unreached(appends: Sequence[Append], results: Sequence[Any], refused: set[str]) -> None:
    """``Unreached`` when some of ``appends`` found their node down (result: ``refused``)."""
    unreached = [
        (a.request_id, r)
        for a, r in zip(appends, results, strict=True)
        if isinstance(r, StoreUnavailable)
    ]
    if unreached:
        pending = {request_id for request_id, _r in unreached}
        raise Unreached(str(unreached[0][1]), pending, refused)
