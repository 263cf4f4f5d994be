"""A local stand-in for ``tokenwire serve`` with the playground wired in.

Until the gateway app adds ``*playground.routes()`` itself, the playground
tests fall back to this: the gateway's own app (``app_from_env``, exactly
what ``tokenwire serve`` runs, request logs included) plus the playground
routes, served by granian like ``tokenwire serve`` does.
"""

from __future__ import annotations

from starlette.applications import Starlette

from tokenwire.gateway import playground
from tokenwire.gateway.app import app_from_env


def app() -> Starlette:
    """The gateway app with the playground routes appended (granian factory)."""
    gateway = app_from_env()
    paths = {getattr(route, "path", None) for route in gateway.router.routes}
    if "/" not in paths:
        gateway.router.routes.extend(playground.routes())
    return gateway
