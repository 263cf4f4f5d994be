"""tokenwire: the reference implementation of the LLM-Stream wire format.

The protocol core (``sse``, ``events``, ``request``, ``lifecycle``, ``writer``)
does no I/O and imports nothing beyond msgspec; the client, server, gateway
and CLI live in their own modules and are imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import binary, errors, events, lifecycle, request, sse, writer
from ._iter import aiter_events, iter_events
from .errors import (
    EventDecodeError,
    FramingError,
    InvalidRequest,
    LocalProtocolError,
    ProtocolError,
    RemoteProtocolError,
    RequestTooLarge,
    StreamError,
    StreamTruncated,
    TokenwireError,
    TransportError,
    UnsupportedMediaType,
)
from .lifecycle import Report, Validator, Violation, validate
from .writer import Writer

if TYPE_CHECKING:  # pragma: no cover
    from .client import AsyncClient, Client

__version__ = "0.1.0"

__all__ = [
    "AsyncClient",
    "Client",
    "EventDecodeError",
    "FramingError",
    "InvalidRequest",
    "LocalProtocolError",
    "ProtocolError",
    "RemoteProtocolError",
    "Report",
    "RequestTooLarge",
    "StreamError",
    "StreamTruncated",
    "TokenwireError",
    "TransportError",
    "UnsupportedMediaType",
    "Validator",
    "Violation",
    "Writer",
    "aiter_events",
    "binary",
    "errors",
    "events",
    "iter_events",
    "lifecycle",
    "request",
    "sse",
    "validate",
    "writer",
]


def __getattr__(name: str) -> Any:
    # The client pulls in httpx; load it only when asked for, so that
    # `import tokenwire` stays free of I/O libraries.
    if name in ("Client", "AsyncClient"):
        from . import client

        return getattr(client, name)
    raise AttributeError(f"module 'tokenwire' has no attribute {name!r}")
