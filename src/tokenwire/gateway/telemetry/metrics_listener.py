"""``[metrics] listen``: ``GET /metrics`` on an address of its own.

The usual Prometheus practice: scrapes go to a private address, and the serving
port does not show the metrics (they name every model and its traffic). This is
a small HTTP/1.1 responder, not the gateway's server: ``GET /metrics`` (or
``HEAD``) gets the text, another path 404, another method 405, and each
answer closes its connection. A request head is read up to ``MAX_HEAD_BYTES``
within ``HEAD_TIMEOUT_S``; beyond either the connection is closed unanswered.
With several workers each binds the address with ``SO_REUSEPORT``, so a scrape
reaches one of them, as on the serving port.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Callable
from typing import Final

__all__ = ["MetricsListener"]

MAX_HEAD_BYTES: Final = 8192
HEAD_TIMEOUT_S: Final = 5.0


def answer(head: bytes, render: Callable[[], bytes], content_type: str) -> bytes:
    """The whole response to a request ``head`` (its request line decides)."""
    parts = head.split(b"\r\n", 1)[0].split(b" ")
    if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
        return _response(400, "text/plain; charset=utf-8", b"bad request line\n")
    method, target = parts[0], parts[1].split(b"?", 1)[0]
    if target != b"/metrics":
        return _response(404, "text/plain; charset=utf-8", b"not found: only /metrics here\n")
    if method not in (b"GET", b"HEAD"):
        return _response(405, "text/plain; charset=utf-8", b"GET /metrics\n", allow=True)
    body = render()
    return _response(200, content_type, body, send_body=method == b"GET")


def _response(
    status: int, content_type: str, body: bytes, *, allow: bool = False, send_body: bool = True
) -> bytes:
    reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed"}
    lines = [
        f"HTTP/1.1 {status} {reason[status]}",
        f"content-type: {content_type}",
        f"content-length: {len(body)}",
        "connection: close",
    ]
    if allow:
        lines.append("allow: GET, HEAD")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head + body if send_body else head


class MetricsListener:
    """Serves ``render()`` at ``GET /metrics`` on ``host:port`` (see module doc)."""

    def __init__(
        self, host: str, port: int, render: Callable[[], bytes], content_type: str
    ) -> None:
        self.host = host
        self.port = port
        self.render = render
        self.content_type = content_type
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        """Bind and listen. Raises ``OSError`` when the address cannot be bound."""
        self._server = await asyncio.start_server(
            self._serve,
            self.host,
            self.port,
            reuse_port=hasattr(socket, "SO_REUSEPORT"),
            limit=MAX_HEAD_BYTES,
        )

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(HEAD_TIMEOUT_S):
                head = await reader.readuntil(b"\r\n\r\n")
            writer.write(answer(head, self.render, self.content_type))
            await writer.drain()
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError):
            pass  # too slow, too long or gone: closed unanswered
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    async def aclose(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
