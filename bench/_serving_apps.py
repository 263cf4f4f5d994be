"""The same tiny SSE app for each serving path ``bench/serving.py`` compares.

``asgi_app`` (granian ASGI, uvicorn, tokenwire's own ``tokenwire.server.http1``) and
``rsgi_app`` (granian RSGI) answer alike:

- ``GET /healthz``: ``200`` ``{"status":"ok"}``;
- ``POST /stream?n=N&pause_ms=P``: the request body read whole, then
  ``text/event-stream`` with N events of ~100 bytes, each in its own send,
  ``P`` ms apart (0: back to back).

Run as a script it serves ``asgi_app`` on ``tokenwire.server.http1`` (uvloop):
``python bench/_serving_apps.py PORT``.
"""

from __future__ import annotations

import asyncio
import socket
import sys
from typing import Any
from urllib.parse import parse_qs

EVENT = (
    b'event: content.delta\ndata: {"type":"content.delta","delta":{"text":"word"},"pad":"'
    + (b"x" * 40)
    + b'"}\n\n'
)
HEALTH = b'{"status":"ok"}'


def _params(query: bytes | str) -> tuple[int, float]:
    q = parse_qs(query.decode() if isinstance(query, bytes) else query)
    return int(q.get("n", ["1"])[0]), float(q.get("pause_ms", ["0"])[0]) / 1000


async def asgi_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            else:
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["path"] == "/healthz":
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": HEALTH})
        return
    while True:
        message = await receive()
        if message["type"] != "http.request" or not message.get("more_body", False):
            break
    n, pause = _params(scope["query_string"])
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")],
        }
    )
    for i in range(n):
        if i and pause:
            await asyncio.sleep(pause)
        await send({"type": "http.response.body", "body": EVENT, "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def rsgi_app(scope: Any, proto: Any) -> None:
    if scope.path == "/healthz":
        proto.response_bytes(200, [("content-type", "application/json")], HEALTH)
        return
    await proto()
    n, pause = _params(scope.query_string)
    transport = proto.response_stream(
        200, [("content-type", "text/event-stream"), ("cache-control", "no-cache")]
    )
    for i in range(n):
        if i and pause:
            await asyncio.sleep(pause)
        await transport.send_bytes(EVENT)


def main() -> None:
    import uvloop

    from tokenwire.server.http1 import H1Server

    port = int(sys.argv[1])

    async def serve() -> None:
        server = H1Server(asgi_app)
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        sock.listen(1024)
        sock.setblocking(False)
        await server.startup()
        await server.start(sock)
        await asyncio.Event().wait()

    uvloop.run(serve())


if __name__ == "__main__":
    main()
