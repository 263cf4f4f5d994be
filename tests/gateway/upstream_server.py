"""A small HTTP/1.1 upstream on 127.0.0.1 for the upstream client's and the HTTP
provider's tests: it answers each request with a scripted ``respond``.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import Awaitable, Callable
from typing import Any

from tokenwire.testing import async_wait_until

DEADLINE = 10.0  # bounded waits on conditions, never a measured time

Respond = Callable[["Server", int, asyncio.StreamReader, asyncio.StreamWriter], Awaitable[bool]]


class Server:
    """An HTTP/1.1 server on 127.0.0.1:0 that answers request ``n`` with ``respond``.

    ``respond`` returns whether to keep the connection. Counts connections and
    the EOFs it saw from the client.
    """

    def __init__(self, respond: Respond) -> None:
        self.respond = respond
        self.connections = 0
        self.eofs = 0
        self.requests: list[bytes] = []
        self.url = ""
        self.writers: list[asyncio.StreamWriter] = []

    async def __aenter__(self) -> Server:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()
        await self.server.wait_closed()
        for writer in self.writers:  # connections still open: closed before the loop ends
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.writers.append(writer)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except asyncio.IncompleteReadError:
                    self.eofs += 1
                    break
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                self.requests.append(head + await reader.readexactly(length))
                keep = await self.respond(self, len(self.requests) - 1, reader, writer)
                await writer.drain()
                if not keep:
                    break
        except (ConnectionError, asyncio.IncompleteReadError):
            self.eofs += 1
        finally:
            writer.close()

    async def until(self, predicate: Callable[[], bool]) -> None:
        """Wait (bounded) until ``predicate()``, for what either side changes."""
        await async_wait_until(predicate, timeout=DEADLINE, max_interval=0.01)


def answer(raw: bytes, *, keep: bool = True) -> Respond:
    async def respond(server: Server, n: int, reader: Any, writer: Any) -> bool:
        writer.write(raw)
        return keep

    return respond


def run(coro: Awaitable[Any]) -> Any:
    async def main() -> Any:
        return await coro

    try:
        return asyncio.run(main())
    finally:
        gc.collect()  # an unclosed socket is reported by the test that left it


OPENAI_OK = (
    b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m",'
    b'"choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"},"finish_reason":null}]}\n\n'
    b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m",'
    b'"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
    b"data: [DONE]\n\n"
)


def chunked(body: bytes, *, head: bytes = b"") -> bytes:
    return (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n"
        + head
        + b"\r\n"
        + b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    )
