"""Google Gemini ``streamGenerateContent?alt=sse`` <-> the standard (§7.1, §7.3).

Four parts, all sans-I/O, one module each:

* ``stream.Translator``: a Gemini ``alt=sse`` body becomes one standard stream
  (thought parts, ``thoughtSignature``s, server tools, citations, usage details,
  the raw finish reason and refusals included).
* ``request.build_request``: a standard request becomes
  ``POST {base}/v1beta/models/{model}:streamGenerateContent?alt=sse``, every
  signature back on the part it came with.
* ``ingress.request_from_vendor`` / ``ingress.EventEncoder``: the gateway's
  ``/v1beta/models/{model}:streamGenerateContent`` route, so that the real
  google-genai SDK can read any upstream.
* ``errors``: finish reasons and error statuses both ways, and ``http_error``.

The rulings are listed in ``docs/translation.md`` ("Gemini").
"""

from __future__ import annotations

from .._contract import VendorFormat, VendorIngress
from .aggregate import ContentAggregator, aggregate_ingress
from .count import COUNT
from .errors import (
    ERROR_STATUSES,
    FINISH_ERRORS,
    FINISH_REASONS,
    REFUSAL_REASONS,
    error_body,
    error_code,
    http_error,
)
from .ingress import EventEncoder, parse_ingress, request_from_vendor
from .request import EXTENSION_KEYS, build_request, request_body
from .stream import Translator

__all__ = [
    "ERROR_STATUSES",
    "EXTENSION_KEYS",
    "FINISH_ERRORS",
    "FINISH_REASONS",
    "FORMAT",
    "INGRESS_ROUTE",
    "REFUSAL_REASONS",
    "ContentAggregator",
    "EventEncoder",
    "Translator",
    "aggregate_ingress",
    "build_request",
    "error_body",
    "error_code",
    "http_error",
    "parse_ingress",
    "request_body",
    "request_from_vendor",
]

#: The google-genai SDK's streaming path (``?alt=sse`` in the query).
INGRESS_ROUTE = "/v1beta/models/{model}:streamGenerateContent"

#: The Google Gemini vendor format.
FORMAT = VendorFormat(
    name="gemini",
    title="Google Gemini",
    transport="http-sse",
    media_type="text/event-stream",
    translator=Translator,
    build_request=build_request,
    http_error=http_error,
    endpoint="POST {base_url}/v1beta/models/{model}:streamGenerateContent?alt=sse",
    ingress=VendorIngress(
        route=INGRESS_ROUTE,
        parse=parse_ingress,
        path_params=("model",),
        aggregate=aggregate_ingress,
        error_body=error_body,
    ),
    fake="tokenwire.testing.gemini",
    count=COUNT,
)
