"""An ASGI app that records each request it got whole, and answers with it."""

from __future__ import annotations

import json
from typing import Any

#: What a served request was: method, target, header fields, body.
Served = tuple[str, bytes, list[tuple[bytes, bytes]], bytes]


async def lifespan(receive: Any, send: Any) -> None:
    """An ASGI lifespan with nothing to start or stop."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        else:
            await send({"type": "lifespan.shutdown.complete"})
            return


async def read_body(receive: Any) -> bytes | None:
    """The whole request body, or ``None`` when the client left before it was in."""
    body = b""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        body += message.get("body", b"")
        if not message.get("more_body", False):
            return body


class Recorder:
    """Records ``Served`` for each request whose body came whole, then answers 200
    with a JSON echo (``HEAD`` gets the same head, no body)."""

    def __init__(self) -> None:
        self.served: list[Served] = []
        self.disconnects = 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await lifespan(receive, send)
            return
        body = await read_body(receive)
        if body is None:
            self.disconnects += 1
            return
        query = scope["query_string"]
        target = scope["raw_path"] + (b"?" + query if query else b"")
        headers = [(bytes(n), bytes(v)) for n, v in scope["headers"]]
        self.served.append((scope["method"], target, headers, body))
        answer = json.dumps({"method": scope["method"], "body": body.decode("latin-1")}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": answer})


app = Recorder()
