"""Client benchmark: events/s that ``tokenwire.Client`` delivers over loopback.

Starts ``tokenwire serve`` (the built-in demo model, zero delay) on a free
127.0.0.1 port, asks for one long answer (``"tokenwire:demo": {"tokens": N}``, so
N + 4 events), and times reading that same stream, best of several repeats:

1. raw HTTP read: ``httpx.Client.stream`` + ``iter_bytes``, no parsing at all
   (what the transport costs);
2. httpx + httpx-sse ``iter_sse`` + ``json.loads``: a typical hand-rolled
   consumer, untyped and unchecked;
3. ``tokenwire.Client``: typed events, lifecycle validator inline;
4. ``tokenwire.AsyncClient``: the same over ``httpx.AsyncClient``.

The demo model generates the stream as it is read, so these numbers include
the gateway's own cost. The same rows are then run against a replay server
(a raw asyncio server sending the captured body at once), which isolates the
client; and the same body in memory, without HTTP, shows the layers: the core
parser (``tokenwire.iter_events``), plus the lifecycle validator, plus the
client's own bookkeeping (its sans-I/O ``Receiver``).

Rewrites the "## client" section of bench/RESULTS.md.

Run: ``.venv/bin/python bench/client.py [--tokens N] [--repeat R] [--no-write]``
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import gc
import json
import os
import platform
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import httpx_sse

import tokenwire
from tokenwire.client import AsyncClient, Client
from tokenwire.client._receiver import Receiver
from tokenwire.request import MEDIA_TYPE, Request, build, dumps

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "RESULTS.md"
HEADERS = {"content-type": MEDIA_TYPE, "accept": "text/event-stream"}

#: A way to read the whole stream of (base URL, request body); returns the events seen.
Reader = Callable[[str, bytes], int]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextlib.contextmanager
def gateway() -> Iterator[str]:
    """``tokenwire serve`` on a free port, stopped on exit."""
    port = free_port()
    exe = Path(sys.executable).parent / "tokenwire"
    proc = subprocess.Popen(
        [str(exe), "serve", "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                    break
            time.sleep(0.1)
        else:
            raise RuntimeError("the gateway did not start")
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(10)


@contextlib.contextmanager
def replay(body: bytes) -> Iterator[str]:
    """A raw HTTP/1.1 server answering every request with ``body`` at once."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    port = 0
    head = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
        b"content-length: %d\r\nconnection: close\r\n\r\n" % len(body)
    )

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        headers = await reader.readuntil(b"\r\n\r\n")
        length = re.search(rb"(?i)content-length: *(\d+)", headers)
        if length:
            await reader.readexactly(int(length[1]))
        writer.write(head)
        for i in range(0, len(body), 65536):
            writer.write(body[i : i + 65536])
            await writer.drain()
        writer.close()

    async def start() -> asyncio.Server:
        nonlocal port
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        return server

    def main() -> None:
        asyncio.set_event_loop(loop)
        server = loop.run_until_complete(start())
        ready.set()
        loop.run_forever()
        server.close()
        loop.run_until_complete(server.wait_closed())

    thread = threading.Thread(target=main, daemon=True)
    thread.start()
    ready.wait(10)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def raw_read(url: str, body: bytes) -> int:
    # Counts blank lines only to check the whole stream came; a "\n\n" split
    # across two chunks is counted by carrying the previous chunk's last byte.
    n = 0
    last = b""
    with httpx.Client() as http:
        with http.stream("POST", url + "/v1/stream", content=body, headers=HEADERS) as r:
            for chunk in r.iter_bytes():
                n += chunk.count(b"\n\n") + (last == b"\n" and chunk[:1] == b"\n")
                last = chunk[-1:]
    return n


def httpx_sse_read(url: str, body: bytes) -> int:
    n = 0
    with httpx.Client() as http:
        with httpx_sse.connect_sse(
            http, "POST", url + "/v1/stream", content=body, headers=HEADERS
        ) as source:
            for sse in source.iter_sse():
                json.loads(sse.data)
                n += 1
    return n


def client_read(url: str, body: bytes) -> int:
    request = tokenwire.request.parse(body)
    n = 0
    with Client(url) as client:
        with client.stream(request) as stream:
            for _ in stream:
                n += 1
            stream.final()
    return n


def async_client_read(url: str, body: bytes) -> int:
    request = tokenwire.request.parse(body)

    async def run() -> int:
        n = 0
        async with AsyncClient(url) as client:
            async with client.stream(request) as stream:
                async for _ in stream:
                    n += 1
                await stream.final()
        return n

    return asyncio.run(run())


def client_read_gc_paused(url: str, body: bytes) -> int:
    """``client_read`` with the cyclic GC paused: what walking the kept events costs
    (the client keeps every delivered event for ``Response.events``)."""
    gc.disable()
    try:
        return client_read(url, body)
    finally:
        gc.enable()


ROWS: list[tuple[str, Reader]] = [
    ("raw HTTP read: httpx iter_bytes, no parsing", raw_read),
    ("httpx + httpx-sse iter_sse + json.loads", httpx_sse_read),
    ("tokenwire.Client (typed, validated)", client_read),
    ("tokenwire.AsyncClient (typed, validated)", async_client_read),
    ("tokenwire.Client, the cyclic GC paused (profile only)", client_read_gc_paused),
]


def capture(url: str, body: bytes) -> bytes:
    with httpx.Client() as http:
        r = http.post(url + "/v1/stream", content=body, headers=HEADERS)
        r.raise_for_status()
        return r.content


#: Issue 14's targets against the replay server: events/s over httpx + httpx-sse.
TARGETS = {
    "tokenwire.Client (typed, validated)": 2.0,
    "tokenwire.AsyncClient (typed, validated)": 1.5,
}


def table(url: str, body: bytes, expected: int, repeat: int) -> tuple[list[str], dict[str, float]]:
    """Time every reader ``repeat`` times, round-robin (so load spikes hit all), best kept.

    Besides the wall clock, the reader thread's own CPU time (``time.thread_time``:
    the servers run in other threads or processes), which other work on the
    machine disturbs much less. Returns the rows and each reader's ratio to
    httpx-sse, by wall clock and by CPU.
    """
    best = dict.fromkeys((name for name, _ in ROWS), float("inf"))
    cpu = dict.fromkeys((name for name, _ in ROWS), float("inf"))
    for _ in range(repeat):
        for name, fn in ROWS:
            t0, c0 = time.perf_counter(), time.thread_time()
            count = fn(url, body)
            best[name] = min(best[name], time.perf_counter() - t0)
            cpu[name] = min(cpu[name], time.thread_time() - c0)
            if count != expected:
                raise SystemExit(f"FAIL: {name} read {count} events, expected {expected}")
    raw = best[ROWS[0][0]]
    sse, sse_cpu = best[ROWS[1][0]], cpu[ROWS[1][0]]
    rows = [
        "| reader | best time (s) | events/s | vs raw read | vs httpx-sse | reader CPU µs/event "
        "| vs httpx-sse, by CPU |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, seconds in best.items():
        rate = expected / seconds
        ratios = f"{raw / seconds:.2f}x | {sse / seconds:.2f}x"
        by_cpu = f"{cpu[name] * 1e6 / expected:.2f} | {sse_cpu / cpu[name]:.2f}x"
        rows.append(f"| {name} | {seconds:.3f} | {rate:,.0f} | {ratios} | {by_cpu} |")
    ratio = {name: sse / seconds for name, seconds in best.items()}
    ratio |= {f"{name} (CPU)": sse_cpu / seconds for name, seconds in cpu.items()}
    return rows, ratio


def targets(ratios: dict[str, float]) -> list[str]:
    """One line per issue-14 target: the ratios measured against the replay server."""
    return [
        f"- {name}: {ratios[name]:.2f}x httpx + httpx-sse + json.loads by the wall clock, "
        f"{ratios[name + ' (CPU)']:.2f}x by the reader's CPU time (target {goal:.1f}x: "
        f"{'met' if min(ratios[name], ratios[name + ' (CPU)']) >= goal else 'missed'}, "
        "judged by the lower of the two)"
        for name, goal in TARGETS.items()
    ]


def in_memory_table(body: bytes, request: Request, expected: int, repeat: int) -> list[str]:
    """The client's layers without HTTP: parser, + validator, + the client's Receiver."""
    chunks = [body[i : i + 65536] for i in range(0, len(body), 65536)]

    def parse_only() -> int:
        return sum(1 for _ in tokenwire.iter_events(chunks))

    def parse_and_validate() -> int:
        validator = tokenwire.Validator(request)
        n = 0
        for event in tokenwire.iter_events(chunks):
            validator.feed(event)
            n += 1
        validator.close()
        return n

    def receiver() -> int:
        r = Receiver(request)
        r.connect()
        n = 0
        for chunk in chunks:
            for event in r.feed(chunk):
                r.deliver(event)
                n += 1
        r.finish()
        r.response()
        return n

    def receiver_gc_paused() -> int:
        # The Receiver keeps every delivered event for Response.events; the
        # events are GC-tracked objects, so the collector keeps walking them.
        gc.disable()
        try:
            return receiver()
        finally:
            gc.enable()

    layers: list[tuple[str, Callable[[], int]]] = [
        ("tokenwire.iter_events: sse.Decoder + events.parse", parse_only),
        ("+ lifecycle.Validator on every event", parse_and_validate),
        ("+ the client's Receiver (§8.2 checks, Response building)", receiver),
        ("the same, the cyclic GC paused (its cost: walking the kept events)", receiver_gc_paused),
    ]
    best = dict.fromkeys((name for name, _ in layers), float("inf"))
    for _ in range(repeat):
        for name, fn in layers:
            t0 = time.perf_counter()
            count = fn()
            best[name] = min(best[name], time.perf_counter() - t0)
            if count != expected:
                raise SystemExit(f"FAIL: {name} read {count} events, expected {expected}")
    rows = ["| layer | best time (s) | events/s |", "| --- | ---: | ---: |"]
    for name, seconds in best.items():
        rows.append(f"| {name} | {seconds:.3f} | {expected / seconds:,.0f} |")
    return rows


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return f"{cpu}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()}"


def write_section(text: str) -> None:
    """Replace the "## client" section of RESULTS.md, keeping the others."""
    old = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n"
    section = re.compile(r"^## client\n.*?(?=^## |\Z)", re.M | re.S)
    if section.search(old):
        new = section.sub(lambda _: text, old, count=1)
    else:
        new = old.rstrip("\n") + "\n\n" + text
    RESULTS.write_text(new)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--tokens", type=int, default=32_768, help="content.delta events (32768, the demo's cap)"
    )
    ap.add_argument("--repeat", type=int, default=5, help="repeats per reader, best kept")
    ap.add_argument("--no-write", action="store_true", help="do not rewrite bench/RESULTS.md")
    args = ap.parse_args()

    request = build(
        model="demo",
        messages="Benchmark the client, please.",
        extensions={"tokenwire:demo": {"tokens": args.tokens}},
        metadata={"request_id": "bench"},
    )
    body = dumps(request)
    expected = args.tokens + 4  # stream.start, the deltas, content.stop, usage, stream.end

    load = os.getloadavg()[0]
    with gateway() as url:
        captured = capture(url, body)
        live, _ = table(url, body, expected, args.repeat)
    with replay(captured) as url:
        replayed, ratios = table(url, body, expected, args.repeat)
    in_memory = in_memory_table(captured, request, expected, args.repeat)
    intro = (
        f"One demo-model answer of {expected:,} events ({args.tokens:,} `content.delta`, "
        f"{len(captured):,} bytes), read over loopback HTTP/1.1; best of {args.repeat} runs taken "
        "round-robin, each with a new client and connection, `time.perf_counter`."
    )
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    command = shlex.join(
        [os.path.relpath(sys.executable, ROOT), os.path.relpath(sys.argv[0], ROOT), *sys.argv[1:]]
    )
    text = "\n".join(
        [
            "## client",
            "",
            intro,
            "",
            f"- date: {now}",
            f"- python: {platform.python_version()} ({sys.implementation.name})",
            f"- machine: {machine()}; load average {load:.1f} when the run began "
            "(other work on the machine shows up as noise)",
            f"- command: `{command}`",
            "",
            "Against `tokenwire serve`, the demo model generating at zero delay (the "
            "gateway's generation and encoding are part of every row):",
            "",
            *live,
            "",
            "Against a replay server sending the captured body at once (the client alone):",
            "",
            *replayed,
            "",
            *targets(ratios),
            "",
            "The same body in memory, in 64 KiB chunks, no HTTP: where the client's time goes "
            "(the core parser, then the lifecycle validator, then the client's own bookkeeping):",
            "",
            *in_memory,
            "",
        ]
    )
    print(text)
    if not args.no_write:
        write_section(text + "\n")
        print(f"wrote the '## client' section of {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
