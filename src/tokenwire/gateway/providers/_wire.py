"""What the HTTP providers send and report besides the request: headers and telemetry.

``http.HTTPProvider`` adds these to every upstream request, translated or
passed through; the transports (``transport``) own the reading.
"""

from __future__ import annotations

from typing import Any, Final

from ...request import Request
from ..context import RequestContext
from ..telemetry.logs import log_unknown_events
from ..telemetry.metrics import UNKNOWN_EVENTS

__all__ = ["IDENTITY", "report_unknown", "trace_headers"]

#: Compression buys nothing on a stream of small events and costs a decoding pass.
IDENTITY: Final = {"accept-encoding": "identity"}


def trace_headers(ctx: RequestContext | None) -> dict[str, str]:
    """The W3C trace context to send upstream: the stream's span, else the client's own."""
    if ctx is None:
        return {}
    value = ctx.traceparent
    if ctx.span is not None:
        from ..telemetry.otel import traceparent_of

        value = traceparent_of(ctx.span) or value
    if not value:
        return {}
    if ctx.tracestate:
        return {"traceparent": value, "tracestate": ctx.tracestate}
    return {"traceparent": value}


def report_unknown(vendor: str, request: Request, translator: Any) -> None:
    """docs/extensions.md: count the vendor event types the translator skipped, log once."""
    counts = getattr(translator, "unknown_types", None)
    if counts:
        UNKNOWN_EVENTS.add(vendor, counts)
        log_unknown_events(vendor, request.request_id, counts)
