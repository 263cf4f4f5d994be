"""Reserve, extend, settle: the same answers from the memory backend and Redis's scripts.

Issue 30: a request reserves its tokens at admission (never past what the
budget has left), a stream past its grant asks for more, and the end replaces
the grant by what was used. Each step is atomic: the memory backend runs it in
one event-loop step, Redis in one Lua script.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest
from tests.resume.redis_proc import RedisServer

from tokenwire.gateway.config.production import KeyConfig
from tokenwire.gateway.policy.keys import KeyRecord, hash_key, new_key
from tokenwire.gateway.policy.limits import Decision, Limits, MemoryLimits, RedisLimits


def _key(**limits: float | int) -> KeyRecord:
    key_id = f"grants-{new_key()[-8:]}"
    return KeyRecord(KeyConfig(id=key_id, hash=hash_key(new_key()), **limits))  # type: ignore[arg-type]


@pytest.fixture(params=["memory", "redis"])
def backend(request: pytest.FixtureRequest) -> Callable[[], object]:
    if request.param == "memory":

        @asynccontextmanager
        async def memory() -> AsyncIterator[Limits]:
            yield MemoryLimits()

        return memory
    server: RedisServer = request.getfixturevalue("redis_server")

    @asynccontextmanager
    async def redis() -> AsyncIterator[Limits]:
        limits = RedisLimits(server.url, prefix="test:grants")
        try:
            yield limits
        finally:
            await limits.aclose()

    return redis


def _run(backend: Callable[[], object], test: Callable[[Limits], Awaitable[None]]) -> None:
    async def go() -> None:
        async with backend() as limits:  # type: ignore[attr-defined]
            await test(limits)

    asyncio.run(go())


def test_a_grant_never_passes_the_budget(backend: Callable[[], object]) -> None:
    async def test(limits: Limits) -> None:
        key = _key(token_budget=100)
        assert await limits.reserve(key, 70) == 70
        assert await limits.reserve(key, 70) == 30  # what is left
        refused = await limits.reserve(key, 1)
        assert isinstance(refused, Decision) and refused.limit == "budget"
        assert await limits.extend(key, 10) == 0
        # The first used 20 of its 70: 50 come back.
        await limits.settle(key, 70, 20)
        assert await limits.extend(key, 80) == 50
        await limits.settle(key, 30 + 50, 80)
        refused = await limits.reserve(key, 1)
        assert isinstance(refused, Decision) and refused.limit == "budget"

    _run(backend, test)


def test_concurrent_reservations_share_what_is_left(backend: Callable[[], object]) -> None:
    async def test(limits: Limits) -> None:
        key = _key(token_budget=50)
        results = await asyncio.gather(*(limits.reserve(key, 30) for _ in range(20)))
        grants = [r for r in results if not isinstance(r, Decision)]
        assert sum(grants) == 50  # 30 + 20, then nothing: never more than the budget
        assert all(isinstance(r, Decision) for r in results if r not in grants)

    _run(backend, test)


def test_the_minute_bucket_is_taken_at_admission_and_given_back_at_the_end(
    backend: Callable[[], object],
) -> None:
    async def test(limits: Limits) -> None:
        key = _key(tokens_per_minute=100)
        assert await limits.reserve(key, 150) == 150  # no budget: the whole grant
        refused = await limits.reserve(key, 1)
        assert isinstance(refused, Decision) and refused.limit == "tokens"
        await limits.settle(key, 150, 10)  # used 10: the bucket is back near full
        assert await limits.reserve(key, 1) == 1

    _run(backend, test)
