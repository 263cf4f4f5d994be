"""The budget's bound under concurrency and hang-ups, on real gateways (issue 30).

docs/gateway.md ("Security", worst-case overshoot): in the gateway's count,
the tokens served never exceed the budget; a key's grants are taken
atomically (in the process on the memory backend, in one Lua script on Redis,
across replicas). Here 24 clients at once, a third of them hanging up
mid-stream, spend one key's budget through one gateway (memory) and through
two replicas sharing Redis; the tokens the clients received (the demo's own
count: a complete stream's ``usage``, a cut one's deltas plus its one-token
prompt) never exceed the budget, and the key is refused once it is spent.

Bounded: 24 streams of at most 40 tokens each, 127.0.0.1 only, the gateways
and Redis stopped at the end.
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
PROMPT_TOKENS = 1  # the demo's count of "hi"


def _payload() -> bytes:
    return msgspec.json.encode(
        {
            "version": "1.0",
            "stream": True,
            "model": "demo",
            "messages": [{"role": "user", "content": "hi"}],
            # Paced, so that the streams overlap and the hang-ups land mid-stream.
            "extensions": {"tokenwire:demo": {"tokens": 40, "delay_ms": 2}},
        }
    )


async def _one(client: httpx.AsyncClient, auth: dict[str, str], cut_after: int | None) -> int:
    """One stream; hang up after ``cut_after`` deltas. Returns the tokens received."""
    headers = {"content-type": "application/llm-request+json", **auth}
    async with client.stream("POST", "/v1/stream", content=_payload(), headers=headers) as resp:
        if resp.status_code != 200:
            await resp.aread()
            assert resp.status_code == 429, resp.status_code
            return 0
        got = 0
        async for line in resp.aiter_lines():
            if not line.startswith("data: "):
                continue
            event = json.loads(line[6:])
            if event["type"] == "content.delta":
                got += 1
                if cut_after is not None and got >= cut_after:
                    return PROMPT_TOKENS + got  # the client hangs up here
            elif event["type"] == "usage" and not event.get("tokenwire:estimated"):
                return int(event["input_tokens"]) + int(event["output_tokens"])
        return PROMPT_TOKENS + got


async def _spend(urls: list[str], auth: dict[str, str]) -> int:
    clients = [httpx.AsyncClient(base_url=url, timeout=60.0) for url in urls]
    try:
        calls = [
            _one(clients[i % len(clients)], auth, 5 if i % 3 == 0 else None) for i in range(CLIENTS)
        ]
        return sum(await asyncio.gather(*calls))
    finally:
        for client in clients:
            await client.aclose()


async def _refused(url: str, auth: dict[str, str]) -> int:
    """Until the key is refused (the settlements land just after the streams end)."""
    async with httpx.AsyncClient(base_url=url, timeout=60.0) as client:
        for _ in range(CLIENTS * 2):
            headers = {"content-type": "application/llm-request+json", **auth}
            resp = await client.post("/v1/stream", content=_payload(), headers=headers)
            if resp.status_code == 429:
                assert resp.json()["error"]["code"] == "budget_exceeded"
                return 429
            assert resp.status_code == 200
        return 200


@pytest.fixture
def budget_keys() -> Iterator[tuple[Keys, dict[str, str]]]:
    keys = Keys()
    secret = keys.add(f"budget-{uuid.uuid4().hex[:8]}", token_budget=BUDGET)
    yield keys, {"authorization": f"Bearer {secret}"}


def test_memory_backend_bound(budget_keys: tuple[Keys, dict[str, str]]) -> None:
    keys, auth = budget_keys
    with processes.serve_gateway(keys.toml()) as gateway:
        served = asyncio.run(_spend([gateway.url], auth))
        assert served <= BUDGET, served
        assert served > 0
        assert asyncio.run(_refused(gateway.url, auth)) == 429


def test_redis_backend_bound_across_two_replicas(
    budget_keys: tuple[Keys, dict[str, str]], redis_server: RedisServer
) -> None:
    keys, auth = budget_keys
    limits = {"backend": "redis", "url": redis_server.url, "prefix": "test:bound"}
    config = keys.toml() + "\n" + table("limits", limits)
    with ExitStack() as stack:
        a = stack.enter_context(processes.serve_gateway(config))
        b = stack.enter_context(processes.serve_gateway(config))
        served = asyncio.run(_spend([a.url, b.url], auth))
        assert served <= BUDGET, served
        assert served > 0
        # Spent through both: refused on each.
        assert asyncio.run(_refused(a.url, auth)) == 429
        assert asyncio.run(_refused(b.url, auth)) == 429
