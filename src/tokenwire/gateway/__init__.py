"""The gateway behind ``tokenwire serve`` (docs/gateway.md).

One module per job: ``config`` (the TOML file), ``demo`` (the built-in
``demo`` model), ``providers`` (vendor upstreams over HTTP, plugins),
``ingress`` (OpenAI and Anthropic request bodies, §7.3), ``metrics``
(Prometheus), ``logs`` (one JSON line per request, content redacted), and
``app`` (the Starlette app tying them to the routes). The request handling
itself is ``tokenwire.server``.
"""
