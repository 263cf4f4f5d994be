"""Prometheus metrics of the gateway, as a ``server.Observer``.

Label children are bound once per model when the gateway starts, so a stream
costs a dict lookup at its start and a handful of increments at its end, and
nothing per event. Rejected requests are counted by status and code, never by
the model name the client sent (unbounded label values are a memory leak).

=========================================  ======================================
``tokenwire_streams_started_total``        streams accepted, by model
``tokenwire_streams_active``               streams in flight, by model
``tokenwire_streams_completed_total``      streams finished, by model and outcome
                                           (``ok``, ``error``, ``disconnected``)
``tokenwire_events_total``                 events sent, by model (at stream end)
``tokenwire_stream_errors_total``          ``error`` events, by model and §5.3.6 code
``tokenwire_requests_rejected_total``      4xx answers, by status and code
``tokenwire_time_to_first_event_seconds``  request arrival to the provider's first event
``tokenwire_stream_duration_seconds``      request arrival to stream end
``tokenwire_unknown_vendor_events_total``  vendor events of a type no translator
                                           knows, by vendor and type (at most
                                           ``MAX_TYPES_PER_VENDOR`` types per
                                           vendor, then ``type="other"``)
=========================================  ======================================

Unknown vendor event types are counted by the provider that owns the
translator (``gateway/providers/__init__.py``) into ``UNKNOWN_EVENTS``, a process-wide
tally that every ``Metrics`` exposes (docs/extensions.md: never silently dropped).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Final

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from ... import events as ev
from ...server import StreamRecord, Tee
from ...translate.adapt import report_of

__all__ = [
    "CONTENT_TYPE",
    "MAX_TYPES_PER_VENDOR",
    "UNKNOWN_EVENTS",
    "Metrics",
    "UnknownEventTally",
]

#: Distinct unknown event types counted by name per vendor; the rest are "other".
MAX_TYPES_PER_VENDOR: Final = 50
_MAX_VENDORS: Final = 64

CONTENT_TYPE: Final = CONTENT_TYPE_LATEST

_TTFE_BUCKETS: Final = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
)  # fmt: skip
_DURATION_BUCKETS: Final = (
    0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
)  # fmt: skip


class UnknownEventTally:
    """Unknown vendor event types, by vendor and type, with bounded label cardinality.

    Thread-safe (the gateway may run several event loops). ``add`` takes a
    translator's ``unknown_types``; a vendor gets at most ``max_types`` type
    labels, after which new types count as ``"other"``.
    """

    def __init__(self, max_types: int = MAX_TYPES_PER_VENDOR) -> None:
        self.max_types = max_types
        self._counts: dict[str, dict[str, int]] = {}
        self._lock = threading.Lock()

    def add(self, vendor: str, counts: Mapping[str, int]) -> None:
        """Count ``counts`` (type -> events) for ``vendor``."""
        with self._lock:
            per_vendor = self._counts.get(vendor)
            if per_vendor is None:
                if len(self._counts) >= _MAX_VENDORS:
                    vendor = "other"
                per_vendor = self._counts.setdefault(vendor, {})
            for kind, n in counts.items():
                if kind not in per_vendor and len(per_vendor) >= self.max_types:
                    kind = "other"
                per_vendor[kind] = per_vendor.get(kind, 0) + n

    def get(self, vendor: str, kind: str) -> int:
        """The count for ``vendor`` and ``kind`` (0 when none)."""
        with self._lock:
            return self._counts.get(vendor, {}).get(kind, 0)

    def items(self) -> list[tuple[str, str, int]]:
        """``(vendor, type, count)`` for every label pair, sorted."""
        with self._lock:
            return sorted((v, k, n) for v, c in self._counts.items() for k, n in c.items())


#: The gateway process's tally (``providers.HTTPProvider`` adds to it).
UNKNOWN_EVENTS: Final = UnknownEventTally()


class _UnknownEventsCollector(Collector):
    """Exposes a tally as ``tokenwire_unknown_vendor_events_total``."""

    def __init__(self, tally: UnknownEventTally) -> None:
        self.tally = tally

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(
            "tokenwire_unknown_vendor_events",
            "Vendor events of a type the translator does not know, by vendor and type.",
            labels=["vendor", "type"],
        )
        for vendor, kind, n in self.tally.items():
            family.add_metric([vendor, kind], n)
        yield family


class _ModelMetrics:
    """The label children of one model, bound once."""

    __slots__ = ("started", "active", "ok", "error", "disconnected", "events", "ttfe", "duration")

    def __init__(self, metrics: Metrics, model: str) -> None:
        self.started = metrics.started.labels(model)
        self.active = metrics.active.labels(model)
        self.ok = metrics.completed.labels(model, "ok")
        self.error = metrics.completed.labels(model, "error")
        self.disconnected = metrics.completed.labels(model, "disconnected")
        self.events = metrics.events.labels(model)
        self.ttfe = metrics.ttfe.labels(model)
        self.duration = metrics.duration.labels(model)


class Metrics:
    """The gateway's metrics, in their own registry; an ``Observer`` of every endpoint.

    ``models`` are the configured model names; a model outside it (served by a
    custom lookup) is counted under ``model="other"``.
    """

    def __init__(
        self,
        models: Iterable[str],
        registry: CollectorRegistry | None = None,
        unknown_events: UnknownEventTally | None = None,
    ) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.unknown_events = unknown_events if unknown_events is not None else UNKNOWN_EVENTS
        r.register(_UnknownEventsCollector(self.unknown_events))
        self.started = Counter(
            "tokenwire_streams_started", "Streams accepted.", ["model"], registry=r
        )
        self.active = Gauge("tokenwire_streams_active", "Streams in flight.", ["model"], registry=r)
        self.completed = Counter(
            "tokenwire_streams_completed",
            "Streams finished, by outcome (ok, error, disconnected).",
            ["model", "outcome"],
            registry=r,
        )
        self.events = Counter("tokenwire_events", "Events sent.", ["model"], registry=r)
        self.errors = Counter(
            "tokenwire_stream_errors",
            "error events sent, by section 5.3.6 code.",
            ["model", "code"],
            registry=r,
        )
        self.adaptations = Counter(
            "tokenwire_adaptations",
            "Fields of vendor bodies adapted for an upstream of another format, by outcome.",
            ["source", "target", "outcome"],
            registry=r,
        )
        self.rejected = Counter(
            "tokenwire_requests_rejected",
            "Requests answered with an error status, by status and code.",
            ["status", "code"],
            registry=r,
        )
        self.ttfe = Histogram(
            "tokenwire_time_to_first_event_seconds",
            "Time from request arrival to the provider's first event.",
            ["model"],
            buckets=_TTFE_BUCKETS,
            registry=r,
        )
        self.duration = Histogram(
            "tokenwire_stream_duration_seconds",
            "Time from request arrival to the end of the stream.",
            ["model"],
            buckets=_DURATION_BUCKETS,
            registry=r,
        )
        self._models = {name: _ModelMetrics(self, name) for name in [*models, "other"]}
        # §5.3.6: bind the registered codes up front as well; they show as 0.
        for name in self._models:
            for code in sorted(ev.ERROR_CODES):
                self.errors.labels(name, code)

    def _for(self, record: StreamRecord) -> _ModelMetrics:
        return self._models.get(record.model or "other") or self._models["other"]

    # -- Observer ------------------------------------------------------------------

    def opened(self, record: StreamRecord) -> Tee | None:
        """A stream started."""
        m = self._for(record)
        m.started.inc()
        m.active.inc()
        return None

    def closed(self, record: StreamRecord) -> None:
        """A request ended: count the stream's totals, or the rejection."""
        for _path, target, outcome in report_of(record.request):
            self.adaptations.labels(record.format, target, outcome).inc()
        if record.status != 200:
            if record.status >= 400 and record.status != 499:
                self.rejected.labels(str(record.status), record.error_code or "").inc()
            return
        m = self._for(record)
        m.active.dec()
        m.events.inc(record.events)
        if record.disconnected:
            m.disconnected.inc()
        elif record.error_code is not None:
            m.error.inc()
        else:
            m.ok.inc()
        if record.error_code is not None:
            code = record.error_code if record.error_code in ev.ERROR_CODES else "other"
            self.errors.labels(
                record.model if record.model in self._models else "other", code
            ).inc()
        ttfe = record.time_to_first_event
        if ttfe is not None:
            m.ttfe.observe(ttfe)
        duration = record.duration
        if duration is not None:
            m.duration.observe(duration)

    # -- exposition -------------------------------------------------------------------

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        data: Any = generate_latest(self.registry)
        return bytes(data)
