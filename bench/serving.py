"""Which HTTP/1.1 serving path: granian ASGI, granian RSGI, uvicorn, or tokenwire's own, in one run.

Two parts, each with every peer alive at once and their requests interleaved
(round robin, one request in flight at a time), so that drift in the machine's
load hits all of them alike:

**The serving path alone**: the same tiny SSE app (``_serving_apps.py``) on

- granian ASGI (``--interface asgi --http 1 --loop uvloop``, one worker; what
  ``tokenwire serve`` runs today);
- granian RSGI (``--interface rsgi``: granian's own interface, no ASGI messages);
- uvicorn with httptools and uvloop;
- ``tokenwire.server.http1`` (an asyncio protocol on httptools, uvloop).

For each: time to the first event (raw client, request written to the first
event read, ``--requests`` times) at p50 and p99; CPU per event (one stream of
``--events`` events, one send each, CPU of the server's process tree); KiB per
open stream (``--open`` paced streams held open at once, RSS over idle); and a
never-read storm: ``--storm`` clients that ask for a long stream and read
nothing (a 4 KiB receive buffer) for ``STORM_S`` seconds, with the tree's peak
RSS and ``GET /healthz`` p99 (one keep-alive connection, every 20 ms) during it,
and RSS 5 s after they left. The tiny app has no write deadline: this is what
each server itself buffers for a client that stops reading.

**The gateway**: ``tokenwire serve`` (the demo and an ``openai`` model in front
of the fake upstream) on granian (``engine = "granian"``) and on ``engine =
"h1"``, and the same guarded app on uvicorn (``tokenwire.gateway.serving:app_from_env``).
Added first-token latency through ``openai.OpenAI`` (``_sdk_latency``; direct and
gateway interleaved), CPU per chunk (ten 2,000-chunk streams), KiB per open
stream (``--open`` paced demo streams). granian RSGI has no gateway row: the
gateway is an ASGI app. The storm through the gateway is ``bench/storm.py
--engine ...``.

Writes the "## serving" section of bench/RESULTS.md (keeping its hand-written
"### Choice" subsection). Run: ``.venv/bin/python bench/serving.py [--rounds 3]
[--no-write]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _sdk_latency as sdk  # noqa: E402
from _common import ROOT, header, md_table, write_section  # noqa: E402
from tokenwire.testing import loadgen as lg  # noqa: E402
from tokenwire.testing import processes as tb  # noqa: E402

BENCH = ROOT / "bench"
BIN = Path(sys.executable).parent
STORM_S = 5.0
AFTER_S = 5.0
KEEP = "Choice"

APPS: dict[str, list[str]] = {
    "granian ASGI": [str(BIN / "granian"), "--interface", "asgi", "_serving_apps:asgi_app"],
    "granian RSGI": [str(BIN / "granian"), "--interface", "rsgi", "_serving_apps:rsgi_app"],
    "uvicorn (httptools, uvloop)": [
        sys.executable,
        "-m",
        "uvicorn",
        "_serving_apps:asgi_app",
        "--http",
        "httptools",
        "--loop",
        "uvloop",
        "--no-access-log",
        "--log-level",
        "warning",
    ],
    "tokenwire h1": [sys.executable, str(BENCH / "_serving_apps.py")],
}
GRANIAN_FLAGS = ["--http", "1", "--loop", "uvloop", "--workers", "1", "--no-ws"]
GRANIAN_FLAGS += ["--log-level", "warning", "--backpressure", "4096"]


def app_process(name: str) -> tb.ServedProcess:
    port = tb.free_port()
    argv = list(APPS[name])
    if name.startswith("granian"):
        argv += [*GRANIAN_FLAGS, "--host", "127.0.0.1", "--port", str(port)]
    elif name.startswith("uvicorn"):
        argv += ["--host", "127.0.0.1", "--port", str(port)]
    else:
        argv.append(str(port))
    env = {**os.environ, "PYTHONPATH": str(BENCH)}
    return tb.ServedProcess(argv, port, ready_path="/healthz", env=env, cwd=BENCH)


def stream_request(port: int, n: int, pause_ms: float = 0) -> bytes:
    return (
        f"POST /stream?n={n}&pause_ms={pause_ms:g} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        "Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
    ).encode()


class _AnyEvent:
    def search(self, data: bytes) -> bool:
        return b"event:" in data


ANY_EVENT: object = _AnyEvent()


@dataclass
class PathFigures:
    name: str
    first: list[float] = field(default_factory=list)
    cpu_us: float = 0.0
    kib_per_stream: float = 0.0
    opened: int = 0
    storm_base: float = 0.0
    storm_peak: float = 0.0
    storm_after: float = 0.0
    health_p50: float = 0.0
    health_p99: float = 0.0


async def first_events(procs: dict[str, tb.ServedProcess], n: int, figs: dict[str, PathFigures]):
    conns = {name: await lg.connect(p.port) for name, p in procs.items()}
    try:
        names = list(procs)
        for i in range(n + 5):
            order = names[i % len(names) :] + names[: i % len(names)]
            for name in order:
                reader, writer = conns[name]
                ex = await lg.exchange(
                    reader, writer, stream_request(procs[name].port, 1), first=ANY_EVENT
                )
                if ex.first is None:
                    raise RuntimeError(f"{name}: no event")
                if i >= 5:
                    figs[name].first.append(ex.first - ex.started)
    finally:
        for _, writer in conns.values():
            writer.close()


async def cpu_per_event(proc: tb.ServedProcess, events: int) -> float:
    reader, writer = await lg.connect(proc.port)
    try:
        pids = proc.pids()
        cpu0 = tb.cpu_seconds(pids)
        ex = await lg.exchange(reader, writer, stream_request(proc.port, events), first=ANY_EVENT)
        if ex.frames < events:
            raise RuntimeError(f"short stream: {ex.frames} of {events}")
        return (tb.cpu_seconds(pids) - cpu0) / events * 1e6
    finally:
        writer.close()


async def open_streams(
    port: int, request: bytes, count: int, pids: Callable[[], list[int]]
) -> tuple[float, int]:
    """``count`` paced streams held open at once: (KiB per open stream, streams open)."""
    idle = tb.rss_kib(pids())
    gate = asyncio.Semaphore(256)
    writers: list[asyncio.StreamWriter] = []
    opened = 0

    async def one() -> None:
        nonlocal opened
        async with gate:
            try:
                reader, writer = await lg.connect(port)
                writers.append(writer)
                writer.write(request)
                head = await reader.readuntil(b"\r\n\r\n")
                if head.startswith(b"HTTP/1.1 200"):
                    opened += 1
            except (OSError, asyncio.IncompleteReadError):
                pass

    try:
        async with asyncio.timeout(120):
            await asyncio.gather(*(one() for _ in range(count)))
        await asyncio.sleep(0.5)  # let the last ones settle into their pause
        peak = tb.rss_kib(pids())
    finally:
        for writer in writers:
            writer.close()
    return (peak - idle) / max(opened, 1), opened


def never_read_storm(
    port: int, request: bytes, clients: int, pids: Callable[[], list[int]], fig: PathFigures
) -> None:
    """``clients`` that never read, for STORM_S; RSS and /healthz latency meanwhile."""
    fig.storm_base = tb.rss_kib(pids()) / 1024
    stop = threading.Event()
    health: list[float] = []
    peak = [fig.storm_base]

    def probe() -> None:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            ask = f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
            while not stop.is_set():
                t0 = time.perf_counter()
                s.sendall(ask)
                got = b""
                while b"}" not in got:
                    chunk = s.recv(65536)
                    if not chunk:
                        return
                    got += chunk
                health.append(time.perf_counter() - t0)
                peak[0] = max(peak[0], tb.rss_kib(pids()) / 1024)
                stop.wait(0.02)

    socks: list[socket.socket] = []
    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    try:
        for _ in range(clients):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.settimeout(10)
            s.connect(("127.0.0.1", port))
            s.sendall(request)
            socks.append(s)
        deadline = time.monotonic() + STORM_S
        while time.monotonic() < deadline:
            peak[0] = max(peak[0], tb.rss_kib(pids()) / 1024)
            time.sleep(0.05)
    finally:
        for s in socks:
            s.close()
        stop.set()
        thread.join(15)
    time.sleep(AFTER_S)
    fig.storm_peak = peak[0]
    fig.storm_after = tb.rss_kib(pids()) / 1024
    fig.health_p50 = tb.percentile(health, 0.5) * 1e3
    fig.health_p99 = tb.percentile(health, 0.99) * 1e3


def run_paths(args: argparse.Namespace) -> dict[str, PathFigures]:
    figs = {name: PathFigures(name) for name in APPS}
    procs = {name: app_process(name) for name in APPS}
    for proc in procs.values():
        proc.__enter__()
    try:
        for _ in range(args.rounds):
            asyncio.run(first_events(procs, args.requests, figs))
        for name, proc in procs.items():
            print(f"  {name}: cpu, open streams, storm...", flush=True)
            cpus = [asyncio.run(cpu_per_event(proc, args.events)) for _ in range(args.rounds)]
            figs[name].cpu_us = statistics.median(cpus)
            request = stream_request(proc.port, 3, pause_ms=5000)
            figs[name].kib_per_stream, figs[name].opened = asyncio.run(
                open_streams(proc.port, request, args.open, proc.pids)
            )
            time.sleep(6)  # the held streams end
            if args.storm:
                never_read_storm(
                    proc.port, stream_request(proc.port, 20000), args.storm, proc.pids, figs[name]
                )
    finally:
        for proc in procs.values():
            proc.__exit__(None, None, None)
    return figs


# --- the gateway ---------------------------------------------------------------------------

GATEWAYS = ("tokenwire serve (granian)", 'tokenwire serve, engine = "h1"', "uvicorn + gateway")


@dataclass
class GatewayFigures:
    name: str
    sdk: list[sdk.Samples] = field(default_factory=list)
    cpu_us: float = 0.0
    kib_per_stream: float = 0.0
    opened: int = 0


def gateway_process(name: str, upstream: str, workdir: Path) -> tb.ServedProcess:
    models = {
        "short": {"provider": "openai", "base_url": upstream + "/v1", "upstream_model": "short"},
        "c2000": {"provider": "openai", "base_url": upstream + "/v1", "upstream_model": "c2000"},
        "paced": {"provider": "openai", "base_url": upstream + "/v1", "upstream_model": "paced"},
        "demo": {"provider": "demo"},
    }
    server = {"engine": "h1" if "h1" in name else "granian"}  # named: the default is h1
    config = workdir / f"gw-{len(list(workdir.iterdir()))}.toml"
    config.write_text(tb.gateway_config(models, server))
    port = tb.free_port()
    env = {k: v for k, v in os.environ.items() if k != "TOKENWIRE_SERVER_ENGINE"}
    if name.startswith("uvicorn"):
        env["TOKENWIRE_GATEWAY_CONFIG"] = str(config)
        argv = [sys.executable, "-m", "uvicorn", "tokenwire.gateway.serving:app_from_env"]
        argv += ["--factory", "--http", "httptools", "--loop", "uvloop", "--no-access-log"]
        argv += ["--log-level", "warning", "--host", "127.0.0.1", "--port", str(port)]
        return tb.ServedProcess(argv, port, ready_path="/healthz", env=env)
    argv = tb.gateway_argv(str(config), port)
    return tb.ServedProcess(argv, port, ready_path="/healthz", env=env)


def run_gateways(args: argparse.Namespace) -> dict[str, GatewayFigures]:
    figs = {name: GatewayFigures(name) for name in GATEWAYS}
    scripts = {
        "short": {"text": tb.words(4), "input_tokens": 5},
        "c2000": {"text": tb.words(2000), "input_tokens": 5},
        "paced": {"text": tb.words(16), "input_tokens": 5, "delay_s": 0.004},
    }
    with (
        tempfile.TemporaryDirectory(prefix="serving-") as tmp,
        tb.fake_upstream_process(scripts) as fake,
    ):
        procs = {name: gateway_process(name, fake.url, Path(tmp)) for name in GATEWAYS}
        for proc in procs.values():
            proc.__enter__()
        try:
            for r in range(args.rounds):
                for name, proc in procs.items():  # one gateway after the other, per round
                    print(f"  round {r + 1}: {name} (openai.OpenAI)...", flush=True)
                    figs[name].sdk.append(
                        sdk.measure_sync(
                            fake.url + "/v1",
                            f"http://127.0.0.1:{proc.port}/v1",
                            "sk-bench",
                            n=args.sdk,
                            first_model="short",
                            paced_model="paced",
                            paced_n=10,
                            whole_n=args.sdk,
                        )
                    )
            for name, proc in procs.items():
                cpus = []
                for _ in range(args.rounds):
                    cpus.append(asyncio.run(gateway_cpu(proc)))
                figs[name].cpu_us = statistics.median(cpus)
                request = lg.standard_request(
                    proc.port,
                    "demo",
                    extensions={"tokenwire:demo": {"tokens": 3, "delay_ms": 5000}},
                )
                figs[name].kib_per_stream, figs[name].opened = asyncio.run(
                    open_streams(proc.port, request, args.open, proc.pids)
                )
                time.sleep(6)
        finally:
            for proc in procs.values():
                proc.__exit__(None, None, None)
    return figs


async def gateway_cpu(proc: tb.ServedProcess) -> float:
    reader, writer = await lg.connect(proc.port)
    try:
        request = lg.openai_request(proc.port, "c2000")
        await lg.exchange(reader, writer, request, first=sdk.FIRST_CONTENT)  # warm
        pids = proc.pids()
        cpu0 = tb.cpu_seconds(pids)
        for _ in range(10):
            await lg.exchange(reader, writer, request, first=sdk.FIRST_CONTENT)
        return (tb.cpu_seconds(pids) - cpu0) / 20000 * 1e6
    finally:
        writer.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=300, help="first-event requests per round")
    ap.add_argument("--events", type=int, default=20000, help="events in the CPU stream")
    ap.add_argument("--open", type=int, default=1000, help="streams held open at once")
    ap.add_argument("--storm", type=int, default=300, help="never-reading clients (0: none)")
    ap.add_argument("--sdk", type=int, default=200, help="SDK request pairs per gateway, round")
    ap.add_argument("--skip-gateway", action="store_true")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    load_before = tb.loadavg()
    print("the serving path alone...", flush=True)
    paths = run_paths(args)
    gateways = {} if args.skip_gateway else run_gateways(args)

    def ms(values: list[float], q: float) -> str:
        return f"{tb.percentile(values, q) * 1e3:.3f}"

    rows = []
    for f in paths.values():
        rows.append(
            [
                f.name,
                ms(f.first, 0.5),
                ms(f.first, 0.99),
                f"{f.cpu_us:.1f}",
                f"{f.kib_per_stream:.1f} ({f.opened:,} open)",
                f"{f.storm_base:.1f} / {f.storm_peak:.1f} (+{f.storm_peak - f.storm_base:.1f})"
                f" / {f.storm_after:.1f}"
                if args.storm
                else "-",
                f"{f.health_p50:.2f} / {f.health_p99:.2f}" if args.storm else "-",
            ]
        )
    table = md_table(
        [
            "serving path (tiny SSE app)",
            "first event p50 (ms)",
            "first event p99 (ms)",
            f"CPU µs per event ({args.events:,} in one stream)",
            "KiB per open stream",
            f"never-read x {args.storm}: RSS base / peak / {AFTER_S:g} s after (MiB)",
            "/healthz during it p50 / p99 (ms)",
        ],
        rows,
        "lrrrrrr",
    )
    gw_rows = []
    for g in gateways.values():

        def added(q: float, figure: str = "first", g: GatewayFigures = g) -> str:
            values = [v for s in g.sdk for v in [s.added_ms(figure, q)] if v is not None]
            return f"{statistics.median(values):.3f}" if values else "-"

        gw_rows.append(
            [
                g.name,
                added(0.5),
                added(0.99),
                added(0.5, "gaps"),
                added(0.99, "gaps"),
                f"{g.cpu_us:.1f}",
                f"{g.kib_per_stream:.1f} ({g.opened:,} open)",
            ]
        )
    gw_table = md_table(
        [
            "gateway",
            "added first token p50 (ms, openai.OpenAI)",
            "added first token p99 (ms)",
            "added gap p50 (ms)",
            "added gap p99 (ms)",
            "CPU µs per chunk (10 x 2,000)",
            "KiB per open stream (demo, paced)",
        ],
        gw_rows,
        "lrrrrrr",
    )
    first_rounds = "; ".join(
        f"{g.name}: " + ", ".join(sdk.fmt(s.added_ms("first", 0.5), ".3f") for s in g.sdk)
        for g in gateways.values()
    )
    notes = [
        f"- rounds: {args.rounds}; first event: {args.requests} requests per server and round, "
        "round robin across the four (one in flight), after 5 untimed; figures are over all "
        "rounds' samples (first event) or the median over rounds (CPU).",
        "- the tiny app has no write deadline: the storm columns show what each server holds "
        "for clients that stop reading, and how its other requests fare meanwhile.",
        f"- gateway: added p50 per round (ms): {first_rounds or '-'}.",
    ]
    print("\n".join(table))
    print()
    print("\n".join(gw_table))
    print("\n".join(notes))
    if not args.no_write:
        text = [
            "## serving",
            "",
            "Which HTTP/1.1 serving path (issue 29): the same tiny SSE app on each, all alive "
            "at once, requests interleaved; then the gateway on granian, on "
            '`engine = "h1"` and on uvicorn. The machine is shared with other engineers\' '
            "test runs (load averages below): compare within the run.",
            "",
            *header("bench/serving.py", load_before),
            f"- peers: granian {_version('granian')}, uvicorn {_version('uvicorn')}, "
            f"httptools {_version('httptools')}",
            "",
            *table,
            "",
            *gw_table,
            "",
            *notes,
            "",
        ]
        write_section("serving", "\n".join(text), keep=KEEP)
        print("wrote the '## serving' section of bench/RESULTS.md")
    return 0


def _version(name: str) -> str:
    from _common import pkg_version

    return pkg_version(name)


if __name__ == "__main__":
    raise SystemExit(main())
