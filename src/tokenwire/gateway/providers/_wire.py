"""What the HTTP providers share on the wire: limits, headers, bounded reads, telemetry hooks.

Used by ``http`` (the translated path) and ``passthrough`` (the same vendor in and
out), so that neither imports the other.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any, Final

from ...request import Request
from ..context import current
from ..telemetry.logs import log_unknown_events
from ..telemetry.metrics import UNKNOWN_EVENTS

__all__ = [
    "DRAIN_BYTES",
    "DRAIN_S",
    "IDENTITY",
    "MAX_ERROR_BODY",
    "finish_body",
    "read_bounded",
    "report_unknown",
    "trace_headers",
]

#: At most this much of an upstream error body is read.
MAX_ERROR_BODY: Final = 64 * 1024
#: After the vendor's end marker, at most this much more body is read, for at
#: most this long, to keep the connection reusable (``finish_body``).
DRAIN_BYTES: Final = 64 * 1024
DRAIN_S: Final = 0.5

#: Compression buys nothing on a stream of small events and costs a decoding pass.
IDENTITY: Final = {"accept-encoding": "identity"}


async def read_bounded(response: Any, limit: int) -> bytes:
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) >= limit:
            break
    return bytes(body[:limit])


def trace_headers() -> dict[str, str]:
    """The W3C trace context to send upstream (what ``Production.install_client_hooks``
    adds on the httpx path): the stream's span, else the client's own."""
    ctx = current()
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


async def finish_body(chunks: AsyncIterator[bytes]) -> None:
    """Read what is left of a response body, at most ``DRAIN_BYTES`` for ``DRAIN_S``.

    An upstream that keeps its body open past its end marker only costs its
    connection (httpx closes a response that was not read to its end).
    """
    import httpx

    size = 0
    with contextlib.suppress(TimeoutError, httpx.HTTPError):
        async with asyncio.timeout(DRAIN_S):
            async for chunk in chunks:
                size += len(chunk)
                if size > DRAIN_BYTES:
                    return
