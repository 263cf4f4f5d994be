"""Reliability routing: retries, ordered fallbacks, weighted load balancing, breakers.

``RoutedProvider`` wraps the deployments of one model name (each a provider
built from the model's entry with a deployment's overrides) and the routes of
its ``fallbacks``. For each request:

1. the model's deployments are tried, picked at random by ``weight`` among
   those whose circuit breaker lets a call through, preferring one not yet
   tried by this request; up to ``1 + retries`` attempts, with exponential
   backoff and full jitter between them;
2. when they are all spent (or all breakers are open), the next model of
   ``fallbacks`` is tried the same way, with the request's ``model`` renamed;
3. the first event that is not an error commits the stream to that
   deployment: from then on a failure is an ``error`` event for the client,
   never a silent switch to another deployment (the client has already seen
   tokens from this one).

A failure before the first token is retried when it is a connect error, a
429, a 5xx or a timeout (the provider's ``error`` event says ``rate_limited``,
``overloaded`` or ``internal_error``, and its ``upstream_status``, when set, is
not a 4xx other than 408 and 429), or any exception. The last failure is what
the client gets when nothing succeeds. Every attempt is appended to the
request's context (the log line's ``attempts``) and counted by ``on_attempt``
(the metrics): ``retry`` for a failure another attempt followed, ``error`` for
one nothing followed, ``refused`` for one not worth retrying, ``failed`` after
the first token, ``ok``.

The breaker opens after ``breaker_failures`` consecutive failures of a
deployment, refuses calls for ``breaker_cooldown_s``, then lets one trial call
through (half-open): a success closes it, a failure opens it again.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Final, Protocol, cast

import msgspec

from ... import events as ev
from ...errors import TokenwireError
from ...request import Request
from ...server import Exchange, Provider
from ...server.asgi import classify_exception
from ...server.hooks import hooked
from ..context import Attempt, RequestContext

__all__ = ["CircuitBreaker", "Deployment", "RetryPolicy", "RoutedProvider"]

#: §5.3.6 codes of a failure worth another attempt (429, 5xx, timeouts, connect errors).
RETRYABLE: Final = frozenset({"rate_limited", "overloaded", "internal_error"})

_NOTHING_TRIED: frozenset[int] = frozenset()


def retryable(error: ev.ErrorEvent) -> bool:
    """Whether an ``error`` event before the first token is worth another attempt.

    An upstream 4xx other than 408 and 429 (a bad request, a bad upstream key)
    would fail the same way again. The provider says which status it was in the
    event's ``upstream_status`` (the message is the vendor's text: never parsed).
    """
    if error.code not in RETRYABLE:
        return False
    status = error.upstream_status
    return status is None or not (400 <= status < 500 and status not in (408, 429))


class CircuitBreaker:
    """Consecutive-failure breaker: closed -> open -> half-open -> closed. ``clock`` injectable."""

    __slots__ = ("failures", "threshold", "cooldown_s", "clock", "opened_at", "trial")

    def __init__(
        self,
        threshold: int = 5,
        cooldown_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.threshold = threshold
        self.cooldown_s = cooldown_s
        self.clock = clock
        self.failures = 0
        self.opened_at: float | None = None
        #: A half-open trial call is in flight.
        self.trial = False

    @property
    def state(self) -> str:
        """``closed``, ``open`` or ``half-open``."""
        if self.opened_at is None:
            return "closed"
        if self.clock() - self.opened_at >= self.cooldown_s:
            return "half-open"
        return "open"

    def available(self) -> bool:
        """Whether a call may go through now (without taking the half-open trial)."""
        state = self.state
        return state == "closed" or (state == "half-open" and not self.trial)

    def acquire(self) -> bool:
        """Take the right to call; in half-open, only one trial at a time."""
        state = self.state
        if state == "closed":
            return True
        if state == "half-open" and not self.trial:
            self.trial = True
            return True
        return False

    def release(self) -> None:
        """The call ended with no verdict (the client left): free the half-open trial."""
        self.trial = False

    def success(self) -> None:
        self.failures, self.opened_at, self.trial = 0, None, False

    def failure(self) -> None:
        self.failures += 1
        self.trial = False
        if self.opened_at is not None or self.failures >= self.threshold:
            self.opened_at = self.clock()


class DrainHook(Protocol):
    """What ``RoutedProvider`` needs of the drain (``drain.Drain``)."""

    def track(self, task: asyncio.Task[object]) -> None: ...

    def untrack(self, task: asyncio.Task[object]) -> None: ...

    def cut(self, task: asyncio.Task[object]) -> bool: ...


class Deployment:
    """One upstream serving a model name: a provider, its weight, its breaker."""

    __slots__ = ("label", "provider", "weight", "breaker")

    def __init__(
        self,
        label: str,
        provider: Provider,
        weight: float = 1.0,
        breaker: CircuitBreaker | None = None,
    ) -> None:
        self.label = label
        self.provider = hooked(provider)
        self.weight = weight
        self.breaker = breaker if breaker is not None else CircuitBreaker()


class RetryPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """How many extra attempts, and the backoff between them."""

    retries: int = 2
    backoff_s: float = 0.1
    backoff_max_s: float = 2.0

    def delay(self, attempt: int, rng: random.Random) -> float:
        """Full jitter: uniform in [0, min(max, base * 2**(attempt-1))]."""
        if self.backoff_s <= 0:
            return 0.0
        return rng.uniform(0.0, min(self.backoff_max_s, self.backoff_s * 2 ** (attempt - 1)))


def _error(code: str, message: str) -> ev.ErrorEvent:
    return ev.ErrorEvent(v=ev.VERSION, seq=0, code=code, message=message)


class _Failed(TokenwireError):
    """An attempt failed before its first token."""

    def __init__(self, error: ev.ErrorEvent, retry: bool) -> None:
        self.error = error
        self.retry = retry


class _Unsettled:
    """A retryable failure not yet logged: ``retry`` if another attempt follows, else ``error``."""

    __slots__ = ("model", "deployment", "code")

    def __init__(self, model: str, deployment: Deployment, code: str) -> None:
        self.model = model
        self.deployment = deployment
        self.code = code


class RoutedProvider(Provider):
    """The provider of one model name: its deployments, then its fallbacks' (see module doc).

    ``fallbacks`` are the ``RoutedProvider`` of each fallback model, in order
    (only their deployments are used, never their own fallbacks).
    ``on_attempt(model, deployment, outcome)`` counts attempts for the metrics.
    """

    def __init__(
        self,
        name: str,
        deployments: Sequence[Deployment],
        *,
        policy: RetryPolicy | None = None,
        fallbacks: Sequence[RoutedProvider] = (),
        on_attempt: Callable[[str, str, str], None] | None = None,
        rng: random.Random | None = None,
        sleep: Callable[[float], object] = asyncio.sleep,
    ) -> None:
        if not deployments:
            raise ValueError(f"model {name!r} has no deployment")
        self.name = name
        self.deployments = list(deployments)
        self.policy = policy if policy is not None else RetryPolicy()
        self.fallbacks = list(fallbacks)
        self.on_attempt = on_attempt
        self.rng = rng if rng is not None else random.Random()
        self.sleep = sleep
        #: Called with the stream's ``usage`` event when the stream is over.
        self.on_usage: Callable[[ev.Usage], None] | None = None
        #: Set by ``Production.wrap_providers``: ends the streams left when a drain is over.
        self.drain: DrainHook | None = None

    def pick(self, tried: frozenset[int]) -> Deployment | None:
        """A deployment by weight among the available ones, untried first; ``None``: none."""
        available = [d for d in self.deployments if d.breaker.available()]
        if not available:
            return None
        fresh = [d for d in available if id(d) not in tried] or available
        if len(fresh) == 1:
            return fresh[0]
        return self.rng.choices(fresh, weights=[d.weight for d in fresh])[0]

    def _record(
        self,
        model: str,
        deployment: Deployment,
        outcome: str,
        code: str | None,
        ctx: RequestContext | None,
    ) -> None:
        if ctx is not None:
            ctx.attempts.append(Attempt(model, deployment.label, outcome, code))
            if outcome == "ok":
                ctx.served_by = deployment.label
        if self.on_attempt is not None:
            self.on_attempt(model or self.name, deployment.label, outcome)

    def check_request(self, request: Request) -> None:
        """What the deployments refuse before any stream starts (``Provider`` in server/hooks.py):
        raises ``InvalidRequest`` when one of them says it will never serve ``request``."""
        for deployment in self.deployments:
            deployment.provider.check_request(request)

    def generate(self, request: Request) -> AsyncIterator[ev.Event]:
        """Stream from the first deployment that produces a token (see module doc)."""
        return self.serve(request, None)

    async def serve(self, request: Request, exchange: Exchange | None) -> AsyncIterator[ev.Event]:
        """``generate`` for one request of the endpoint: each attempt is recorded in
        the request's context, and each deployment serves the same ``exchange``."""
        ctx: RequestContext | None = exchange.context if exchange is not None else None
        drain = self.drain
        task = asyncio.current_task() if drain is not None else None
        if drain is not None and task is not None:
            drain.track(task)
        # The routing is inline (not a generator of its own that this one relays):
        # each event passes one generator, and an open stream holds one frame less.
        unsettled: _Unsettled | None = None
        try:
            last: ev.ErrorEvent | None = None
            for route in [self, *self.fallbacks]:
                routed = request
                if route is not self:
                    routed = msgspec.structs.replace(request, model=route.name)
                label = "" if route is self else route.name
                tried = _NOTHING_TRIED  # a shared empty frozenset: no set held per stream
                for attempt in range(route.policy.retries + 1):
                    deployment = route.pick(tried)
                    if deployment is None or not deployment.breaker.acquire():
                        break  # every breaker is open: on to the next fallback
                    if unsettled is not None:
                        # Another attempt follows the last failure: that one was retried.
                        self._settle(unsettled, "retry", ctx)
                        unsettled = None
                    if attempt:
                        delay = route.policy.delay(attempt, self.rng)
                        if delay > 0:
                            await self.sleep(delay)  # type: ignore[misc]
                    tried = tried | {id(deployment)}
                    iterator = deployment.provider.serve(routed, exchange)
                    try:
                        try:
                            first = await self._first(label, deployment, iterator, ctx)
                        except _Failed as failed:
                            last = failed.error
                            if not failed.retry:
                                yield failed.error
                                return
                            unsettled = _Unsettled(label, deployment, failed.error.code)
                            continue
                        if first is None:
                            return
                        usage: ev.Usage | None = first if first.__class__ is ev.Usage else None
                        yield first
                        # Committed: a failure from here on is the client's error event.
                        try:
                            async for event in iterator:
                                cls = event.__class__
                                if cls is ev.Usage:
                                    usage = cast(ev.Usage, event)
                                elif cls is ev.ErrorEvent:
                                    deployment.breaker.failure()
                                    code = cast(ev.ErrorEvent, event).code
                                    self._record(label, deployment, "failed", code, ctx)
                                yield event
                        except Exception as exc:
                            deployment.breaker.failure()
                            code = classify_exception(exc)[0]
                            self._record(label, deployment, "failed", code, ctx)
                            raise
                        finally:
                            if usage is not None and self.on_usage is not None:
                                self.on_usage(usage)  # the key's token limits (production.py)
                        return
                    finally:
                        aclose = getattr(iterator, "aclose", None)
                        if aclose is not None:
                            await aclose()
            if unsettled is not None:
                self._settle(unsettled, "error", ctx)  # nothing followed it: not a retry
                unsettled = None
            yield (
                last
                if last is not None
                else _error(
                    "overloaded", f"no deployment of {self.name!r} is available (circuit open)"
                )
            )
        except asyncio.CancelledError:
            if drain is None or task is None or not drain.cut(task):
                raise
            # §5.3.6: the drain time is over; this stream ends with an error.
            task.uncancel()
            yield _error("overloaded", "the gateway is shutting down; retry on another replica")
        finally:
            if unsettled is not None:
                self._settle(unsettled, "error", ctx)  # the client left (or a drain cut) first
            if drain is not None and task is not None:
                drain.untrack(task)

    def _settle(self, failure: _Unsettled, outcome: str, ctx: RequestContext | None) -> None:
        self._record(failure.model, failure.deployment, outcome, failure.code, ctx)

    async def _first(
        self,
        model: str,
        deployment: Deployment,
        iterator: AsyncIterator[ev.Event],
        ctx: RequestContext | None,
    ) -> ev.Event | None:
        """The stream's first event (``None``: it ended empty); ``_Failed`` before it."""
        try:
            async for event in iterator:
                cls = event.__class__
                if cls is ev.StreamStart:
                    continue
                if cls is ev.ErrorEvent:
                    assert isinstance(event, ev.ErrorEvent)
                    retry = retryable(event)
                    if retry:
                        deployment.breaker.failure()  # logged by the caller (_Unsettled)
                    else:
                        deployment.breaker.success()
                        self._record(model, deployment, "refused", event.code, ctx)
                    raise _Failed(event, retry)
                deployment.breaker.success()
                self._record(model, deployment, "ok", None, ctx)
                return event
        except _Failed:
            raise
        except (asyncio.CancelledError, GeneratorExit):
            deployment.breaker.release()
            raise
        except Exception as exc:
            deployment.breaker.failure()
            code, message = classify_exception(exc)
            raise _Failed(_error(code, message), True) from exc  # logged by the caller
        deployment.breaker.success()
        self._record(model, deployment, "ok", None, ctx)
        return None
