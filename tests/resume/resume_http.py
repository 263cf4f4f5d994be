"""HTTP helpers of the resume tests: partial reads, resumes, and a two-backend proxy."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import threading
import uuid
from pathlib import Path
from typing import Any

import httpx
import msgspec

import tokenwire
from tokenwire import events as ev
from tokenwire import request as rq
from tokenwire.testing import wait_for_file, wait_until

MEDIA = rq.MEDIA_TYPE
QUESTION = "What makes a stream resumable across gateway replicas?"
#: The header of a resumable stream's POST answer, sent back to resume or cancel it.
TOKEN_HEADER = "tokenwire-resume-token"
#: request_id -> the resume token its POST answer carried (``remember``).
TOKENS: dict[str, str] = {}


def remember(response: httpx.Response, raw: bytes) -> str | None:
    """Keep the resume token of a POST answer under its stream's request_id."""
    token = response.headers.get(TOKEN_HEADER)
    events = events_of(complete_frames(raw))
    if token is not None and events and isinstance(events[0], ev.StreamStart):
        request_id = events[0].request_id
        if request_id:
            TOKENS[request_id] = token
    return token


def auth(request_id: str, token: str | None = None) -> dict[str, str]:
    """The header that lets a GET or DELETE at the stream (none for an unknown
    stream, or for ``token=""``)."""
    token = token if token is not None else TOKENS.get(request_id)
    return {TOKEN_HEADER: token} if token else {}


def payload(
    model: str = "demo",
    *,
    request_id: str | None = None,
    resumable: bool | None = True,
    delay_ms: int | None = None,
    text: str = QUESTION,
) -> dict[str, Any]:
    """A standard request body; ``resumable=None`` leaves the extension out."""
    body: dict[str, Any] = {
        "version": "1.0",
        "stream": True,
        "model": model,
        "messages": [{"role": "user", "content": text}],
    }
    if request_id is not None:
        body["metadata"] = {"request_id": request_id}
    extensions: dict[str, Any] = {}
    if resumable is not None:
        extensions["tokenwire:resumable"] = resumable
    if delay_ms is not None:
        extensions["tokenwire:demo"] = {"delay_ms": delay_ms}
    if extensions:
        body["extensions"] = extensions
    return body


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def complete_frames(raw: bytes) -> bytes:
    """The bytes of every whole SSE frame in ``raw`` (a cut can end mid-frame)."""
    end = raw.rfind(b"\n\n")
    return raw[: end + 2] if end >= 0 else b""


def events_of(raw: bytes) -> list[ev.Event]:
    return list(tokenwire.iter_events(raw))


def text_of(events: list[ev.Event]) -> str:
    return "".join(e.delta.text for e in events if isinstance(e, ev.ContentDelta))


def read_part(client: httpx.Client, body: dict[str, Any], count: int) -> bytes:
    """POST ``body`` and hang up once ``count`` events came; returns their frames."""
    raw = b""
    with client.stream(
        "POST", "/v1/stream", content=msgspec.json.encode(body), headers={"content-type": MEDIA}
    ) as response:
        assert response.status_code == 200, response.read()
        for chunk in response.iter_raw():
            raw += chunk
            if len(events_of(complete_frames(raw))) >= count:
                break
        remember(response, raw)
    # Leaving the block closes the connection: the client hung up mid-stream.
    frames = complete_frames(raw)
    cut = b""
    for frame in frames.split(b"\n\n")[:-1]:
        if frame.startswith(b":"):
            continue  # a keep-alive comment
        cut += frame + b"\n\n"
        if len(events_of(cut)) == count:
            break
    return cut


def post_all(client: httpx.Client, body: dict[str, Any]) -> bytes:
    """POST ``body`` and read the whole stream."""
    response = client.post(
        "/v1/stream", content=msgspec.json.encode(body), headers={"content-type": MEDIA}
    )
    assert response.status_code == 200, response.text
    remember(response, response.content)
    return response.content


def resume(
    client: httpx.Client,
    request_id: str,
    after: int | None,
    *,
    query: bool = False,
    token: str | None = None,
) -> httpx.Response:
    """``GET /v1/streams/{request_id}`` with ``Last-Event-ID`` (or ``?after=``), read whole,
    with the stream's resume token (``token``, else the remembered one)."""
    headers = auth(request_id, token)
    params: dict[str, str] = {}
    if after is not None:
        if query:
            params["after"] = str(after)
        else:
            headers["last-event-id"] = str(after)
    return client.get(f"/v1/streams/{request_id}", headers=headers, params=params)


def cancel(client: httpx.Client, request_id: str, token: str | None = None) -> httpx.Response:
    """``DELETE /v1/streams/{request_id}`` with the stream's resume token."""
    return client.delete(f"/v1/streams/{request_id}", headers=auth(request_id, token))


def start_of(events: list[ev.Event]) -> ev.StreamStart:
    first = events[0]
    assert isinstance(first, ev.StreamStart)
    return first


def wait_record(record_dir: Path, request_id: str, timeout: float = 30.0) -> dict[str, Any]:
    """The Recorder plugin's record of ``request_id``, once it wrote one."""
    path = record_dir / f"{request_id}.json"
    record: dict[str, Any] = wait_for_file(
        path, json.loads, timeout=timeout, what=f"a record for {request_id}"
    )
    return record


def wait_for(predicate: Any, timeout: float = 30.0, what: str = "condition") -> None:
    wait_until(predicate, timeout=timeout, what=what)


class Balancer:
    """A TCP load balancer on 127.0.0.1: connections go round-robin to ``backends``.

    The first connection's answer is cut after ``cut_after`` bytes, the way a
    proxy recycling connections drops a long stream. ``routed`` lists the
    backend port each connection went to.
    """

    def __init__(self, backends: list[int], cut_after: int) -> None:
        self.backends = backends
        self.cut_after = cut_after
        self.routed: list[int] = []
        self._turn = itertools.cycle(backends)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> Balancer:
        self._thread.start()
        started = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._pipe, "127.0.0.1", 0), self._loop
        )
        self._server = started.result(10)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def __exit__(self, *exc: object) -> None:
        async def close() -> None:
            self._server.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        backend = next(self._turn)
        self.routed.append(backend)
        budget = self.cut_after if len(self.routed) == 1 else None
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", backend)

        async def upstream() -> None:
            with contextlib.suppress(ConnectionError):
                while data := await reader.read(65536):
                    up_writer.write(data)
                    await up_writer.drain()

        pump = asyncio.ensure_future(upstream())
        try:
            while data := await up_reader.read(65536):
                if budget is not None:
                    data = data[:budget]
                    budget -= len(data)
                writer.write(data)
                await writer.drain()
                if budget == 0:
                    break  # the cut: both sides of this connection drop
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            pump.cancel()
            writer.transport.abort()
            up_writer.transport.abort()
            self._tasks.discard(task)
