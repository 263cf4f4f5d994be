"""Small request/response helpers shared by the gateway tests."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import httpx
import msgspec

import tokenwire
from tokenwire import events as ev
from tokenwire import request as rq

MEDIA = rq.MEDIA_TYPE
WEATHER_TOOL = {
    "name": "get_weather",
    "description": "Get the current weather for a city",
    "parameters": {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        },
        "required": ["city"],
    },
}


def body(model: str, content: str | list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    """A standard request body; ``content`` is one user message or the messages."""
    messages = [{"role": "user", "content": content}] if isinstance(content, str) else content
    return {"version": "1.0", "stream": True, "model": model, "messages": messages, **fields}


def post(
    client: httpx.Client,
    payload: dict[str, Any],
    *,
    path: str = "/v1/stream",
    content_type: str = MEDIA,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    """POST ``payload`` as JSON and read the whole answer."""
    return client.post(
        path,
        content=msgspec.json.encode(payload),
        headers={"content-type": content_type, **(headers or {})},
    )


def events_of(data: bytes) -> list[ev.Event]:
    """The standard events of an SSE body."""
    return list(tokenwire.iter_events(data))


def text_of(events: list[ev.Event]) -> str:
    return "".join(e.delta.text for e in events if isinstance(e, ev.ContentDelta))


def of_type(events: list[ev.Event], cls: type[Any]) -> list[Any]:
    return [e for e in events if isinstance(e, cls)]


def request_of(payload: dict[str, Any]) -> rq.Request:
    return rq.parse(msgspec.json.encode(payload))


def raw_request(port: int, payload: dict[str, Any], path: str = "/v1/stream") -> socket.socket:
    """Open a plain socket and send one standard request on it (HTTP/1.1)."""
    data = msgspec.json.encode(payload)
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {MEDIA}\r\n"
        f"Content-Length: {len(data)}\r\n\r\n".encode()
        + data
    )
    return sock


def read_until(sock: socket.socket, count: int, needle: bytes, timeout: float = 10.0) -> bytes:
    """Read from ``sock`` until ``needle`` occurred ``count`` times."""
    sock.settimeout(timeout)
    seen = b""
    deadline = time.monotonic() + timeout
    while seen.count(needle) < count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"only {seen.count(needle)} of {count} {needle!r}")
        chunk = sock.recv(65536)
        if not chunk:
            break
        seen += chunk
    return seen


class StreamReader(threading.Thread):
    """Reads one ``/v1/stream`` reply to its end in a thread; ``events`` grows as they arrive."""

    def __init__(self, url: str, model: str, timeout: float = 60.0) -> None:
        super().__init__(daemon=True)
        self.url, self.model, self.timeout = url, model, timeout
        self.events: list[ev.Event] = []
        self.failure: BaseException | None = None

    def run(self) -> None:
        try:
            with httpx.Client(base_url=self.url, timeout=self.timeout) as client:
                with client.stream(
                    "POST",
                    "/v1/stream",
                    content=msgspec.json.encode(body(self.model, "hi")),
                    headers={"content-type": MEDIA},
                ) as response:
                    decoder = tokenwire.sse.Decoder()
                    for chunk in response.iter_bytes():
                        for message in decoder.feed(chunk):
                            self.events.append(ev.parse(message.event, message.data))
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.failure = exc
