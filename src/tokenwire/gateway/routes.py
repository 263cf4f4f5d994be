"""Every vendor route and version the SDKs call by default, and token counting.

=============================================================  ===========================
``POST /{v1,v1beta,v1alpha}/models/{model}:streamGenerateContent``  Gemini stream (``alt=sse``,
                                                                     else one JSON array)
``POST /{v1,v1beta,v1alpha}/models/{model}:generateContent``   Gemini, whole
``POST /{v1,v1beta,v1alpha}/models/{model}:countTokens``       Gemini ``{"totalTokens"}``
``POST /v1/messages/count_tokens``                             Anthropic ``{"input_tokens"}``
``POST /v1/responses/input_tokens``                            Responses ``{"object":
                                                               "response.input_tokens", ...}``
``POST /v1/responses/compact``                                 Responses compaction, forwarded
                                                               to a Responses upstream, else 404
=============================================================  ===========================

A count comes from the upstream's own counting endpoint when its vendor has
one (``VendorFormat.count``: Anthropic, Gemini, Responses), for the request
the upstream would be sent; otherwise (the demo, an OpenAI Chat upstream) it
is an estimate (one token per 4 characters of the prompt, its tools
included), and the answer says so: the header ``tokenwire-token-count:
estimate`` (``upstream`` otherwise) and ``"tokenwire:estimate": true`` in
the body. Errors are in the route's vendor shape. What each vendor's counting
route takes and answers is the vendor's (``VendorFormat.count``), not this module's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeVar

import msgspec
from starlette.routing import Route

from ..errors import InvalidRequest, RequestTooLarge
from ..request import Request, echo
from ..server import DEFAULT_MAX_BODY_BYTES, Exchange, Provider, StreamEndpoint
from ..server.asgi import Receive, Scope, Send, read_body, send_json
from ..server.hooks import CountRefused, hooked
from ..writer import estimate_tokens
from .ingress import FormatIngress, decode_json_body

__all__ = ["GEMINI_ROUTES", "GEMINI_VERSIONS", "CompactEndpoint", "CountEndpoint", "vendor_routes"]

_log = logging.getLogger("tokenwire.gateway")
_T = TypeVar("_T")
_encode = msgspec.json.Encoder().encode

#: The API versions google-genai and Google's REST clients call (3.x defaults to ``v1``).
GEMINI_VERSIONS: Final = ("v1", "v1beta", "v1alpha")
#: Gemini's methods, by route template (``{version}`` filled in per version).
GEMINI_ROUTES: Final = (
    "/{version}/models/{model}:streamGenerateContent",
    "/{version}/models/{model}:generateContent",
    "/{version}/models/{model}:countTokens",
)
COUNT_HEADER: Final = b"tokenwire-token-count"


def _prompt_chars(request: Request) -> int:
    chars = sum(len(message.text) for message in request.messages)
    for tool in request.tools or ():
        chars += len(tool.name) + len(tool.description) + len(_encode(tool.parameters))
    return chars


class _WholeEndpoint:
    """A vendor route answered whole: its body read within the limit, errors in the
    vendor's shape."""

    def __init__(
        self,
        ingress: FormatIngress,
        providers: Mapping[str, Provider],
        *,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    ) -> None:
        count = ingress.format.count
        if count is None:
            raise ValueError(f"vendor format {ingress.name!r} has no token counting")
        self.count = count
        self.ingress = ingress
        self.providers = providers
        self.max_body_bytes = max_body_bytes

    async def _error(
        self, send: Send, status: int, code: str, message: str, path: str | None = None
    ) -> None:
        await send_json(send, status, self.ingress.error_body(status, code, message, path))

    async def _read(
        self, exchange: Exchange, receive: Receive, send: Send, parse: Callable[[bytes], _T]
    ) -> _T | None:
        """The body, read and ``parse``d; ``None`` when it could not be (answered)."""
        try:
            if exchange.length_error is not None:
                raise exchange.length_error
            body = await read_body(receive, self.max_body_bytes, exchange.length)
            return parse(body)
        except RequestTooLarge as exc:
            await self._error(send, 413, "request_too_large", exc.reason, exc.path)
        except InvalidRequest as exc:
            await self._error(send, 400, "invalid_request", exc.reason, exc.path)
        except Exception:  # the body stream broke (the client left)
            await self._error(send, 400, "invalid_request", "the request body ended early")
        return None


class CountEndpoint(_WholeEndpoint):
    """``POST`` a vendor request body, get its input token count in the vendor's shape."""

    def _request(self, body: bytes, path_params: Mapping[str, str]) -> Request:
        obj = self.count.generation_body(decode_json_body(body), path_params)
        obj.pop("stream", None)
        request, _ = self.ingress.format.ingress.parse(obj)  # type: ignore[union-attr]
        return request

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        exchange = Exchange.from_scope(scope)
        if exchange.method != "POST":
            await self._error(send, 405, "method_not_allowed", "use POST")
            return
        request = await self._read(
            exchange, receive, send, lambda body: self._request(body, exchange.path_params)
        )
        if request is None:
            return
        found = self.providers.get(request.model)
        if found is None:
            message = f"unknown model {echo(request.model)}"
            await self._error(send, 404, "model_not_found", message, "model")
            return
        try:
            counted = await hooked(found).count_tokens(request)
        except InvalidRequest as exc:
            await self._error(send, 400, "invalid_request", exc.reason, exc.path)
            return
        except CountRefused as exc:  # the upstream's own error, mapped by its vendor
            await self._error(send, exc.status, exc.code, exc.message)
            return
        except ValueError as exc:  # an answer without a count
            await self._error(send, 502, "internal_error", f"upstream count: {exc}")
            return
        except Exception as exc:
            _log.warning("token count upstream failed: %s", type(exc).__name__)
            await self._error(send, 502, "internal_error", "the upstream could not be reached")
            return
        estimated = counted is None
        tokens = estimate_tokens(_prompt_chars(request)) if counted is None else counted
        answer = self.count.answer(tokens)
        if estimated:
            answer["tokenwire:estimate"] = True
        how = b"estimate" if estimated else b"upstream"
        await send_json(send, 200, _encode(answer), [(COUNT_HEADER, how)])


class CompactEndpoint(_WholeEndpoint):
    """``POST /v1/responses/compact``: a Responses compaction, forwarded to the model's
    upstream when it is an OpenAI Responses one; for any other model a 404 in OpenAI's
    error shape, on which a client (Codex) compacts the conversation itself."""

    def __init__(
        self, providers: Mapping[str, Provider], *, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    ) -> None:
        super().__init__(
            FormatIngress("openai-responses"), providers, max_body_bytes=max_body_bytes
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        from .providers.passthrough_request import rename_model

        exchange = Exchange.from_scope(scope)
        read = await self._read(
            exchange, receive, send, lambda body: (body, decode_json_body(body))
        )
        if read is None:
            return
        raw, obj = read
        model = obj.get("model")
        if not isinstance(model, str):
            await self._error(send, 400, "invalid_request", "model: required", "model")
            return
        provider = self.providers.get(model)
        if provider is None:
            await self._error(send, 404, "model_not_found", f"unknown model {echo(model)}", "model")
            return
        compact = getattr(provider, "compact", None)
        try:
            upstream_model = getattr(provider, "upstream_model", None) or model
            answered = (
                None if compact is None else await compact(rename_model(raw, obj, upstream_model))
            )
        except InvalidRequest as exc:
            await self._error(send, 400, "invalid_request", exc.reason, exc.path)
            return
        except Exception as exc:
            _log.warning("compaction upstream failed: %s", type(exc).__name__)
            await self._error(send, 502, "internal_error", "the upstream could not be reached")
            return
        if answered is None:
            message = (
                f"model {echo(model)} is not served by an OpenAI Responses upstream, which "
                "alone compacts: compact the conversation locally"
            )
            await self._error(send, 404, "not_found", message)
            return
        status, body = answered
        await send_json(send, status, body)


def vendor_routes(
    gemini: StreamEndpoint,
    gemini_whole: StreamEndpoint,
    providers: Mapping[str, Provider],
    *,
    max_body_bytes: int,
) -> list[Route]:
    """The Gemini routes of every version (its stream and whole endpoints), and the
    counting routes, which ask ``providers`` (the upstreams themselves, no routing)."""
    limit, raw = max_body_bytes, providers
    gemini_count = CountEndpoint(FormatIngress("gemini"), raw, max_body_bytes=limit)
    apps: tuple[Any, ...] = (gemini, gemini_whole, gemini_count)
    routes = [
        Route(template.replace("{version}", version), app, methods=["POST"])
        for version in GEMINI_VERSIONS
        for template, app in zip(GEMINI_ROUTES, apps, strict=True)
    ]
    for route, vendor in (
        ("/v1/messages/count_tokens", "anthropic"),
        ("/v1/responses/input_tokens", "openai-responses"),
    ):
        endpoint = CountEndpoint(FormatIngress(vendor), raw, max_body_bytes=limit)
        routes.append(Route(route, endpoint, methods=["POST"]))
    compact = CompactEndpoint(raw, max_body_bytes=limit)
    routes.append(Route("/v1/responses/compact", compact, methods=["POST"]))
    return routes
