"""A raw asyncio HTTP/1.1 streaming client for load and latency probes.

It reads a chunked stream with no SSE parsing beyond counting frames, so the
client costs little next to the server it measures. Loopback only.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

MEDIA_TYPE: Final = "application/llm-request+json"

#: Marks the first content frame of a standard stream.
FIRST_STANDARD: Final = re.compile(rb"event: content\.delta")
#: Marks the first OpenAI chunk carrying text (``"content": "x"``, with or without the space).
FIRST_OPENAI: Final = re.compile(rb'"content": ?"[^"]')


# --- a raw HTTP/1.1 streaming client ------------------------------------------------------


def standard_request(port: int, model: str, text: str = "bench", **fields: Any) -> bytes:
    """A whole ``POST /v1/stream`` request (head and body) for the standard."""
    body: dict[str, Any] = {"version": "1.0", "stream": True, "model": model}
    body["messages"] = [{"role": "user", "content": text}]
    body.update(fields)
    data = json.dumps(body).encode()
    head = (
        f"POST /v1/stream HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: {MEDIA_TYPE}\r\n"
        f"Content-Length: {len(data)}\r\n\r\n"
    )
    return head.encode() + data


def openai_request(
    port: int,
    model: str,
    path: str = "/v1/chat/completions",
    text: str = "bench",
    headers: Mapping[str, str] | None = None,
) -> bytes:
    """A whole streaming OpenAI Chat Completions request (head and body)."""
    data = json.dumps(
        {"model": model, "stream": True, "messages": [{"role": "user", "content": text}]}
    ).encode()
    extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"{extra}Content-Length: {len(data)}\r\n\r\n"
    )
    return head.encode() + data


@dataclass
class Exchange:
    """One streamed answer as the raw client saw it (``time.perf_counter`` values)."""

    started: float
    status: int = 0
    first: float | None = None
    ended: float = 0.0
    frames: int = 0
    #: ``(arrival time, frames in that read)`` when ``timeline`` was asked for.
    arrivals: list[tuple[float, int]] = field(default_factory=list)
    #: The whole body when ``keep_body`` was asked for.
    body: bytes = b""


async def exchange(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    request: bytes,
    *,
    first: re.Pattern[bytes] = FIRST_STANDARD,
    frame: bytes = b"\n\n",
    timeline: bool = False,
    keep_body: bool = False,
    counter: list[int] | None = None,
) -> Exchange:
    """Send ``request`` on a kept-alive connection and read the chunked answer to its end.

    Counts ``frame`` occurrences (SSE frames end with a blank line) and notes
    when ``first`` matched; ``counter[0]`` (when given) is raised as frames
    arrive, so a caller can count a stream still in flight. Raises
    ``RuntimeError`` for a non-200 answer or a body that is not chunked, and
    ``asyncio.IncompleteReadError`` when the server hangs up mid-body.
    """
    result = Exchange(started=time.perf_counter())
    writer.write(request)
    head = await reader.readuntil(b"\r\n\r\n")
    status_line = head.split(b"\r\n", 1)[0].split(b" ", 2)
    result.status = int(status_line[1]) if len(status_line) > 1 else 0
    lower = head.lower()
    if result.status != 200 or b"transfer-encoding: chunked" not in lower:
        raise RuntimeError(f"unexpected answer: {head.decode(errors='replace')[:300]}")
    parts: list[bytes] = []
    carry = b""  # the tail of the previous read, so a frame split across reads counts once
    keep = len(frame) - 1
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
        if size == 0:
            await reader.readuntil(b"\r\n")
            break
        data = (await reader.readexactly(size + 2))[:-2]
        now = time.perf_counter()
        if result.first is None and first.search(data):
            result.first = now
        window = carry + data
        n = window.count(frame)
        result.frames += n
        if counter is not None:
            counter[0] += n
        carry = window[-keep:] if keep else b""
        if carry and window.endswith(frame):
            carry = b""
        if timeline and n:
            result.arrivals.append((now, n))
        if keep_body:
            parts.append(data)
    result.ended = time.perf_counter()
    result.body = b"".join(parts)
    return result


async def connect(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection to 127.0.0.1:port with a read buffer large enough for big chunks."""
    return await asyncio.open_connection("127.0.0.1", port, limit=1 << 22)


async def first_chunk_times(
    port: int,
    request: bytes,
    count: int,
    *,
    first: re.Pattern[bytes] = FIRST_STANDARD,
    warmup: int = 5,
) -> list[float]:
    """Seconds from writing ``request`` to the first content frame, ``count`` times in a row
    on one kept-alive connection (after ``warmup`` untimed ones)."""
    reader, writer = await connect(port)
    out: list[float] = []
    try:
        for i in range(count + warmup):
            ex = await exchange(reader, writer, request, first=first)
            if ex.first is None:
                raise RuntimeError("the answer had no content frame")
            if i >= warmup:
                out.append(ex.first - ex.started)
    finally:
        writer.close()
    return out


async def stream_concurrently(
    port: int,
    request: bytes,
    streams: int,
    *,
    first: re.Pattern[bytes] = FIRST_STANDARD,
    timeline: bool = False,
    keep_body: bool = False,
    on_sample: Callable[[], None] | None = None,
    sample_s: float = 0.02,
) -> tuple[list[Exchange], float]:
    """``streams`` answers at once, each on its own connection.

    ``on_sample`` is called every ``sample_s`` while they run (to sample RSS).
    Returns the exchanges and the wall time in seconds.
    """
    done = asyncio.Event()

    async def sampler() -> None:
        assert on_sample is not None
        while not done.is_set():
            on_sample()
            await asyncio.sleep(sample_s)

    async def one() -> Exchange:
        reader, writer = await connect(port)
        try:
            return await exchange(
                reader, writer, request, first=first, timeline=timeline, keep_body=keep_body
            )
        finally:
            writer.close()

    task = asyncio.ensure_future(sampler()) if on_sample is not None else None
    t0 = time.perf_counter()
    try:
        results = await asyncio.gather(*(one() for _ in range(streams)))
    finally:
        done.set()
        if task is not None:
            await task
    return list(results), time.perf_counter() - t0
