"""OpenAI Responses API <-> the standard (§7.1), both directions.

- ``request.build_request``: a standard request becomes ``POST {base}/v1/responses``.
- ``stream.Translator``: a Responses SSE body becomes standard events.
- ``ingress.parse_ingress``: a Responses request body becomes a standard
  request (the gateway's ``/v1/responses`` ingress, §7.3), and
  ``ingress.ResponsesEncoder`` turns standard events into the Responses event
  stream, so that ingress answers in the caller's own format.
- ``errors``: error codes and stop reasons, and ``http_error``.

The rules are tabled in ``docs/translation.md``.
"""

from __future__ import annotations

from .._contract import VendorFormat, VendorIngress
from ..openai.errors import error_body
from .aggregate import ResponseAggregator, aggregate_ingress
from .count import COUNT
from .errors import ERROR_CODES, INCOMPLETE_REASONS, error_code, error_frame, http_error
from .ingress import ResponsesEncoder, parse_ingress, request_from_vendor
from .request import EXTENSION_KEYS, build_request, reasoning_items
from .stream import Translator

__all__ = [
    "ERROR_CODES",
    "EXTENSION_KEYS",
    "FORMAT",
    "INCOMPLETE_REASONS",
    "ResponseAggregator",
    "ResponsesEncoder",
    "Translator",
    "aggregate_ingress",
    "build_request",
    "error_body",
    "error_frame",
    "error_code",
    "http_error",
    "parse_ingress",
    "reasoning_items",
    "request_from_vendor",
]

#: The OpenAI Responses vendor format.
FORMAT = VendorFormat(
    name="openai-responses",
    title="OpenAI Responses",
    transport="http-sse",
    media_type="text/event-stream",
    translator=Translator,
    build_request=build_request,
    http_error=http_error,
    endpoint="POST {base_url}/v1/responses",
    ingress=VendorIngress(
        route="/v1/responses",
        parse=parse_ingress,
        aggregate=aggregate_ingress,
        error_body=error_body,
        error_frame=error_frame,
    ),
    fake="tokenwire.testing.openai_responses",
    count=COUNT,
)
