"""Dual-format ingress (§7.3): vendor request bodies in, the vendor's own stream out.

Every ``VendorFormat`` with an ``ingress`` (``translate.registry``) gets a
route: ``POST /v1/chat/completions`` takes an OpenAI Chat Completions body and
``POST /v1/messages`` an Anthropic Messages body. ``FormatIngress`` turns each
into a standard ``Request`` with the format's ingress parser, the routed
provider serves it like any other request, and it is answered in the vendor's
stream format (the format's reverse encoder), or in the standard when the client sends
``Accept: text/event-stream; profile="llm-stream-1.0"``. A standard body
(``Content-Type: application/llm-request+json``) is accepted on both routes.

A body for a model served only by upstreams of the route's own vendor format
passes through when it streams (``providers/passthrough.py``): the client's body goes
upstream and the upstream's bytes come back, the translator reading them alongside.

A body with ``"stream": true`` is answered as a stream, any other as one JSON
object, built by the format's aggregator from the same events
(``answers``); a route that streams or not by its path (Gemini's
``:streamGenerateContent`` and ``:generateContent``) says so with
``streaming``, and reads its path parameters (``{model}``) and query
(``alt``) from the request's ``Exchange``. Errors are in the vendor's own shape
(``error_body``).
"""

from __future__ import annotations

from typing import Any

import msgspec

from .. import translate
from ..errors import InvalidRequest, RequestTooLarge
from ..request import DEFAULT_MAX_DEPTH, Request
from ..server import Encode, Exchange, Ingress
from ..server.asgi import json_error
from ..translate import VendorFormat, VendorIngress, adapt
from ..translate.adapt import signatures
from .answers import (
    ChunkArray,
    HeldStream,
    WholeAnswer,
    minted,
    minted_aggregate,
    with_headers,
)
from .providers import passthrough

__all__ = [
    "AnthropicMessagesIngress",
    "FormatIngress",
    "GeminiIngress",
    "OpenAIChatIngress",
    "decode_json_body",
]

_decode = msgspec.json.Decoder().decode


def _too_deep(value: Any, max_depth: int) -> bool:
    # Iterative, so a hostile body cannot exhaust the stack.
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > max_depth:
            return True
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values() if isinstance(v, dict | list))
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item if isinstance(v, dict | list))
    return False


def decode_json_body(body: bytes, max_depth: int = DEFAULT_MAX_DEPTH) -> dict[str, Any]:
    """A vendor body as a JSON object.

    Raises ``InvalidRequest`` for invalid UTF-8, invalid JSON (with the byte
    offset) or a non-object, and ``RequestTooLarge`` when arrays and objects
    nest deeper than ``max_depth``, like ``request.parse`` does for the standard.
    """
    try:
        value = _decode(body)
    except RecursionError:
        raise RequestTooLarge("arrays/objects nest too deeply", path="$") from None
    except msgspec.DecodeError as exc:
        try:
            body.decode("utf-8")
        except UnicodeDecodeError as bad:
            raise InvalidRequest(
                f"body is not valid UTF-8 (at byte {bad.start})", path="$"
            ) from None
        raise InvalidRequest(f"body is not valid JSON: {exc}", path="$") from None
    if not isinstance(value, dict):
        raise InvalidRequest("the body must be a JSON object", path="$")
    # Counting brackets is C-speed; only a body that could be too deep is walked.
    if body.count(b"[") + body.count(b"{") > max_depth and _too_deep(value, max_depth):
        raise RequestTooLarge(f"arrays/objects nest deeper than {max_depth} levels", path="$")
    return value


def _wants_stream(body: dict[str, Any]) -> bool:
    stream = body.get("stream", False)
    if stream is None:
        return False
    if not isinstance(stream, bool):
        raise InvalidRequest("must be a boolean", path="stream")
    return stream


class FormatIngress(Ingress):
    """One vendor's request bodies, answered in that vendor's format, streamed or whole.

    ``streaming``: ``None`` when the body's ``stream`` decides, else whether
    the route streams (Gemini's two methods).
    """

    def __init__(self, vendor: VendorFormat | str, *, streaming: bool | None = None) -> None:
        self.format = vendor if isinstance(vendor, VendorFormat) else translate.get(vendor)
        if self.format.ingress is None:
            raise ValueError(f"vendor format {self.format.name!r} has no ingress")
        self._ingress: VendorIngress = self.format.ingress
        self.name = self.format.name
        self.media_types = self._ingress.media_types
        self.route = self._ingress.route
        if streaming is None and self._ingress.path_params:
            streaming = True  # a route that streams by its path
        self.streaming = streaming
        #: Which models pass through (set by the gateway; ``None``: every body is translated).
        self.passthrough: passthrough.Routes | None = None

    def error_body(self, status: int, code: str, message: str, path: str | None) -> bytes:
        """An error answered before any stream, in the vendor's own shape."""
        shape = self._ingress.error_body
        if shape is None:
            return json_error(code, message, path)
        return shape(status, code, message, path)

    def parse(self, body: bytes, exchange: Exchange) -> tuple[Request, Encode]:
        """The standard request and how to answer it: a vendor stream whose head
        waits for the first event, or a whole answer; a body that passes through
        leaves its offer on ``exchange``. Raises ``InvalidRequest``."""
        obj = decode_json_body(body)
        names = self._ingress.path_params
        if names:
            given = exchange.path_params
            obj.update({name: given[name] for name in names if name in given})
        streaming = self.streaming if self.streaming is not None else _wants_stream(obj)
        routes = self.passthrough
        if routes is not None:
            # providers/passthrough.py: same vendor, the body goes upstream as it came
            # (streams only; a whole answer is aggregated from the translated events).
            if (
                streaming
                and routes.format_of(obj.get("model")) == self.name
                and passthrough.eligible(self.name, obj)
            ):
                offer = exchange.offer = passthrough.Offer.make(self.name, body, obj, exchange)
                request, encode = passthrough.lenient(self.name, body, obj, self._ingress.parse)
                return request, passthrough.Encoder(offer, encode)
        adapted = None
        model = obj.get("model")
        targets = routes.targets(model) if routes is not None else frozenset()
        if routes is not None and targets - {self.name}:
            # Served by another format: the adaptation table decides what the
            # standard does not carry (translate/adapt), every map and drop reported.
            adapted = adapt.adapt(self.name, obj, targets, strict=routes.strict(model))
        request, encode = self._ingress.parse(obj if adapted is None else adapted.body)
        minter = None
        if adapted is not None and routes is not None:
            # Earlier turns' reasoning sealed by the gateway goes back bound to its
            # upstream (before finish: Anthropic thinking depends on it); when no
            # upstream speaks the client's format, this turn's is sealed in the
            # client format's own field.
            request = signatures.rebind(request, self.name, routes.signing_key)
            request = adapt.finish(adapted, request)
            if self.name not in targets:
                minter = signatures.Minter(self.name, routes.signing_key)
        answer = self._answer(
            obj, request, encode, streaming, adapt.report_of(request), exchange, minter
        )
        return request, answer

    def _answer(
        self,
        obj: dict[str, Any],
        request: Request,
        encode: Encode,
        streaming: bool,
        report: list[tuple[str, str, str]],
        exchange: Exchange,
        minter: signatures.Minter | None = None,
    ) -> Encode:
        """How to answer: a vendor stream whose head waits, a whole answer, or (a
        format without an aggregator) the encoder itself. The head names what was
        adapted (``tokenwire-adapted``)."""
        headers = [(adapt.HEADER.encode(), adapt.header_value(report).encode())] if report else []
        aggregate = self._ingress.aggregate
        if minter is not None:
            encode = minted(encode, minter)
            if aggregate is not None:
                aggregate = minted_aggregate(aggregate, minter)
        if aggregate is None:
            if not streaming:
                raise InvalidRequest(
                    'only streaming is served here: set "stream": true', path="stream"
                )
            return with_headers(encode, headers)
        answer: WholeAnswer | ChunkArray | HeldStream
        if not streaming:
            answer = WholeAnswer(aggregate(obj, request))
        elif self._ingress.path_params and exchange.query.get("alt") != "sse":
            answer = ChunkArray(encode)
        else:
            answer = HeldStream(encode, lambda: aggregate(obj, request))
        answer.extra_headers = headers
        return answer


class OpenAIChatIngress(FormatIngress):
    """OpenAI Chat Completions bodies, answered as ``chat.completion.chunk`` SSE."""

    def __init__(self) -> None:
        super().__init__("openai")


class AnthropicMessagesIngress(FormatIngress):
    """Anthropic Messages bodies, answered as Anthropic's event stream."""

    def __init__(self) -> None:
        super().__init__("anthropic")


class GeminiIngress(FormatIngress):
    """Gemini ``GenerateContentRequest`` bodies: ``:streamGenerateContent`` answered as
    Gemini's ``alt=sse`` stream (``streaming``), ``:generateContent`` whole."""

    def __init__(self, *, streaming: bool = True) -> None:
        super().__init__("gemini", streaming=streaming)
