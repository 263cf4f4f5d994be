"""One script for every resume store: ``MemoryStore`` and ``RedisStore`` (a real
``redis-server``, and a real Redis Cluster of three primaries with replicas) must
behave the same wherever the ``Store`` protocol says so."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from tokenwire.gateway.resume import (
    Append,
    Created,
    Entry,
    EventsTrimmed,
    MemoryStore,
    RedisStore,
    Store,
    StreamInfo,
    StreamNotFound,
)
from tokenwire.writer import Writer

INFO = StreamInfo("demo", 1_700_000_000, "me", "t" * 64, "c" * 64)
KINDS = ["memory", "redis", "redis-cluster"]

StoreTest = Callable[[Store], Coroutine[Any, Any, None]]


def _stream(n: int, request_id: str = "r") -> list[Entry]:
    """A whole stored stream: start, ``n`` deltas, stop, stream.end."""
    from tokenwire import events as ev

    w = Writer(model="demo", request_id=request_id, created=1)
    events = w.start()
    for i in range(n):
        events += w.text(f" t{i}")
    return [Entry(e.seq or 0, e.type, ev.dump(e)) for e in events + w.end()]


@pytest.fixture(params=KINDS)
def run(request: pytest.FixtureRequest) -> Callable[..., None]:
    """``run(test, **limits)`` runs ``test(store)`` against a fresh store of the kind."""

    def go(test: StoreTest, **limits: Any) -> None:
        async def main() -> None:
            async with _store(request, **limits) as store:
                await test(store)

        asyncio.run(main())

    return go


class _store:  # noqa: N801 - used as ``async with _store(...)``
    def __init__(self, request: pytest.FixtureRequest, **limits: Any) -> None:
        self.request = request
        self.limits = limits
        self.store: Store | None = None

    async def __aenter__(self) -> Store:
        store: Store
        if self.request.param == "memory":
            store = MemoryStore(**self.limits)
        elif self.request.param == "redis-cluster":
            cluster = self.request.getfixturevalue("redis_cluster")
            store = RedisStore(
                cluster.url,
                owner="me",
                prefix=f"c{uuid.uuid4().hex[:8]}",
                cluster=True,
                **self.limits,
            )
        else:
            server = self.request.getfixturevalue("redis_server")
            store = RedisStore(
                server.url, owner="me", prefix=f"c{uuid.uuid4().hex[:8]}", **self.limits
            )
        await store.start(lambda _request_id: None)
        if isinstance(store, RedisStore):
            await _subscribed(store)
        self.store = store
        return store

    async def __aexit__(self, *exc: object) -> None:
        assert self.store is not None
        await self.store.aclose()


async def _subscribed(store: RedisStore) -> None:
    """Wait (bounded) until the store's listener is subscribed to its channels."""
    async with asyncio.timeout(20):
        await store.listening.wait()


async def _stream_of(store: Store, request_id: str, after: int = -1) -> list[Entry]:
    reader = await store.open_reader(request_id, after)
    try:
        return reader.first + await reader.next(0)
    finally:
        reader.close()


def test_create_info_and_conflict(run: Callable[..., None]) -> None:
    async def test(store: Store) -> None:
        assert await store.create("r", INFO) is Created.CREATED
        assert await store.create("r", INFO) is Created.EXISTS
        info = await store.info("r")
        assert info is not None
        assert (info.model, info.created, info.owner) == ("demo", 1_700_000_000, "me")
        # The digests that bind it to its creator (never the token itself).
        assert (info.token, info.credential) == ("t" * 64, "c" * 64)
        assert await store.info("nope") is None
        assert await store.state("nope") is None
        state = await store.state("r")
        assert state is not None and state.status == "live"

    run(test)


def test_commit_read_follow_and_end(run: Callable[..., None]) -> None:
    async def test(store: Store) -> None:
        await store.create("r", INFO)
        entries = _stream(3)
        assert await store.commit([Append("r", entries[:2], None, True)]) == set()
        # A seq that is not the next one is refused: a resume would get a repeat.
        assert await store.commit([Append("r", entries[1:2], None, False)]) == {"r"}
        reader = await store.open_reader("r", 0)
        try:
            assert [e.seq for e in reader.first] == [1]
            assert not reader.finished
            waiting = asyncio.ensure_future(reader.next(30.0))
            # One loop turn, not a pause: next() starts waiting before the commit.
            await asyncio.sleep(0)
            assert await store.commit([Append("r", entries[2:], "completed", False)]) == set()
            got = await waiting
            got += await reader.next(0)
            assert [e.seq for e in got] == list(range(2, len(entries)))
        finally:
            reader.close()
        state = await store.state("r")
        assert state is not None and state.status == "completed"
        # The stored frames are the bytes that were committed.
        assert [e.frame for e in await _stream_of(store, "r")] == [e.frame for e in entries]
        # Nothing may follow the end.
        assert await store.commit([Append("r", entries[-1:], None, False)]) == {"r"}
        finished = await store.open_reader("r", len(entries) - 1)
        assert finished.first == [] and finished.finished
        finished.close()
        with pytest.raises(StreamNotFound):
            await store.open_reader("nope", -1)

    run(test)


def test_wait_ended_wakes_on_the_end(run: Callable[..., None]) -> None:
    async def test(store: Store) -> None:
        await store.create("w", INFO)
        entries = _stream(2, "w")
        await store.commit([Append("w", entries[:2], None, True)])
        waiter = asyncio.ensure_future(store.wait_ended("w", 3600.0))
        await asyncio.sleep(0)  # one loop turn, not a pause: it registers before its first await
        await store.commit([Append("w", entries[2:], "completed", False)])
        async with asyncio.timeout(30):  # bounded: a missed wake fails, never hangs
            await waiter
        state = await store.state("w")
        assert state is not None and state.status == "completed"
        # A stream that is not live (or does not exist) does not wait at all.
        async with asyncio.timeout(30):
            await store.wait_ended("w", 3600.0)
            await store.wait_ended("nope", 3600.0)

    run(test)


def test_trimming_keeps_the_newest(run: Callable[..., None]) -> None:
    async def test(store: Store) -> None:
        await store.create("t", INFO)
        entries = _stream(400, "t")
        for i in range(0, len(entries), 50):
            assert await store.commit([Append("t", entries[i : i + 50], None, i == 0)]) == set()
        with pytest.raises(EventsTrimmed):
            await store.open_reader("t", 0)
        # At least the newest max_events_per_stream are kept.
        tail = await _stream_of(store, "t", len(entries) - 11)
        assert [e.seq for e in tail] == list(range(len(entries) - 10, len(entries)))

    run(test, max_events_per_stream=10)


def test_readers_and_discard(run: Callable[..., None]) -> None:
    async def test(store: Store) -> None:
        await store.create("d", INFO)
        await store.commit([Append("d", _stream(2, "d")[:2], None, True)])
        assert await store.readers_seen(["d"]) == set()
        await store.touch_reader("d")
        assert await store.readers_seen(["d", "other"]) == {"d"}
        await store.discard("d")
        assert await store.state("d") is None
        assert await store.info("d") is None
        with pytest.raises(StreamNotFound):
            await store.open_reader("d", -1)

    run(test)
