"""OpenTelemetry: one span per stream (GenAI semantic conventions), metrics, OTLP/HTTP export.

The ``otel`` extra (``opentelemetry-sdk``, ``opentelemetry-exporter-otlp-proto-http``)
is imported only when telemetry is on: ``[telemetry] enabled = true``, or
``enabled`` unset and ``OTEL_EXPORTER_OTLP_ENDPOINT`` /
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` set (and ``OTEL_SDK_DISABLED`` not
``true``). The exporters read the other standard ``OTEL_*`` variables
(headers, timeouts); ``[telemetry] endpoint`` overrides the endpoint.

Each stream is a ``SERVER`` span named ``chat <model>`` whose parent is the
client's W3C ``traceparent``, with ``gen_ai.operation.name``,
``gen_ai.request.model``, ``gen_ai.response.model`` (the deployment that
served it), ``gen_ai.usage.input_tokens`` / ``output_tokens``,
``gen_ai.response.finish_reasons``, ``gen_ai.response.time_to_first_chunk``
(seconds), ``error.type`` for an ``error`` event, and the routing attempts.
Prompt and completion text are added (``gen_ai.input.messages``,
``gen_ai.output.messages``) only with ``log_content``. Metrics:
``gen_ai.server.request.duration``, ``gen_ai.server.time_to_first_token`` and
``gen_ai.client.token.usage`` (by ``gen_ai.token.type``).

An unreachable collector costs one JSON warning line and an exponential
backoff (otel_export.py), and ``shutdown`` waits on the exporters at most
``SHUTDOWN_FLUSH_S``.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping
from typing import Any, Final

import msgspec

from ... import events as ev
from ...server import StreamRecord
from ..config.production import TelemetryConfig
from ..context import RequestContext
from .otel_export import EXPORT_TIMEOUT_S, Gate, metric_exporter, span_exporter

__all__ = ["Telemetry", "enabled", "traceparent_of"]

_SECONDS_BUCKETS: Final = (
    0.01,
    0.02,
    0.04,
    0.08,
    0.16,
    0.32,
    0.64,
    1.28,
    2.56,
    5.12,
    10.24,
    20.48,
    40.96,
    81.92,
)
_TOKEN_BUCKETS: Final = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576)
#: The longest a shutdown waits for the last spans and metrics to go out.
SHUTDOWN_FLUSH_S: Final = 2.5


def enabled(config: TelemetryConfig, environ: Mapping[str, str] = os.environ) -> bool:
    """Whether telemetry is on, by the config, else by the standard variables."""
    if environ.get("OTEL_SDK_DISABLED", "").lower() == "true":
        return False
    if config.enabled is not None:
        return config.enabled
    return bool(
        environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        or environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )


def traceparent_of(span: Any) -> str | None:
    """The W3C ``traceparent`` naming ``span`` as the parent."""
    context = span.get_span_context()
    if not context.is_valid:
        return None
    flags = int(context.trace_flags) & 0xFF
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{flags:02x}"


class Telemetry:
    """The tracer and meter of one gateway worker, exporting over OTLP/HTTP."""

    def __init__(self, config: TelemetryConfig, *, log_content: bool = False) -> None:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
        from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, View
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.trace import SpanKind, Status, StatusCode
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        self.log_content = log_content
        resource = Resource.create({SERVICE_NAME: config.service_name})
        base = config.endpoint.rstrip("/") if config.endpoint else None
        where = base or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or "http://localhost:4318"
        #: One collector behind both exporters: one warning, one backoff.
        self.gate = Gate(where)
        spans = span_exporter(f"{base}/v1/traces" if base else None, self.gate)
        self.tracer_provider = TracerProvider(resource=resource)
        self.tracer_provider.add_span_processor(
            BatchSpanProcessor(spans, export_timeout_millis=EXPORT_TIMEOUT_S * 1000)
        )
        self.tracer = self.tracer_provider.get_tracer("tokenwire.gateway")
        metrics = metric_exporter(f"{base}/v1/metrics" if base else None, self.gate)
        reader = PeriodicExportingMetricReader(
            metrics,
            export_interval_millis=config.export_interval_s * 1000,
            export_timeout_millis=EXPORT_TIMEOUT_S * 1000,
        )
        views = [
            View(
                instrument_name="gen_ai.server.*",
                aggregation=ExplicitBucketHistogramAggregation(_SECONDS_BUCKETS),
            ),
            View(
                instrument_name="gen_ai.client.token.usage",
                aggregation=ExplicitBucketHistogramAggregation(_TOKEN_BUCKETS),
            ),
        ]
        self.meter_provider = MeterProvider(resource=resource, metric_readers=[reader], views=views)
        meter = self.meter_provider.get_meter("tokenwire.gateway")
        self.duration = meter.create_histogram(
            "gen_ai.server.request.duration", unit="s", description="Stream duration."
        )
        self.ttft = meter.create_histogram(
            "gen_ai.server.time_to_first_token", unit="s", description="Time to first chunk."
        )
        self.tokens = meter.create_histogram(
            "gen_ai.client.token.usage", unit="{token}", description="Tokens by kind."
        )
        self._propagator = TraceContextTextMapPropagator()
        self._server = SpanKind.SERVER
        self._ok, self._error_status = Status(StatusCode.OK), Status(StatusCode.ERROR)

    def start(self, record: StreamRecord, ctx: RequestContext) -> Any:
        """The stream's span, started at the request's arrival, child of the client's trace."""
        carrier = {}
        if ctx.traceparent:
            carrier["traceparent"] = ctx.traceparent
            if ctx.tracestate:
                carrier["tracestate"] = ctx.tracestate
        parent = self._propagator.extract(carrier) if carrier else None
        started_ns = time.time_ns() - int((time.perf_counter() - record.started) * 1e9)
        model = record.model or ""
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": model,
            "http.route": record.route,
            "tokenwire.ingress": record.format,
        }
        if record.request_id:
            attributes["gen_ai.request.id"] = record.request_id
        if ctx.key is not None:
            attributes["tokenwire.key.id"] = ctx.key.id
        if self.log_content and record.request is not None:
            attributes["gen_ai.input.messages"] = msgspec.json.encode(
                msgspec.to_builtins(record.request.messages)
            ).decode()
        return self.tracer.start_span(
            f"chat {model}",
            context=parent,
            kind=self._server,
            attributes=attributes,
            start_time=started_ns,
        )

    def finish(
        self,
        span: Any,
        record: StreamRecord,
        ctx: RequestContext,
        usage: ev.Usage | None,
        stop_reasons: list[str],
        text: list[str] | None,
    ) -> None:
        """End ``span`` with the stream's outcome; record the metrics."""
        model = record.model or ""
        served = ctx.served_by or model
        span.set_attribute("gen_ai.response.model", served)
        common = {"gen_ai.operation.name": "chat", "gen_ai.request.model": model}
        if usage is not None:
            span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
            self.tokens.record(usage.input_tokens, {**common, "gen_ai.token.type": "input"})
            self.tokens.record(usage.output_tokens, {**common, "gen_ai.token.type": "output"})
        if stop_reasons:
            span.set_attribute("gen_ai.response.finish_reasons", stop_reasons)
        ttfe = record.time_to_first_event
        if ttfe is not None:
            span.set_attribute("gen_ai.response.time_to_first_chunk", ttfe)
            self.ttft.record(ttfe, common)
        if ctx.attempts:
            span.set_attribute("tokenwire.attempts", len(ctx.attempts))
            span.set_attribute(
                "tokenwire.attempt.outcomes", [f"{a.deployment}:{a.outcome}" for a in ctx.attempts]
            )
        if text is not None:
            span.set_attribute("gen_ai.output.messages", "".join(text))
        if record.error_code is not None:
            span.set_attribute("error.type", record.error_code)
            span.set_status(self._error_status)
        else:
            span.set_status(self._ok)
        ended = time.perf_counter()
        duration = ended - record.started
        self.duration.record(duration, common)
        span.end()

    def shutdown(self) -> None:
        """Flush and stop both exporters (at the worker's shutdown), for at most
        ``SHUTDOWN_FLUSH_S``: what has not gone out by then is dropped.

        The flush runs in a daemon thread, so an exporter stuck past the bound
        holds up neither the shutdown nor the process's exit.
        """

        def flush() -> None:
            try:
                self.tracer_provider.shutdown()
            finally:
                self.meter_provider.shutdown(timeout_millis=EXPORT_TIMEOUT_S * 1000)

        flusher = threading.Thread(target=flush, name="tokenwire-otel-flush", daemon=True)
        flusher.start()
        flusher.join(SHUTDOWN_FLUSH_S)
