"""The production layer of the gateway: keys, limits, routing, drain, telemetry, wired once.

``Gateway`` (app.py) builds one ``Production`` from ``config.production``
and uses four seams, each a few lines there:

- ``wrap_providers``: every model's provider becomes a ``RoutedProvider``
  (deployments, retries, fallbacks, breakers; the drain's hook);
- ``ProductionMiddleware``: an ASGI middleware that gives each request its
  ``RequestContext`` (in the scope, for the endpoint's ``Exchange``), refuses
  while draining, and checks the inbound key before the endpoint reads the
  request;
- ``admit`` (``Production`` is ``StreamEndpoint``'s ``server.Admission``): once the
  endpoint has parsed the request, checks the key's models and its limits
  against that request's ``model``, the very one the route serves (one
  resolution per request, never a second peek at the body or the path),
  and reserves its tokens (``policy.metering``);
- ``observer``: a stream ``Observer`` ending the request's span, and giving
  back the tokens of a request whose stream never started;
- ``request_log``: the request log line with ``key_id``, ``attempts`` and
  the tokens charged.

Every model's provider is also wrapped in a ``metering.MeteredProvider``: it
counts the output against the key's grant as it streams, and admits (fail
closed) a request that reached it without the admission hook.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, cast

import msgspec

from .. import events as ev
from .. import translate
from ..request import Request
from ..server import Exchange, Provider, StreamRecord, Tee
from ..server.asgi import Receive, Scope, Send, json_error
from ..server.exchange import CONTEXT_KEY
from .config import Config, deployment_models
from .context import RequestContext
from .policy import auth
from .policy.drain import Drain
from .policy.keys import KeyRing, credential
from .policy.limits import Decision, Limits, build_limits, retry_after_header
from .policy.metering import Ledger, MeteredProvider, refusal_of, release, reservation
from .policy.routing import CircuitBreaker, Deployment, RetryPolicy, RoutedProvider
from .telemetry import logs

if TYPE_CHECKING:
    from .providers import UpstreamClients

__all__ = ["Production", "ProductionMiddleware", "ProductionRequestLog"]

_log = logging.getLogger("tokenwire.gateway")

#: Routes that spend provider keys or read streams: they need a key when keys are configured.
_PROTECTED: Final = ("/v1/", "/v1beta/", "/v1alpha/")
#: The playground's converter spends nothing.
_OPEN: Final = frozenset({"/v1/convert"})


class _UsageTee:
    """Sees a stream's events for its span: usage, stop reasons, the text with log_content."""

    __slots__ = ("production", "record", "ctx", "usage", "stop_reasons", "text")

    def __init__(self, production: Production, record: StreamRecord, ctx: RequestContext) -> None:
        self.production = production
        self.record = record
        self.ctx = ctx
        self.usage: ev.Usage | None = None
        self.stop_reasons: list[str] = []
        self.text: list[str] | None = [] if production.log_content else None

    def write(self, events: list[ev.Event]) -> None:
        for event in events:
            cls = event.__class__
            if cls is ev.Usage:
                self.usage = event  # type: ignore[assignment]
            elif cls is ev.ContentStop:
                reason = event.stop_reason  # type: ignore[union-attr]
                if reason:
                    self.stop_reasons.append(reason)
            elif cls is ev.ContentDelta and self.text is not None:
                self.text.append(event.delta.text)  # type: ignore[union-attr]

    def close(self) -> None:
        production, ctx = self.production, self.ctx
        telemetry = production.telemetry
        if telemetry is not None and ctx.span is not None:
            span, ctx.span = ctx.span, None
            telemetry.finish(span, self.record, ctx, self.usage, self.stop_reasons, self.text)


class ProductionRequestLog(logs.RequestLog):
    """The request log line, plus ``key_id`` and the routing ``attempts`` (never the key)."""

    def line(self, record: StreamRecord, transcript: Any = None) -> dict[str, Any]:
        line = super().line(record, transcript)
        ctx = _context_of(record)
        if ctx is not None:
            if ctx.key is not None:
                line["key_id"] = ctx.key.id
            if ctx.attempts:
                line["attempts"] = [attempt.as_dict() for attempt in ctx.attempts]
            ledger = ctx.ledger
            if ledger is not None and ledger.charged is not None:
                line["charged_tokens"] = ledger.charged
                if ledger.estimated:
                    line["charge_estimated"] = True
        return line


def _context_of(record: StreamRecord) -> RequestContext | None:
    """The request's context, when the production middleware gave it one."""
    exchange = record.exchange
    return None if exchange is None else cast(RequestContext | None, exchange.context)


class Production:
    """Keys, limits, routing, drain and telemetry of one gateway (see module doc)."""

    def __init__(
        self,
        config: Config,
        *,
        log_content: bool = False,
        registry: Any = None,
        limits: Limits | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        from .telemetry import otel

        settings = config.production
        self.config = config
        self.log_content = log_content
        self.keys = KeyRing(settings.keys)
        lim = settings.limits
        self.limits: Limits = (
            limits
            if limits is not None
            else build_limits(
                lim.backend,
                lim.url or config.resume.url,
                **(
                    {"prefix": lim.prefix, "cluster": lim.cluster, "fail_open": lim.fail_open}
                    if lim.backend == "redis"
                    else {}
                ),
            )
        )
        #: What a request without ``max_tokens`` reserves for its output.
        self.reserve_tokens: int = lim.reserve_tokens
        #: ``[metrics] keys``: the key ids that may read ``/metrics`` (``None``: anyone).
        self.metrics_keys: frozenset[str] | None = frozenset(config.metrics.keys) or None
        #: ``/metrics`` on the serving port: names every model and its traffic, so
        #: with keys (or a listener of its own) only where ``[metrics] keys`` opens it.
        self.metrics_here = self.metrics_keys is not None or (
            not config.production.keys and config.metrics.listen is None
        )
        self.drain = Drain(settings.drain_s)
        self.clock = clock
        self.telemetry = (
            otel.Telemetry(settings.telemetry, log_content=log_content)
            if otel.enabled(settings.telemetry)
            else None
        )
        self._tasks: set[asyncio.Task[Any]] = set()
        self._attempts: Any = None
        if registry is not None:
            from prometheus_client import Counter

            self._attempts = Counter(
                "tokenwire_upstream_attempts",
                "Upstream attempts, by model, deployment and outcome (ok, retry, failed, refused).",
                ["model", "deployment", "outcome"],
                registry=registry,
            )
        self._refused: Any = None
        if registry is not None:
            from prometheus_client import Counter as _Counter

            self._refused = _Counter(
                "tokenwire_requests_refused",
                "Requests refused by keys, limits or the drain, by status and code.",
                ["status", "code"],
                registry=registry,
            )
        self.observer = _Observer(self)

    # -- providers -------------------------------------------------------------

    def _count(self, model: str, deployment: str, outcome: str) -> None:
        if self._attempts is not None:
            self._attempts.labels(model, deployment, outcome).inc()

    def wrap_providers(
        self, providers: Mapping[str, Provider], clients: UpstreamClients
    ) -> dict[str, Provider]:
        """Every model's provider as a ``RoutedProvider`` (its deployments and fallbacks),
        inside a ``MeteredProvider`` when keys are configured."""
        from .providers import build_provider

        settings = self.config.production
        routed: dict[str, RoutedProvider] = {}
        for model in self.config.models:
            routing = settings.routing_for(model.name)
            clock = self.clock
            # A model without routing keys keeps the classic behaviour: one
            # attempt, and no breaker turning its failures into refusals.
            configured = model.name in settings.routing

            def breaker(
                routing: Any = routing, clock: Any = clock, configured: bool = configured
            ) -> CircuitBreaker:
                if not configured:
                    return CircuitBreaker(threshold=1 << 62)
                if clock is None:
                    return CircuitBreaker(routing.breaker_failures, routing.breaker_cooldown_s)
                return CircuitBreaker(routing.breaker_failures, routing.breaker_cooldown_s, clock)

            deployments = []
            for i, (entry, weight) in enumerate(deployment_models(model, routing)):
                provider = providers[model.name] if not routing.deployments else None
                if provider is None:
                    try:
                        provider = build_provider(entry, clients)
                    except ValueError as exc:
                        raise ValueError(f"model {model.name!r} deployments[{i}]: {exc}") from None
                label = f"{model.name}#{i}" if routing.deployments else model.name
                deployments.append(Deployment(label, provider, weight, breaker()))
            policy = RetryPolicy(
                retries=routing.retries,
                backoff_s=routing.retry_backoff_s,
                backoff_max_s=routing.retry_backoff_max_s,
            )
            routed[model.name] = RoutedProvider(
                model.name, deployments, policy=policy, on_attempt=self._count
            )
        for name, provider in routed.items():
            provider.fallbacks = [routed[f] for f in settings.routing_for(name).fallbacks]
            provider.drain = self.drain
        out: dict[str, Provider] = dict(providers)
        out.update(routed)
        if self.keys:
            # Outside the routing: a fallback serves under the grant of the model admitted.
            for name, provider in out.items():
                out[name] = MeteredProvider(provider, self.limits, self.spawn, self._admit_inline)
        return out

    def request_log(self, *, log_content: bool) -> logs.RequestLog:
        """The request log with the production fields."""
        return ProductionRequestLog(log_content=log_content)

    # -- lifecycle -------------------------------------------------------------

    def spawn(self, work: Awaitable[Any]) -> None:
        """Run ``work`` in the background, kept referenced until done."""
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def start(self) -> None:
        """At the worker's startup: the drain's signal handlers; the limits' Redis."""
        self.drain.install()
        await self.limits.start()

    async def aclose(self) -> None:
        """At shutdown: end the drain, flush the charges, close Redis, flush telemetry."""
        self.drain.uninstall()
        if self.drain.draining:
            await self.drain.wait()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=5.0)
        with contextlib.suppress(Exception):
            await self.limits.aclose()
        if self.telemetry is not None:
            await asyncio.to_thread(self.telemetry.shutdown)

    # -- the request hook --------------------------------------------------------

    def check_key(self, scope: Scope, ctx: RequestContext) -> auth.Refusal | None:
        """The middleware's check, before the body is read: a valid key (else 401).

        The key's models and limits wait for the parsed request (``admit``).
        """
        key = self.keys.find(
            credential(scope.get("headers", ()), scope.get("query_string", b"")) or ""
        )
        if key is None:
            return auth.Refusal(
                401,
                "a valid API key is required (Authorization: Bearer, x-api-key or x-goog-api-key)",
            )
        ctx.key = key
        return None

    @staticmethod
    def may_use(scope: Scope, model: str) -> bool:
        """Whether the key of the request in ``scope`` may use ``model`` (``True`` without keys)."""
        ctx: RequestContext | None = scope.get(CONTEXT_KEY)
        return ctx is None or ctx.key is None or ctx.key.allows(model)

    def _metrics_refusal(self, scope: Scope) -> auth.Refusal | None:
        """``[metrics] keys``: ``/metrics`` only for those keys."""
        key = self.keys.find(
            credential(scope.get("headers", ()), scope.get("query_string", b"")) or ""
        )
        if key is None:
            return auth.Refusal(401, "a valid API key is required")
        if self.metrics_keys is not None and key.id not in self.metrics_keys:
            return auth.Refusal(403, "this key may not read the metrics", code="forbidden")
        return None

    async def _decide(self, request: Request, ctx: RequestContext) -> auth.Refusal | None:
        """The key's models and limits for the request as it will be served (one
        resolution: ``request.model``); on admission, the request's token grant."""
        key = ctx.key
        model = request.model
        if not key.allows(model):
            # Before the provider lookup: a model outside the list gets this same
            # 403 whether or not it is configured.
            return auth.Refusal(
                403, f"this key may not use model {model!r}", code="model_not_allowed"
            )
        if key.limited:
            tokens = prompt = 0
            if key.counts_tokens:
                prompt, tokens = reservation(request, self.reserve_tokens)
            result = await self.limits.reserve(key, tokens)
            if isinstance(result, Decision):
                return _limit_refusal(result)
            if key.budget is not None and tokens and result < prompt:
                # What is left of the budget cannot pay for the prompt, which the
                # upstream reads whole: refused, and the grant goes back.
                await self.limits.settle(key, result, 0)
                return _limit_refusal(Decision("budget", None))
            if key.counts_tokens:
                ctx.ledger = Ledger(key, result, prompt)
        ctx.admitted = model
        return None

    async def admit(
        self, exchange: Exchange, request: Request, send: Send, record: StreamRecord
    ) -> bool:
        """``server.Admission`` (``StreamEndpoint(admission=production)``): the key's
        models and limits for the parsed request."""
        ctx: RequestContext | None = exchange.context
        if ctx is None or ctx.key is None:
            return True  # no keys configured, or an unprotected route
        refusal = await self._decide(request, ctx)
        if refusal is None:
            return True
        record.status = refusal.status
        record.error_code = refusal.code or auth.standard_code(refusal.status)
        await self.refuse(exchange.path, send, refusal, ctx)
        return False

    async def _admit_inline(self, request: Request, ctx: RequestContext | None) -> str | None:
        """``MeteredProvider``'s admission (a route without the hook): the refusal's message."""
        if ctx is None or ctx.key is None:
            return None
        refusal = await self._decide(request, ctx)
        return None if refusal is None else refusal.message

    async def refuse(
        self, path: str, send: Send, refusal: auth.Refusal, ctx: RequestContext
    ) -> None:
        """Answer ``refusal`` in the route's vendor error shape, count it and log it."""
        code = refusal.code or auth.standard_code(refusal.status)
        if self._refused is not None:
            self._refused.labels(str(refusal.status), code).inc()
        body = translate.error_body_for(path, refusal.status, code, refusal.message)
        await send(
            {
                "type": "http.response.start",
                "status": refusal.status,
                "headers": auth.headers_for(refusal),
            }
        )
        body = body if body is not None else json_error(code, refusal.message, None)
        await send({"type": "http.response.body", "body": body})
        _log.info(
            msgspec.json.encode(
                logs.bounded(
                    {
                        "msg": "request",
                        "route": path,
                        "status": refusal.status,
                        "error_code": code,
                        "key_id": ctx.key.id if ctx.key is not None else None,
                    }
                )
            ).decode()
        )


def _query_key_as_header(scope: Scope) -> Scope:
    """A ``?key=`` credential (older Gemini clients) as ``x-goog-api-key``, when no
    header carries one: the routes behind bind it like any other credential
    (a resumable stream's owner)."""
    headers = scope.get("headers", ())
    if credential(headers) is not None:
        return scope
    key = credential(headers, scope.get("query_string", b""))
    if not key:
        return scope
    return {**scope, "headers": [*headers, (b"x-goog-api-key", key.encode())]}


def _limit_refusal(decision: Decision) -> auth.Refusal:
    if decision.limit == "unavailable":
        return auth.Refusal(503, refusal_of(decision), retry_after="1")
    if decision.limit == "budget":
        return auth.Refusal(429, refusal_of(decision), code="budget_exceeded")
    return auth.Refusal(429, refusal_of(decision), retry_after=retry_after_header(decision))


class _Observer:
    """The stream observer: the usage tee (limits, span) of each stream."""

    def __init__(self, production: Production) -> None:
        self.production = production

    def opened(self, record: StreamRecord) -> Tee | None:
        ctx = _context_of(record)
        if ctx is None:
            return None
        production = self.production
        if production.telemetry is None:
            return None  # the key's tokens are metered by MeteredProvider, no tee needed
        ctx.span = production.telemetry.start(record, ctx)
        return _UsageTee(production, record, ctx)

    def closed(self, record: StreamRecord) -> None:
        ctx = _context_of(record)
        if ctx is not None:
            # A grant whose stream never started (a 404, a 409...) goes back.
            release(ctx.ledger, self.production.limits, self.production.spawn)


class ProductionMiddleware:
    """ASGI middleware: the request's context; the drain's 503; keys and limits (see module doc)."""

    def __init__(
        self, app: Callable[[Scope, Receive, Send], Awaitable[None]], production: Production
    ) -> None:
        self.app = app
        self.production = production
        self.guarded = bool(production.keys)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        ctx = RequestContext()
        for name, value in scope.get("headers", ()):
            if name == b"traceparent":
                ctx.traceparent = value.decode("latin-1")
            elif name == b"tracestate":
                ctx.tracestate = value.decode("latin-1")
        # For the endpoint's Exchange (and the routes that read the key): in the
        # scope, as ASGI carries a request's extensions down the app stack.
        scope[CONTEXT_KEY] = ctx
        path: str = scope.get("path", "")
        protected = path.startswith(_PROTECTED) and path not in _OPEN
        if protected and b"key=" in scope.get("query_string", b""):
            scope = _query_key_as_header(scope)
        refusal: auth.Refusal | None = None
        production = self.production
        if protected and production.drain.draining:
            refusal = auth.Refusal(
                503, "the gateway is shutting down; retry", retry_after="1", code="draining"
            )
            # Read the body first: the HTTP server closes a connection whose
            # request body was left unread, and a kept-alive one must stay open
            # for the next request's 503, until the drain ends.
            await _discard_body(receive, production.config.server.max_body_bytes)
        elif protected and self.guarded:
            refusal = production.check_key(scope, ctx)
        elif path == "/metrics" and production.metrics_keys is not None:
            refusal = production._metrics_refusal(scope)
        if refusal is not None:
            await production.refuse(path, send, refusal, ctx)
            return
        await self.app(scope, receive, send)


async def _discard_body(receive: Receive, limit: int) -> None:
    """Read and drop a request body, up to ``limit`` bytes (beyond: let the server close)."""
    size = 0
    while size <= limit:
        message = await receive()
        if message["type"] != "http.request":
            return
        size += len(message.get("body", b""))
        if not message.get("more_body", False):
            return
