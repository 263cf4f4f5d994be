"""Tokens metered as they stream: a key's grant, taken at admission, used event by event.

Metered only at the end, tokens were charged only when the upstream's ``usage`` arrived, so a
client that hung up first was never charged, and concurrent requests all
passed one check before any of them was charged. Now:

1. at admission (``production.Production.admit``) the request
   reserves its prompt (estimated, one token per 4 characters) plus its
   ``max_tokens`` or ``[limits] reserve_tokens``: ``Limits.reserve`` grants
   up to that, never past what the budget has left, and counts it as spent;
2. ``MeteredProvider`` counts every output event before it goes out
   (``event_tokens``: text, reasoning, tool arguments, tool deltas, one token
   per 4 characters, rounded up per event). An event that would pass the
   grant asks ``Limits.extend`` for more; when the budget has none left the
   event is not sent, the stream ends with ``error`` (``rate_limited``) and
   ``stream.end``, and its whole grant counts as spent (what is left fits no
   event);
3. at the end, however it ends (done, failed, the client gone), the grant is
   settled: replaced by the upstream's ``usage`` when it came, else by the
   gateway's count (``Ledger.estimated``, logged as ``charge_estimated``).

So the tokens the gateway counts as sent never exceed the budget, whatever
the concurrency and the hang-ups (docs/gateway.md, "Security").
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Final

from ... import events as ev
from ...request import Request
from ...server import Exchange, Provider
from ...server.hooks import hooked
from ...writer import estimate_tokens
from ..context import RequestContext
from .keys import KeyRecord
from .limits import Decision, Limits

__all__ = ["BUDGET_SPENT", "Ledger", "MeteredProvider", "event_tokens", "reservation"]

#: The message of a stream cut because its key's budget ran out.
BUDGET_SPENT: Final = "this key's token budget is spent"
#: The least a running stream asks for when it passes its grant (it asks for as
#: much again as it holds, when that is more).
EXTEND_STEP: Final = 64


def reservation(request: Request, reserve_tokens: int) -> tuple[int, int]:
    """``(prompt, total)``: the prompt's estimated tokens, and what the request reserves."""
    prompt = estimate_tokens(sum(len(message.text) for message in request.messages))
    params = request.parameters
    output = params.max_tokens if params is not None and params.max_tokens else None
    return prompt, prompt + (output if output is not None else reserve_tokens)


def event_tokens(event: ev.Event) -> int:
    """The output tokens ``event`` carries, estimated (0 for framing events)."""
    cls = event.__class__
    if cls is ev.ContentDelta:
        return estimate_tokens(len(event.delta.text))  # type: ignore[union-attr]
    if cls is ev.ToolCall:
        return estimate_tokens(len(event.arguments))  # type: ignore[union-attr]
    if cls is ev.UnknownEvent:
        return estimate_tokens(len(event.data))  # type: ignore[union-attr]
    return 0


class Ledger:
    """One request's tokens against its key: granted (reserved), used (counted so far)."""

    __slots__ = ("key", "granted", "used", "started", "settled", "charged", "estimated")

    def __init__(self, key: KeyRecord, granted: int, prompt: int) -> None:
        self.key = key
        self.granted = granted
        #: The prompt counts from the start: the upstream reads all of it.
        self.used = prompt
        self.started = False
        self.settled = False
        #: What was charged at the end, and whether it was the gateway's estimate.
        self.charged: int | None = None
        self.estimated = False


class MeteredProvider(Provider):
    """A model's provider, its output counted against the request's key (see module doc).

    ``admit(request)`` is the admission for a request that reached a provider
    without one (a route that skipped ``StreamEndpoint``'s hook): fail closed,
    it returns a refusal's message or ``None``. ``spawn`` runs the settlement
    in the background (a stream cancelled by its client cannot await it).
    """

    def __init__(
        self,
        inner: Provider,
        limits: Limits,
        spawn: Callable[[Awaitable[Any]], None],
        admit: Callable[[Request, RequestContext | None], Awaitable[str | None]],
    ) -> None:
        self.inner = hooked(inner)
        self.limits = limits
        self.spawn = spawn
        self.admit = admit

    def check_request(self, request: Request) -> None:
        self.inner.check_request(request)

    async def count_tokens(self, request: Request) -> int | None:
        return await self.inner.count_tokens(request)

    def generate(self, request: Request) -> AsyncIterator[ev.Event]:
        return self.serve(request, None)

    def serve(self, request: Request, exchange: Exchange | None) -> AsyncIterator[ev.Event]:
        """The inner provider's stream, metered against the key of the request's context."""
        ctx: RequestContext | None = exchange.context if exchange is not None else None
        if ctx is None or ctx.key is None:
            return self.inner.serve(request, exchange)  # no key: nothing to meter
        ledger: Ledger | None = ctx.ledger
        if ctx.admitted == request.model and ledger is None:
            return self.inner.serve(request, exchange)  # admitted; its key counts no tokens
        return self._metered(request, exchange, ctx)

    async def _metered(
        self, request: Request, exchange: Exchange | None, ctx: RequestContext
    ) -> AsyncIterator[ev.Event]:
        ledger: Ledger | None = ctx.ledger
        if ctx.admitted != request.model or (ledger is not None and ledger.started):
            # Not admitted for this model, or a second stream on one admission: a
            # route that skipped the admission hook. Admit here (fail closed).
            ctx.admitted, ctx.ledger = None, None
            refused = await self.admit(request, ctx)
            if refused is not None:
                yield ev.ErrorEvent(v=ev.VERSION, seq=0, code="rate_limited", message=refused)
                return
            ledger = ctx.ledger
            if ledger is None:
                async for event in self.inner.serve(request, exchange):
                    yield event
                return
        assert ledger is not None
        ledger.started = True
        usage: ev.Usage | None = None
        limits, key = self.limits, ledger.key
        iterator = self.inner.serve(request, exchange)
        try:
            async for event in iterator:
                cost = event_tokens(event)
                if cost:
                    want = ledger.used + cost - ledger.granted
                    if want > 0:
                        # Doubling: a long stream asks O(log n) times, not every
                        # few tokens (a Redis round trip each); the bound does not
                        # depend on it (a grant never passes what is left).
                        step = max(want, EXTEND_STEP, ledger.granted)
                        ledger.granted += await limits.extend(key, step)
                        if ledger.used + cost > ledger.granted:
                            # The event is not sent: the budget holds exactly. What
                            # is left of it fits no event: spent (the next request
                            # gets a 429, not a stream cut at its first token).
                            ledger.used = ledger.granted
                            yield ev.ErrorEvent(
                                v=ev.VERSION, seq=0, code="rate_limited", message=BUDGET_SPENT
                            )
                            return
                    ledger.used += cost
                elif event.__class__ is ev.Usage:
                    usage = event
                yield event
        finally:
            aclose = getattr(iterator, "aclose", None)
            try:
                if aclose is not None:
                    await aclose()
            finally:
                self._settle(ledger, usage)

    def _settle(self, ledger: Ledger, usage: ev.Usage | None) -> None:
        if ledger.settled:
            return
        ledger.settled = True
        if usage is not None and not usage.estimated:
            used = usage.input_tokens + usage.output_tokens
        else:
            used, ledger.estimated = ledger.used, True
        ledger.charged = used
        self.spawn(self.limits.settle(ledger.key, ledger.granted, used))


def release(ledger: Ledger | None, limits: Limits, spawn: Callable[[Awaitable[Any]], None]) -> None:
    """Give back the grant of a request whose stream never started (a 404, a 409...)."""
    if ledger is None or ledger.started or ledger.settled:
        return
    ledger.settled = True
    ledger.charged = 0
    spawn(limits.settle(ledger.key, ledger.granted, 0))


def refusal_of(decision: Decision) -> str:
    """The message of a limits refusal met inside a stream."""
    if decision.limit == "budget":
        return BUDGET_SPENT
    if decision.limit == "unavailable":
        return "the rate limiter is unavailable"
    what = "requests" if decision.limit == "requests" else "tokens"
    return f"rate limit reached ({what} per minute)"
