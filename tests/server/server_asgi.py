"""Drive an ASGI app with scripted ``receive``/``send``: no server, nothing buffered.

``Exchange`` plays the client. Its ``receive`` hands out the request body in
the given chunks, then blocks until ``hang_up()`` (or ``hang_up_after``
body sends), when it returns ``http.disconnect``. Its ``send`` records every
message and yields to the event loop, as a real server does when it writes.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable
from typing import Any

import tokenwire
from tokenwire import events as ev
from tokenwire.request import MEDIA_TYPE


class Exchange:
    def __init__(
        self,
        body: bytes | Iterable[bytes] = b"",
        *,
        method: str = "POST",
        content_type: str | None = MEDIA_TYPE,
        headers: dict[str, str] | None = None,
        content_length: bool = True,
        hang_up_after: int | None = None,
        send_error_after: int | None = None,
    ) -> None:
        chunks = [body] if isinstance(body, bytes) else list(body)
        self.chunks = chunks
        self.received = 0  # body messages handed out
        self.messages: list[dict[str, Any]] = []
        self.hang_up_after = hang_up_after
        self.send_error_after = send_error_after
        self._gone: asyncio.Event | None = None
        raw = dict(headers or {})
        if content_type is not None:
            raw["content-type"] = content_type
        if content_length:
            raw["content-length"] = str(sum(map(len, chunks)))
        self.scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": method,
            "path": "/v1/stream",
            "headers": [(k.lower().encode(), v.encode()) for k, v in raw.items()],
        }

    @property
    def gone(self) -> asyncio.Event:
        if self._gone is None:
            self._gone = asyncio.Event()
        return self._gone

    def hang_up(self) -> None:
        self.gone.set()

    async def receive(self) -> dict[str, Any]:
        if self.received < len(self.chunks):
            chunk = self.chunks[self.received]
            self.received += 1
            return {
                "type": "http.request",
                "body": chunk,
                "more_body": self.received < len(self.chunks),
            }
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        if self.gone.is_set():
            raise OSError("client gone")
        self.messages.append(message)
        bodies = len(self.bodies)
        if self.send_error_after is not None and bodies > self.send_error_after:
            self.hang_up()
            raise OSError("connection reset")
        if self.hang_up_after is not None and bodies >= self.hang_up_after:
            self.hang_up()
        # One loop turn per send, as a real transport yields: not a timed pause.
        await asyncio.sleep(0)

    def run(self, app: Any) -> Exchange:
        async def go() -> None:
            await app(self.scope, self.receive, self.send)

        asyncio.run(go())
        return self

    # -- what the client got --------------------------------------------------

    @property
    def status(self) -> int:
        return int(self.messages[0]["status"])

    @property
    def headers(self) -> dict[str, str]:
        return {k.decode(): v.decode() for k, v in self.messages[0]["headers"]}

    @property
    def bodies(self) -> list[bytes]:
        return [m.get("body", b"") for m in self.messages if m["type"] == "http.response.body"]

    @property
    def body(self) -> bytes:
        return b"".join(self.bodies)

    def json(self) -> Any:
        return json.loads(self.body)

    def events(self) -> list[ev.Event]:
        return list(tokenwire.iter_events(self.body))
