"""The gateway's HTTP/1.1 upstream client: httptools over asyncio protocols.

``Pool.stream(method, url, headers, body, read_timeout=..., connect_timeout=...,
pool_timeout=...)`` is an async context manager yielding a ``Response`` whose
``read()`` returns the body pieces as the socket gave them (``[]`` at the end).
Every failure is an ``UpstreamError``: ``timeout`` and ``phase`` for timeouts,
``reason`` naming what went wrong. Chosen by measurement over httpx, aiohttp
and h11 (``bench/upstream.py``, bench/RESULTS.md "## upstream"); HTTP/2
upstreams keep httpx (docs/reference/config.md, "Upstream connections").

May import: the core, and of the gateway ``config`` and ``context``; never
``telemetry``, ``policy``, ``providers``, ``resume`` or the app.
"""

from __future__ import annotations

from .errors import Phase, UpstreamError
from .pool import Pool, Response
from .protocol import HIGH_WATER, MAX_CHUNK_LINE, MAX_HEAD

__all__ = ["HIGH_WATER", "MAX_CHUNK_LINE", "MAX_HEAD", "Phase", "Pool", "Response", "UpstreamError"]
