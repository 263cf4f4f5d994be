"""Measuring tools: ``tokenwire bench``, the full benches under ``bench/`` and the fault tests.

Everything here runs on the user's machine from the installed package (no
``bench/`` files needed) and talks to loopback only:

- **process probes** read ``/proc`` (Linux): CPU seconds of a process tree
  (``/proc/<pid>/stat``), ``VmRSS``/``VmHWM`` (``/proc/<pid>/status``), open
  sockets (``/proc/<pid>/fd``);
- ``ServedProcess`` runs a server (``tokenwire serve``, or any other command)
  in its own process group on a free 127.0.0.1 port, times its start-up (spawn
  to the first ``200`` on its health route) and always stops it;
- ``fake_upstream_process`` runs ``tokenwire.testing.upstream.FakeUpstream`` in
  a process of its own, scripted per upstream model name;
- a raw asyncio HTTP/1.1 client (``exchange``) that reads a chunked stream
  with no SSE parsing beyond counting frames, so the client costs little;
- the two quick benchmarks of ``tokenwire bench``: ``decode_bench`` and
  ``gateway_bench``.

Nothing here is imported by the gateway or the protocol core.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import platform
import random
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

__all__ = [
    "DecodeResult",
    "Exchange",
    "FIRST_OPENAI",
    "FIRST_STANDARD",
    "GatewayResult",
    "GatewayRow",
    "MEDIA_TYPE",
    "ServedProcess",
    "UpstreamProcess",
    "children",
    "connect",
    "cpu_seconds",
    "decode_bench",
    "decode_body",
    "exchange",
    "fake_upstream_process",
    "first_chunk_times",
    "free_port",
    "gateway_argv",
    "gateway_bench",
    "gateway_config",
    "loadavg",
    "machine",
    "open_fds",
    "open_sockets",
    "openai_request",
    "percentile",
    "rss_kib",
    "serve_gateway",
    "standard_request",
    "status_kib",
    "stream_concurrently",
    "tree",
    "words",
]

MEDIA_TYPE: Final = "application/llm-request+json"
_TICKS: Final = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

#: Marks the first content frame of a standard stream.
FIRST_STANDARD: Final = re.compile(rb"event: content\.delta")
#: Marks the first OpenAI chunk carrying text (``"content": "x"``, with or without the space).
FIRST_OPENAI: Final = re.compile(rb'"content": ?"[^"]')


# --- the machine --------------------------------------------------------------------------


def free_port() -> int:
    """A TCP port that was free on 127.0.0.1 a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def machine() -> str:
    """CPU model, CPU count and kernel, for the header of a results table."""
    cpu = platform.processor() or "unknown CPU"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return f"{cpu}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()}"


def loadavg() -> str:
    """The 1, 5 and 15 minute load averages, or ``"?"`` off Linux."""
    with contextlib.suppress(OSError):
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    return "?"


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values`` by nearest rank; 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# --- process probes (/proc) ---------------------------------------------------------------


def children(pid: int) -> list[int]:
    """Every descendant of ``pid`` (a server's worker processes), depth first."""
    out: list[int] = []
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError):
                for child in (task / "children").read_text().split():
                    out += [int(child), *children(int(child))]
    return out


def tree(pid: int) -> list[int]:
    """``pid`` and all its descendants."""
    return [pid, *children(pid)]


def cpu_seconds(pids: Sequence[int]) -> float:
    """User + system CPU seconds the processes have used so far (gone ones count 0)."""
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime, in clock ticks
    return total / _TICKS


def status_kib(pid: int, key: str = "VmRSS") -> int:
    """A ``kB`` field of ``/proc/<pid>/status`` (``VmRSS``, ``VmHWM``...); 0 if absent."""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def rss_kib(pids: int | Sequence[int]) -> int:
    """Resident set size in KiB of one process, or the sum over several."""
    if isinstance(pids, int):
        return status_kib(pids)
    return sum(status_kib(pid) for pid in pids)


def open_fds(pid: int) -> int:
    """Open file descriptors of ``pid``."""
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def open_sockets(pid: int) -> int:
    """Open sockets (TCP connections and listeners, socket pairs) of ``pid``."""
    count = 0
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:"):
                    count += 1
    return count


# --- servers in their own process group ---------------------------------------------------


def _http_get_status(port: int, path: str, timeout: float = 1.0) -> int:
    """The status of ``GET path`` on 127.0.0.1:port (0 when nothing answered)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(
                f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode()
            )
            head = s.recv(64)
    except OSError:
        return 0
    parts = head.split(b" ", 2)
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0


class ServedProcess:
    """A server command on 127.0.0.1 in its own process group; always stopped on exit.

    ``start`` spawns ``argv`` and polls ``GET ready_path`` every 10 ms until it
    answers ``200``; ``started_s`` is the time from spawn to that answer (the
    start-up time a user waits). ``stop`` sends SIGINT, then kills the whole
    process group (workers included) if it does not exit in ``grace_s``.
    Raises ``RuntimeError`` with the process's stderr when it dies or does not
    come up within ``timeout_s``.
    """

    def __init__(
        self,
        argv: Sequence[str],
        port: int,
        *,
        ready_path: str = "/healthz",
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        timeout_s: float = 60.0,
        grace_s: float = 10.0,
    ) -> None:
        self.argv = list(argv)
        self.port = port
        self.ready_path = ready_path
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.timeout_s = timeout_s
        self.grace_s = grace_s
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_s = 0.0
        self._tmp = tempfile.TemporaryDirectory(prefix="tokenwire-bench-")
        self.stderr_path = Path(self._tmp.name) / "stderr"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None, "not started"
        return self.proc.pid

    def pids(self) -> list[int]:
        """The server and its workers, now."""
        return tree(self.pid)

    def worker(self) -> int:
        """The last-spawned process of the tree (granian's worker; the server itself alone)."""
        return self.pids()[-1]

    def stderr(self) -> str:
        with contextlib.suppress(OSError):
            return self.stderr_path.read_text(errors="replace")
        return ""

    def start(self) -> ServedProcess:
        """Spawn and wait until ready. Returns ``self``."""
        with open(self.stderr_path, "wb") as err:
            t0 = time.perf_counter()
            self.proc = subprocess.Popen(
                self.argv,
                env=self.env,
                cwd=self.cwd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                start_new_session=True,
            )
        deadline = t0 + self.timeout_s
        try:
            while True:
                if _http_get_status(self.port, self.ready_path) == 200:
                    self.started_s = time.perf_counter() - t0
                    return self
                if self.proc.poll() is not None:
                    raise RuntimeError(f"{self.argv[0]} exited at start:\n{self.stderr()[-4000:]}")
                if time.perf_counter() > deadline:
                    raise RuntimeError(f"{self.argv[0]} did not come up:\n{self.stderr()[-4000:]}")
                time.sleep(0.01)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop the server and every process of its group. Idempotent."""
        proc = self.proc
        if proc is None:
            return
        self.proc = None
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=self.grace_s)
            except subprocess.TimeoutExpired:
                pass
        # Workers live in the server's process group: none may outlive it.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=self.grace_s)

    def close(self) -> None:
        """Stop, and remove the stderr file."""
        self.stop()
        self._tmp.cleanup()

    def __enter__(self) -> ServedProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def gateway_argv(config_path: str | None, port: int, *, workers: int = 1) -> list[str]:
    """The ``tokenwire serve`` command line for ``config_path`` on 127.0.0.1:port."""
    argv = [sys.executable, "-m", "tokenwire", "serve", "--host", "127.0.0.1"]
    argv += ["--port", str(port), "--workers", str(workers)]
    if config_path is not None:
        argv += ["--config", config_path]
    return argv


@contextlib.contextmanager
def serve_gateway(
    config: str | None = None,
    *,
    workers: int = 1,
    env: Mapping[str, str] | None = None,
    timeout_s: float = 60.0,
) -> Iterator[ServedProcess]:
    """``tokenwire serve`` with ``config`` (TOML text; ``None``: demo only) on a free port.

    Yields the running ``ServedProcess``; stops it (and its workers) on exit.
    """
    with tempfile.TemporaryDirectory(prefix="tokenwire-gw-") as tmp:
        path = None
        if config is not None:
            path = str(Path(tmp) / "gateway.toml")
            Path(path).write_text(config)
        port = free_port()
        full_env = {**os.environ, **(env or {})}
        served = ServedProcess(
            gateway_argv(path, port, workers=workers), port, env=full_env, timeout_s=timeout_s
        )
        with served:
            yield served


def gateway_config(models: Mapping[str, Mapping[str, Any]], server: Mapping[str, Any] = {}) -> str:  # noqa: B006 - never mutated
    """TOML for ``tokenwire serve``: ``[server]`` keys and one ``[[models]]`` table per name."""
    lines: list[str] = []
    if server:
        lines.append("[server]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in server.items()]
        lines.append("")
    for name, options in models.items():
        lines += ["[[models]]", f"name = {json.dumps(name)}"]
        for key, value in options.items():
            if isinstance(value, Mapping):
                items = ", ".join(f"{k} = {json.dumps(v)}" for k, v in value.items())
                lines.append(f"{key} = {{ {items} }}")
            else:
                lines.append(f"{key} = {json.dumps(value)}")
        lines.append("")
    return "\n".join(lines)


#: The fake upstream process: a FakeUpstream whose script is chosen by the
#: ``model`` of each request (what the gateway sends as ``upstream_model``).
_FAKE_UPSTREAM: Final = r"""
import asyncio, json, sys
try:
    import uvloop
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
except ImportError:
    pass
import functools
# A listen backlog of 100 (asyncio's default) drops the SYNs of a thousand
# connections opened at once, and each dropped one costs a 1 s retransmit.
asyncio.start_server = functools.partial(asyncio.start_server, backlog=4096)
from tokenwire.testing.upstream import FakeUpstream, Fault, Script
vendor, specs = sys.argv[1], json.loads(sys.argv[2])
fault = Fault(**json.loads(sys.argv[3])) if len(sys.argv) > 3 else None
scripts = {name: Script(**spec) for name, spec in specs.items()}
default = next(iter(scripts.values()), Script())
def pick(request):
    try:
        return scripts.get(request.json().get("model"), default)
    except Exception:
        return default
fake = FakeUpstream(vendor, pick, fault=fault).start()
# Recorded requests would pile up over a long run: keep none.
fake.requests = type("NoList", (list,), {"append": lambda self, item: None})()
print(fake.url, flush=True)
sys.stdin.read()
fake.stop()
"""


@dataclass
class UpstreamProcess:
    """A running fake upstream: its URL, port and process."""

    url: str
    port: int
    proc: subprocess.Popen[str]

    @property
    def pid(self) -> int:
        return self.proc.pid


def words(n: int, prefix: str = "word") -> str:
    """``n`` distinct words joined by spaces: a script text of ``n`` chunks."""
    return " ".join(f"{prefix}{i}" for i in range(n))


@contextlib.contextmanager
def fake_upstream_process(
    scripts: Mapping[str, Mapping[str, Any]],
    vendor: str = "openai",
    fault: Mapping[str, Any] | None = None,
) -> Iterator[UpstreamProcess]:
    """``FakeUpstream(vendor)`` in its own process, scripted by upstream model name.

    ``scripts`` maps a model name to ``Script`` keyword arguments (``text``,
    ``delay_s``...); an unknown name gets the first script. The process ends
    when the context exits (its stdin closes).
    """
    argv = [sys.executable, "-c", _FAKE_UPSTREAM, vendor, json.dumps(scripts)]
    if fault is not None:
        argv.append(json.dumps(fault))
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        if not url.startswith("http://"):
            raise RuntimeError("the fake upstream did not start")
        yield UpstreamProcess(url, int(url.rsplit(":", 1)[1]), proc)
    finally:
        with contextlib.suppress(Exception):
            assert proc.stdin is not None
            proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


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


# --- tokenwire bench: decode --------------------------------------------------------------

#: Short tokens as an LLM emits them: ASCII words, punctuation, a JSON escape, non-ASCII.
_TOKENS: Final = [
    " the",
    " model",
    " stream",
    "ing",
    ",",
    ".",
    "\n",
    ' "SSE"',
    " café",
    " 東京",
    " 🙂",
]


@dataclass
class DecodeResult:
    """Decoding one standard body with ``tokenwire.iter_events`` (best of ``repeat``)."""

    events: int
    body_bytes: int
    best_s: float
    baseline_s: float  # split on blank lines + json.loads: the floor for any SSE+JSON reader

    @property
    def events_per_s(self) -> float:
        return self.events / self.best_s

    @property
    def mb_per_s(self) -> float:
        return self.body_bytes / self.best_s / 1e6


def decode_body(events: int, seed: int = 20240601) -> tuple[bytes, list[bytes]]:
    """A standard body of ``events`` content deltas (plus framing events), and the same
    body cut into random 1-4096-byte chunks with a fixed seed."""
    from .events import dump
    from .writer import Writer

    rng = random.Random(seed)
    writer = Writer(model="bench", request_id="bench-1")
    out = writer.start()
    for _ in range(events):
        out += writer.text(rng.choice(_TOKENS), 0)
    out += writer.stop(0, "end_turn") + writer.usage(10, events) + writer.end()
    body = b"".join(dump(event) for event in out)
    chunks, pos = [], 0
    while pos < len(body):
        step = rng.randint(1, 4096)
        chunks.append(body[pos : pos + step])
        pos += step
    return body, chunks


def decode_bench(events: int = 20_000, repeat: int = 3) -> DecodeResult:
    """Time ``tokenwire.iter_events`` over a body of ``events`` deltas in random chunks."""
    from ._iter import iter_events

    body, chunks = decode_body(events)
    best = baseline = float("inf")
    count = 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        count = sum(1 for _ in iter_events(chunks))
        best = min(best, time.perf_counter() - t0)
        t0 = time.perf_counter()
        for block in b"".join(chunks).split(b"\n\n"):
            i = block.find(b"data: ")
            if i >= 0:
                json.loads(block[i + 6 :])
        baseline = min(baseline, time.perf_counter() - t0)
    return DecodeResult(events=count, body_bytes=len(body), best_s=best, baseline_s=baseline)


# --- tokenwire bench: gateway -------------------------------------------------------------


@dataclass
class GatewayRow:
    """One path through the gateway: throughput, CPU, first-chunk time."""

    path: str
    events: int = 0
    seconds: float = 0.0
    cpu_s: float = 0.0
    ttfe_ms: list[float] = field(default_factory=list)
    direct_ms: list[float] = field(default_factory=list)

    @property
    def events_per_s(self) -> float:
        return self.events / self.seconds if self.seconds else 0.0

    @property
    def cpu_us_per_event(self) -> float:
        return self.cpu_s / self.events * 1e6 if self.events else 0.0

    @property
    def ttfe_p50_ms(self) -> float:
        return statistics.median(self.ttfe_ms) if self.ttfe_ms else 0.0

    @property
    def added_ms(self) -> float:
        """First-chunk time via the gateway minus the upstream's own (the demo: all of it)."""
        direct = statistics.median(self.direct_ms) if self.direct_ms else 0.0
        return self.ttfe_p50_ms - direct


@dataclass
class GatewayResult:
    """What ``gateway_bench`` measured."""

    start_s: float = 0.0
    idle_rss_kib: int = 0
    rows: list[GatewayRow] = field(default_factory=list)


async def _throughput(
    port: int, request: bytes, conns: int, seconds: float, pids: Sequence[int]
) -> tuple[int, float, float]:
    """Frames received, wall seconds and gateway CPU seconds while ``conns`` connections
    stream back to back for ``seconds`` (a stream cut at the deadline counts what arrived)."""
    received = [0]

    async def worker() -> None:
        reader, writer = await connect(port)
        try:
            while True:
                await exchange(reader, writer, request, counter=received)
        finally:
            writer.close()

    tasks = [asyncio.ensure_future(worker()) for _ in range(conns)]
    await asyncio.sleep(0.3)  # every connection is streaming
    cpu0, n0, t0 = cpu_seconds(pids), received[0], time.perf_counter()
    await asyncio.sleep(seconds)
    cpu1, n1, t1 = cpu_seconds(pids), received[0], time.perf_counter()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return n1 - n0, t1 - t0, cpu1 - cpu0


def gateway_bench(
    *,
    seconds: float = 2.0,
    conns: int = 8,
    requests: int = 50,
    upstream: bool = True,
    step: Callable[[str], None] = lambda _label: None,
) -> GatewayResult:
    """Run ``tokenwire serve`` (one worker) and measure it, quickly.

    Start-up time and idle RSS (server + worker); for the demo model at zero
    delay and, with ``upstream``, the OpenAI translator in front of a fake
    upstream process: frames/s over ``conns`` connections for ``seconds``, gateway
    CPU µs per frame, and the first content frame's time (median of
    ``requests``; for the upstream path also the upstream called directly).
    ``step(label)`` is called as each phase begins (for a progress display).
    """
    result = GatewayResult()
    with contextlib.ExitStack() as stack:
        models: dict[str, dict[str, Any]] = {}
        fake: UpstreamProcess | None = None
        if upstream:
            step("starting a fake OpenAI upstream")
            fake = stack.enter_context(
                fake_upstream_process(
                    {"bulk": {"text": words(2000)}, "short": {"text": "Hello there, friend."}}
                )
            )
            for name in ("bulk", "short"):
                models[f"fake-{name}"] = {
                    "provider": "openai",
                    "base_url": fake.url + "/v1",
                    "upstream_model": name,
                }
        step("starting tokenwire serve")
        gw = stack.enter_context(serve_gateway(gateway_config(models) if models else None))
        result.start_s = gw.started_s
        time.sleep(0.3)
        result.idle_rss_kib = rss_kib(gw.pids())
        pids = gw.pids()

        async def run() -> None:
            demo = GatewayRow("demo model, zero delay")
            step("demo: throughput")
            bulk = standard_request(gw.port, "demo", parameters={"max_tokens": 2000})
            demo.events, demo.seconds, demo.cpu_s = await _throughput(
                gw.port, bulk, conns, seconds, pids
            )
            step("demo: time to first chunk")
            one = standard_request(gw.port, "demo", parameters={"max_tokens": 1})
            demo.ttfe_ms = [t * 1e3 for t in await first_chunk_times(gw.port, one, requests)]
            result.rows.append(demo)
            if fake is None:
                return
            row = GatewayRow("openai translator <- fake upstream")
            step("upstream: throughput")
            bulk = standard_request(gw.port, "fake-bulk")
            row.events, row.seconds, row.cpu_s = await _throughput(
                gw.port, bulk, conns, seconds, pids
            )
            step("upstream: time to first chunk")
            short = standard_request(gw.port, "fake-short")
            row.ttfe_ms = [t * 1e3 for t in await first_chunk_times(gw.port, short, requests)]
            direct = openai_request(fake.port, "short")
            times = await first_chunk_times(fake.port, direct, requests, first=FIRST_OPENAI)
            row.direct_ms = [t * 1e3 for t in times]
            result.rows.append(row)

        asyncio.run(run())
    return result
