"""Per-key request and token limits and token budgets: in memory or shared through Redis.

Both limits are token buckets refilled continuously: ``requests_per_minute``
holds that many requests and refills at that rate per minute (so a burst of a
full minute's worth is allowed, then one request per ``60/rpm`` s);
``tokens_per_minute`` likewise for usage tokens (input + output), which are
known only when a stream ends, so a request is admitted while the bucket is
above zero and the stream's usage is charged afterwards (it may go negative:
the next requests wait until it refilled). ``token_budget`` is a lifetime
total.

``RedisLimits`` runs each check and each charge as one Lua script, so two
replicas can never both take the last request. Its keys are
``<prefix>:{<key id>}:req|tok|budget``: the hash tag puts one key's counters in
one Redis Cluster slot, so every script touches a single slot. The script
reads Redis's own clock (``TIME``), so replicas with skewed clocks agree.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable
from typing import Any, Final, NamedTuple, Protocol

from .keys import KeyRecord

__all__ = ["Decision", "Limits", "MemoryLimits", "RedisLimits", "build_limits"]

_log = logging.getLogger("tokenwire.gateway")

ALLOW: Final = None


class Decision(NamedTuple):
    """A refusal: which limit (``requests``, ``tokens``, ``budget``) and when to retry."""

    limit: str
    retry_after_s: float | None


class Limits(Protocol):
    """What the auth hook needs from a limits backend."""

    async def check(self, key: KeyRecord) -> Decision | None:
        """``None`` admits the request (and takes one request from its bucket)."""
        ...

    async def charge(self, key: KeyRecord, tokens: int) -> None:
        """Charge a finished stream's usage tokens to ``key``."""
        ...

    async def aclose(self) -> None: ...


def _level(tokens: float, stamp: float, capacity: float, now: float) -> float:
    return min(capacity, tokens + max(0.0, now - stamp) * capacity / 60.0)


class MemoryLimits:
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

    async def check(self, key: KeyRecord) -> Decision | None:
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
        return ALLOW

    async def charge(self, key: KeyRecord, tokens: int) -> None:
        now = self.clock()
        state = self._of(key, now)
        if key.tokens_per_minute is not None:
            state[2] = _level(state[2], state[3], key.tokens_per_minute, now) - tokens
            state[3] = now
        if key.budget is not None:
            state[4] += tokens

    async def aclose(self) -> None:
        pass


# KEYS: req, tok, budget. ARGV: rpm, tpm, budget (0: none).
# Returns {1} to admit, or {0, limit, retry-after seconds as a string} (a Lua
# number would be truncated to an integer on its way out).
_CHECK: Final = """
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
return {1}
"""

# KEYS: tok, budget. ARGV: tpm, tokens, budget (0: none).
_CHARGE: Final = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local tpm, tokens, budget = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
if tpm > 0 then
  local v = redis.call('HMGET', KEYS[1], 't', 's')
  local level, stamp = tonumber(v[1]), tonumber(v[2])
  if level == nil then level = tpm else
    local elapsed = now - stamp
    if elapsed < 0 then elapsed = 0 end
    level = math.min(tpm, level + elapsed * tpm / 60)
  end
  level = level - tokens
  redis.call('HSET', KEYS[1], 't', tostring(level), 's', tostring(now))
  -- Kept until it would have refilled, plus a minute.
  redis.call('EXPIRE', KEYS[1], math.ceil((tpm - level) * 60 / tpm) + 60)
end
if budget > 0 then redis.call('INCRBY', KEYS[2], tokens) end
return 1
"""


def _arg(value: float | int | None) -> str:
    return repr(float(value)) if value is not None else "0"


class RedisLimits:
    """The counters in Redis (single server or Cluster), shared by every replica."""

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "tokenwire:limits",
        cluster: bool = False,
        fail_open: bool = True,
        client: Any = None,
    ) -> None:
        if client is None:
            if cluster:
                from redis.asyncio.cluster import RedisCluster

                client = RedisCluster.from_url(url)
            else:
                import redis.asyncio

                client = redis.asyncio.from_url(url)
        self.client = client
        self.prefix = prefix
        self.fail_open = fail_open
        self._check = client.register_script(_CHECK)
        self._charge = client.register_script(_CHARGE)
        self._warned = False

    def keys(self, key: KeyRecord) -> tuple[str, str, str]:
        """The Redis keys of ``key``'s counters, all in the slot of ``{<key id>}``."""
        base = f"{self.prefix}:{{{key.id}}}"
        return f"{base}:req", f"{base}:tok", f"{base}:budget"

    def _unavailable(self, exc: Exception) -> None:
        if not self._warned:
            self._warned = True
            _log.warning(
                '{"msg": "limits_redis_unavailable", "error": "%s", "fail_open": %s}',
                type(exc).__name__,
                "true" if self.fail_open else "false",
            )

    async def check(self, key: KeyRecord) -> Decision | None:
        args = [_arg(key.requests_per_minute), _arg(key.tokens_per_minute), _arg(key.budget)]
        try:
            result = await self._check(keys=list(self.keys(key)), args=args)
        except Exception as exc:  # noqa: BLE001 - any Redis failure
            self._unavailable(exc)
            return None if self.fail_open else Decision("unavailable", 1.0)
        self._warned = False
        if int(result[0]) == 1:
            return ALLOW
        limit = _text(result[1])
        retry = _text(result[2]) if len(result) > 2 else ""
        return Decision(limit, float(retry) if retry else None)

    async def charge(self, key: KeyRecord, tokens: int) -> None:
        req, tok, budget = self.keys(key)
        args = [_arg(key.tokens_per_minute), str(int(tokens)), _arg(key.budget)]
        try:
            await self._charge(keys=[tok, budget], args=args)
        except Exception as exc:  # noqa: BLE001
            self._unavailable(exc)

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
