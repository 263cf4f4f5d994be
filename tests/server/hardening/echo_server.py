"""The echo app both engines serve in the engine suite (``test_engines.py``).

``GET|POST|HEAD /any``: ``200`` with ``{"method", "path", "body"}``;
``/smuggled``: ``200`` ``SMUGGLED`` (a request hidden in another's body that
reached the app); ``/healthz``: ``200``. ``python echo_server.py PORT`` serves
it on the h1 engine (uvloop, as ``tokenwire serve`` runs it); granian imports
``echo_server:app``.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
from typing import Any

# A sibling module: granian imports this one from its working directory, and
# ``python echo_server.py`` puts this directory first on the path.
from recorder import lifespan, read_body


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        await lifespan(receive, send)
        return
    body = await read_body(receive)
    if body is None:
        return
    if scope["path"] == "/smuggled":
        answer = b"SMUGGLED"
    else:
        fields = {"method": scope["method"], "path": scope["path"], "body": body.decode("latin-1")}
        answer = json.dumps(fields).encode()
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": answer})


def main() -> None:
    import uvloop

    from tokenwire.server.http1 import H1Server

    async def serve() -> None:
        server = H1Server(app)
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", int(sys.argv[1])))
        sock.listen(128)
        sock.setblocking(False)
        await server.startup()
        await server.start(sock)
        await asyncio.Event().wait()

    uvloop.run(serve())


if __name__ == "__main__":
    main()
