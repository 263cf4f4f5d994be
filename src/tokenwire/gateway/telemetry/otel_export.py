"""OTLP/HTTP exporters that degrade quietly when the collector is unreachable.

The SDK's exporters retry a failed export for their whole timeout (10 s by
default), log each retry as a plain-text line (which lands in the gateway's
one-JSON-line-per-request log through Python's last-resort handler), and start
over with the next batch. Here instead:

- their own log lines are kept out of the log (``quiet_exporter_logs``); the
  last one is kept as the reason;
- the first failure writes **one** warning line, in the log's JSON format
  (``telemetry_unreachable``, with the endpoint and the reason); the next exports
  are skipped (their batch dropped) for an exponential backoff, 1 s doubling up
  to 60 s; the first export that succeeds again writes ``telemetry_reachable``;
- each export attempt is bounded by ``EXPORT_TIMEOUT_S``, so a shutdown's flush
  never waits on the exporter longer than that (``otel.Telemetry.shutdown``).

``Gate`` is the state machine (pure, its clock injectable); the exporters are
the SDK's, subclassed to pass through it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Final

import msgspec

from .logs import LOGGER_NAME

__all__ = [
    "EXPORT_TIMEOUT_S",
    "Gate",
    "metric_exporter",
    "quiet_exporter_logs",
    "span_exporter",
]

#: One export attempt (the SDK's retries included) lasts at most this long.
EXPORT_TIMEOUT_S: Final = 2.0
#: The backoff after a failed export: from this, doubling...
BACKOFF_FIRST_S: Final = 1.0
#: ...up to this.
BACKOFF_MAX_S: Final = 60.0
#: The loggers of the SDK's OTLP exporters (and their shared HTTP client).
_EXPORTER_LOGGERS: Final = ("opentelemetry.exporter.otlp",)

_log = logging.getLogger(LOGGER_NAME)
_encode = msgspec.json.Encoder().encode


class _LastMessage(logging.Handler):
    """Keeps the last line the exporters logged (the reason of a failure), writes none."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.last = ""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.last = record.getMessage()[:300]
        except Exception:  # noqa: BLE001 - a handler must never raise
            self.last = str(record.msg)[:300]


_LAST = _LastMessage()


def quiet_exporter_logs() -> _LastMessage:
    """Keep the SDK exporters' lines out of the log (idempotent); returns the keeper."""
    for name in _EXPORTER_LOGGERS:
        logger = logging.getLogger(name)
        if _LAST not in logger.handlers:
            logger.addHandler(_LAST)
        logger.propagate = False
    return _LAST


class Gate:
    """Whether to try the collector now: closed for a backoff after each failure.

    ``failed`` and ``ok`` are called with each export's outcome; the first failure
    after a success (or at start) logs one warning, the first success after
    failures one info line. Thread-safe: spans and metrics export from two threads.
    """

    def __init__(
        self,
        endpoint: str,
        *,
        clock: Callable[[], float] = time.monotonic,
        log: Callable[[int, dict[str, Any]], None] | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.clock = clock
        self.log = log or _write
        self.down = False
        self.delay = 0.0
        self.until = 0.0
        self.skipped = 0
        self._lock = threading.Lock()

    def allows(self) -> bool:
        with self._lock:
            if self.clock() >= self.until:
                return True
            self.skipped += 1
            return False

    def failed(self, reason: str) -> None:
        with self._lock:
            self.delay = BACKOFF_FIRST_S if not self.down else min(BACKOFF_MAX_S, self.delay * 2)
            self.until = self.clock() + self.delay
            if self.down:
                return
            self.down = True
        self.log(
            logging.WARNING,
            {
                "msg": "telemetry_unreachable",
                "endpoint": self.endpoint,
                "error": reason,
                "effect": "spans and metrics are dropped; retried with backoff "
                f"({BACKOFF_FIRST_S:g} s doubling to {BACKOFF_MAX_S:g} s)",
            },
        )

    def ok(self) -> None:
        with self._lock:
            was_down, self.down = self.down, False
            self.delay = self.until = 0.0
            skipped, self.skipped = self.skipped, 0
        if was_down:
            self.log(
                logging.INFO,
                {"msg": "telemetry_reachable", "endpoint": self.endpoint, "skipped": skipped},
            )


def _write(level: int, fields: dict[str, Any]) -> None:
    if _log.isEnabledFor(level):
        _log.log(level, _encode({"ts": round(time.time(), 3), **fields}).decode())


def span_exporter(endpoint: str | None, gate: Gate) -> Any:
    """An ``OTLPSpanExporter`` through ``gate``, each attempt bounded."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SpanExportResult

    keeper = quiet_exporter_logs()

    class GatedSpanExporter(OTLPSpanExporter):
        def export(self, spans: Any) -> Any:
            if not gate.allows():
                return SpanExportResult.FAILURE
            result = super().export(spans)
            if result is SpanExportResult.SUCCESS:
                gate.ok()
            else:
                gate.failed(keeper.last or "the export failed")
            return result

    return GatedSpanExporter(endpoint=endpoint, timeout=EXPORT_TIMEOUT_S)


def metric_exporter(endpoint: str | None, gate: Gate) -> Any:
    """An ``OTLPMetricExporter`` through ``gate``, each attempt bounded."""
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.sdk.metrics.export import MetricExportResult

    keeper = quiet_exporter_logs()

    class GatedMetricExporter(OTLPMetricExporter):
        def export(
            self, metrics_data: Any, timeout_millis: float | None = 10_000, **kwargs: Any
        ) -> Any:
            if not gate.allows():
                return MetricExportResult.FAILURE
            result = super().export(metrics_data, timeout_millis=timeout_millis, **kwargs)
            if result is MetricExportResult.SUCCESS:
                gate.ok()
            else:
                gate.failed(keeper.last or "the export failed")
            return result

    return GatedMetricExporter(endpoint=endpoint, timeout=EXPORT_TIMEOUT_S)
