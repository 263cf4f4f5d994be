"""The LLM-Stream client: ``Client`` / ``AsyncClient`` over httpx (docs/client.md).

::

    from tokenwire import Client

    with Client("http://127.0.0.1:8080") as client:
        with client.stream(model="demo", messages="Hello") as stream:
            for text in stream.text_stream:
                print(text, end="")
            response = stream.final()

Every event is checked by the lifecycle validator as it arrives; tool calls
are checked against the request's tools and their JSON Schemas (§8.2).
"""

from __future__ import annotations

from ._async import AsyncClient, AsyncConfirm, AsyncFallback, AsyncStream
from ._common import DEFAULT_TIMEOUTS, EventTranslator, Timeouts, stream_url
from ._receiver import SIDE_EFFECTS_EXTENSION
from ._response import ParsedToolCall, RejectedToolCall, Response, tool_results_request
from ._sync import Client, Confirm, Fallback, Stream

__all__ = [
    "DEFAULT_TIMEOUTS",
    "SIDE_EFFECTS_EXTENSION",
    "AsyncClient",
    "AsyncConfirm",
    "AsyncFallback",
    "AsyncStream",
    "Client",
    "Confirm",
    "EventTranslator",
    "Fallback",
    "ParsedToolCall",
    "RejectedToolCall",
    "Response",
    "Stream",
    "Timeouts",
    "stream_url",
    "tool_results_request",
]
