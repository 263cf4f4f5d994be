"""What the production layers know about one request.

The middleware (``production.ProductionMiddleware``) makes a fresh
``RequestContext`` for each request and leaves it in the ASGI scope
(``server.exchange.CONTEXT_KEY``); the endpoint's ``Exchange`` carries it on,
as a parameter: the routing wrapper appends its attempts there, the usage tee
reads the key, the upstream request takes the trace context from it, and the
request log adds the key id and the attempts to its line.

May import: the core only; of the gateway nothing (only ``config`` sits lower).
"""

from __future__ import annotations

from typing import Any

__all__ = ["Attempt", "RequestContext"]


class Attempt:
    """One try of one deployment: its label, the outcome and, for a failure, the code."""

    __slots__ = ("model", "deployment", "outcome", "code")

    def __init__(self, model: str, deployment: str, outcome: str, code: str | None) -> None:
        self.model = model
        self.deployment = deployment
        #: ok | retry (failed before the first token) | failed (after it) | refused
        self.outcome = outcome
        self.code = code

    def as_dict(self) -> dict[str, Any]:
        """The attempt as a log-line field."""
        out: dict[str, Any] = {"deployment": self.deployment, "outcome": self.outcome}
        if self.model:
            out["model"] = self.model
        if self.code is not None:
            out["code"] = self.code
        return out


class RequestContext:
    """One request's production state. ``key`` is a ``keys.KeyRecord`` or ``None``."""

    __slots__ = (
        "key",
        "admitted",
        "ledger",
        "attempts",
        "traceparent",
        "tracestate",
        "span",
        "served_by",
    )

    def __init__(self) -> None:
        self.key: Any = None
        #: The one resolved model of the request: the parsed request's
        #: ``model``, the very one the route serves, once the key may use it and
        #: its limits admitted it. ``None`` until then.
        self.admitted: str | None = None
        #: The request's tokens against its key (``policy.metering.Ledger``), when
        #: the key has a token limit.
        self.ledger: Any = None
        self.attempts: list[Attempt] = []
        #: The client's W3C trace context (``traceparent``/``tracestate`` headers).
        self.traceparent: str | None = None
        self.tracestate: str | None = None
        #: The request's OpenTelemetry span, when telemetry is on.
        self.span: Any = None
        #: The deployment that served the stream (``gen_ai.response.model`` source).
        self.served_by: str | None = None
