"""The limit check off the first token's path (docs/gateway.md, "Limits"): with the Redis
limits it runs beside the upstream connect and request write, and is joined before
the response starts. In process: a limiter that answers only once the upstream has
been called proves the two overlap (inline, they would deadlock; the test's timeout
fails it); a refusal is still answered with its status, and the upstream request
already made is cancelled."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from tests.server.server_asgi import Exchange

import tokenwire
from tokenwire import events as ev
from tokenwire.gateway import config as gw_config
from tokenwire.gateway.policy.keys import KeyRecord, hash_key, new_key
from tokenwire.gateway.policy.limits import Decision
from tokenwire.gateway.production import Production, ProductionMiddleware
from tokenwire.request import Request
from tokenwire.server import StreamEndpoint

SECRET = new_key()


class HeldLimits:
    """Answers ``decision`` only once ``release`` is set (by the upstream, below)."""

    def __init__(self, decision: Decision | None) -> None:
        self.decision = decision
        self.release = asyncio.Event()
        self.checks = 0

    async def check(self, key: KeyRecord) -> Decision | None:
        self.checks += 1
        await self.release.wait()
        return self.decision

    async def charge(self, key: KeyRecord, tokens: int) -> None:
        pass

    async def aclose(self) -> None:
        pass


class Upstream:
    """A provider whose call is the upstream request: it lets the limiter answer, then
    streams ``text`` (or, with ``hold``, waits for a first token that never comes)."""

    def __init__(self, limits: HeldLimits, *, hold: bool = False) -> None:
        self.limits = limits
        self.hold = hold
        self.pending_at_call: bool | None = None
        self.outcome = "not called"

    async def generate(self, request: Request) -> AsyncIterator[ev.Event]:
        # The check is still in flight while the upstream is being called.
        self.pending_at_call = not self.limits.release.is_set()
        self.limits.release.set()
        self.outcome = "called"
        try:
            if self.hold:
                await asyncio.Event().wait()
            yield ev.ContentDelta(
                v=ev.VERSION, seq=0, index=0, role="assistant", delta=ev.Delta(text="hello")
            )
            self.outcome = "completed"
        except (asyncio.CancelledError, GeneratorExit):
            self.outcome = "cancelled"
            raise


def _production(limits: HeldLimits) -> Production:
    config = gw_config.parse(
        {
            "keys": [{"id": "k", "hash": hash_key(SECRET), "requests_per_minute": 1}],
            "limits": {"backend": "redis", "url": "redis://127.0.0.1:1/0"},
        }
    )
    production = Production(config, limits=limits)
    assert production.defer_limits  # the Redis limits: off the critical path
    return production


def _request(**extensions: Any) -> bytes:
    body: dict[str, Any] = {
        "version": "1.0",
        "stream": True,
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
    }
    if extensions:
        body["extensions"] = extensions
    return json.dumps(body).encode()


def _run(limits: HeldLimits, upstream: Upstream, body: bytes) -> Exchange:
    app = ProductionMiddleware(StreamEndpoint(upstream), _production(limits))
    exchange = Exchange(body, headers={"authorization": f"Bearer {SECRET}"})

    async def go() -> None:
        async with asyncio.timeout(30):  # bounded: a deadlock fails, never hangs
            await app(exchange.scope, exchange.receive, exchange.send)

    asyncio.run(go())
    return exchange


def test_the_limit_check_runs_while_the_upstream_is_called() -> None:
    limits = HeldLimits(None)
    upstream = Upstream(limits)
    exchange = _run(limits, upstream, _request())
    assert upstream.pending_at_call is True
    assert limits.checks == 1
    assert exchange.status == 200
    events = list(tokenwire.iter_events(exchange.body))
    assert [e.type for e in events][-2:] == ["usage", "stream.end"]
    assert tokenwire.validate([exchange.body]).ok
    assert upstream.outcome == "completed"


def test_a_refused_request_keeps_its_status_and_its_upstream_call_is_cancelled() -> None:
    limits = HeldLimits(Decision("requests", 7.0))
    upstream = Upstream(limits, hold=True)
    exchange = _run(limits, upstream, _request())
    assert upstream.pending_at_call is True
    assert exchange.status == 429
    assert exchange.headers["retry-after"] == "7"
    error = json.loads(exchange.body)["error"]
    assert error["code"] == "rate_limited" and "requests per minute" in error["message"]
    assert b"event:" not in exchange.body  # no event left before the check said no
    assert upstream.outcome == "cancelled"


def test_a_resumable_stream_is_checked_before_anything_starts() -> None:
    # Refused, it must leave no stored stream behind: its check is not deferred.
    limits = HeldLimits(Decision("requests", 7.0))
    limits.release.set()
    upstream = Upstream(limits)
    exchange = _run(limits, upstream, _request(**{"tokenwire:resumable": True}))
    assert exchange.status == 429
    assert upstream.outcome == "not called"
