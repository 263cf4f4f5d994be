"""Gateway benchmark: ``tokenwire serve`` (one granian worker) on 127.0.0.1.

Starts a real gateway process, and for the vendor path a ``FakeUpstream("openai")``
in a process of its own, then measures with a raw asyncio HTTP/1.1 client (keep-alive,
chunked decoding, no SSE parsing beyond counting frames, so the client costs little):

1. **events/s through one worker**, for the built-in demo model at zero delay and for
   the OpenAI translator in front of the loopback fake upstream: ``--conns``
   connections stream long replies back to back for ``--seconds``;
2. **CPU µs per event**: the gateway processes' user+system CPU time
   (``/proc/<pid>/stat``, server and worker) over the events of run 1;
3. **time to first event**: one connection, sequential requests, from writing the
   request to reading the first ``content.delta``: the demo at zero delay (its own
   work is ~30 µs, so this is the gateway's overhead), and fake upstream via the
   gateway against the same fake upstream called directly (the difference is the
   gateway's overhead);
4. **peak RSS with 200 concurrent streams**: the worker's VmRSS sampled every 20 ms
   while 200 paced streams (100 tokens, 20 ms apart) are open at once (demo, then
   fake upstream).

It prints a table and rewrites the "## gateway" section of bench/RESULTS.md.

Run: ``.venv/bin/python bench/gateway.py [--seconds 5] [--conns 16] [--no-write]``
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import json
import os
import platform
import re
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tokenwire.testing.processes import (
    children,
    cpu_seconds,
    free_port,
    loadavg,
    machine,
    rss_kib,
)

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "RESULTS.md"
MEDIA = "application/llm-request+json"

#: The fake upstream process: one FakeUpstream("openai") whose script depends
#: on the upstream model name the gateway sends (``upstream_model``).
FAKE_UPSTREAM = r"""
import sys, time
from tokenwire.testing.upstream import FakeUpstream, Script
WORDS = " ".join(f"word{i}" for i in range(4000))
SCRIPTS = {
    "bulk": Script(text=" ".join(WORDS.split()[:2000]), input_tokens=5),
    "short": Script(text="Hello there, this is a short reply.", input_tokens=5),
    "paced": Script(text=" ".join(WORDS.split()[:100]), input_tokens=5, delay_s=0.02),
}
def script(request):
    return SCRIPTS[request.json()["model"]]
fake = FakeUpstream("openai", script).start()
print(fake.url, flush=True)
sys.stdin.read()
fake.stop()
"""


@contextlib.contextmanager
def fake_upstream() -> Iterator[tuple[str, subprocess.Popen[str]]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", FAKE_UPSTREAM],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        if not url.startswith("http://"):
            raise RuntimeError("the fake upstream did not start")
        yield url, proc
    finally:
        with contextlib.suppress(Exception):
            assert proc.stdin is not None
            proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@contextlib.contextmanager
def gateway(config: str) -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.toml"
        path.write_text(config)
        argv = [sys.executable, "-m", "tokenwire", "serve", "--port", str(port)]
        argv += ["--config", str(path), "--workers", "1"]
        log = open(Path(tmp) / "stderr", "wb")  # noqa: SIM115 - closed below
        proc = subprocess.Popen(
            argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=log, start_new_session=True
        )
        try:
            deadline = time.monotonic() + 30
            while True:
                with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port)):
                    break
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError((Path(tmp) / "stderr").read_text())
                time.sleep(0.05)
            yield port, proc
        finally:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            log.close()


# --- the client ------------------------------------------------------------------------


def std_request(port: int, model: str, text: str, **fields: object) -> bytes:
    body = {"version": "1.0", "stream": True, "model": model}
    body["messages"] = [{"role": "user", "content": text}]  # type: ignore[assignment]
    body.update(fields)  # type: ignore[arg-type]
    data = json.dumps(body).encode()
    head = (
        f"POST /v1/stream HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: {MEDIA}\r\n"
        f"Content-Length: {len(data)}\r\n\r\n"
    )
    return head.encode() + data


def openai_request(port: int, model: str, path: str) -> bytes:
    data = json.dumps(
        {"model": model, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    ).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\n\r\n"
    )
    return head.encode() + data


@dataclass
class Exchange:
    started: float
    first: float | None = None
    ended: float = 0.0
    events: int = 0


_FIRST_STANDARD = re.compile(rb"event: content\.delta")
_FIRST_OPENAI = re.compile(rb'"content":"[^"]')


class Counter:
    """Events received so far, across connections (partial streams included)."""

    def __init__(self) -> None:
        self.events = 0


async def exchange(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    request: bytes,
    first: re.Pattern[bytes],
    frame: bytes,
    counter: Counter | None = None,
) -> Exchange:
    """One request on a kept-alive connection; counts ``frame`` occurrences."""
    result = Exchange(started=time.perf_counter())
    writer.write(request)
    head = await reader.readuntil(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(head.decode(errors="replace"))
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
        if size == 0:
            await reader.readuntil(b"\r\n")
            break
        data = (await reader.readexactly(size + 2))[:-2]
        if result.first is None and first.search(data):
            result.first = time.perf_counter()
        n = data.count(frame)
        result.events += n
        if counter is not None:
            counter.events += n
    result.ended = time.perf_counter()
    return result


async def throughput(
    port: int, request: bytes, conns: int, seconds: float, pids: list[int]
) -> tuple[int, float, float]:
    """Events received and gateway CPU seconds while ``conns`` connections stream
    back to back for ``seconds`` (streams cut at the deadline count what arrived).

    Returns (events, elapsed seconds, gateway CPU seconds).
    """
    counter = Counter()

    async def worker() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 22)
        try:
            while True:
                await exchange(reader, writer, request, _FIRST_STANDARD, b"event: ", counter)
        finally:
            writer.close()

    tasks = [asyncio.ensure_future(worker()) for _ in range(conns)]
    await asyncio.sleep(0.5)  # every connection is streaming
    cpu0, events0, started = cpu_seconds(pids), counter.events, time.perf_counter()
    await asyncio.sleep(seconds)
    cpu1, events1, ended = cpu_seconds(pids), counter.events, time.perf_counter()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return events1 - events0, ended - started, cpu1 - cpu0


async def first_event_times(
    port: int, request: bytes, count: int, first: re.Pattern[bytes], frame: bytes
) -> list[float]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 22)
    out = []
    try:
        for _ in range(count + 10):
            ex = await exchange(reader, writer, request, first, frame)
            assert ex.first is not None
            out.append(ex.first - ex.started)
    finally:
        writer.close()
    return out[10:]  # the first ones warm caches and imports


async def concurrent_rss(
    port: int, pid: int, request: bytes, streams: int
) -> tuple[int, int, float]:
    """Baseline and peak worker RSS (KiB) while ``streams`` paced streams are open."""
    base = rss_kib(pid)
    peak = base
    done = asyncio.Event()

    async def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, rss_kib(pid))
            await asyncio.sleep(0.02)

    async def one() -> Exchange:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 22)
        try:
            return await exchange(reader, writer, request, _FIRST_STANDARD, b"event: ")
        finally:
            writer.close()

    sampler = asyncio.ensure_future(sample())
    started = time.perf_counter()
    results = await asyncio.gather(*(one() for _ in range(streams)))
    elapsed = time.perf_counter() - started
    done.set()
    await sampler
    assert all(r.events > 50 for r in results), "a stream ended early"
    return base, peak, elapsed


# --- the runs ---------------------------------------------------------------------------


@dataclass
class Row:
    path: str
    events_per_s: float = 0.0
    cpu_us_per_event: float = 0.0
    ttfe_p50_ms: float = 0.0
    ttfe_p99_ms: float = 0.0
    overhead_ms: float = 0.0
    rss_base_mib: float = 0.0
    rss_peak_mib: float = 0.0
    notes: list[str] = field(default_factory=list)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def run(args: argparse.Namespace, fake_url: str) -> list[Row]:
    config = (
        '[[models]]\nname = "fake-bulk"\nprovider = "openai"\n'
        f'base_url = "{fake_url}/v1"\nupstream_model = "bulk"\n\n'
        '[[models]]\nname = "fake-short"\nprovider = "openai"\n'
        f'base_url = "{fake_url}/v1"\nupstream_model = "short"\n\n'
        '[[models]]\nname = "fake-paced"\nprovider = "openai"\n'
        f'base_url = "{fake_url}/v1"\nupstream_model = "paced"\n'
    )
    fake_port = int(fake_url.rsplit(":", 1)[1])
    demo, fake = Row("demo model (zero delay)"), Row("openai translator <- FakeUpstream")
    with gateway(config) as (port, proc):
        pids = [proc.pid, *children(proc.pid)]
        worker = pids[-1]
        bulk_demo = std_request(
            port, "demo", "bench", extensions={"tokenwire:demo": {"tokens": 2000}}
        )
        bulk_fake = std_request(port, "fake-bulk", "bench")
        for row, request in ((demo, bulk_demo), (fake, bulk_fake)):
            events, elapsed, cpu = await throughput(port, request, args.conns, args.seconds, pids)
            row.events_per_s = events / elapsed
            row.cpu_us_per_event = cpu / events * 1e6
            row.notes.append(f"{events:,} events in {elapsed:.1f} s, {cpu:.2f} s gateway CPU")

        one = std_request(port, "demo", "bench", extensions={"tokenwire:demo": {"tokens": 1}})
        times = await first_event_times(port, one, args.requests, _FIRST_STANDARD, b"event: ")
        demo.ttfe_p50_ms, demo.ttfe_p99_ms = pct(times, 0.5) * 1e3, pct(times, 0.99) * 1e3
        demo.overhead_ms = demo.ttfe_p50_ms
        short = std_request(port, "fake-short", "bench")
        via = await first_event_times(port, short, args.requests, _FIRST_STANDARD, b"event: ")
        direct_req = openai_request(fake_port, "short", "/v1/chat/completions")
        direct = await first_event_times(
            fake_port, direct_req, args.requests, _FIRST_OPENAI, b"data: "
        )
        fake.ttfe_p50_ms, fake.ttfe_p99_ms = pct(via, 0.5) * 1e3, pct(via, 0.99) * 1e3
        fake.overhead_ms = (statistics.median(via) - statistics.median(direct)) * 1e3
        fake.notes.append(f"upstream alone: p50 {statistics.median(direct) * 1e3:.2f} ms")

        paced_demo = std_request(
            port,
            "demo",
            "bench",
            extensions={"tokenwire:demo": {"tokens": 100, "delay_ms": 20}},
        )
        paced_fake = std_request(port, "fake-paced", "bench")
        for row, request in ((demo, paced_demo), (fake, paced_fake)):
            base, peak, elapsed = await concurrent_rss(port, worker, request, args.streams)
            row.rss_base_mib, row.rss_peak_mib = base / 1024, peak / 1024
            row.notes.append(f"{args.streams} streams x 100 tokens at 20 ms: {elapsed:.1f} s")
    return [demo, fake]


def render(rows: list[Row], args: argparse.Namespace) -> list[str]:
    table = [
        "| path | events/s (1 worker) | CPU µs/event | TTFE p50 / p99 (ms) | TTFE overhead (ms) "
        f"| RSS idle -> peak, {args.streams} streams (MiB) |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        table.append(
            f"| {r.path} | {r.events_per_s:,.0f} | {r.cpu_us_per_event:.1f} | "
            f"{r.ttfe_p50_ms:.2f} / {r.ttfe_p99_ms:.2f} | {r.overhead_ms:.2f} | "
            f"{r.rss_base_mib:.1f} -> {r.rss_peak_mib:.1f} |"
        )
    return table


def command() -> str:
    exe = (
        os.path.relpath(sys.executable, ROOT) if sys.executable.startswith(str(ROOT)) else "python"
    )
    return shlex.join([exe, "bench/gateway.py", *sys.argv[1:]])


def write_section(text: str) -> None:
    """Replace the "## gateway" section of RESULTS.md, keeping the others."""
    old = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n"
    section = re.compile(r"^## gateway\n.*?(?=^## |\Z)", re.M | re.S)
    if section.search(old):
        new = section.sub(lambda _: text, old, count=1)
    else:
        new = old.rstrip("\n") + "\n\n" + text
    RESULTS.write_text(new)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=5.0, help="length of each throughput run")
    ap.add_argument("--conns", type=int, default=16, help="connections in throughput runs")
    ap.add_argument("--requests", type=int, default=200, help="sequential requests for TTFE")
    ap.add_argument("--streams", type=int, default=200, help="concurrent streams for RSS")
    ap.add_argument("--no-write", action="store_true", help="do not rewrite bench/RESULTS.md")
    args = ap.parse_args()

    load_before = loadavg()
    with fake_upstream() as (url, _proc):
        rows = asyncio.run(run(args, url))
    table = render(rows, args)
    notes = [f"- {r.path}: " + "; ".join(r.notes) for r in rows]
    print("\n".join(table))
    print("\n".join(notes))
    if not args.no_write:
        now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
        text = "\n".join(
            [
                "## gateway",
                "",
                "`tokenwire serve` (granian, ASGI, one worker, HTTP/1.1 on 127.0.0.1) measured "
                "by a raw asyncio client in another process. *events/s*: "
                f"{args.conns} keep-alive connections streaming long replies (demo "
                "`max_tokens` 2000; fake upstream 2000 words) back to back for "
                f"{args.seconds:g} s. *CPU µs/event*: user+system CPU of the gateway's "
                "processes (`/proc/<pid>/stat`) over those events. *TTFE*: request written to "
                f"first `content.delta` read, {args.requests} sequential requests on one "
                "connection; the overhead is the demo's TTFE itself (its model work is "
                "~30 µs), and for the upstream path TTFE via the gateway minus TTFE of the "
                f"same fake upstream called directly. *RSS*: worker VmRSS sampled every 20 ms "
                f"while {args.streams} paced streams (100 tokens, 20 ms apart) are open. The "
                "fake upstream (`tokenwire.testing.upstream.FakeUpstream`, one HTTP chunk per "
                "event) runs in a process of its own.",
                "",
                f"- date: {now}",
                f"- python: {platform.python_version()}, granian "
                f"{_version('granian')}, starlette {_version('starlette')}",
                f"- machine: {machine()}; load average before the run: {load_before} "
                f"(other work shares these CPUs; client, gateway and fake upstream too)",
                f"- command: `{command()}`",
                "",
                *table,
                "",
                *notes,
                "",
            ]
        )
        write_section(text + "\n")
        print(f"wrote the '## gateway' section of {RESULTS.relative_to(ROOT)}")
    return 0


def _version(name: str) -> str:
    from importlib.metadata import version

    try:
        return version(name)
    except Exception:
        return "?"


if __name__ == "__main__":
    raise SystemExit(main())
