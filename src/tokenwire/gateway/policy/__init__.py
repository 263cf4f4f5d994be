"""Who may use the gateway, how much, and where a request goes: the policy layer.

- ``keys``: inbound keys (generation, hashing, lookup, the credential each SDK sends);
- ``auth``: refusals of keys and limits in each ingress's vendor error shape;
- ``limits``: per-key request and token limits and budgets, in memory or on Redis;
- ``routing``: retries, fallbacks, weighted deployments, circuit breakers;
- ``drain``: graceful drain on SIGTERM.

May import: the core, ``tokenwire.server`` (with its ``asgi``), and of the gateway
``config`` and ``context``; never ``providers``, ``telemetry`` or the app
(``production.py`` wires them together).
"""
