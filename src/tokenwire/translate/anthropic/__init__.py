"""Anthropic Messages <-> the standard (§7.1 gateway translation, §7.3 dual format).

Four parts, all sans-I/O, one module each:

* ``stream.Translator``: an Anthropic Messages SSE body (``message_start`` …
  ``message_stop``) becomes one standard stream.
* ``request.build_request``: a standard request becomes ``POST {base_url}/v1/messages``.
* ``ingress.request_from_vendor``: an Anthropic Messages request body becomes a
  standard ``Request`` (the gateway's ``/v1/messages`` ingress), and
  ``ingress.EventEncoder`` turns standard events into Anthropic's own SSE, so
  that an Anthropic client (the real ``anthropic`` SDK) can read any upstream.
* ``errors``: stop reasons and error types both ways, and ``http_error``.

The rulings where Anthropic and the draft do not line up one to one (merged
text blocks, dropped server-tool blocks, a second ``message_start``, truncated
tool input, ``pause_turn``...) are listed in ``docs/translation.md``
("Anthropic") and restated next to the code that applies them.
"""

from __future__ import annotations

from .._contract import VendorFormat, VendorIngress
from .aggregate import MessageAggregator, aggregate_ingress
from .count import COUNT
from .errors import (
    ERROR_CODES,
    ERROR_TYPES,
    STOP_REASONS,
    VENDOR_STOP_REASONS,
    error_body,
    error_code,
    error_frame,
    http_error,
    stop_reason,
)
from .ingress import EventEncoder, parse_ingress, request_from_vendor
from .request import (
    ANTHROPIC_VERSION,
    DEFAULT_MAX_TOKENS,
    build_request,
    request_body,
    thinking_enabled,
)
from .stream import (
    ContentBlockDelta,
    ContentBlockStart,
    ContentBlockStop,
    InStreamError,
    MessageDelta,
    MessageStart,
    MessageStop,
    Ping,
    Translator,
    VendorEvent,
)

__all__ = [
    "ANTHROPIC_VERSION",
    "DEFAULT_MAX_TOKENS",
    "ERROR_CODES",
    "ERROR_TYPES",
    "FORMAT",
    "STOP_REASONS",
    "VENDOR_STOP_REASONS",
    "ContentBlockDelta",
    "ContentBlockStart",
    "ContentBlockStop",
    "EventEncoder",
    "InStreamError",
    "MessageAggregator",
    "MessageDelta",
    "MessageStart",
    "MessageStop",
    "Ping",
    "Translator",
    "VendorEvent",
    "aggregate_ingress",
    "build_request",
    "error_body",
    "error_frame",
    "error_code",
    "http_error",
    "parse_ingress",
    "request_body",
    "request_from_vendor",
    "stop_reason",
    "thinking_enabled",
]

#: The Anthropic Messages vendor format.
FORMAT = VendorFormat(
    name="anthropic",
    title="Anthropic Messages",
    transport="http-sse",
    media_type="text/event-stream",
    translator=Translator,
    build_request=build_request,
    http_error=http_error,
    endpoint="POST {base_url}/v1/messages",
    ingress=VendorIngress(
        route="/v1/messages",
        parse=parse_ingress,
        aggregate=aggregate_ingress,
        error_body=error_body,
        error_frame=error_frame,
    ),
    fake="tokenwire.testing.anthropic",
    count=COUNT,
    vendor_reasoning=thinking_enabled,
)
