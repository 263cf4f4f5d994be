"""OpenAI Chat Completions <-> the standard (§7.1), both directions.

- ``request.build_request``: a standard request becomes ``POST {base_url}/chat/completions``.
- ``stream.Translator``: a Chat Completions SSE body becomes standard events.
- ``ingress.request_from_vendor``: a Chat Completions request body becomes a
  standard request (the gateway's ``/v1/chat/completions`` ingress, §7.3), and
  ``ingress.ChunkEncoder`` turns standard events into ``chat.completion.chunk``
  frames, so that ingress can answer in the caller's own format.
- ``errors``: finish reasons and error types both ways, and ``http_error``.

The stream side's rules (which block index each thing gets, how stop reasons
and error codes map, what is dropped) are tabled in ``docs/translation.md``.
OpenAI-compatible vendors (Mistral, DeepSeek, Groq, Azure) share this code;
``translate.mistral`` only changes the request side.
"""

from __future__ import annotations

from .._contract import VendorFormat, VendorIngress
from .aggregate import ChatAggregator, aggregate_ingress
from .errors import (
    ERROR_FINISH_REASONS,
    ERROR_TYPES,
    FINISH_REASONS,
    STOP_TO_FINISH,
    error_body,
    error_code,
    error_frame,
    http_error,
)
from .ingress import ChunkEncoder, parse_ingress, request_from_vendor
from .request import (
    PartConverter,
    build_request,
    http_headers,
    merge_extension,
    messages_to_openai,
    reasoning_texts,
    tools_to_openai,
)
from .stream import Translator

__all__ = [
    "ERROR_FINISH_REASONS",
    "ERROR_TYPES",
    "FINISH_REASONS",
    "FORMAT",
    "STOP_TO_FINISH",
    "ChatAggregator",
    "ChunkEncoder",
    "PartConverter",
    "Translator",
    "aggregate_ingress",
    "build_request",
    "error_body",
    "error_frame",
    "error_code",
    "http_error",
    "http_headers",
    "merge_extension",
    "messages_to_openai",
    "parse_ingress",
    "reasoning_texts",
    "request_from_vendor",
    "tools_to_openai",
]

#: The OpenAI Chat Completions vendor format.
FORMAT = VendorFormat(
    name="openai",
    title="OpenAI Chat Completions",
    transport="http-sse",
    media_type="text/event-stream",
    translator=Translator,
    build_request=build_request,
    http_error=http_error,
    endpoint="POST {base_url}/chat/completions",
    ingress=VendorIngress(
        route="/v1/chat/completions",
        parse=parse_ingress,
        aggregate=aggregate_ingress,
        error_body=error_body,
        error_frame=error_frame,
    ),
    fake="tokenwire.testing.openai",
)
