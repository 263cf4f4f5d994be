"""Request and token limits and budgets: the memory backend (an injected clock), the
Redis backend's scripts against a real ``redis-server``, and two replicas sharing one."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from tests.gateway.gateway_http import body, post
from tests.production.conftest import Keys, start, table
from tests.resume.redis_proc import RedisServer

from tokenwire.gateway.config.production import KeyConfig
from tokenwire.gateway.policy.keys import KeyRecord, hash_key, new_key
from tokenwire.gateway.policy.limits import MemoryLimits, RedisLimits, retry_after_header
from tokenwire.testing import wait_until


def _key(key_id: str = "k", **limits: float | int) -> KeyRecord:
    return KeyRecord(KeyConfig(id=key_id, hash=hash_key(new_key()), **limits))  # type: ignore[arg-type]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_memory_request_bucket_refills_at_its_rate() -> None:
    clock = Clock()
    limits = MemoryLimits(clock)
    key = _key(requests_per_minute=2)

    async def run() -> None:
        assert await limits.check(key) is None
        assert await limits.check(key) is None
        refused = await limits.check(key)
        assert refused is not None and refused.limit == "requests"
        assert refused.retry_after_s == pytest.approx(30.0)
        assert retry_after_header(refused) == "30"
        clock.now += 29.0
        assert await limits.check(key) is not None
        clock.now += 1.0
        assert await limits.check(key) is None
        # Another key has its own bucket.
        assert await limits.check(_key("other", requests_per_minute=2)) is None

    asyncio.run(run())


def test_memory_tokens_are_charged_after_the_stream_and_budgets_end() -> None:
    clock = Clock()
    limits = MemoryLimits(clock)
    key = _key(tokens_per_minute=100)
    budget = _key("b", token_budget=50)

    async def run() -> None:
        assert await limits.check(key) is None
        await limits.charge(key, 150)  # over the bucket: it goes negative
        refused = await limits.check(key)
        assert refused is not None and refused.limit == "tokens"
        assert refused.retry_after_s == pytest.approx(30.6)
        clock.now += 31.0
        assert await limits.check(key) is None
        assert await limits.check(budget) is None
        await limits.charge(budget, 49)
        assert await limits.check(budget) is None
        await limits.charge(budget, 1)
        spent = await limits.check(budget)
        assert spent is not None and spent.limit == "budget" and spent.retry_after_s is None
        clock.now += 10_000
        assert await limits.check(budget) is not None  # a budget does not refill

    asyncio.run(run())


def test_redis_scripts_keep_one_keys_counters_in_one_slot(redis_server: RedisServer) -> None:
    async def run() -> None:
        limits = RedisLimits(redis_server.url, prefix="test:limits:units")
        key = _key(
            f"units-{new_key()[-8:]}",
            requests_per_minute=2,
            tokens_per_minute=100,
            token_budget=120,
        )
        names = limits.keys(key)
        assert all(f"{{{key.id}}}" in name for name in names)
        try:
            assert await limits.check(key) is None
            assert await limits.check(key) is None
            refused = await limits.check(key)
            assert refused is not None and refused.limit == "requests"
            assert 29.0 < (refused.retry_after_s or 0) <= 30.0
            await limits.charge(key, 130)
            over = await limits.check(key)
            assert over is not None and over.limit == "budget"
        finally:
            await limits.client.delete(*names)
            await limits.aclose()

    asyncio.run(run())


def test_redis_down_fails_open_or_closed_as_configured(tmp_path: Path) -> None:
    from tests.resume.redis_proc import free_port

    url = f"redis://127.0.0.1:{free_port()}/0"  # nobody listens there

    async def run() -> None:
        key = _key(requests_per_minute=1)
        open_ = RedisLimits(url, fail_open=True)
        closed = RedisLimits(url, fail_open=False)
        try:
            assert await open_.check(key) is None
            refused = await closed.check(key)
            assert refused is not None and refused.limit == "unavailable"
        finally:
            await open_.aclose()
            await closed.aclose()

    asyncio.run(run())


def test_a_limit_reached_through_one_replica_holds_on_the_other(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    keys = Keys()
    rpm = keys.add(f"shared-rpm-{new_key()[-6:]}", requests_per_minute=2)
    tpm_id = f"shared-tpm-{new_key()[-6:]}"
    tpm = keys.add(tpm_id, tokens_per_minute=5)
    config = (
        keys.toml()
        + "\n"
        + table("limits", {"backend": "redis", "url": redis_server.url, "prefix": "test:replicas"})
    )
    a = start(tmp_path, config)
    try:
        b = start(tmp_path, config)
        try:
            with a.client(timeout=10.0) as ca, b.client(timeout=10.0) as cb:
                auth = {"authorization": f"Bearer {rpm}"}
                assert post(ca, body("demo", "hi"), headers=auth).status_code == 200
                assert post(ca, body("demo", "hi"), headers=auth).status_code == 200
                refused = post(cb, body("demo", "hi"), headers=auth)
                assert refused.status_code == 429
                assert refused.json()["error"]["code"] == "rate_limited"
                assert 1 <= int(refused.headers["retry-after"]) <= 30
                # Tokens: the demo's usage (well over 5) charged through A refuses B.
                auth = {"authorization": f"Bearer {tpm}"}
                assert post(ca, body("demo", "hello there"), headers=auth).status_code == 200
                # The charge lands a moment after the stream ends: wait for it in Redis.
                charged = f"test:replicas:{{{tpm_id}}}:tok"
                wait_until(
                    lambda: redis_server.command("EXISTS", charged) == b":1\r\n",
                    timeout=10.0,
                    what="the usage charged in Redis",
                )
                refused = post(cb, body("demo", "hi"), headers=auth)
                assert refused.status_code == 429
                assert "tokens per minute" in refused.json()["error"]["message"]
        finally:
            b.stop()
    finally:
        a.stop()
