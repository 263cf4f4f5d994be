"""What the gateway tells its operator: metrics, request logs and traces.

- ``metrics``: Prometheus metrics, as a ``server.Observer``;
- ``logs``: one JSON line per request, content redacted (§8.1);
- ``otel``: OpenTelemetry spans and metrics over OTLP/HTTP (the ``otel`` extra).

May import: the core, ``tokenwire.server``, and of the gateway ``config`` and
``context``; never ``policy``, ``providers`` or the app.
"""
