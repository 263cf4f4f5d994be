"""The gateway behind ``tokenwire serve`` (docs/gateway.md), one package per concern.

==================  ==========================================================
``config/``         the TOML file: ``Config`` and its sections (``production``:
                    keys, limits, routing, telemetry)
``providers/``      what a model is served by: vendor upstreams over HTTP,
                    SignalR, Connect, the built-in ``demo``, Python plugins
``upstream/``       the HTTP/1.1 upstream client (httptools, a keep-alive pool)
``policy/``         keys, auth refusals, limits and budgets, routing, drain
``telemetry/``      Prometheus metrics, request logs, OpenTelemetry
``resume/``         resumable streams and their stores (memory, Redis)
==================  ==========================================================

The top level is the app and its wiring: ``app`` (the Starlette app and its
routes), ``ingress`` (vendor request bodies in, §7.3), ``playground`` (the
browser page), ``production`` (the policy and telemetry layers wired around
the providers), ``context`` (what those layers know of one request) and
``serving`` (the app behind the request guard, per worker). The request
handling itself is ``tokenwire.server``.

Imports point down these layers (``tests/test_layers.py``, ``GATEWAY_LAYERS``);
two packages on one layer never import each other:

=====  ==============================================================
0      ``config``
1      ``context``
2      ``upstream``, ``telemetry``
3      ``resume``, ``policy``, ``providers``
4      ``ingress``, ``playground``, ``production``
5      ``app``
6      ``serving``
=====  ==============================================================
"""
