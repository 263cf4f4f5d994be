"""The gateway's Connect provider (``provider = "connect"``): Cursor / Windsurf upstreams.

It sends the standard request as one Connect server-streaming envelope over
httpx (HTTP/2 where the upstream offers it) with ``Connect-Protocol-Version:
1``, and feeds the streamed envelopes to ``translate.connect.Translator``.

Options (the model's TOML entry)::

    [[models]]
    name = "cursor-like"
    provider = "connect"
    [models.options]
    base_url = "https://api.example.com"
    service_path = "/demo.v1.ChatService/StreamChat"   # default by mapping
    codec = "proto"              # json (default) | proto
    mapping = "text"             # text (default) | standard
    http2 = true                 # offer HTTP/2 (ALPN on https)
    h2c = false                  # HTTP/2 with prior knowledge on http:// (no HTTP/1.1)
    idle_timeout_s = 2.0         # Cursor-style: silence this long ends the stream cleanly
    timeout_s = 120.0            # read timeout when idle_timeout_s is not set
    connect_timeout_s = 10.0
    compression = "gzip"         # compress the request envelope (default: none)
    api_key_env = "UPSTREAM_KEY" # sent as Authorization: Bearer
    headers = { "x-client" = "tokenwire" }

Each call has its own connection, closed when the call ends: a client that
leaves closes it, and with it the upstream HTTP/2 stream (GOAWAY and TCP FIN;
httpx has no way to reset one HTTP/2 stream alone, and a Cursor-style stream
never ends by itself, so a pooled connection would keep it open).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Any, Final

import httpx
import msgspec

from ... import events as ev
from ...request import Request
from ...server.hooks import Provider
from ...translate import VendorFormat, connect
from ._options import (
    check_known,
    one_of,
    positive_number,
    required_url,
    secret,
    string_headers,
)

__all__ = ["OPTIONS", "ConnectProvider"]

#: Every option the provider takes.
OPTIONS: Final = frozenset(
    {
        "base_url",
        "service_path",
        "codec",
        "mapping",
        "http2",
        "h2c",
        "idle_timeout_s",
        "timeout_s",
        "connect_timeout_s",
        "compression",
        "api_key",
        "api_key_env",
        "headers",
        "reasoning",
        "max_message_bytes",
        "upstream_model",
    }
)

#: At most this much of a non-200 body is read.
_MAX_ERROR_BODY: Final = 64 * 1024


class ConnectProvider(Provider):
    """Serve a model from a Connect upstream; ``generate`` yields standard events.

    Raises ``ValueError`` for a missing ``base_url``, an unknown option, codec
    or mapping.
    """

    # The constructor every transport provider has (``PROVIDERS_BY_TRANSPORT`` builds
    # them alike), beginning as ``SignalRProvider``'s does: the options it shares are
    # checked by ``_options``; what follows is this binding's own.
    def __init__(
        self,
        *,
        model_name: str,
        options: Mapping[str, Any],
        vendor: VendorFormat = connect.FORMAT,
    ) -> None:
        check_known(options, OPTIONS, "Connect")
        base_url = required_url(options, "base_url", "connect")
        self.format = vendor
        self.model_name = model_name
        self.base_url = base_url
        self.codec = one_of(options, "codec", connect.CODECS)
        self.mapping = one_of(options, "mapping", connect.MAPPINGS)
        self.service_path = str(options.get("service_path") or connect.SERVICE_PATHS[self.mapping])
        self.http2 = bool(options.get("http2", True))
        self.h2c = bool(options.get("h2c", False))
        self.idle_timeout_s = positive_number(options, "idle_timeout_s", None)
        self.timeout_s = positive_number(options, "timeout_s", 120.0)
        self.connect_timeout_s = positive_number(options, "connect_timeout_s", 10.0)
        compression = options.get("compression")
        if compression not in (None, "gzip", "identity"):
            raise ValueError(f"options.compression must be gzip or identity, got {compression!r}")
        self.compression: str | None = compression
        self.api_key = secret(options, "api_key", "api_key_env")
        self.headers = string_headers(options)
        self.reasoning = bool(options.get("reasoning", False))
        self.max_message_bytes = int(
            options.get("max_message_bytes", connect.DEFAULT_MAX_MESSAGE_BYTES)
        )

    def _client(self) -> httpx.AsyncClient:
        # §3: HTTP/2 where offered. On http:// httpx speaks HTTP/1.1 unless
        # HTTP/1.1 is turned off, which means HTTP/2 with prior knowledge (h2c).
        return httpx.AsyncClient(
            http2=self.http2 or self.h2c,
            http1=not self.h2c,
            timeout=httpx.Timeout(self.timeout_s, connect=self.connect_timeout_s),
            follow_redirects=False,
        )

    async def generate(self, request: Request) -> AsyncIterator[ev.Event]:
        """Stream the upstream's answer to ``request`` as standard events.

        Upstream failures come out as ``error`` + ``stream.end``: a non-200
        answer by its Connect code (or the code inferred from the status), a
        timeout as ``overloaded``, a broken connection as ``internal_error``.
        """
        translator = self.format.new_translator(
            model=self.model_name,
            request_id=request.request_id,
            codec=self.codec,
            mapping=self.mapping,
            reasoning=self.reasoning,
            max_message_bytes=self.max_message_bytes,
        )
        # The Connect provider drives the Connect translator's own idle() and encoding.
        assert isinstance(translator, connect.Translator)
        vendor_request = self.format.build_request(
            request,
            base_url=self.base_url,
            service_path=self.service_path,
            codec=self.codec,
            mapping=self.mapping,
            compression=self.compression,
            api_key=self.api_key,
            headers=self.headers,
        )
        client = self._client()
        try:
            async with client.stream(
                vendor_request.method,
                vendor_request.url,
                headers=vendor_request.headers,
                content=vendor_request.body,
            ) as response:
                if response.status_code != 200:
                    body = await _read_bounded(response)
                    status = response.status_code
                    for event in translator.writer.fail(*self.format.http_error(status, body)):
                        if isinstance(event, ev.ErrorEvent):
                            # Routing tells a non-retryable 4xx by this, not by the message.
                            event = msgspec.structs.replace(event, upstream_status=status)
                        yield event
                    return
                content_type = response.headers.get("content-type", "")
                if not content_type.startswith("application/connect+"):
                    for event in translator.writer.fail(
                        "internal_error", f"upstream answered {content_type!r}, not Connect"
                    ):
                        yield event
                    return
                encoding = response.headers.get("connect-content-encoding")
                translator.encoding = encoding.strip().lower() if encoding else None
                chunks = response.aiter_bytes()
                while True:
                    try:
                        if self.idle_timeout_s is None:
                            chunk = await anext(chunks)
                        else:
                            chunk = await asyncio.wait_for(anext(chunks), self.idle_timeout_s)
                    except StopAsyncIteration:
                        events = translator.close()
                    except TimeoutError:
                        # Cursor-style: no END_STREAM ever comes; silence ends it.
                        events = translator.idle()
                    else:
                        events = translator.feed(chunk)
                    for event in events:
                        yield event
                    if translator.done:
                        return
        except httpx.TimeoutException as exc:
            phase = type(exc).__name__.removesuffix("Timeout").lower() or "request"
            for event in translator.writer.fail(
                "overloaded", f"the upstream did not answer in time ({phase} timeout)"
            ):
                yield event
        except httpx.HTTPError as exc:
            for event in translator.writer.fail(
                "internal_error", f"upstream connection failed ({type(exc).__name__})"
            ):
                yield event
        finally:
            # Closing the call's own connection ends the upstream stream, also
            # when the client left (cancellation) or a Cursor-style stream is
            # still open after its completion marker.
            await asyncio.shield(client.aclose())


async def _read_bounded(response: httpx.Response) -> bytes:
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) >= _MAX_ERROR_BODY:
            break
    return bytes(body[:_MAX_ERROR_BODY])
