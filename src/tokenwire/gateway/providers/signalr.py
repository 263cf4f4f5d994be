"""The gateway's SignalR provider (``provider = "signalr"``): Azure / Copilot-style hubs.

One call is one hub connection over ``websockets``: negotiate when the hub
needs it, the JSON handshake, a StreamInvocation of the configured hub method
with the request, then the received records fed to
``translate.signalr.Translator``. When the client leaves (the generator is
cancelled or closed early) the provider sends CancelInvocation (type 5) and
Close (type 7) and closes the WebSocket.

Options (the model's TOML entry)::

    [[models]]
    name = "copilot-like"
    provider = "signalr"
    [models.options]
    hub_url = "https://hub.example.com/chathub"   # http(s):// or ws(s)://
    method = "StreamChat"        # default: StreamChat (stream), chat (copilot)
    mapping = "stream"           # stream (default) | copilot
    negotiate = true             # POST {hub_url}/negotiate first (default false)
    access_token_env = "HUB_TOKEN"   # Bearer token for negotiate and the socket
    server_timeout_s = 30.0      # no frame for this long: the hub is gone
    keepalive_s = 15.0           # our Ping (type 6) interval
    connect_timeout_s = 10.0
    headers = { "x-client" = "tokenwire" }
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import Any, Final
from urllib.parse import urlencode, urlsplit, urlunsplit

import httpx
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
from websockets.protocol import State

from ... import events as ev
from ...errors import TokenwireError
from ...request import Request
from ...server.hooks import Provider
from ...translate import VendorFormat, signalr
from ._options import (
    check_known,
    one_of,
    positive_number,
    required_url,
    secret,
    string_headers,
)

__all__ = ["OPTIONS", "NegotiateError", "SignalRProvider"]

#: Every option the provider takes.
OPTIONS: Final = frozenset(
    {
        "hub_url",
        "method",
        "mapping",
        "negotiate",
        "access_token",
        "access_token_env",
        "api_key_env",
        "server_timeout_s",
        "keepalive_s",
        "connect_timeout_s",
        "headers",
        "reasoning",
        "max_record_bytes",
    }
)

#: Azure SignalR Service answers negotiate with a redirect; follow at most this many.
_MAX_REDIRECTS: Final = 5
#: The CancelInvocation + Close on the way out must not hold the caller for long.
_GOODBYE_TIMEOUT_S: Final = 2.0
_INVOCATION_ID: Final = "0"


class NegotiateError(TokenwireError):
    """The hub's negotiate step failed (an ``error`` answer, no WebSockets...)."""


def _with_query(url: str, **params: str) -> str:
    parts = urlsplit(url)
    extra = urlencode(params)
    query = f"{parts.query}&{extra}" if parts.query else extra
    return urlunsplit((parts.scheme, parts.netloc, parts.path, query, parts.fragment))


def _http_url(url: str) -> str:
    if url.startswith(("ws://", "wss://")):
        return "http" + url[len("ws") :]
    return url


def _ws_url(url: str) -> str:
    if url.startswith(("http://", "https://")):
        return "ws" + url[len("http") :]
    return url


class SignalRProvider(Provider):
    """Serve a model from a SignalR hub; ``generate`` yields standard events.

    Raises ``ValueError`` for a missing ``hub_url``, an unknown option or mapping.
    """

    # The constructor every transport provider has (``PROVIDERS_BY_TRANSPORT`` builds
    # them alike), beginning as ``ConnectProvider``'s does: the options it shares are
    # checked by ``_options``; what follows is this binding's own.
    def __init__(
        self,
        *,
        model_name: str,
        options: Mapping[str, Any],
        vendor: VendorFormat = signalr.FORMAT,
    ) -> None:
        check_known(options, OPTIONS, "SignalR")
        hub_url = required_url(options, "hub_url", "signalr")
        self.format = vendor
        self.model_name = model_name
        self.hub_url = hub_url
        self.mapping = one_of(options, "mapping", signalr.MAPPINGS)
        self.method = str(options.get("method") or signalr.METHODS[self.mapping])
        self.negotiate = bool(options.get("negotiate", False))
        self.access_token = secret(options, "access_token", "access_token_env", "api_key_env")
        self.server_timeout_s = positive_number(options, "server_timeout_s", 30.0)
        self.keepalive_s = positive_number(options, "keepalive_s", 15.0)
        self.connect_timeout_s = positive_number(options, "connect_timeout_s", 10.0)
        self.headers = string_headers(options)
        self.reasoning = bool(options.get("reasoning", False))
        self.max_record_bytes = int(
            options.get("max_record_bytes", signalr.DEFAULT_MAX_RECORD_BYTES)
        )

    # -- connecting -----------------------------------------------------------

    async def _negotiate(self) -> tuple[str, str | None]:
        """``(WebSocket URL with ?id=, access token)`` after the negotiate exchange.

        TransportProtocols.md: ``POST {hub}/negotiate?negotiateVersion=1``;
        version 1 answers a ``connectionToken`` (the ``id``), version 0 only a
        ``connectionId``; an answer with ``url`` (+ ``accessToken``) redirects.
        """
        url, token = self.hub_url, self.access_token
        timeout = httpx.Timeout(self.server_timeout_s, connect=self.connect_timeout_s)
        async with httpx.AsyncClient(timeout=timeout) as client:
            for _ in range(_MAX_REDIRECTS + 1):
                base = _http_url(url)
                parts = urlsplit(base)
                negotiate_url = urlunsplit(
                    (
                        parts.scheme,
                        parts.netloc,
                        parts.path.rstrip("/") + "/negotiate",
                        parts.query,
                        "",
                    )
                )
                headers = dict(self.headers)
                if token:
                    headers["authorization"] = f"Bearer {token}"
                response = await client.post(
                    _with_query(negotiate_url, negotiateVersion="1"), headers=headers, content=b""
                )
                if response.status_code != 200:
                    raise NegotiateError(f"negotiate answered HTTP {response.status_code}")
                try:
                    answer = response.json()
                except ValueError:
                    raise NegotiateError("negotiate answer is not JSON") from None
                if not isinstance(answer, dict):
                    raise NegotiateError("negotiate answer is not a JSON object")
                if answer.get("error"):
                    raise NegotiateError(f"negotiate refused: {answer['error']}")
                if isinstance(answer.get("url"), str):
                    url = answer["url"]
                    token = answer.get("accessToken") or token
                    continue
                transports = answer.get("availableTransports") or []
                if not any(
                    isinstance(t, dict) and t.get("transport") == "WebSockets" for t in transports
                ):
                    raise NegotiateError("the hub offers no WebSockets transport")
                connection = answer.get("connectionToken") or answer.get("connectionId")
                if not isinstance(connection, str):
                    raise NegotiateError("negotiate answer has no connection id")
                return _with_query(_ws_url(base), id=connection), token
        raise NegotiateError("negotiate redirected too many times")

    async def _connect(self) -> ClientConnection:
        if self.negotiate:
            url, token = await self._negotiate()
        else:
            url, token = _ws_url(self.hub_url), self.access_token
        headers = dict(self.headers)
        if token:
            headers["authorization"] = f"Bearer {token}"
        return await connect(
            url,
            additional_headers=headers,
            open_timeout=self.connect_timeout_s,
            max_size=self.max_record_bytes + 1024,
            compression=None,
        )

    # -- the call ------------------------------------------------------------

    async def generate(self, request: Request) -> AsyncIterator[ev.Event]:
        """Stream the hub's answer to ``request`` as standard events.

        Failures come out as ``error`` + ``stream.end``: a refused negotiate,
        handshake or connection as ``internal_error``, a connect timeout or a
        hub silent for ``server_timeout_s`` as ``overloaded``.
        """
        translator = self.format.new_translator(
            model=self.model_name,
            request_id=request.request_id,
            mapping=self.mapping,
            invocation_id=_INVOCATION_ID,
            reasoning=self.reasoning,
            max_record_bytes=self.max_record_bytes,
        )
        try:
            ws = await self._connect()
        except (TimeoutError, httpx.TimeoutException):
            for event in translator.writer.fail("overloaded", "the hub did not answer in time"):
                yield event
            return
        except InvalidStatus as exc:
            status = exc.response.status_code
            for event in translator.writer.fail(
                "internal_error", f"the hub refused the WebSocket (HTTP {status})"
            ):
                yield event
            return
        except (NegotiateError, InvalidHandshake, OSError, httpx.HTTPError) as exc:
            message = str(exc) if isinstance(exc, NegotiateError) else type(exc).__name__
            for event in translator.writer.fail(
                "internal_error", f"hub connection failed ({message})"
            ):
                yield event
            return
        keepalive = asyncio.create_task(self._keepalive(ws))
        try:
            arguments = signalr.invocation_arguments(request, self.mapping)
            await ws.send(
                (
                    signalr.handshake_request()
                    + signalr.stream_invocation(self.method, arguments, _INVOCATION_ID)
                ).decode()
            )
            while not translator.done:
                try:
                    frame = await asyncio.wait_for(ws.recv(), self.server_timeout_s)
                except TimeoutError:
                    events = translator.writer.fail(
                        "overloaded", f"the hub sent nothing for {self.server_timeout_s:g} s"
                    )
                except ConnectionClosed:
                    events = translator.close()
                else:
                    events = translator.feed(frame.encode() if isinstance(frame, str) else frame)
                for event in events:
                    yield event
        finally:
            keepalive.cancel()
            # Not done: the client left mid-stream (cancelled or closed early).
            await asyncio.shield(self._goodbye(ws, cancel=not translator.done))

    async def _keepalive(self, ws: ClientConnection) -> None:
        # HubProtocol.md: pings go both ways, so the hub's timeout never fires.
        with contextlib.suppress(ConnectionClosed):
            while True:
                await asyncio.sleep(self.keepalive_s)
                await ws.send(signalr.ping().decode())

    async def _goodbye(self, ws: ClientConnection, *, cancel: bool) -> None:
        """CancelInvocation when the stream is unfinished, then Close and the close frame."""
        records = signalr.close_message()
        if cancel:
            records = signalr.cancel_invocation(_INVOCATION_ID) + records
        with contextlib.suppress(ConnectionClosed, OSError, TimeoutError):
            async with asyncio.timeout(_GOODBYE_TIMEOUT_S):
                await ws.send(records.decode())
                await ws.close()
        if ws.state is not State.CLOSED:
            ws.transport.abort()
