"""An upstream that sends exact bytes and then ends its body the way a test says.

``FakeUpstream`` cuts streams at event boundaries; a cut *inside* an SSE event
needs the exact bytes, so this tiny asyncio HTTP/1.1 server (one thread, a
free 127.0.0.1 port) answers every ``POST`` with a chunked ``200`` carrying
``body`` and then either drops the connection (``end="drop"``: a reset or a
dying proxy) or ends the chunked body cleanly (``end="eof"``).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Literal


class RawUpstream:
    """Serve ``body`` to every request, then end it as ``end`` says. ``.url``, ``.served``."""

    def __init__(self, body: bytes, *, end: Literal["drop", "eof"] = "drop") -> None:
        self.body = body
        self.end = end
        self.url = ""
        self.served = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            await reader.readexactly(length)
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                b"transfer-encoding: chunked\r\n\r\n"
                + b"%x\r\n%s\r\n"
                % (len(self.body), self.body)
            )
            if self.end == "eof":
                writer.write(b"0\r\n\r\n")
            await writer.drain()
            self.served += 1
            if self.end == "eof":
                # Keep the connection open: the body ended, the socket did not.
                await reader.read()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    def start(self) -> RawUpstream:
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._handle, "127.0.0.1", 0), self._loop
        )
        self._server = future.result(timeout=10)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    def stop(self) -> None:
        async def close() -> None:
            if self._server is not None:
                self._server.close()
            # Connections still open (a clean end keeps its socket) end here.
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if self._server is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self._server.wait_closed(), 1)

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(close(), self._loop).result(timeout=5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        if not self._thread.is_alive():
            self._loop.close()
