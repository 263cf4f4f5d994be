"""The gateway: a Starlette app built from a ``Config``.

=================================  ==============================================
``POST /v1/stream``                the standard (``application/llm-request+json``
                                   in, ``text/event-stream`` out)
``POST /v1/chat/completions``      OpenAI ingress (§7.3), OpenAI chunks out
``POST /v1/messages``              Anthropic ingress (§7.3), Anthropic events out
``POST /v1/responses``             OpenAI Responses ingress (§7.3), Responses events out
``POST /{v1,v1beta,v1alpha}/models/{model}:streamGenerateContent``, ``:generateContent``
                                   Gemini ingress (§7.3, google-genai), Gemini chunks out
``POST /v1/messages/count_tokens``, ``/v1/responses/input_tokens``, Gemini ``:countTokens``
                                   token counts (``routes``)
``GET /v1/responses`` (WebSocket)  the Responses API's WebSocket mode (``responses_ws``)
``GET /v1/streams/{request_id}``   resume a resumable stream (``Last-Event-ID``
                                   or ``?after=N``): the rest, then the live events
``DELETE /v1/streams/{request_id}`` cancel a resumable stream (docs/scaling.md)
``GET /v1/models``                 the served model names (OpenAI's list shape)
``GET /healthz``                   liveness
``GET /metrics``                   Prometheus text format
=================================  ==============================================

Every error status, the router's 404 and 405 included, has a JSON body
``{"error": {"code", "message", "path"}}``. ``tokenwire serve`` runs
``app_from_env`` in each server worker; tests and embedders call ``build_app``.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import AsyncIterator, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, cast

import msgspec
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request as HTTPRequest
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from .. import translate
from ..server import StreamEndpoint
from ..server.asgi import HTTP_ERROR_CODES, json_error
from ..server.frames.connect import CONNECT_PATH, ConnectStream
from ..server.frames.websocket import FramesOverWebSocket
from . import playground
from .body_encoding import BodyDecoding, has_content_encoding
from .config import CONFIG_ENV, LOG_CONTENT_ENV, Config, load
from .ingress import (
    AnthropicMessagesIngress,
    FormatIngress,
    GeminiIngress,
    OpenAIChatIngress,
)
from .production import Production, ProductionMiddleware  # production (docs/gateway.md)
from .providers import UpstreamClients, build_providers, passthrough
from .responses_ws import ResponsesOverWebSocket
from .resume import ResumeEndpoint, ResumeManager, build_manager
from .routes import GEMINI_ROUTES, vendor_routes
from .telemetry import logs
from .telemetry.metrics import CONTENT_TYPE, Metrics
from .telemetry.metrics_listener import MetricsListener

if TYPE_CHECKING:
    import httpx  # only the upstream client's type: httpx loads with the first model that uses it

__all__ = ["CONFIG_ENV", "LOG_CONTENT_ENV", "Gateway", "app_from_env", "build_app"]


class Gateway:
    """The gateway's parts: providers, metrics, request log, the three stream endpoints,
    the resume manager (``[resume]``, docs/scaling.md) and its route (``streams``).

    ``log_content`` overrides ``config.server.log_content``. ``client`` is the
    ``httpx.AsyncClient`` of the ``http = "2"`` models (one is made when one of
    them needs it); the upstream connections are closed at shutdown either way.
    ``resume`` replaces the manager built from ``config.resume``.
    """

    def __init__(
        self,
        config: Config,
        *,
        log_content: bool | None = None,
        client: httpx.AsyncClient | None = None,
        resume: ResumeManager | None = None,
    ) -> None:
        self.config = config
        # httpx (~6 MB with h2) loads only when a model asks for HTTP/2 (UpstreamClients).
        self.upstreams = UpstreamClients(client)
        #: The providers themselves (no routing): the counting routes ask their upstream.
        self.upstream_providers = build_providers(config, self.upstreams)
        self.metrics = Metrics(self.upstream_providers)
        content = config.server.log_content if log_content is None else log_content
        # Keys, limits, routing, drain, telemetry (production.py).
        self.production = Production(config, log_content=content, registry=self.metrics.registry)
        self.providers = self.production.wrap_providers(self.upstream_providers, self.upstreams)
        self.log = self.production.request_log(log_content=content)
        self.resume = (
            resume
            if resume is not None
            else build_manager(config.resume, keepalive_s=config.server.keepalive_s)
        )
        if config.resume.backend == "memory" and config.server.workers > 1:
            # Each worker has its own memory: a resume may land on another one.
            warning = {
                "msg": "resume_memory_store_per_worker",
                "workers": config.server.workers,
                "effect": "a stream resumes only on the worker that generated it; "
                'use [resume] backend = "redis" with several workers',
            }
            logging.getLogger(logs.LOGGER_NAME).warning(msgspec.json.encode(warning).decode())
        limits: dict[str, Any] = {
            "max_body_bytes": config.server.max_body_bytes,
            "keepalive_s": config.server.keepalive_s,
            "observers": (self.metrics, self.log, self.production.observer),
            "resumption": self.resume,
            # The key's models and limits, checked on the parsed request.
            "admission": self.production,
        }
        self.stream = StreamEndpoint(self.providers, route="/v1/stream", **limits)
        self.chat_completions = StreamEndpoint(
            self.providers, ingress=OpenAIChatIngress(), route="/v1/chat/completions", **limits
        )
        self.messages = StreamEndpoint(
            self.providers, ingress=AnthropicMessagesIngress(), route="/v1/messages", **limits
        )
        self.responses = StreamEndpoint(
            self.providers,
            ingress=FormatIngress("openai-responses"),
            route="/v1/responses",
            **limits,
        )
        gemini = GeminiIngress()
        self.gemini = StreamEndpoint(self.providers, ingress=gemini, route=gemini.route, **limits)
        # Same-vendor passthrough (providers/passthrough.py): which models it serves.
        routes = passthrough.Routes(config)
        for endpoint in (self.chat_completions, self.messages, self.responses, self.gemini):
            cast(FormatIngress, endpoint.ingress).passthrough = routes
        # Gemini's whole answer (:generateContent), every API version.
        whole = GeminiIngress(streaming=False)
        whole.passthrough = routes
        self.gemini_whole = StreamEndpoint(
            self.providers, ingress=whole, route=GEMINI_ROUTES[1], **limits
        )
        self.streams = ResumeEndpoint(self.resume)

    # -- plain routes -----------------------------------------------------------------

    async def healthz(self, request: HTTPRequest) -> Response:
        """Liveness: 200 while the process serves."""
        return JSONResponse({"status": "ok"})

    async def models(self, request: HTTPRequest) -> Response:
        """The served models, in OpenAI's ``/v1/models`` shape (``data[].id``)."""
        data = [
            {"id": m.name, "object": "model", "created": 0, "owned_by": m.provider}
            for m in self.config.models
            if self.production.may_use(request.scope, m.name)  # only the key's models
        ]
        return JSONResponse({"object": "list", "data": data})

    async def metrics_text(self, request: HTTPRequest) -> Response:
        """Prometheus text exposition."""
        return Response(self.metrics.render(), media_type=CONTENT_TYPE)

    # -- the app ---------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        """Starts the resume manager; at shutdown stops it and closes the upstream client."""
        await self.resume.start()
        await self.production.start()
        webtransport = None
        server = self.config.server
        if server.webtransport_port is not None:
            from ..server.frames.webtransport import WebTransportServer

            assert server.certfile is not None and server.keyfile is not None  # checked
            webtransport = WebTransportServer(
                self.ws,
                host=server.host,
                port=server.webtransport_port,
                certfile=server.certfile,
                keyfile=server.keyfile,
            )
            await webtransport.start()
        metrics_listener = None
        address = self.config.metrics.address()
        if address is not None:
            metrics_listener = MetricsListener(*address, self.metrics.render, CONTENT_TYPE)
            await metrics_listener.start()
        try:
            yield
        finally:
            if webtransport is not None:
                webtransport.close()
            if metrics_listener is not None:
                await metrics_listener.aclose()
            try:
                await self.production.aclose()  # the drain runs before resume closes
                await self.resume.aclose()
            finally:
                await self.upstreams.aclose()

    def app(self) -> Starlette:
        """The Starlette app serving every route."""
        # The stream routes with a fixed path: Starlette routes them, and their
        # POSTs also have a short way past its stack (see _GatewayApp).
        streams: dict[str, ASGIApp] = {
            "/v1/stream": self.stream,
            "/v1/chat/completions": self.chat_completions,
            "/v1/messages": self.messages,
            "/v1/responses": self.responses,
        }
        ws = self.ws = FramesOverWebSocket()
        # The Responses API's WebSocket mode: each turn through the routes above.
        responses_ws = ResponsesOverWebSocket(
            self.config.responses_websocket,
            write_timeout_s=self.config.server.write_timeout_s,
            max_message_bytes=self.config.server.max_body_bytes,
            drain=lambda: self.production.drain,
        )
        metrics_here = self.production.metrics_here
        routes = [
            *(Route(path, endpoint, methods=["POST"]) for path, endpoint in streams.items()),
            *vendor_routes(
                self.gemini,
                self.gemini_whole,
                self.upstream_providers,
                max_body_bytes=self.config.server.max_body_bytes,
            ),
            Route("/v1/streams/{request_id}", self.streams, methods=["GET", "DELETE"]),
            # docs/binary.md 6.2: the binary binding over WebSocket, each stream through
            # the routes above (so keys, limits and logs apply as over HTTP).
            WebSocketRoute("/v1/ws", ws),
            WebSocketRoute("/v1/responses", responses_ws),
            # docs/bindings.md: the Connect binding (and gRPC-web), through the same routes.
            Route(CONNECT_PATH, ConnectStream(ws), methods=["POST"]),
            Route("/v1/models", self.models, methods=["GET"]),
            Route("/healthz", self.healthz, methods=["GET"]),
            # Closed on this port where keys are configured, unless [metrics] opens it.
            *([Route("/metrics", self.metrics_text, methods=["GET"])] if metrics_here else []),
            # GET /, /static/*, POST /v1/convert: the browser playground.
            *playground.routes(),
        ]
        app = _GatewayApp(
            routes=routes,
            lifespan=self.lifespan,
            middleware=[Middleware(ProductionMiddleware, production=self.production)],
            exception_handlers={HTTPException: _http_error, Exception: _server_error},
        )
        app.state.gateway = self
        ws.target = responses_ws.target = app
        app.streams = {
            path: ProductionMiddleware(endpoint, production=self.production)
            for path, endpoint in streams.items()
        }
        app.body_decoding = BodyDecoding(
            app.serve,
            max_body_bytes=self.config.server.max_body_bytes,
            vendor_error=translate.error_body_for,
        )
        return app


class _GatewayApp(Starlette):
    """The gateway's Starlette app, with a short way in for the stream routes.

    A ``POST`` to a stream route with a fixed path goes straight to its
    endpoint behind the production middleware: the same middleware, endpoint
    and answers as through Starlette, without its error and exception
    middleware, router and their per-``send`` wrappers (the gateway's
    own share of the first token and of every chunk). Anything else (other
    methods, paths with parameters, the lifespan) takes Starlette's way. An
    exception escaping the endpoint is answered 500 as Starlette's error
    middleware answers it (when no response has started) and re-raised for
    the server to log.
    """

    #: Path -> the endpoint behind the production middleware (set by ``Gateway.app``).
    streams: Mapping[str, ASGIApp] = MappingProxyType({})
    #: Decodes a compressed request body before any route reads it (``body_encoding``).
    body_decoding: BodyDecoding | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        decoding = self.body_decoding
        if decoding is not None and scope["type"] == "http" and has_content_encoding(scope):
            await decoding(scope, receive, send)  # then ``serve``, with the decoded body
            return
        await self.serve(scope, receive, send)

    async def serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Route a request whose body is plain (see the class docstring)."""
        if scope["type"] == "http" and scope.get("method") == "POST" and not scope.get("root_path"):
            # (Mounted under a prefix, the route's path is not scope["path"]: Starlette's way.)
            endpoint = self.streams.get(scope["path"])
            if endpoint is not None:
                scope["app"] = self
                try:
                    await endpoint(scope, receive, send)
                except Exception:
                    body = json_error("internal_error", "internal error")
                    headers = [
                        (b"content-length", str(len(body)).encode()),
                        (b"content-type", b"application/json"),
                    ]
                    with contextlib.suppress(Exception):  # the response may have started
                        start = {"type": "http.response.start", "status": 500, "headers": headers}
                        await send(start)
                        await send({"type": "http.response.body", "body": body})
                    raise
                return
        await super().__call__(scope, receive, send)


async def _http_error(request: HTTPRequest, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    message = {404: f"no route for {request.url.path}", 405: f"{request.method} is not allowed"}
    code = HTTP_ERROR_CODES.get(exc.status_code, "http_error")
    text = message.get(exc.status_code, exc.detail)
    return Response(
        translate.error_body_for(request.url.path, exc.status_code, code, text)
        or json_error(code, text),
        status_code=exc.status_code,
        headers=exc.headers,
        media_type="application/json",
    )


async def _server_error(request: HTTPRequest, exc: Exception) -> Response:
    # No traceback or exception text on the wire.
    return Response(
        json_error("internal_error", "internal error"),
        status_code=500,
        media_type="application/json",
    )


def build_app(config: Config | None = None, *, log_content: bool | None = None) -> Starlette:
    """The gateway app for ``config`` (the default config, ``demo`` only, when ``None``)."""
    return Gateway(config if config is not None else load(None), log_content=log_content).app()


def app_from_env() -> Starlette:
    """The app ``tokenwire serve`` runs in each worker, configured by environment variables.

    ``TOKENWIRE_GATEWAY_CONFIG`` is the config file's path (unset: ``demo``
    only); ``TOKENWIRE_LOG_CONTENT=1`` logs prompts and completions.
    """
    logs.configure(fmt=os.environ.get(logs.LOG_FORMAT_ENV) or "json")
    path = os.environ.get(CONFIG_ENV) or None
    log_content = os.environ.get(LOG_CONTENT_ENV) == "1"
    return build_app(load(path), log_content=log_content or None)
