"""Per-key request and token limits and token budgets: in memory or shared through Redis.

Both limits are token buckets refilled continuously: ``requests_per_minute``
holds that many requests and refills at that rate per minute (so a burst of a
full minute's worth is allowed, then one request per ``60/rpm`` s);
``tokens_per_minute`` likewise for usage tokens (input + output). A request is
admitted while the bucket is above zero. ``token_budget`` is a lifetime total.

Tokens are never charged only at the end (a client that hung up
before ``usage`` was never charged, and concurrent requests all passed one
check). Three steps, each atomic:

- ``reserve(key, n)`` at admission checks every limit, takes the request, and
  grants up to ``n`` tokens (the prompt's estimate plus ``max_tokens`` or the
  configured ``reserve_tokens``): counted as spent at once, in the budget and
  the minute's bucket, so concurrent requests share what is left instead of
  each seeing all of it;
- ``extend(key, n)`` while the stream runs past its grant grants up to ``n``
  more (0 when the budget is spent: the stream is cut, ``metering``);
- ``settle(key, granted, used)`` at the end replaces the grant by what was
  used (the upstream's usage, or the gateway's count when it never came).

A budget is never granted past its total, so the tokens the gateway counts
never exceed it (docs/gateway.md, "Security").

``RedisLimits`` runs each step as one Lua script, so two replicas can never
both take the last request or the last tokens. Its keys are
``<prefix>:{<key id>}:req|tok|budget``: the hash tag puts one key's counters in
one Redis Cluster slot, so every script touches a single slot. The script
reads Redis's own clock (``TIME``), so replicas with skewed clocks agree.
On Cluster its client reads the slot map at ``start`` (redis_clients.py): a
client that waited for its first request to do so could not find the cluster
if the URL's node had died meanwhile, and would serve without counting until
that node came back.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable
from typing import Any, Final, NamedTuple, Protocol

from ..redis_clients import client_options, cluster_client, load_slot_map
from .keys import KeyRecord

__all__ = ["Decision", "Limits", "MemoryLimits", "RedisLimits", "build_limits"]


_log = logging.getLogger("tokenwire.gateway")

ALLOW: Final = None


class Decision(NamedTuple):
    """A refusal: which limit (``requests``, ``tokens``, ``budget``) and when to retry."""

    limit: str
    retry_after_s: float | None


class Limits(Protocol):
    """What the admission and the metering need from a limits backend."""

    async def reserve(self, key: KeyRecord, tokens: int) -> Decision | int:
        """A refusal, or admit the request: take one request from its bucket and
        grant up to ``tokens`` (fewer when the budget has less left), counted as
        spent until ``settle``."""
        ...

    async def extend(self, key: KeyRecord, tokens: int) -> int:
        """Grant up to ``tokens`` more to a running stream (0: the budget is spent)."""
        ...

    async def settle(self, key: KeyRecord, granted: int, used: int) -> None:
        """A stream is over: it used ``used`` tokens of the ``granted`` ones."""
        ...

    async def check(self, key: KeyRecord) -> Decision | None:
        """``reserve(key, 0)``: ``None`` admits the request."""
        result = await self.reserve(key, 0)
        return result if isinstance(result, Decision) else ALLOW

    async def charge(self, key: KeyRecord, tokens: int) -> None:
        """``settle(key, 0, tokens)``: charge tokens nothing reserved."""
        await self.settle(key, 0, tokens)

    async def start(self) -> None:
        """At the gateway's startup, before the first request."""
        ...

    async def aclose(self) -> None: ...


def _level(tokens: float, stamp: float, capacity: float, now: float) -> float:
    return min(capacity, tokens + max(0.0, now - stamp) * capacity / 60.0)


class MemoryLimits(Limits):
    """The counters of one process. ``clock`` is injectable for tests."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        # key id -> [request tokens, stamp, usage tokens, stamp, budget used]
        self._state: dict[str, list[float]] = {}

    def _of(self, key: KeyRecord, now: float) -> list[float]:
        state = self._state.get(key.id)
        if state is None:
            state = [key.requests_per_minute or 0.0, now, key.tokens_per_minute or 0.0, now, 0.0]
            self._state[key.id] = state
        return state

    # Each method runs without an await: one event loop step, atomic in this process.

    async def reserve(self, key: KeyRecord, tokens: int) -> Decision | int:
        now = self.clock()
        state = self._of(key, now)
        if key.budget is not None and state[4] >= key.budget:
            return Decision("budget", None)
        if key.tokens_per_minute is not None:
            level = _level(state[2], state[3], key.tokens_per_minute, now)
            if level <= 0:
                return Decision("tokens", (1 - level) * 60.0 / key.tokens_per_minute)
        if key.requests_per_minute is not None:
            rpm = key.requests_per_minute
            level = _level(state[0], state[1], rpm, now)
            if level < 1:
                return Decision("requests", (1 - level) * 60.0 / rpm)
            state[0], state[1] = level - 1, now
        return self._take(key, state, tokens, now)

    def _take(self, key: KeyRecord, state: list[float], tokens: int, now: float) -> int:
        granted = max(0, int(tokens))
        if key.budget is not None:
            granted = max(0, min(granted, int(key.budget - state[4])))
            state[4] += granted
        if key.tokens_per_minute is not None and granted:
            state[2] = _level(state[2], state[3], key.tokens_per_minute, now) - granted
            state[3] = now
        return granted

    async def extend(self, key: KeyRecord, tokens: int) -> int:
        now = self.clock()
        return self._take(key, self._of(key, now), tokens, now)

    async def settle(self, key: KeyRecord, granted: int, used: int) -> None:
        now = self.clock()
        state = self._of(key, now)
        delta = int(used) - int(granted)
        if key.tokens_per_minute is not None:
            tpm = key.tokens_per_minute
            state[2] = min(tpm, _level(state[2], state[3], tpm, now) - delta)
            state[3] = now
        if key.budget is not None:
            state[4] = max(0.0, state[4] + delta)

    async def start(self) -> None:
        pass

    async def aclose(self) -> None:
        pass


# What every script starts with: Redis's clock, the bucket level, and the grant.
_COMMON: Final = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local function level(key, cap)
  local v = redis.call('HMGET', key, 't', 's')
  local tokens, stamp = tonumber(v[1]), tonumber(v[2])
  if tokens == nil then return cap end
  local elapsed = now - stamp
  if elapsed < 0 then elapsed = 0 end
  return math.min(cap, tokens + elapsed * cap / 60)
end
-- Take delta tokens from the minute's bucket (give back when negative): it may
-- go below zero (the next requests wait), never above its capacity.
local function debit(key, tpm, delta)
  local l = level(key, tpm) - delta
  if l > tpm then l = tpm end
  redis.call('HSET', key, 't', tostring(l), 's', tostring(now))
  -- Kept until it would have refilled, plus a minute.
  redis.call('EXPIRE', key, math.ceil((tpm - l) * 60 / tpm) + 60)
end
-- Grant up to n tokens, never past the budget's total; counted as spent now.
local function take(tok, bkey, tpm, budget, n)
  local granted = math.floor(n)
  if granted < 0 then granted = 0 end
  if budget > 0 then
    local left = math.floor(budget - tonumber(redis.call('GET', bkey) or '0'))
    if left < 0 then left = 0 end
    if granted > left then granted = left end
    if granted > 0 then redis.call('INCRBY', bkey, granted) end
  end
  if tpm > 0 and granted > 0 then debit(tok, tpm, granted) end
  return granted
end
"""

# KEYS: req, tok, budget. ARGV: rpm, tpm, budget (0: none), tokens to reserve.
# Returns {1, granted} to admit, or {0, limit, retry-after seconds as a string}
# (a Lua number would be truncated to an integer on its way out).
_RESERVE: Final = (
    _COMMON
    + """
local rpm, tpm, budget = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
if budget > 0 then
  local used = tonumber(redis.call('GET', KEYS[3]) or '0')
  if used >= budget then return {0, 'budget', ''} end
end
if tpm > 0 then
  local tk = level(KEYS[2], tpm)
  if tk <= 0 then return {0, 'tokens', tostring((1 - tk) * 60 / tpm)} end
end
if rpm > 0 then
  local r = level(KEYS[1], rpm)
  if r < 1 then return {0, 'requests', tostring((1 - r) * 60 / rpm)} end
  redis.call('HSET', KEYS[1], 't', tostring(r - 1), 's', tostring(now))
  redis.call('EXPIRE', KEYS[1], 120)
end
return {1, take(KEYS[2], KEYS[3], tpm, budget, tonumber(ARGV[4]))}
"""
)

# KEYS: tok, budget. ARGV: tpm, budget (0: none), tokens wanted. Returns the grant.
_EXTEND: Final = (
    _COMMON
    + """
return take(KEYS[1], KEYS[2], tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]))
"""
)

# KEYS: tok, budget. ARGV: tpm, budget (0: none), used - granted (may be negative).
_SETTLE: Final = (
    _COMMON
    + """
local tpm, budget, delta = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
if tpm > 0 and delta ~= 0 then debit(KEYS[1], tpm, delta) end
if budget > 0 and delta ~= 0 then
  if redis.call('INCRBY', KEYS[2], delta) < 0 then redis.call('SET', KEYS[2], '0') end
end
return 1
"""
)


def _arg(value: float | int | None) -> str:
    return repr(float(value)) if value is not None else "0"


class RedisLimits(Limits):
    """The counters in Redis (single server or Cluster), shared by every replica."""

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "tokenwire:limits",
        cluster: bool = False,
        fail_open: bool = True,
        client: Any = None,
        socket_timeout_s: float = 5.0,
    ) -> None:
        if client is None:
            # A request waits on its check: a dead node fails it at once (fail_open).
            if cluster:
                client = cluster_client(url, socket_timeout_s=socket_timeout_s)
            else:
                import redis.asyncio

                client = redis.asyncio.from_url(url, **client_options(socket_timeout_s))
        self.client = client
        self.cluster = cluster
        self.prefix = prefix
        self.fail_open = fail_open
        self._reserve = client.register_script(_RESERVE)
        self._extend = client.register_script(_EXTEND)
        self._settle = client.register_script(_SETTLE)
        self._warned = False

    def keys(self, key: KeyRecord) -> tuple[str, str, str]:
        """The Redis keys of ``key``'s counters, all in the slot of ``{<key id>}``."""
        base = f"{self.prefix}:{{{key.id}}}"
        return f"{base}:req", f"{base}:tok", f"{base}:budget"

    async def start(self) -> None:
        """On Cluster: read the slot map now, while the URL's node answers, so that
        every node becomes a seed (see module doc). A cluster that does not answer
        yet is tried again by the first request."""
        if self.cluster and not await load_slot_map(self.client):
            self._unavailable("ClusterUnreachable")

    def _unavailable(self, error: str) -> None:
        if not self._warned:
            self._warned = True
            _log.warning(
                '{"msg": "limits_redis_unavailable", "error": "%s", "fail_open": %s}',
                error,
                "true" if self.fail_open else "false",
            )

    async def reserve(self, key: KeyRecord, tokens: int) -> Decision | int:
        args = [
            _arg(key.requests_per_minute),
            _arg(key.tokens_per_minute),
            _arg(key.budget),
            str(max(0, int(tokens))),
        ]
        try:
            result = await self._reserve(keys=list(self.keys(key)), args=args)
        except Exception as exc:  # noqa: BLE001 - any Redis failure
            self._unavailable(type(exc).__name__)
            # fail_open serves without counting: the budget's bound does not hold then.
            return max(0, int(tokens)) if self.fail_open else Decision("unavailable", 1.0)
        self._warned = False
        if int(result[0]) == 1:
            return int(result[1])
        limit = _text(result[1])
        retry = _text(result[2]) if len(result) > 2 else ""
        return Decision(limit, float(retry) if retry else None)

    async def extend(self, key: KeyRecord, tokens: int) -> int:
        _, tok, budget = self.keys(key)
        args = [_arg(key.tokens_per_minute), _arg(key.budget), str(max(0, int(tokens)))]
        try:
            return int(await self._extend(keys=[tok, budget], args=args))
        except Exception as exc:  # noqa: BLE001
            self._unavailable(type(exc).__name__)
            return max(0, int(tokens)) if self.fail_open else 0

    async def settle(self, key: KeyRecord, granted: int, used: int) -> None:
        _, tok, budget = self.keys(key)
        delta = int(used) - int(granted)
        args = [_arg(key.tokens_per_minute), _arg(key.budget), str(delta)]
        try:
            await self._settle(keys=[tok, budget], args=args)
        except Exception as exc:  # noqa: BLE001
            self._unavailable(type(exc).__name__)

    async def aclose(self) -> None:
        close = getattr(self.client, "aclose", None) or self.client.close
        result = close()
        if asyncio.iscoroutine(result):
            await result


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def retry_after_header(decision: Decision) -> str | None:
    """The ``Retry-After`` value (whole seconds, at least 1) for a refusal."""
    if decision.retry_after_s is None:
        return None
    return str(max(1, math.ceil(decision.retry_after_s)))


def build_limits(backend: str, url: str | None, **options: Any) -> Limits:
    """The backend ``[limits]`` names."""
    if backend == "redis":
        assert url is not None  # checked by config_prod.check
        return RedisLimits(url, **options)
    return MemoryLimits()
