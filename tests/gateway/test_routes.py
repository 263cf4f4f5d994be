"""The counting routes when the upstream's counting endpoint fails: the client gets
the vendor's own error, mapped by the upstream's vendor, or a 502 naming what broke.

The upstream is a small asyncio server on 127.0.0.1 written here; the route is
driven with scripted ASGI ``receive``/``send``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json

import pytest
from tests.server.server_asgi import Exchange as Client

from tokenwire.gateway.ingress import FormatIngress
from tokenwire.gateway.providers import HTTPProvider
from tokenwire.gateway.routes import CountEndpoint
from tokenwire.gateway.upstream import Pool

BODY = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
#: A bound on the exchange, far above what it takes.
DEADLINE_S = 10.0


def _answer(status: int, reason: str, body: bytes) -> bytes:
    head = f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
    return head.encode() + b"content-length: %d\r\n\r\n%s" % (len(body), body)


async def _count(answer: bytes | None) -> Client:
    """POST ``BODY`` to Anthropic's counting route, its upstream answering ``answer``
    (``None``: nothing listens there)."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        await reader.readexactly(length)
        assert answer is not None
        writer.write(answer)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    if answer is None:
        server.close()
        await server.wait_closed()
    pool = Pool()
    try:
        provider = HTTPProvider("anthropic", pool=pool, base_url=url, api_key="k")
        endpoint = CountEndpoint(FormatIngress("anthropic"), {"m": provider})
        client = Client(BODY, content_type="application/json")
        async with asyncio.timeout(DEADLINE_S):
            await endpoint(client.scope, client.receive, client.send)
        return client
    finally:
        await pool.aclose()
        with contextlib.suppress(Exception):
            server.close()
            await server.wait_closed()


def test_the_upstreams_refusal_reaches_the_client_in_the_routes_shape() -> None:
    error = {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}
    client = asyncio.run(_count(_answer(429, "Too Many Requests", json.dumps(error).encode())))
    assert client.status == 429
    body = client.json()
    assert body["type"] == "error" and body["error"]["type"] == "rate_limit_error"
    assert "slow down" in body["error"]["message"]


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (_answer(200, "OK", b'{"tokens": 3}'), "upstream count: the count answer has no"),
        (None, "the upstream could not be reached"),
    ],
    ids=["no-count", "unreachable"],
)
def test_a_count_that_cannot_be_had_is_a_502_saying_why(answer: bytes | None, message: str) -> None:
    client = asyncio.run(_count(answer))
    assert client.status == 502
    assert client.json()["error"]["type"] == "api_error"
    assert client.json()["error"]["message"].startswith(message)
