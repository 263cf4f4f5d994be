"""The production layer of the gateway: keys, limits, routing, drain, telemetry, wired once.

``Gateway`` (app.py) builds one ``Production`` from ``config.production``
and uses four seams, each a few lines there:

- ``wrap_providers``: every model's provider becomes a ``RoutedProvider``
  (deployments, retries, fallbacks, breakers; the drain's hook);
- ``ProductionMiddleware``: an ASGI middleware that gives each request its
  ``RequestContext``, refuses while draining, and checks the inbound key, the
  key's models and its limits before the endpoint reads the request (with the
  Redis limits, the limit check runs beside the upstream connect and request
  write instead, and is joined before the response starts: ``_Gate``);
- ``observer``: a stream ``Observer`` ending the request's span (the key's
  usage tokens are charged by ``RoutedProvider.on_usage``);
- ``request_log``: the request log line with ``key_id`` and ``attempts``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

import msgspec

from .. import events as ev
from .._asgi import Receive, Scope, Send, content_length_of
from ..server import Provider, StreamRecord, Tee
from .config import Config, deployment_models
from .context import CURRENT, RequestContext, current
from .policy import auth
from .policy.drain import Drain
from .policy.keys import KeyRing, credential
from .policy.limits import Limits, build_limits, retry_after_header
from .policy.routing import CircuitBreaker, Deployment, RetryPolicy, RoutedProvider
from .telemetry import logs

if TYPE_CHECKING:
    import httpx  # only the upstream client's type: httpx loads with the first model that uses it

    from .providers import UpstreamClients

__all__ = ["Production", "ProductionMiddleware", "ProductionRequestLog"]

_log = logging.getLogger("tokenwire.gateway")

#: Routes that spend provider keys or read streams: they need a key when keys are configured.
_PROTECTED: Final = ("/v1/", "/v1beta/", "/v1alpha/")
#: The playground's converter spends nothing.
_OPEN: Final = frozenset({"/v1/convert"})


class _ModelOnly(msgspec.Struct):
    model: Any = None
    extensions: Any = None


_model_of = msgspec.json.Decoder(_ModelOnly).decode


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

    def closed(self, record: StreamRecord) -> None:
        ctx = current()
        if ctx is not None and ctx.refused is not None:
            # Refused by its limits after the endpoint began: the middleware logs
            # the refusal, the one line of this request.
            self._transcripts.pop(id(record), None)
            return
        super().closed(record)

    def line(self, record: StreamRecord, transcript: Any = None) -> dict[str, Any]:
        line = super().line(record, transcript)
        ctx = current()
        if ctx is not None:
            if ctx.key is not None:
                line["key_id"] = ctx.key.id
            if ctx.attempts:
                line["attempts"] = [attempt.as_dict() for attempt in ctx.attempts]
        return line


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
        #: A limit check that waits on Redis runs beside the upstream call (``_Gate``).
        self.defer_limits = lim.backend == "redis"
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
                "Upstream attempts, by model, deployment and outcome "
                "(ok, retry, error, failed, refused).",
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
        """Every model's provider as a ``RoutedProvider`` (its deployments and fallbacks)."""
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
            if self.keys:
                provider.on_usage = self._charge
        out: dict[str, Provider] = dict(providers)
        out.update(routed)
        return out

    def _charge(self, usage: ev.Usage) -> None:
        """Charge a finished stream's usage to the request's key (in the background)."""
        ctx = current()
        key = ctx.key if ctx is not None else None
        if key is not None and key.counts_tokens:
            self.spawn(self.limits.charge(key, usage.input_tokens + usage.output_tokens))

    @staticmethod
    def install_client_hooks(client: httpx.AsyncClient) -> None:
        """Send the W3C trace context upstream: the stream's span, else the client's own."""

        async def add_traceparent(request: httpx.Request) -> None:
            ctx = current()
            if ctx is None:
                return
            value = ctx.traceparent
            if ctx.span is not None:
                from .telemetry.otel import traceparent_of

                value = traceparent_of(ctx.span) or value
            if value:
                request.headers["traceparent"] = value
                if ctx.tracestate:
                    request.headers["tracestate"] = ctx.tracestate

        hooks = client.event_hooks
        hooks["request"] = [*hooks.get("request", []), add_traceparent]
        client.event_hooks = hooks

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
        """At the worker's startup: the drain's signal handlers."""
        self.drain.install()

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

    async def admit(
        self, scope: Scope, receive: Receive, ctx: RequestContext
    ) -> tuple[auth.Refusal | None, Receive]:
        """Check the key, its models and its limits. Returns a refusal or the receive to use."""
        key = self.keys.find(
            credential(scope.get("headers", ()), scope.get("query_string", b"")) or ""
        )
        if key is None:
            return auth.Refusal(
                401,
                "a valid API key is required (Authorization: Bearer, x-api-key or x-goog-api-key)",
            ), receive
        ctx.key = key
        if scope.get("method") != "POST":
            return None, receive
        peeked, receive = await _peek_model(scope, receive, self.config.server.max_body_bytes)
        model = peeked.model
        if isinstance(model, str) and not key.allows(model):
            return auth.Refusal(
                403, f"this key may not use model {model!r}", code="model_not_allowed"
            ), receive
        if key.limited:
            if self.defer_limits and not self._maybe_resumable(peeked):
                # Off the first token's path: the check's round trip to Redis runs
                # while the upstream is connected to and written; the middleware
                # joins it before the response starts (_Gate).
                ctx.admission = asyncio.ensure_future(self.check_limits(key))
                return None, receive
            return await self.check_limits(key), receive
        return None, receive

    def _maybe_resumable(self, peeked: _ModelOnly) -> bool:
        """A resumable stream is checked first: refused, it must leave no record (a
        retry with its request_id would get 409)."""
        if self.config.resume.default:
            return True
        extensions = peeked.extensions
        return isinstance(extensions, dict) and extensions.get("tokenwire:resumable") is True

    async def check_limits(self, key: Any) -> auth.Refusal | None:
        """The key's limits: ``None``, or the refusal to answer with."""
        decision = await self.limits.check(key)
        if decision is not None:
            if decision.limit == "unavailable":
                return auth.Refusal(503, "the rate limiter is unavailable", retry_after="1")
            if decision.limit == "budget":
                return auth.Refusal(429, "this key's token budget is spent", code="budget_exceeded")
            what = "requests" if decision.limit == "requests" else "tokens"
            return auth.Refusal(
                429,
                f"rate limit reached ({what} per minute)",
                retry_after=retry_after_header(decision),
            )
        return None


async def _peek_model(scope: Scope, receive: Receive, limit: int) -> tuple[_ModelOnly, Receive]:
    """The body's top-level ``model`` (or the Gemini path's) and ``extensions``, and a
    receive replaying the body."""
    path: str = scope.get("path", "")
    if path.startswith(("/v1beta/models/", "/v1alpha/models/", "/v1/models/")):
        name = path.split("/models/", 1)[1].split(":", 1)[0]
        return _ModelOnly(model=name), receive
    parts: list[bytes] = []
    size = 0
    more = True
    first: Any = None
    # As _asgi.read_body: a body is whole once Content-Length bytes are in.
    length = content_length_of(scope.get("headers", ()))
    while more and size != length:
        message = await receive()
        if message["type"] != "http.request":
            first = message
            break
        chunk = message.get("body", b"")
        parts.append(chunk)
        size += len(chunk)
        more = bool(message.get("more_body", False))
        if size > limit:
            break  # the endpoint answers 413; nothing to look at
    body = b"".join(parts)
    replay: list[Any] = [{"type": "http.request", "body": body, "more_body": more}]
    if first is not None:
        replay.append(first)

    async def replaying() -> Any:
        if replay:
            return replay.pop(0)
        return await receive()

    peeked = _ModelOnly()
    if (not more or size == length) and size <= limit:
        with contextlib.suppress(msgspec.DecodeError, msgspec.ValidationError):
            peeked = _model_of(body)
    return peeked, replaying


class _Observer:
    """The stream observer: the usage tee (limits, span) of each stream."""

    def __init__(self, production: Production) -> None:
        self.production = production

    def opened(self, record: StreamRecord) -> Tee | None:
        ctx = current()
        if ctx is None:
            return None
        production = self.production
        if production.telemetry is None:
            return None  # the key's usage is charged by RoutedProvider, no tee needed
        ctx.span = production.telemetry.start(record, ctx)
        return _UsageTee(production, record, ctx)

    def closed(self, record: StreamRecord) -> None:
        pass


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
        token = CURRENT.set(ctx)
        try:
            path: str = scope.get("path", "")
            protected = path.startswith(_PROTECTED) and path not in _OPEN
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
                refusal, receive = await production.admit(scope, receive, ctx)
            if refusal is not None:
                await self._refuse(send, path, refusal, ctx)
                return
            admission = ctx.admission
            if admission is None:
                await self.app(scope, receive, send)
                return
            gate = _Gate(send, admission, ctx)
            try:
                await self.app(scope, receive, gate.send)
            except _Refused:
                pass  # the endpoint's answer was held back: the refusal goes instead
            finally:
                if not admission.done():
                    admission.cancel()  # the request ended before it needed the check
            if ctx.refused is not None and not gate.started:
                await self._refuse(send, path, ctx.refused, ctx)
        finally:
            CURRENT.reset(token)

    async def _refuse(
        self, send: Send, path: str, refusal: auth.Refusal, ctx: RequestContext
    ) -> None:
        production = self.production
        code = refusal.code or auth.standard_code(refusal.status)
        if production._refused is not None:
            production._refused.labels(str(refusal.status), code).inc()
        ingress = auth.ingress_of(path)
        await send(
            {
                "type": "http.response.start",
                "status": refusal.status,
                "headers": auth.headers_for(ingress, refusal),
            }
        )
        await send({"type": "http.response.body", "body": auth.error_body(ingress, refusal)})
        _log.info(
            msgspec.json.encode(
                {
                    "msg": "request",
                    "route": path,
                    "status": refusal.status,
                    "error_code": code,
                    "key_id": ctx.key.id if ctx.key is not None else None,
                }
            ).decode()
        )


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


class _Refused(OSError):
    """Raised by ``_Gate.send`` for a refused request: an ``OSError``, which is what the
    stream endpoint takes for a client gone, so it cancels the generation (and with it
    the upstream request already made) and sends nothing more."""


class _Gate:
    """The endpoint's ``send`` while the limit check runs beside it: the response start
    waits for the check, so no event leaves before it is reconciled. A refusal raises
    ``_Refused`` there; the middleware then answers with the refusal instead."""

    __slots__ = ("_send", "admission", "ctx", "started")

    def __init__(self, send: Send, admission: asyncio.Future[Any], ctx: RequestContext) -> None:
        self._send = send
        self.admission = admission
        self.ctx = ctx
        self.started = False

    async def send(self, message: Any) -> None:
        if not self.started and message["type"] == "http.response.start":
            try:
                refusal = await self.admission
            except Exception:  # noqa: BLE001 - a limiter that broke: as if unreachable
                refusal = auth.Refusal(503, "the rate limiter is unavailable", retry_after="1")
            if refusal is not None:
                self.ctx.refused = refusal
                raise _Refused("refused by the key's limits")
            self.started = True
        await self._send(message)
