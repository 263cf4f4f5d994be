"""The resume module in-process: stores, the runner behind ``StreamEndpoint``, the route.

The endpoint is driven with scripted ASGI ``receive``/``send``
(tests/server/server_asgi.py), so a hang-up is exact and nothing is buffered.
The Redis store runs against the session's real ``redis-server``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import tomllib
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import msgspec
import pytest
from tests.server.server_asgi import Exchange

import tokenwire
from tokenwire import events as ev
from tokenwire.gateway import config as gw_config
from tokenwire.gateway.resume import (
    ENTRY_OVERHEAD,
    ORPHAN_MESSAGE,
    Append,
    Created,
    Entry,
    EventsTrimmed,
    MemoryStore,
    RedisStore,
    ResumeEndpoint,
    ResumeManager,
    StoreRefused,
    StoreUnavailable,
    StreamInfo,
    StreamNotFound,
    closing_entries,
    parse_after,
)
from tokenwire.gateway.resume.redis_scripts import redacted
from tokenwire.request import Request
from tokenwire.server import StreamEndpoint, StreamRecord
from tokenwire.testing import async_wait_until
from tokenwire.writer import Writer

VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "resume"
INFO = StreamInfo("demo", 1_700_000_000, "me")


def _vectors(name: str) -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = json.loads((VECTORS / name).read_text())["cases"]
    return cases


def _delta(text: str) -> ev.ContentDelta:
    return ev.ContentDelta(v="1.0", seq=0, index=0, role="assistant", delta=ev.Delta(text=text))


def _entries(events: list[ev.Event]) -> list[Entry]:
    return [Entry(e.seq or 0, e.type, ev.dump(e)) for e in events]


def _stream(n: int, request_id: str = "r") -> list[Entry]:
    """A whole stored stream: start, ``n`` deltas, stop, stream.end."""
    w = Writer(model="demo", request_id=request_id, created=1)
    events = w.start()
    for i in range(n):
        events += w.text(f" t{i}")
    return _entries(events + w.end())


# --- pure pieces ------------------------------------------------------------------------


@pytest.mark.parametrize("case", _vectors("after.json"), ids=lambda c: c["name"])
def test_parse_after(case: dict[str, Any]) -> None:
    headers = [(k.encode(), v.encode()) for k, v in case["headers"].items()]
    query = case["query"].encode()
    if case.get("error"):
        with pytest.raises(ValueError):
            parse_after(headers, query)
    else:
        assert parse_after(headers, query) == case["after"]


def _prefix(last: tuple[int, str] | None) -> list[ev.Event]:
    """A stream cut off right after an event of ``last``'s seq and type."""
    if last is None:
        return []
    seq, kind = last
    w = Writer(model="demo", request_id="r", created=1)
    events = w.start()
    if kind == "stream.start":
        return events
    # stream.end closes the open block first: one seq fewer of text.
    while w.next_seq < (seq - 1 if kind == "stream.end" else seq):
        events += w.text("x")
    if kind == "content.delta":
        events += w.text("y")
    elif kind == "tool.call":
        events += w.tool_call(id="c1", name="f", arguments="{}", index=1)
    elif kind == "usage":
        events += w.usage(1, 2)
    elif kind == "error":
        events += w.error("overloaded", "busy")
    elif kind == "stream.end":
        events += w.end()
    assert (events[-1].seq, events[-1].type) == (seq, kind)
    return events


@pytest.mark.parametrize("case", _vectors("closing.json"), ids=lambda c: c["name"])
def test_closing_entries(case: dict[str, Any]) -> None:
    last = tuple(case["last"]) if case["last"] is not None else None
    seen = case.get("seen", -1)
    stored = _entries(_prefix(last))  # type: ignore[arg-type]
    closing = closing_entries("r", INFO, stored[-1] if stored else None, "cancelled", "stop", seen)
    assert [[e.seq, e.type] for e in closing] == case["expect"]
    if last is None or last[1] != "stream.end":
        # What the client has: the stored events, or more when it saw unstored ones.
        has = stored
        if seen > (last[0] if last else -1):
            has = _entries(_prefix((seen, "content.delta")))
        wire = b"".join(e.frame for e in has + closing)
        report = tokenwire.validate([wire])
        assert report.ok, report.violations
        assert isinstance(
            tokenwire.events.parse("stream.end", closing[-1].frame.split(b"data: ")[1]),
            ev.StreamEnd,
        )


def test_redacted_url() -> None:
    assert redacted("redis://:secret@host:6380/0") == "redis://:***@host:6380/0"
    assert redacted("redis://user:secret@host/1") == "redis://user:***@host/1"
    assert redacted("redis://host:6379/0") == "redis://host:6379/0"


@pytest.mark.parametrize(
    ("table", "where"),
    [
        ({"backend": "sqlite"}, "resume.backend"),
        ({"backend": "redis"}, "resume.url"),
        ({"backend": "redis", "url": "http://x"}, "resume.url"),
        ({"grace_s": 0}, "resume.grace_s"),
        ({"ttl_s": -1}, "resume.ttl_s"),
        ({"lease_s": float("nan")}, "resume.lease_s"),
        ({"max_events_per_stream": 0}, "resume.max_events_per_stream"),
        ({"max_bytes": 0}, "resume.max_bytes"),
        ({"graze_s": 1}, "graze_s"),
    ],
)
def test_resume_config_is_checked(table: dict[str, Any], where: str) -> None:
    with pytest.raises(gw_config.ConfigError, match=where.replace(".", r"\.")):
        gw_config.parse({"resume": table})


def test_resume_config_defaults() -> None:
    cfg = gw_config.parse({}).resume
    assert (cfg.default, cfg.backend, cfg.url) == (False, "memory", None)
    cfg = gw_config.parse({"resume": {"backend": "redis", "url": "redis://127.0.0.1:1/0"}}).resume
    assert cfg.backend == "redis"


# --- the memory store ---------------------------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_memory_store_basics() -> None:
    async def go() -> None:
        store = MemoryStore(max_events_per_stream=100, ttl_s=10.0)
        assert await store.create("r", INFO) is Created.CREATED
        assert await store.create("r", INFO) is Created.EXISTS
        entries = _stream(3)
        assert await store.commit([Append("r", entries[:2], None, True)]) == set()
        # A gap would corrupt every later resume: refused.
        assert await store.commit([Append("r", entries[3:4], None, False)]) == {"r"}
        reader = await store.open_reader("r", 0)
        assert [e.seq for e in reader.first] == [1]
        assert not reader.finished
        waiting = asyncio.ensure_future(reader.next(5.0))
        # One loop turn, not a pause: next() runs to its first await and waits, so
        # the commit below must wake it (asyncio runs ready tasks in order).
        await asyncio.sleep(0)
        assert await store.commit([Append("r", entries[2:], "completed", False)]) == set()
        assert [e.seq for e in await waiting] == [2, 3, 4, 5]
        assert await reader.next(0.01) == []
        state = await store.state("r")
        assert state is not None and state.status == "completed"
        # Nothing may follow the end.
        assert await store.commit([Append("r", [], None, False)]) == {"r"}
        with pytest.raises(StreamNotFound):
            await store.open_reader("nope", -1)
        assert await store.state("nope") is None

    asyncio.run(go())


def test_memory_store_trims_and_expires() -> None:
    async def go() -> None:
        clock = FakeClock()
        store = MemoryStore(max_events_per_stream=16, ttl_s=10.0, clock=clock)
        await store.create("r", INFO)
        entries = _stream(60)
        for entry in entries:
            await store.commit([Append("r", [entry], None, False)])
        reader = await store.open_reader("r", len(entries) - 17)
        assert len(reader.first) == 16  # at least the newest 16 are kept
        with pytest.raises(EventsTrimmed) as info:
            await store.open_reader("r", 0)
        assert info.value.first_seq > 1
        await store.commit([Append("r", [], "completed", False)])
        clock.now += 9.9
        assert await store.state("r") is not None
        clock.now += 0.2
        assert await store.state("r") is None  # ttl_s after the end
        assert store.size == 0

    asyncio.run(go())


def test_memory_store_bytes_limit() -> None:
    async def go() -> None:
        entries = _stream(10)
        size = sum(len(e.frame) + ENTRY_OVERHEAD for e in entries)
        store = MemoryStore(max_bytes=size + 1)
        await store.create("done", INFO)
        await store.commit([Append("done", entries, "completed", True)])
        await store.create("live", INFO)
        await store.commit([Append("live", entries[:-2], None, True)])
        # Over the limit: the finished stream goes first, then there is room.
        assert await store.create("next", INFO) is Created.CREATED
        assert await store.state("done") is None
        await store.commit([Append("next", entries[:-2], None, True)])
        # Live streams alone fill it: a new one is not recorded.
        assert await store.create("more", INFO) is Created.FULL
        assert await store.state("live") is not None

    asyncio.run(go())


def test_memory_store_readers() -> None:
    async def go() -> None:
        clock = FakeClock()
        store = MemoryStore(clock=clock)
        await store.create("r", INFO)
        assert await store.readers_seen(["r"]) == set()
        await store.touch_reader("r")
        clock.now += 2.9
        assert await store.readers_seen(["r", "x"]) == {"r"}
        clock.now += 0.2
        assert await store.readers_seen(["r"]) == set()

    asyncio.run(go())


# --- the runner behind StreamEndpoint ------------------------------------------------------


class Ticker:
    """``count`` tokens, ``interval`` s apart; records how it ended."""

    def __init__(self, count: int = 10, interval: float = 0.01, fail_at: int | None = None):
        self.count = count
        self.interval = interval
        self.fail_at = fail_at
        self.outcome: dict[str, str] = {}

    async def generate(self, request: Request) -> AsyncIterator[ev.Event]:
        rid = request.request_id or "?"
        try:
            for i in range(self.count):
                await asyncio.sleep(self.interval)  # the pacing of a model: the behaviour
                if i == self.fail_at:
                    raise RuntimeError("boom")
                yield _delta(f" t{i}")
        except asyncio.CancelledError:
            self.outcome[rid] = "cancelled"
            raise
        self.outcome[rid] = "completed"


def _assert_estimated_usage(events: list[ev.Event], prompt: str) -> None:
    """docs/extensions.md: a cancelled or failed stream that sent output still
    reports usage (before stream.end), estimated and marked: one token per 4
    characters of the prompt's text and of the text it sent."""
    usage = events[-2]
    text = "".join(e.delta.text for e in events if isinstance(e, ev.ContentDelta))
    assert text, "the stream sent output"
    assert isinstance(usage, ev.Usage) and usage.estimated, usage
    assert (usage.input_tokens, usage.output_tokens) == (
        -(-len(prompt) // 4),
        -(-len(text) // 4),
    )


def _body(request_id: str | None = None, resumable: bool | None = True) -> bytes:
    body: dict[str, Any] = {
        "version": "1.0",
        "stream": True,
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
    }
    if request_id is not None:
        body["metadata"] = {"request_id": request_id}
    if resumable is not None:
        body["extensions"] = {"tokenwire:resumable": resumable}
    return msgspec.json.encode(body)


#: request_id -> the resume token of its POST answer.
TOKENS: dict[str, str] = {}


async def _post(endpoint: StreamEndpoint, body: bytes, hang_up_after: int | None) -> Exchange:
    exchange = Exchange(body, hang_up_after=hang_up_after)
    await endpoint(exchange.scope, exchange.receive, exchange.send)
    token = exchange.headers.get("tokenwire-resume-token")
    if exchange.status == 200 and token is not None:
        start = exchange.events()[0]
        assert isinstance(start, ev.StreamStart) and start.request_id is not None
        TOKENS[start.request_id] = token
    return exchange


async def _get(manager: ResumeManager, request_id: str, after: int | None = None) -> Exchange:
    headers = {} if after is None else {"last-event-id": str(after)}
    if request_id in TOKENS:
        headers["tokenwire-resume-token"] = TOKENS[request_id]
    exchange = Exchange(b"", method="GET", content_type=None, headers=headers)
    exchange.scope["path_params"] = {"request_id": request_id}
    await ResumeEndpoint(manager)(exchange.scope, exchange.receive, exchange.send)
    return exchange


async def _until(predicate: Any, timeout: float = 10.0) -> None:
    await async_wait_until(predicate, timeout=timeout)


async def _follow_blocked(store: RedisStore) -> bool:
    """The store's follow is in ``XREAD BLOCK`` (Redis counts it as a blocked client)."""
    info = await store.call("INFO", "clients")
    if isinstance(info, dict):
        return int(info.get("blocked_clients", 0)) > 0
    text = info.decode() if isinstance(info, bytes) else str(info)
    return re.search(r"blocked_clients:[1-9]", text) is not None


async def _owner_gone(store: RedisStore, request_id: str) -> bool:
    """The owner's lease on ``request_id`` ran out (the stream is still ``live``)."""
    state = await store.state(request_id)
    return state is not None and not state.owner_alive


async def _subscribed(store: RedisStore) -> bool:
    reply = await store.call("PUBSUB", "NUMSUB", store.channel)
    return int(reply[1]) >= 1


def test_hang_up_does_not_cancel_a_resumable_stream() -> None:
    provider = Ticker(count=20)

    async def go() -> None:
        manager = ResumeManager(MemoryStore(), grace_s=30.0)
        endpoint = StreamEndpoint(provider, resumption=manager)
        first = await _post(endpoint, _body("r1"), hang_up_after=3)
        got = first.events()
        await _until(lambda: "r1" in provider.outcome)
        rest = await _get(manager, "r1", got[-1].seq)
        await manager.aclose()
        assert provider.outcome["r1"] == "completed"
        joined = got + rest.events()
        assert [e.seq for e in joined] == list(range(len(joined)))
        assert "".join(e.delta.text for e in joined if isinstance(e, ev.ContentDelta)) == "".join(
            f" t{i}" for i in range(20)
        )
        assert tokenwire.validate([first.body + rest.body]).ok

    asyncio.run(go())


def test_a_failed_send_detaches_a_resumable_stream() -> None:
    # The ASGI server reports a vanished client by failing send(): for a
    # resumable stream that is a hang-up too, so the generation goes on.
    provider = Ticker(count=10)

    async def go() -> None:
        manager = ResumeManager(MemoryStore(), grace_s=30.0)
        endpoint = StreamEndpoint(provider, resumption=manager)
        exchange = Exchange(_body("sf1"), send_error_after=2)
        await endpoint(exchange.scope, exchange.receive, exchange.send)
        TOKENS["sf1"] = exchange.headers["tokenwire-resume-token"]
        await _until(lambda: "sf1" in provider.outcome)
        rest = await _get(manager, "sf1")
        await manager.aclose()
        assert provider.outcome["sf1"] == "completed"
        assert tokenwire.validate([rest.body]).ok

    asyncio.run(go())


def test_hang_up_cancels_a_plain_stream_at_once() -> None:
    provider = Ticker(count=1000)

    async def go() -> None:
        manager = ResumeManager(MemoryStore(), grace_s=30.0)
        endpoint = StreamEndpoint(provider, resumption=manager)
        await _post(endpoint, _body("p1", resumable=None), hang_up_after=3)
        # The request is over only once the generation was cancelled.
        assert provider.outcome == {"p1": "cancelled"}
        assert (await _get(manager, "p1")).status == 404
        await manager.aclose()

    asyncio.run(go())


def test_grace_period_then_cancelled() -> None:
    provider = Ticker(count=10_000)

    async def go() -> None:
        manager = ResumeManager(MemoryStore(), grace_s=0.3)
        endpoint = StreamEndpoint(provider, resumption=manager)
        await _post(endpoint, _body("g1"), hang_up_after=2)
        await _until(lambda: "g1" in provider.outcome)
        assert provider.outcome["g1"] == "cancelled"
        rest = await _get(manager, "g1", None)
        await manager.aclose()
        error, _usage, end = rest.events()[-3:]
        assert isinstance(error, ev.ErrorEvent) and error.code == "cancelled"
        _assert_estimated_usage(rest.events(), "hi")
        assert isinstance(end, ev.StreamEnd) and end.request_id == "g1"
        assert tokenwire.validate([rest.body]).ok

    asyncio.run(go())


def test_provider_failure_after_hang_up_is_stored() -> None:
    provider = Ticker(count=10, fail_at=5)

    async def go() -> None:
        manager = ResumeManager(MemoryStore(), grace_s=30.0)
        endpoint = StreamEndpoint(provider, resumption=manager)
        await _post(endpoint, _body("f1"), hang_up_after=2)
        await _until(lambda: "f1" not in manager.live)
        rest = await _get(manager, "f1")
        state = await manager.store.state("f1")
        await manager.aclose()
        error, _usage, end = rest.events()[-3:]
        assert isinstance(error, ev.ErrorEvent) and error.code == "internal_error"
        _assert_estimated_usage(rest.events(), "hi")
        assert isinstance(end, ev.StreamEnd)
        assert state is not None and state.status == "failed"

    asyncio.run(go())


class KeptStore(MemoryStore):
    """A memory store that outlives its manager's shutdown, to be read after it."""

    async def aclose(self) -> None:
        pass


def test_shutdown_ends_live_streams() -> None:
    provider = Ticker(count=10_000)

    async def go() -> None:
        store = KeptStore()
        manager = ResumeManager(store, grace_s=30.0)
        endpoint = StreamEndpoint(provider, resumption=manager)
        await _post(endpoint, _body("s1"), hang_up_after=2)
        reader = await store.open_reader("s1", -1)
        await manager.aclose()
        assert provider.outcome["s1"] == "cancelled"
        frames = b"".join(e.frame for e in reader.first + await reader.next(0))
        events = list(tokenwire.iter_events(frames))
        error, _usage, end = events[-3:]
        assert isinstance(error, ev.ErrorEvent) and error.code == "overloaded"
        _assert_estimated_usage(events, "hi")
        assert isinstance(end, ev.StreamEnd)

    asyncio.run(go())


def test_cancelled_before_it_ran() -> None:
    # A task cancelled before its first step runs none of its own cleanup:
    # the session still ends the stored stream.
    async def go() -> None:
        store = MemoryStore()
        manager = ResumeManager(store)
        request = msgspec.json.decode(_body("early"), type=Request)
        request, session = await manager.open(request, StreamRecord("/v1/stream"))
        assert session is not None
        ((name, token),) = session.headers
        assert name == b"tokenwire-resume-token"
        TOKENS["early"] = token.decode()
        w = Writer(model="m", request_id="early")
        events = w.start()
        session.record(events, [ev.dump(e) for e in events])

        async def never() -> None:
            raise AssertionError("ran")

        task = asyncio.get_running_loop().create_task(never())
        session.run(task)
        assert manager.cancel_local("early", "cancelled", "stop")
        await asyncio.wait([task])
        await _until(lambda: "early" not in manager.live)
        rest = await _get(manager, "early")
        await manager.aclose()
        assert [e.type for e in rest.events()] == ["stream.start", "error", "stream.end"]
        assert tokenwire.validate([rest.body]).ok

    asyncio.run(go())


class RefusingStore(MemoryStore):
    """Creates streams, then refuses every write: a record that cannot be complete."""

    async def commit(self, appends: Sequence[Append]) -> set[str]:
        raise StoreRefused("OOM command not allowed")


class OutageStore(MemoryStore):
    """Unreachable for its first ``down`` commits (a restart, a failover), then back."""

    def __init__(self, down: int) -> None:
        super().__init__()
        self.down = down
        self.failed = 0

    async def commit(self, appends: Sequence[Append]) -> set[str]:
        if self.failed < self.down:
            self.failed += 1
            raise StoreUnavailable("down")
        return await super().commit(appends)


def test_events_recorded_while_the_store_is_unreachable_are_committed_once_it_is_back() -> None:
    provider = Ticker(count=40, interval=0.005)

    async def go() -> None:
        store = OutageStore(down=3)
        manager = ResumeManager(store, grace_s=3600.0)
        endpoint = StreamEndpoint(provider, resumption=manager)
        await _post(endpoint, _body("outage"), hang_up_after=2)
        await _until(lambda: provider.outcome.get("outage") == "completed")
        await _until(lambda: "outage" not in manager.live)
        assert store.failed == 3
        rest = await _get(manager, "outage")
        await manager.aclose()
        events = rest.events()
        assert [e.seq for e in events] == list(range(len(events)))  # every seq, once
        text = "".join(e.delta.text for e in events if isinstance(e, ev.ContentDelta))
        assert text == "".join(f" t{i}" for i in range(40))
        assert tokenwire.validate([rest.body]).ok

    asyncio.run(go())


def test_a_lost_record_stops_a_detached_generation() -> None:
    # Nobody can resume a stream whose record failed: after the hang-up its
    # generation stops at once instead of running out the grace period.
    provider = Ticker(count=10_000)

    async def go() -> None:
        manager = ResumeManager(RefusingStore(), grace_s=3600.0)
        endpoint = StreamEndpoint(provider, resumption=manager)
        await _post(endpoint, _body("lost"), hang_up_after=3)
        await _until(lambda: "lost" in provider.outcome)
        assert provider.outcome["lost"] == "cancelled"
        await _until(lambda: "lost" not in manager.live)
        await manager.aclose()

    asyncio.run(go())


def test_full_store_serves_live_only(caplog: pytest.LogCaptureFixture) -> None:
    provider = Ticker(count=10_000)

    async def go() -> None:
        manager = ResumeManager(MemoryStore(max_bytes=1), grace_s=30.0)
        endpoint = StreamEndpoint(provider, resumption=manager)
        await _post(endpoint, _body("big"), hang_up_after=2)  # live, and over max_bytes
        await _post(endpoint, _body("next"), hang_up_after=2)
        # Not recorded, so served the classic way: the hang-up cancelled it.
        assert provider.outcome == {"next": "cancelled"}
        assert (await _get(manager, "next")).status == 404
        await manager.aclose()

    with caplog.at_level(logging.WARNING, logger="tokenwire.gateway"):
        asyncio.run(go())
    assert [r for r in caplog.records if "resume_store_full" in r.getMessage()]


def test_generated_request_id_and_conflict() -> None:
    provider = Ticker(count=3, interval=0)

    async def go() -> None:
        manager = ResumeManager(MemoryStore())
        endpoint = StreamEndpoint(provider, resumption=manager)
        anonymous = await _post(endpoint, _body(None), hang_up_after=None)
        start = anonymous.events()[0]
        assert isinstance(start, ev.StreamStart)
        assert start.request_id is not None and uuid.UUID(start.request_id).version == 4
        again = await _post(endpoint, _body(start.request_id), hang_up_after=None)
        assert again.status == 409
        assert again.json()["error"]["code"] == "request_id_in_use"
        too_long = await _post(endpoint, _body("x" * 300), hang_up_after=None)
        assert too_long.status == 400
        assert too_long.json()["error"]["path"] == "metadata.request_id"
        await manager.aclose()

    asyncio.run(go())


# --- the Redis store (a real redis-server) ----------------------------------------------------


class Target:
    """Where a Redis store test runs: one ``redis-server``, or the Redis Cluster."""

    def __init__(self, url: str, cluster: bool) -> None:
        self.url, self.cluster = url, cluster


@pytest.fixture(params=["redis", "redis-cluster"])
def redis_target(request: pytest.FixtureRequest) -> Target:
    if request.param == "redis":
        return Target(request.getfixturevalue("redis_server").url, False)
    return Target(request.getfixturevalue("redis_cluster").url, True)


def _redis(target: Target, **kw: Any) -> RedisStore:
    return RedisStore(
        target.url,
        owner=kw.pop("owner", "me"),
        prefix=kw.pop("prefix", f"t{uuid.uuid4().hex[:6]}"),
        cluster=target.cluster,
        **kw,
    )


def test_redis_store_roundtrip(redis_target: Target) -> None:
    async def go() -> None:
        store = _redis(redis_target, ttl_s=30)
        other = _redis(redis_target, owner="other", prefix=store.prefix)
        try:
            assert await store.create("r", INFO) is Created.CREATED
            assert await store.create("r", INFO) is Created.EXISTS
            entries = _stream(5)
            assert await store.commit([Append("r", entries[:3], None, True)]) == set()
            # Redis itself refuses a seq that is not after the last one, from anyone...
            assert await store.commit([Append("r", entries[1:2], None, False)]) == {"r"}
            assert await other.commit([Append("r", entries[2:4], None, False)]) == {"r"}
            # ...and only the owner may end it.
            assert await other.commit([Append("r", [], "completed", False)]) == {"r"}
            reader = await store.open_reader("r", 0)
            assert [e.seq for e in reader.first] == [1, 2]
            waiting = asyncio.ensure_future(reader.next(5.0))
            await _until(lambda: _follow_blocked(store))  # the commit must wake the follow
            await store.commit([Append("r", entries[3:], "completed", False)])
            got = await waiting
            got += await reader.next(0)
            assert [e.seq for e in got] == [3, 4, 5, 6, 7]
            assert b"".join(e.frame for e in entries) == b"".join(
                e.frame for e in (await store.open_reader("r", -1)).first
            )
            state = await store.state("r")
            assert state is not None and state.status == "completed" and not state.owner_alive
            ttl = await store.call("PTTL", store.keys("r")[1])
            assert 0 < ttl <= 30_000  # a TTL once it ended
            with pytest.raises(StreamNotFound):
                await store.open_reader("nope", -1)
        finally:
            await store.aclose()
            await other.aclose()

    asyncio.run(go())


def test_redis_store_orphan_is_closed(redis_target: Target) -> None:
    async def go() -> None:
        store = _redis(redis_target, lease_s=0.05)
        try:
            await store.create("o", INFO)
            entries = _stream(5)
            await store.commit([Append("o", entries[:4], None, True)])
            # The owner is alive while its lease is.
            assert not await store.close_orphan("o", "internal_error", ORPHAN_MESSAGE)
            await _until(lambda: _owner_gone(store, "o"))
            state = await store.state("o")
            assert state is not None and state.status == "live" and not state.owner_alive
            assert await store.close_orphan("o", "internal_error", ORPHAN_MESSAGE)
            assert not await store.close_orphan("o", "internal_error", ORPHAN_MESSAGE)
            # The owner's late writes cannot land after that end.
            assert await store.commit([Append("o", entries[4:5], None, False)]) == {"o"}
            whole = b"".join(e.frame for e in (await store.open_reader("o", -1)).first)
            kinds = [e.type for e in tokenwire.iter_events(whole)]
            assert kinds[-2:] == ["error", "stream.end"]
            assert tokenwire.validate([whole]).ok
            state = await store.state("o")
            assert state is not None and state.status == "failed"
        finally:
            await store.aclose()

    asyncio.run(go())


def test_redis_store_trims_approximately(redis_target: Target) -> None:
    async def go() -> None:
        store = _redis(redis_target, max_events_per_stream=10)
        try:
            await store.create("t", INFO)
            entries = _stream(400)
            for i in range(0, len(entries), 50):
                await store.commit([Append("t", entries[i : i + 50], None, i == 0)])
            length = await store.call("XLEN", store.keys("t")[1])
            assert 10 <= length < len(entries)  # MAXLEN ~ trims whole nodes
            with pytest.raises(EventsTrimmed):
                await store.open_reader("t", 0)
            reader = await store.open_reader("t", len(entries) - 6)
            assert [e.seq for e in reader.first] == list(range(len(entries) - 5, len(entries)))
        finally:
            await store.aclose()

    asyncio.run(go())


def test_redis_store_cancel_reaches_the_owner(redis_target: Target) -> None:
    async def go() -> None:
        owner = _redis(redis_target, owner="a")
        asker = _redis(redis_target, owner="b", prefix=owner.prefix)
        heard: list[str] = []
        try:
            await owner.start(heard.append)
            await owner.create("c", StreamInfo("demo", 1, "a"))
            async with asyncio.timeout(20):
                await owner.listening.wait()  # the subscription is in place
            assert await asker.request_cancel("c")
            await _until(lambda: heard == ["c"])
            # A heartbeat sees the flag too (a cancel published while resubscribing).
            cancel, lost = await owner.heartbeat(["c"])
            assert (cancel, lost) == ({"c"}, set())
            assert await asker.heartbeat(["c"]) == (set(), {"c"})
            await owner.commit([Append("c", _stream(1, "c"), "completed", True)])
            assert not await asker.request_cancel("c")
            await asker.touch_reader("c")
            assert await owner.readers_seen(["c", "d"]) == {"c"}
        finally:
            await owner.aclose()
            await asker.aclose()

    asyncio.run(go())


def test_redis_store_discard(redis_target: Target) -> None:
    async def go() -> None:
        store = _redis(redis_target)
        try:
            await store.create("d", INFO)
            await store.commit([Append("d", _stream(2)[:2], None, True)])
            await store.discard("d")
            assert await store.state("d") is None
        finally:
            await store.aclose()

    asyncio.run(go())


def test_redis_unreachable(caplog: pytest.LogCaptureFixture) -> None:
    from tests.resume.redis_proc import free_port

    async def go() -> None:
        store = RedisStore(f"redis://127.0.0.1:{free_port()}/0", owner="me")
        try:
            for _ in range(3):
                with pytest.raises(StoreUnavailable):
                    await store.create("u", INFO)
            with pytest.raises(StoreUnavailable):
                await store.open_reader("u", -1)
        finally:
            await store.aclose()

    with caplog.at_level(logging.WARNING, logger="tokenwire.gateway"):
        asyncio.run(go())
    lines = [r.getMessage() for r in caplog.records if "resume_store_unavailable" in r.getMessage()]
    assert len(lines) == 1, lines


def test_the_scaling_doc_configs_parse() -> None:
    doc = Path(__file__).resolve().parents[2] / "docs" / "scaling.md"
    blocks = re.findall(r"```toml\n(.*?)```", doc.read_text(), re.DOTALL)
    assert len(blocks) >= 2
    for block in blocks:
        gw_config.parse(tomllib.loads(block))


def test_redis_store_orphan_closed_after_what_the_reader_has(redis_target: Target) -> None:
    # The dead replica sent seqs 0-5 to its client but stored only 0-3; the client
    # resumes after 5 and must get error + stream.end as seqs 6 and 7.
    async def go() -> None:
        store = _redis(redis_target, lease_s=0.05)
        try:
            await store.create("h", INFO)
            await store.commit([Append("h", _stream(8)[:4], None, True)])
            await _until(lambda: _owner_gone(store, "h"))
            reader = await store.open_reader("h", 5)
            assert reader.first == []
            assert await store.close_orphan("h", "internal_error", ORPHAN_MESSAGE, seen=5)
            got = await reader.next(5.0)
            got += await reader.next(0)
            reader.close()
            assert [(e.seq, e.type) for e in got] == [(6, "error"), (7, "stream.end")]
            # A reader from before the hole cannot get a whole stream any more (410).
            with pytest.raises(EventsTrimmed):
                await store.open_reader("h", 2)
        finally:
            await store.aclose()

    asyncio.run(go())


def test_redis_store_writes_back_what_a_failover_lost(redis_target: Target) -> None:
    # A primary acknowledged seqs 0-9 and died having replicated only 0-6: the
    # promoted replica lacks 7-9. The owner's next commit finds the gap and
    # writes back the entries its session still holds, so the stream is whole.
    async def go() -> None:
        store = _redis(redis_target)
        try:
            await store.create("f", INFO)
            entries = _stream(20)
            assert await store.commit([Append("f", entries[:10], None, True)]) == set()
            # The promoted replica's copy: 0-6 only (XDEL would not do: a stream
            # remembers its last ID, which a replica that never saw 7-9 does not).
            stream = store.keys("f")[1]
            await store.call("DEL", stream)
            for entry in entries[:7]:
                await store.call(
                    "XADD", stream, f"0-{entry.seq + 1}", "t", entry.type, "f", entry.frame
                )
            tail = entries[:10]
            assert (
                await store.commit([Append("f", entries[10:11], None, False, False, tail)]) == set()
            )
            # A retry of a commit that did land skips it instead of refusing it.
            again = Append("f", entries[9:12], None, False, True, tail)
            assert await store.commit([again]) == set()
            rest = entries[12:]
            assert await store.commit([Append("f", rest, "completed", False)]) == set()
            # ...and a retried end that did land counts as done.
            assert await store.commit([Append("f", rest[-1:], "completed", False, True)]) == set()
            whole = (await store.open_reader("f", -1)).first
            assert [e.seq for e in whole] == list(range(len(entries)))
            # A gap wider than the session's replay stays a hole: a reader from before
            # it gets 410 (EventsTrimmed), one from after it the rest.
            await store.create("g", INFO)
            assert await store.commit([Append("g", entries[:3], None, True)]) == set()
            assert await store.commit([Append("g", entries[5:6], None, False)]) == set()
            with pytest.raises(EventsTrimmed):
                await store.open_reader("g", 1)
            assert [e.seq for e in (await store.open_reader("g", 4)).first] == [5]
        finally:
            await store.aclose()

    asyncio.run(go())
