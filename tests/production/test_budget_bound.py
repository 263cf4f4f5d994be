"""The budget's bound under concurrency and hang-ups, on real gateways (issue 30).

docs/gateway.md ("Security", worst-case overshoot): in the gateway's count,
the tokens served never exceed the budget; a key's grants are taken
atomically (in the process on the memory backend, in one Lua script on Redis,
across replicas). Here waves of 24 clients at once spend one key's budget,
through one gateway (memory) and through two replicas sharing Redis: each asks
for ``max_tokens`` 8, so that many hold a grant at once and each outgrows it
(the gateway's estimate is above the demo's count), and a third of them hang
up mid-stream. The tokens the clients received (the demo's own count: a
complete stream's ``usage``, a cut one's deltas plus its one-token prompt)
never exceed the budget; the budget is really spent, not locked up in grants;
and the key is refused once it is.

Bounded: at most 8 waves of 24 streams of at most 8 tokens each, 127.0.0.1
only, the gateways and Redis stopped at the end.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from contextlib import ExitStack

import httpx
import msgspec
import pytest
from tests.production.conftest import Keys, table
from tests.resume.redis_proc import RedisServer

from tokenwire.testing import processes

BUDGET = 120
CLIENTS = 24
WAVES = 8
PROMPT_TOKENS = 1  # the demo's count of "hi"
HEADERS = {"content-type": "application/llm-request+json"}


def _payload() -> bytes:
    return msgspec.json.encode(
        {
            "version": "1.0",
            "stream": True,
            "model": "demo",
            "messages": [{"role": "user", "content": "hi"}],
            "parameters": {"max_tokens": 8},
            # Paced, so that the streams overlap and the hang-ups land mid-stream.
            "extensions": {"tokenwire:demo": {"tokens": 40, "delay_ms": 2}},
        }
    )


async def _one(
    client: httpx.AsyncClient, auth: dict[str, str], cut_after: int | None
) -> tuple[int, bool]:
    """One stream, hung up after ``cut_after`` deltas: (tokens received, admitted)."""
    headers = {**HEADERS, **auth}
    async with client.stream("POST", "/v1/stream", content=_payload(), headers=headers) as resp:
        if resp.status_code != 200:
            await resp.aread()
            assert resp.status_code == 429, resp.status_code
            assert resp.json()["error"]["code"] == "budget_exceeded"
            return 0, False
        got = 0
        async for line in resp.aiter_lines():
            if not line.startswith("data: "):
                continue
            event = json.loads(line[6:])
            if event["type"] == "content.delta":
                got += 1
                if cut_after is not None and got >= cut_after:
                    return PROMPT_TOKENS + got, True  # the client hangs up here
            elif event["type"] == "usage" and not event.get("tokenwire:estimated"):
                return int(event["input_tokens"]) + int(event["output_tokens"]), True
        return PROMPT_TOKENS + got, True


async def _spend(urls: list[str], auth: dict[str, str]) -> tuple[int, int]:
    """Waves of ``CLIENTS`` at once until a whole wave is refused: (served, waves)."""
    clients = [httpx.AsyncClient(base_url=url, timeout=60.0) for url in urls]
    served = 0
    try:
        for wave in range(1, WAVES + 1):
            results = await asyncio.gather(
                *(
                    _one(clients[i % len(clients)], auth, 3 if i % 3 == 0 else None)
                    for i in range(CLIENTS)
                )
            )
            served += sum(got for got, _ in results)
            if not any(admitted for _, admitted in results):
                return served, wave
        return served, WAVES
    finally:
        for client in clients:
            await client.aclose()


@pytest.fixture
def budget_keys() -> Iterator[tuple[Keys, dict[str, str]]]:
    keys = Keys()
    secret = keys.add(f"budget-{uuid.uuid4().hex[:8]}", token_budget=BUDGET)
    yield keys, {"authorization": f"Bearer {secret}"}


def _check(served: int, waves: int) -> None:
    assert served <= BUDGET, served
    # Spent, not locked up in grants: the gateway's count (one token per 4
    # characters) is about twice the demo's for these words.
    assert served >= BUDGET // 4, served
    assert waves < WAVES, "the key was never refused"


def test_memory_backend_bound(budget_keys: tuple[Keys, dict[str, str]]) -> None:
    keys, auth = budget_keys
    with processes.serve_gateway(keys.toml()) as gateway:
        _check(*asyncio.run(_spend([gateway.url], auth)))


def test_redis_backend_bound_across_two_replicas(
    budget_keys: tuple[Keys, dict[str, str]], redis_server: RedisServer
) -> None:
    keys, auth = budget_keys
    limits = {"backend": "redis", "url": redis_server.url, "prefix": "test:bound"}
    config = keys.toml() + "\n" + table("limits", limits)
    with ExitStack() as stack:
        a = stack.enter_context(processes.serve_gateway(config))
        b = stack.enter_context(processes.serve_gateway(config))
        # Every wave goes to both replicas; the last is refused by both.
        _check(*asyncio.run(_spend([a.url, b.url], auth)))
