"""Resume load test: many concurrent resumable streams through one gateway with Redis.

Starts a ``redis-server`` (``--save '' --appendonly no``) and one ``tokenwire
serve`` worker whose ``[resume]`` store is that Redis, both on 127.0.0.1, then
runs ``--streams`` clients at once. Each client:

1. POSTs a resumable demo request (``"tokenwire:resumable": true``, paced with
   ``"tokenwire:demo": {"delay_ms": N}``, ``max_tokens`` tokens) and hangs up
   after a random number of events, mid-stream;
2. after a random pause (0-300 ms) opens a new connection and resumes with
   ``GET /v1/streams/{request_id}`` and ``Last-Event-ID: <last seq>``, reading
   to ``stream.end``.

Afterwards every joined stream is checked: seqs 0..n without gap or repeat,
exactly the events and text of the demo's deterministic reply
(``tokenwire.gateway.providers.demo.plan_reply``), ``stream.end`` last, and
``tokenwire.validate`` passes. Measured over the load phase: events/s received
by the clients, Redis commands/s (``INFO stats`` ``total_commands_processed``
delta; peak ``instantaneous_ops_per_sec`` sampled every 0.5 s), Redis commands
per event, gateway CPU, and Redis memory.

It prints a table and rewrites the "## resume" section of bench/RESULTS.md.
The run is bounded: every stream has a deadline, and so has the whole run.

Run: ``.venv/bin/python bench/resume_load.py [--streams 500] [--tokens 100]
[--delay-ms 20] [--no-write]``. Needs ``redis-server`` on PATH (Debian:
``apt-get install redis-server``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import json
import os
import platform
import random
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import redis.asyncio as aioredis

import tokenwire
from tokenwire import events as ev
from tokenwire import request as rq
from tokenwire.gateway.providers.demo import plan_reply

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "RESULTS.md"
MEDIA = rq.MEDIA_TYPE
TICKS = os.sysconf("SC_CLK_TCK")
STREAM_DEADLINE_S = 120.0
RUN_DEADLINE_S = 600.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def machine() -> str:
    cpu = "unknown CPU"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return f"{cpu}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()}"


def loadavg() -> str:
    with contextlib.suppress(OSError):
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    return "?"


def children(pid: int) -> list[int]:
    out: list[int] = []
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            for child in (task / "children").read_text().split():
                out += [int(child), *children(int(child))]
    return out


def cpu_seconds(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
    return total / TICKS


def _stop(proc: subprocess.Popen[bytes], sig: int = signal.SIGINT) -> None:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _wait_port(port: int, proc: subprocess.Popen[bytes], what: str, log: Path) -> None:
    deadline = time.monotonic() + 60
    while True:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port)):
            return
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not start: {log.read_text()[-2000:]}")
        time.sleep(0.05)


@contextlib.contextmanager
def redis_server(workdir: Path) -> Iterator[int]:
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server is not installed (Debian: apt-get install redis-server)")
    port = free_port()
    log = workdir / "redis.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly"]
            + ["no", "--dir", str(workdir), "--maxclients", "10000"],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        _wait_port(port, proc, "redis-server", log)
        yield port
    finally:
        _stop(proc, signal.SIGKILL)


@contextlib.contextmanager
def gateway(workdir: Path, redis_port: int) -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    port = free_port()
    config = workdir / "gateway.toml"
    config.write_text(
        f'[resume]\nbackend = "redis"\nurl = "redis://127.0.0.1:{redis_port}/0"\ngrace_s = 30.0\n'
    )
    argv = [sys.executable, "-m", "tokenwire", "serve", "--port", str(port)]
    argv += ["--config", str(config), "--workers", "1"]
    log = workdir / "gateway.stderr"
    with open(log, "wb") as err:
        proc = subprocess.Popen(
            argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True
        )
    try:
        _wait_port(port, proc, "the gateway", log)
        yield port, proc
    finally:
        _stop(proc)


# --- one client ----------------------------------------------------------------------------


@dataclass
class Outcome:
    request_id: str
    question: str
    cut_at: int  # events read before hanging up
    part: bytes = b""
    rest: bytes = b""
    status: int = 0
    problem: str = ""


def _post(port: int, body: bytes) -> bytes:
    head = (
        f"POST /v1/stream HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: {MEDIA}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def _get(port: int, request_id: str, after: int, token: str) -> bytes:
    return (
        f"GET /v1/streams/{request_id} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Accept: text/event-stream\r\nLast-Event-ID: {after}\r\n"
        f"Tokenwire-Resume-Token: {token}\r\n\r\n"
    ).encode()


async def _status(reader: asyncio.StreamReader) -> int:
    """Read one HTTP/1.1 response head; returns its status (the body is read by the caller)."""
    return (await _head(reader))[0]


async def _head(reader: asyncio.StreamReader) -> tuple[int, str]:
    """Read one HTTP/1.1 response head: its status and its resume token (or "")."""
    head = await reader.readuntil(b"\r\n\r\n")
    token = re.search(rb"(?im)^tokenwire-resume-token: *(\S+)", head)
    return int(head.split(b" ", 2)[1]), token.group(1).decode() if token else ""


async def _read_chunk(reader: asyncio.StreamReader) -> bytes | None:
    size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
    if size == 0:
        await reader.readuntil(b"\r\n")
        return None
    return (await reader.readexactly(size + 2))[:-2]


def _whole_frames(raw: bytes, count: int) -> bytes:
    """The first ``count`` event frames of ``raw`` (comments skipped)."""
    out = b""
    n = 0
    for frame in raw.split(b"\n\n")[:-1]:
        if not frame.startswith(b"event:"):
            continue
        out += frame + b"\n\n"
        n += 1
        if n == count:
            break
    return out


_ID = re.compile(rb"^id: (\d+)$", re.M)


async def one_stream(
    port: int, outcome: Outcome, delay_ms: int, tokens: int, rng: random.Random
) -> None:
    body = json.dumps(
        {
            "version": "1.0",
            "stream": True,
            "model": "demo",
            "messages": [{"role": "user", "content": outcome.question}],
            "metadata": {"request_id": outcome.request_id},
            "extensions": {
                "tokenwire:resumable": True,
                "tokenwire:demo": {"delay_ms": delay_ms, "tokens": tokens},
            },
        }
    ).encode()
    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 22)
    raw = b""
    try:
        writer.write(_post(port, body))
        status, token = await _head(reader)
        if status != 200:
            outcome.problem = f"POST answered {status}"
            return
        while _whole_frames(raw, outcome.cut_at).count(b"\nid: ") < outcome.cut_at:
            chunk = await _read_chunk(reader)
            if chunk is None:
                break
            raw += chunk
    finally:
        writer.transport.abort()  # hang up mid-stream
    outcome.part = _whole_frames(raw, outcome.cut_at)
    ids = _ID.findall(outcome.part)
    if len(ids) != outcome.cut_at:
        outcome.problem = f"read {len(ids)} events before the hang-up, wanted {outcome.cut_at}"
        return
    await asyncio.sleep(rng.uniform(0, 0.3))
    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 22)
    try:
        writer.write(_get(port, outcome.request_id, int(ids[-1]), token))
        outcome.status = await _status(reader)
        if outcome.status != 200:
            outcome.problem = f"resume answered {outcome.status}"
            return
        parts = []
        while (chunk := await _read_chunk(reader)) is not None:
            parts.append(chunk)
        outcome.rest = b"".join(parts)
    finally:
        writer.close()


async def plain_stream(port: int, question: str, delay_ms: int, tokens: int) -> int:
    """The baseline: the same request, not resumable, read whole. Returns its events."""
    body = json.dumps(
        {
            "version": "1.0",
            "stream": True,
            "model": "demo",
            "messages": [{"role": "user", "content": question}],
            "extensions": {"tokenwire:demo": {"delay_ms": delay_ms, "tokens": tokens}},
        }
    ).encode()
    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 22)
    try:
        writer.write(_post(port, body))
        if await _status(reader) != 200:
            return 0
        events = 0
        while (chunk := await _read_chunk(reader)) is not None:
            events += chunk.count(b"\nid: ")
        return events
    finally:
        writer.close()


def check(outcome: Outcome, tokens: int) -> tuple[int, str]:
    """(events in the joined stream, problem or "")."""
    if outcome.problem:
        return 0, outcome.problem
    joined = outcome.part + outcome.rest
    events = list(tokenwire.iter_events(joined))
    seqs = [e.seq for e in events]
    if seqs != list(range(len(events))):
        return len(events), "seqs are not 0..n: an event was lost or repeated"
    request = rq.build(
        model="demo",
        messages=outcome.question,
        extensions={"tokenwire:demo": {"tokens": tokens}},
    )
    reply = plan_reply(request)
    text = "".join(e.delta.text for e in events if isinstance(e, ev.ContentDelta))
    if text != "".join(reply.tokens):
        return len(events), "the joined text differs from the demo's reply"
    if len(events) != len(reply.tokens) + 4:  # start, deltas, stop, usage, end
        return len(events), f"{len(events)} events, expected {len(reply.tokens) + 4}"
    if not isinstance(events[-1], ev.StreamEnd):
        return len(events), "no stream.end"
    report = tokenwire.validate([joined])
    if not report.ok:
        return len(events), f"invalid: {report.violations[0]}"
    return len(events), ""


# --- the run -------------------------------------------------------------------------------


@dataclass
class Result:
    streams: int
    ok: int
    problems: list[str]
    events: int
    seconds: float
    commands: int
    peak_ops: int
    gateway_cpu: float
    redis_memory_peak: str
    baseline_events: int
    baseline_seconds: float
    baseline_cpu: float


async def run(args: argparse.Namespace, port: int, redis_port: int, pids: list[int]) -> Result:
    rng = random.Random(args.seed)
    stats = aioredis.Redis(host="127.0.0.1", port=redis_port)
    try:
        # Warm up imports, scripts and pools.
        warm = [Outcome(f"warm-{i}", f"Warm-up question {i}?", cut_at=3) for i in range(5)]
        await asyncio.gather(*(one_stream(port, o, 5, 20, rng) for o in warm))
        outcomes = [
            Outcome(
                f"load-{i}-{rng.getrandbits(32):08x}",
                f"Question {i}: how do resumable streams survive a dropped connection?",
                cut_at=rng.randint(2, max(3, args.tokens // 2)),
            )
            for i in range(args.streams)
        ]
        peak = 0
        sampling = True

        async def sample() -> int:
            nonlocal peak
            calls = 0
            while sampling:
                info = await stats.info("stats")
                calls += 1
                peak = max(peak, int(info["instantaneous_ops_per_sec"]))
                await asyncio.sleep(0.5)
            return calls

        before = int((await stats.info("stats"))["total_commands_processed"])
        cpu0 = cpu_seconds(pids)
        sampler = asyncio.ensure_future(sample())
        started = time.perf_counter()
        async with asyncio.timeout(RUN_DEADLINE_S):
            results = await asyncio.gather(
                *(
                    asyncio.wait_for(
                        one_stream(port, o, args.delay_ms, args.tokens, rng), STREAM_DEADLINE_S
                    )
                    for o in outcomes
                ),
                return_exceptions=True,
            )
        seconds = time.perf_counter() - started
        sampling = False
        sample_calls = await sampler
        cpu1 = cpu_seconds(pids)
        after = int((await stats.info("stats"))["total_commands_processed"])
        memory = (await stats.info("memory"))["used_memory_peak_human"]
        # The baseline: the same streams, not resumable, each read whole.
        await asyncio.sleep(1.0)
        base_cpu0 = cpu_seconds(pids)
        base_started = time.perf_counter()
        async with asyncio.timeout(RUN_DEADLINE_S):
            counts = await asyncio.gather(
                *(plain_stream(port, o.question, args.delay_ms, args.tokens) for o in outcomes)
            )
        baseline_seconds = time.perf_counter() - base_started
        baseline_cpu = cpu_seconds(pids) - base_cpu0
    finally:
        await stats.aclose()
    problems = []
    events = 0
    ok = 0
    for outcome, result in zip(outcomes, results, strict=True):
        if isinstance(result, BaseException):
            problems.append(f"{outcome.request_id}: {type(result).__name__}: {result}")
            continue
        count, problem = check(outcome, args.tokens)
        events += count
        if problem:
            problems.append(f"{outcome.request_id}: {problem}")
        else:
            ok += 1
    # INFO calls of this script count as commands too (two around the run, the samples).
    commands = after - before - sample_calls - 1
    return Result(
        streams=len(outcomes),
        ok=ok,
        problems=problems,
        events=events,
        seconds=seconds,
        commands=commands,
        peak_ops=peak,
        gateway_cpu=cpu1 - cpu0,
        redis_memory_peak=str(memory),
        baseline_events=sum(counts),
        baseline_seconds=baseline_seconds,
        baseline_cpu=baseline_cpu,
    )


def render(result: Result, args: argparse.Namespace) -> list[str]:
    per_stream = args.tokens + 4
    generated = max(1, result.streams * per_stream)
    rows = [
        "| run | streams | complete and exact | events received | wall time (s) | events/s "
        "| gateway CPU µs/event | Redis commands/s (avg / peak) | Redis commands/event "
        "| Redis used_memory_peak |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        f"| resumable, Redis store, each hung up and resumed once | {result.streams} "
        f"| {result.ok} | {result.events:,} | {result.seconds:.2f} "
        f"| {result.events / result.seconds:,.0f} "
        f"| {result.gateway_cpu / generated * 1e6:.0f} "
        f"| {result.commands / result.seconds:,.0f} / {result.peak_ops:,} "
        f"| {result.commands / generated:.2f} | {result.redis_memory_peak} |",
        f"| baseline: the same streams, not resumable, read whole | {result.streams} | - "
        f"| {result.baseline_events:,} | {result.baseline_seconds:.2f} "
        f"| {result.baseline_events / result.baseline_seconds:,.0f} "
        f"| {result.baseline_cpu / max(1, result.baseline_events) * 1e6:.0f} | - | - | - |",
    ]
    return rows


def command() -> str:
    argv = [".venv/bin/python", "bench/resume_load.py", *sys.argv[1:]]
    return " ".join(shlex.quote(a) for a in argv if a != "--no-write")


def write_section(text: str) -> None:
    """Replace the "## resume" section of RESULTS.md, keeping the others."""
    old = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n"
    section = re.compile(r"^## resume\n.*?(?=^## |\Z)", re.M | re.S)
    if section.search(old):
        new = section.sub(lambda _: text, old, count=1)
    else:
        new = old.rstrip("\n") + "\n\n" + text
    RESULTS.write_text(new)


def _hiredis() -> bool:
    from redis.utils import HIREDIS_AVAILABLE

    return bool(HIREDIS_AVAILABLE)


def _version(name: str) -> str:
    from importlib.metadata import version

    try:
        return version(name)
    except Exception:
        return "?"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--streams", type=int, default=500)
    ap.add_argument("--tokens", type=int, default=100, help="tokens of each demo reply")
    ap.add_argument("--delay-ms", type=int, default=20, help="the demo's pace between events")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--no-write", action="store_true", help="do not rewrite bench/RESULTS.md")
    args = ap.parse_args()
    load = loadavg()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        with redis_server(workdir) as redis_port, gateway(workdir, redis_port) as (port, proc):
            pids = [proc.pid, *children(proc.pid)]
            result = asyncio.run(run(args, port, redis_port, pids))
            redis_version = subprocess.run(
                ["redis-server", "--version"], capture_output=True, text=True
            ).stdout.split()[2]
    rows = render(result, args)
    parser = "hiredis" if _hiredis() else "pure-Python"
    print("\n".join(rows))
    for problem in result.problems[:20]:
        print("PROBLEM", problem)
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    text = "\n".join(
        [
            "## resume",
            "",
            f"{args.streams} concurrent resumable streams through one `tokenwire serve` worker "
            "whose `[resume]` store is a local `redis-server` (no persistence). Each client "
            "POSTs a demo request (`max_tokens` "
            f"{args.tokens}, `delay_ms` {args.delay_ms}: {args.tokens + 4} events), hangs up "
            "after a random 2..tokens/2 events, waits 0-300 ms and resumes with "
            "`GET /v1/streams/{request_id}` + `Last-Event-ID` on a new connection, reading to "
            "`stream.end`. Every joined stream is then checked: seqs 0..n without gap or "
            "repeat, exactly the demo's deterministic reply, `stream.end` last, "
            "`tokenwire.validate` clean. *events/s*: events received by the clients (both "
            "connections) over the wall time of the whole run. *Redis commands/s*: "
            "`INFO stats` `total_commands_processed` delta over that time (the script's own "
            "INFO calls subtracted) and the peak `instantaneous_ops_per_sec` sampled every "
            "0.5 s. *commands per event*: that delta over the events generated. Client, "
            "gateway and Redis share the machine.",
            "",
            f"- date: {now}",
            f"- python: {platform.python_version()}, granian {_version('granian')}, "
            f"redis-py {_version('redis')} ({parser} parser), redis-server {redis_version}",
            f"- machine: {machine()}; load average before the run: {load}",
            f"- command: `{command()}`",
            "",
            *rows,
            "",
            f"- lost or repeated events: {'none' if not result.problems else len(result.problems)}"
            f" ({result.ok} of {result.streams} joined streams exact)",
            f"- the gateway's one worker used {result.gateway_cpu:.1f} s of CPU in the "
            f"{result.seconds:.1f} s run: it is the bottleneck here, not Redis. Recording "
            "each event, writing it and reading it back for the resume (redis-py's reply "
            "parsing is the largest part) roughly triples the CPU an event costs; more "
            "workers or replicas share the load (any of them can serve any resume).",
            "",
        ]
    )
    if not args.no_write:
        write_section(text)
        print(f"wrote the '## resume' section of {RESULTS.relative_to(ROOT)}")
    return 0 if not result.problems else 1


if __name__ == "__main__":
    sys.exit(main())
