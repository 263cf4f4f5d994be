"""The ASGI toolkit: serve any ``generate(request)`` provider as an LLM-Stream endpoint.

A provider author writes one async generator::

    class Echo:
        async def generate(self, request: Request) -> AsyncIterator[Event]:
            yield ContentDelta(v="1.0", seq=0, index=0, role="assistant",
                               delta=Delta(text=request.messages[-1].text))

    app = StreamEndpoint(Echo())          # an ASGI app; mount it anywhere

and ``StreamEndpoint`` does the rest of the standard:

- 405 unless POST; 415 unless the Content-Type essence is
  ``application/llm-request+json`` (§7.2);
- 413 over ``max_body_bytes``, from ``Content-Length`` before reading and while
  reading otherwise, so an oversized body is never buffered whole;
- 400 for invalid JSON or an invalid envelope (§4), naming the field or byte offset;
- 404 for a model no provider serves;
- then ``text/event-stream`` with ``Cache-Control: no-cache``: every event the
  provider yields goes through a ``Writer`` (so ``seq``/``v`` are always right
  and the stream always ends with ``stream.end``), is encoded once, and every
  event already produced is flushed in one ASGI ``send``;
- a client hang-up cancels the generator (and whatever upstream call it was
  awaiting) at once; idle streams get ``: keep-alive`` comments;
- an exception or timeout in the provider becomes ``error`` + ``stream.end``
  with a §5.3.6 code, never a traceback on the wire.

A ``resumption`` hook (the gateway's resume store, docs/scaling.md) may take
a stream over: its events are recorded as they are sent, and the generation
outlives the request, so a hang-up no longer cancels it and the client can
come back for the rest (``GET /v1/streams/{request_id}``).

Every error status carries a JSON body ``{"error": {"code", "message", "path"}}``.

Hooks: ``observers`` see every request (``opened`` when a stream starts,
``closed`` when the request is done, with a ``StreamRecord``); an observer may
return a ``Tee`` from ``opened`` to see every event the stream emits. That is
the seam for metrics, logs, and a resume store. Each request is an ``Exchange``
(its head read once, the route's parameters, a gateway's state), handed as a
parameter to the ingress, the admission, the provider (``Provider.serve``) and,
on the ``StreamRecord``, to the observers.

The module needs no web framework: ``StreamEndpoint`` is a plain ASGI app.
"""

from __future__ import annotations

from .encoders import FRAMES, Encode, FramesEncode
from .encoders import SSE_HEADERS as SSE_HEADERS
from .endpoint import DEFAULT_KEEPALIVE_S, DEFAULT_MAX_BODY_BYTES, StreamEndpoint
from .exchange import Exchange
from .hooks import (
    Admission,
    HeadedEncode,
    HeldAnswer,
    Ingress,
    Observer,
    Provider,
    ProviderLookup,
    ResumeConflict,
    ResumeSession,
    Resumption,
    StreamRecord,
    Tee,
)
from .stream import CLEANUP_S as CLEANUP_S

__all__ = [
    "DEFAULT_KEEPALIVE_S",
    "Admission",
    "DEFAULT_MAX_BODY_BYTES",
    "Encode",
    "FRAMES",
    "Exchange",
    "FramesEncode",
    "HeadedEncode",
    "HeldAnswer",
    "Ingress",
    "Observer",
    "Provider",
    "ProviderLookup",
    "ResumeConflict",
    "ResumeSession",
    "Resumption",
    "StreamEndpoint",
    "StreamRecord",
    "Tee",
]
