"""``tokenwire bench``: the decode and gateway benchmarks, quickly, on this machine.

Small sizes (a few seconds per phase), progress shown while it runs, one table
at the end. The full-size runs, and the side-by-side with LiteLLM, are the
scripts under ``bench/`` in the repository; this command needs none of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import click

from ..testing.loadgen import (
    FIRST_OPENAI,
    connect,
    exchange,
    first_chunk_times,
    openai_request,
    standard_request,
)
from ..testing.processes import (
    UpstreamProcess,
    cpu_seconds,
    fake_upstream_process,
    gateway_config,
    loadavg,
    machine,
    rss_kib,
    serve_gateway,
    words,
)


@click.command()
@click.option("--events", default=20_000, show_default=True, help="Events in the decode body.")
@click.option(
    "--seconds", default=2.0, show_default=True, help="Length of each throughput run (s)."
)
@click.option("--conns", default=8, show_default=True, help="Connections in throughput runs.")
@click.option(
    "--requests", default=50, show_default=True, help="Sequential requests timed for TTFE."
)
@click.option(
    "--upstream/--no-upstream",
    default=True,
    show_default=True,
    help="Also measure the OpenAI translator in front of a local fake upstream.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON instead.")
def command(
    events: int, seconds: float, conns: int, requests: int, upstream: bool, as_json: bool
) -> None:
    """Run the decode and gateway benchmarks on this machine (loopback only).

    Starts `tokenwire serve` (one worker) on a free 127.0.0.1 port, and a fake
    OpenAI upstream when --upstream, measures them, stops them, and prints
    the table. Takes about 15 s with the defaults.
    """
    from rich.console import Console
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
    from rich.table import Table

    console = Console(stderr=as_json)
    phases = 2 + (6 if upstream else 4)
    progress = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )
    with progress:
        task = progress.add_task("decode: tokenwire.iter_events", total=phases)
        decode = decode_bench(events=events)
        progress.advance(task)

        def step(label: str) -> None:
            progress.update(task, description=f"gateway: {label}")
            progress.advance(task)

        try:
            gateway = gateway_bench(
                seconds=seconds, conns=conns, requests=requests, upstream=upstream, step=step
            )
        except RuntimeError as exc:
            raise click.ClickException(f"the gateway benchmark failed: {exc}") from None
        progress.update(task, completed=phases)

    if as_json:
        click.echo(json.dumps(_as_dict(decode, gateway), indent=2))
        return

    console.print(
        f"[bold]tokenwire bench[/] - {machine()}, Python {platform.python_version()}, "
        f"load average {loadavg()}"
    )
    table = Table(title="decode (sse.Decoder + events.parse)")
    for name in ("events", "bytes", "events/s", "MB/s", "split + json.loads floor"):
        table.add_column(name, justify="right")
    table.add_row(
        f"{decode.events:,}",
        f"{decode.body_bytes:,}",
        f"{decode.events_per_s:,.0f}",
        f"{decode.mb_per_s:.1f}",
        f"{decode.events / decode.baseline_s:,.0f} events/s",
    )
    console.print(table)
    table = Table(
        title=f"gateway: tokenwire serve, 1 worker (start {gateway.start_s:.2f} s, "
        f"idle RSS {gateway.idle_rss_kib / 1024:.1f} MiB)"
    )
    table.add_column("path")
    for name in ("events/s", "CPU µs/event", "TTFE p50 (ms)", "added (ms)"):
        table.add_column(name, justify="right")
    for row in gateway.rows:
        table.add_row(
            row.path,
            f"{row.events_per_s:,.0f}",
            f"{row.cpu_us_per_event:.1f}",
            f"{row.ttfe_p50_ms:.2f}",
            f"{row.added_ms:.2f}",
        )
    console.print(table)
    console.print(
        "events/s over "
        f"{conns} connections for {seconds:g} s; CPU of the gateway's processes per event; "
        f"TTFE median of {requests} requests; 'added' is TTFE minus the upstream's own "
        "(the demo: all of it)."
    )
    sys.stdout.flush()


def _as_dict(decode: Any, gateway: Any) -> dict[str, Any]:
    return {
        "decode": {
            "events": decode.events,
            "bytes": decode.body_bytes,
            "events_per_s": round(decode.events_per_s),
            "mb_per_s": round(decode.mb_per_s, 2),
        },
        "gateway": {
            "start_s": round(gateway.start_s, 3),
            "idle_rss_mib": round(gateway.idle_rss_kib / 1024, 1),
            "paths": [
                {
                    "path": row.path,
                    "events_per_s": round(row.events_per_s),
                    "cpu_us_per_event": round(row.cpu_us_per_event, 2),
                    "ttfe_p50_ms": round(row.ttfe_p50_ms, 3),
                    "added_ms": round(row.added_ms, 3),
                }
                for row in gateway.rows
            ],
        },
    }


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
    from ..events import dump
    from ..writer import Writer

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
    from .._iter import iter_events

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

    Start-up time and idle RSS (its process tree: one process with one worker);
    for the demo model at zero delay and, with ``upstream``, the OpenAI
    translator in front of a fake upstream process: frames/s over ``conns``
    connections for ``seconds``, gateway CPU µs per frame, and the first
    content frame's time (median of ``requests``; for the upstream path also
    the upstream called directly).
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
            bulk = standard_request(
                gw.port, "demo", extensions={"tokenwire:demo": {"tokens": 2000}}
            )
            demo.events, demo.seconds, demo.cpu_s = await _throughput(
                gw.port, bulk, conns, seconds, pids
            )
            step("demo: time to first chunk")
            one = standard_request(gw.port, "demo", extensions={"tokenwire:demo": {"tokens": 1}})
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
