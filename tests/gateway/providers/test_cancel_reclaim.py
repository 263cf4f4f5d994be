"""A client that hangs up while the upstream connection is being opened leaks nothing.

httpcore 1.0.9 leaves a connection in its pool for good when the request that
opened it is cancelled between the connect and the first byte sent
(encode/httpcore#1093): it is neither idle nor closed, and no request owns it.
The gateway reclaims such orphans when a stream over httpx (``http = "2"``)
is cancelled, on the translated path and on the same-vendor passthrough alike.

The hang-up is made to land in that very window, every time: the network
backend of the httpx pool cancels the producer's task right after its TCP
connect (what the endpoint does when the client leaves), so the cancel is
delivered at httpcore's next checkpoint, before the request is sent.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import MutableMapping
from typing import Any

import httpx
import msgspec
import pytest

from tokenwire import request as rq
from tokenwire.gateway import config as gwconfig
from tokenwire.gateway.ingress import FormatIngress
from tokenwire.gateway.providers import HTTPProvider, passthrough
from tokenwire.server import StreamEndpoint
from tokenwire.testing import async_wait_until

#: A bound on each wait, far above what it takes; hit only when something leaks.
DEADLINE_S = 10.0


class CancelAfterConnect:
    """An httpcore network backend that cancels the connecting task once connected."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.connects = 0

    async def connect_tcp(self, *args: Any, **kwargs: Any) -> Any:
        stream = await self.inner.connect_tcp(*args, **kwargs)
        self.connects += 1
        task = asyncio.current_task()
        assert task is not None
        task.cancel()  # the hang-up, delivered at httpcore's next checkpoint
        return stream

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


class SilentUpstream:
    """A TCP server on 127.0.0.1 that reads and never answers; it sees each close."""

    def __init__(self) -> None:
        self.opened = 0
        self.closed = 0
        self.url = ""
        self.writers: list[asyncio.StreamWriter] = []

    async def __aenter__(self) -> SilentUpstream:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()
        for writer in self.writers:  # what the gateway left open is closed here
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
        await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.opened += 1
        self.writers.append(writer)
        with contextlib.suppress(ConnectionError):
            while await reader.read(65536):
                pass
        self.closed += 1
        writer.close()


def _body(standard: bool) -> tuple[bytes, bytes]:
    if standard:
        return rq.dumps(rq.build(model="m", messages="hi")), rq.MEDIA_TYPE.encode()
    anthropic = {
        "model": "m",
        "max_tokens": 16,
        "stream": True,
        "messages": [{"role": "user", "content": "hi"}],
    }
    return msgspec.json.encode(anthropic), b"application/json"


async def _serve_one(endpoint: StreamEndpoint, body: bytes, content_type: bytes) -> None:
    sent = False
    never = asyncio.Event()

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await never.wait()  # the client stays; its hang-up is the backend's cancel
        return {"type": "http.disconnect"}

    async def send(message: MutableMapping[str, Any]) -> None:
        pass

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/v1/messages",
        "headers": [(b"content-type", content_type), (b"content-length", b"%d" % len(body))],
    }
    async with asyncio.timeout(DEADLINE_S):
        await endpoint(scope, receive, send)


@pytest.mark.parametrize("standard", [True, False], ids=["translated", "passthrough"])
def test_a_hangup_while_connecting_over_httpx_leaves_no_upstream_connection(
    standard: bool,
) -> None:
    async def main() -> None:
        async with SilentUpstream() as upstream, httpx.AsyncClient(http2=True) as client:
            pool: Any = client._transport._pool  # type: ignore[attr-defined]
            backend = CancelAfterConnect(pool._network_backend)
            pool._network_backend = backend
            config = gwconfig.parse(
                {"models": [{"name": "m", "provider": "anthropic", "base_url": upstream.url}]}
            )
            ingress = FormatIngress("anthropic")
            ingress.passthrough = passthrough.Routes(config)
            provider = HTTPProvider("anthropic", client=client, base_url=upstream.url, api_key="k")
            endpoint = StreamEndpoint({"m": provider}, ingress=ingress)
            await _serve_one(endpoint, *_body(standard))
            assert backend.connects == 1
            # The connection opened for the cancelled request is closed, not kept.
            await async_wait_until(
                lambda: upstream.closed == upstream.opened == 1,
                timeout=DEADLINE_S,
                what=lambda: f"{upstream.opened} opened, {upstream.closed} closed upstream",
            )
            stuck = [c for c in pool._connections if not c.is_idle() and not c.is_closed()]
            assert stuck == []

    asyncio.run(main())
