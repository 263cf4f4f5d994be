"""``RoutedProvider`` in process: retries, fallbacks, weights, the breaker (an injected clock)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator

from tokenwire import events as ev
from tokenwire.gateway.context import RequestContext
from tokenwire.gateway.policy.routing import CircuitBreaker, Deployment, RetryPolicy, RoutedProvider
from tokenwire.request import Request
from tokenwire.server import Exchange
from tokenwire.testing import async_wait_until

REQUEST = Request(version="1.0", stream=True, model="m", messages=[])


def _delta(text: str) -> ev.ContentDelta:
    return ev.ContentDelta(v="1.0", seq=0, index=0, role="assistant", delta=ev.Delta(text=text))


def _error(code: str, message: str = "boom", status: int | None = None) -> ev.ErrorEvent:
    return ev.ErrorEvent(v="1.0", seq=0, code=code, message=message, upstream_status=status)


class Scripted:
    """Fails its first ``fail`` calls the way ``mode`` says, then answers ``text``."""

    def __init__(self, text: str, *, fail: int = 0, mode: str = "503") -> None:
        self.text, self.fail, self.mode = text, fail, mode
        self.calls = 0
        self.models: list[str] = []

    async def generate(self, request: Request) -> AsyncIterator[ev.Event]:
        self.calls += 1
        self.models.append(request.model)
        if self.calls <= self.fail:
            if self.mode == "raise":
                raise ConnectionRefusedError("refused")
            if self.mode == "400":
                yield _error("internal_error", "upstream answered HTTP 400: bad", 400)
                return
            if self.mode == "401":
                # The vendor's own text, as its error body gives it: no status in it.
                yield _error("internal_error", "Incorrect API key provided: sk-...", 401)
                return
            code = "rate_limited" if self.mode == "429" else "overloaded"
            yield _error(code, f"upstream answered HTTP {self.mode}", int(self.mode))
            return
        if self.mode == "cut":
            yield _delta(self.text)
            yield _error("internal_error", "upstream connection failed (RemoteProtocolError)")
            return
        yield _delta(self.text)


def _run(provider: RoutedProvider) -> tuple[list[ev.Event], RequestContext]:
    ctx = RequestContext()

    async def go() -> list[ev.Event]:
        return [event async for event in provider.serve(REQUEST, Exchange(context=ctx))]

    return asyncio.run(go()), ctx


def _text(events: list[ev.Event]) -> str:
    return "".join(e.delta.text for e in events if isinstance(e, ev.ContentDelta))


def _route(*deployments: Deployment, retries: int = 2, **kw: object) -> RoutedProvider:
    policy = RetryPolicy(retries=retries, backoff_s=0.0)
    return RoutedProvider("m", deployments, policy=policy, rng=random.Random(7), **kw)  # type: ignore[arg-type]


def test_failures_before_the_first_token_are_retried_on_each_kind() -> None:
    for mode in ("raise", "429", "503"):
        flaky = Scripted("ok", fail=2, mode=mode)
        events, ctx = _run(_route(Deployment("d", flaky)))
        assert _text(events) == "ok", mode
        assert [a.outcome for a in ctx.attempts] == ["retry", "retry", "ok"]
        assert not any(isinstance(e, ev.ErrorEvent) for e in events)


def test_an_upstream_4xx_is_not_retried() -> None:
    bad = Scripted("ok", fail=5, mode="400")
    events, ctx = _run(_route(Deployment("d", bad)))
    assert bad.calls == 1
    assert [type(e) for e in events] == [ev.ErrorEvent]
    assert [a.outcome for a in ctx.attempts] == ["refused"]


def test_an_upstream_4xx_is_told_by_its_status_not_by_its_message() -> None:
    bad = Scripted("ok", fail=5, mode="401")
    events, ctx = _run(_route(Deployment("d", bad)))
    assert bad.calls == 1
    assert [a.outcome for a in ctx.attempts] == ["refused"]
    assert isinstance(events[0], ev.ErrorEvent) and events[0].upstream_status == 401


def test_the_last_failure_reaches_the_client_when_all_attempts_fail() -> None:
    down = Scripted("ok", fail=10, mode="503")
    events, ctx = _run(_route(Deployment("d", down), retries=1))
    assert down.calls == 2
    assert len(events) == 1 and isinstance(events[0], ev.ErrorEvent)
    assert events[0].code == "overloaded"
    # The second attempt was never retried: it is an error, not a retry.
    assert [(a.outcome, a.code) for a in ctx.attempts] == [
        ("retry", "overloaded"),
        ("error", "overloaded"),
    ]


def test_a_single_attempt_never_retried_is_not_logged_as_a_retry() -> None:
    down = Scripted("ok", fail=1, mode="raise")
    events, ctx = _run(_route(Deployment("d", down), retries=0))
    assert down.calls == 1
    assert [a.outcome for a in ctx.attempts] == ["error"]


def test_fallbacks_are_tried_in_order_with_their_own_model_name() -> None:
    down = Scripted("no", fail=10)
    also_down = Scripted("no", fail=10)
    backup = Scripted("from backup")
    second = RoutedProvider(
        "second", [Deployment("second", also_down)], policy=RetryPolicy(retries=0)
    )
    third = RoutedProvider("third", [Deployment("third", backup)], policy=RetryPolicy(retries=0))
    events, ctx = _run(_route(Deployment("d", down), retries=1, fallbacks=[second, third]))
    assert _text(events) == "from backup"
    assert backup.models == ["third"]
    assert [(a.deployment, a.outcome) for a in ctx.attempts] == [
        ("d", "retry"),
        ("d", "retry"),
        ("second", "retry"),  # the fallback after it was its retry
        ("third", "ok"),
    ]
    assert ctx.served_by == "third"


def test_after_the_first_token_a_failure_is_an_error_never_a_switch() -> None:
    cut = Scripted("partial", mode="cut")
    backup = Scripted("from backup")
    fallback = RoutedProvider("b", [Deployment("b", backup)])
    events, ctx = _run(_route(Deployment("d", cut), fallbacks=[fallback]))
    assert _text(events) == "partial"
    assert isinstance(events[-1], ev.ErrorEvent)
    assert backup.calls == 0
    assert [a.outcome for a in ctx.attempts] == ["ok", "failed"]


def test_weights_share_the_traffic() -> None:
    heavy, light = Scripted("h"), Scripted("l")
    provider = _route(Deployment("heavy", heavy, 3.0), Deployment("light", light, 1.0))
    for _ in range(400):
        _run(provider)
    assert heavy.calls + light.calls == 400
    assert 0.65 < heavy.calls / 400 < 0.85


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_breaker_opens_then_recovers_through_one_trial() -> None:
    clock = Clock()
    breaker = CircuitBreaker(threshold=3, cooldown_s=30.0, clock=clock)
    sick = Scripted("sick recovered", fail=3)
    healthy = Scripted("healthy")
    provider = _route(
        Deployment("sick", sick, 1000.0, breaker),
        Deployment("healthy", healthy, 1.0, CircuitBreaker(clock=clock)),
        retries=1,
    )
    # Each request tries the heavy "sick" first, then "healthy".
    for _ in range(3):
        events, _ctx = _run(provider)
        assert _text(events) == "healthy"
    assert breaker.state == "open" and sick.calls == 3
    # Open: "sick" is not even tried.
    events, ctx = _run(provider)
    assert _text(events) == "healthy" and sick.calls == 3
    assert [a.deployment for a in ctx.attempts] == ["healthy"]
    clock.now += 29.9
    _run(provider)
    assert sick.calls == 3
    clock.now += 0.1
    assert breaker.state == "half-open"
    # Half-open: one trial; it succeeds and closes the breaker.
    events, _ctx = _run(provider)
    assert _text(events) == "sick recovered" and sick.calls == 4
    assert breaker.state == "closed"


def test_a_failed_trial_opens_the_breaker_again() -> None:
    clock = Clock()
    breaker = CircuitBreaker(threshold=1, cooldown_s=10.0, clock=clock)
    assert breaker.acquire()
    breaker.failure()
    assert breaker.state == "open" and not breaker.acquire()
    clock.now = 10.0
    assert breaker.acquire()  # the one trial
    assert not breaker.acquire()  # no second one while it runs
    breaker.failure()
    assert breaker.state == "open"
    clock.now = 20.0
    assert breaker.acquire()
    breaker.success()
    assert breaker.state == "closed" and breaker.acquire() and breaker.acquire()


def test_all_breakers_open_moves_on_to_the_fallback() -> None:
    clock = Clock()
    breaker = CircuitBreaker(threshold=1, cooldown_s=60.0, clock=clock)
    breaker.failure()
    primary = Scripted("primary")
    backup = Scripted("backup")
    fallback = RoutedProvider("b", [Deployment("b", backup)])
    events, _ctx = _run(_route(Deployment("p", primary, 1.0, breaker), fallbacks=[fallback]))
    assert _text(events) == "backup" and primary.calls == 0
    events, _ctx = _run(_route(Deployment("p", primary, 1.0, breaker)))
    assert isinstance(events[0], ev.ErrorEvent) and events[0].code == "overloaded"


class Hanging:
    """Never answers: the client leaves while it waits."""

    async def generate(self, request: Request) -> AsyncIterator[ev.Event]:
        await asyncio.Event().wait()
        yield _delta("never")


def test_a_trial_cut_short_by_the_client_frees_the_half_open_breaker() -> None:
    clock = Clock()
    breaker = CircuitBreaker(threshold=1, cooldown_s=10.0, clock=clock)
    breaker.failure()
    clock.now = 10.0
    provider = _route(Deployment("d", Hanging(), 1.0, breaker), retries=0)

    async def go() -> None:
        task = asyncio.ensure_future(anext(aiter(provider.generate(REQUEST))))
        await async_wait_until(lambda: breaker.trial)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(go())
    assert breaker.state == "half-open" and not breaker.trial and breaker.acquire()
