"""``tokenwire bench``: the decode and gateway benchmarks, quickly, on this machine.

Small sizes (a few seconds per phase), progress shown while it runs, one table
at the end. The full-size runs, and the side-by-side with LiteLLM, are the
scripts under ``bench/`` in the repository; this command needs none of them.
"""

from __future__ import annotations

import json
import platform
import sys
from typing import Any

import click


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

    from .. import _bench

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
        decode = _bench.decode_bench(events=events)
        progress.advance(task)

        def step(label: str) -> None:
            progress.update(task, description=f"gateway: {label}")
            progress.advance(task)

        try:
            gateway = _bench.gateway_bench(
                seconds=seconds, conns=conns, requests=requests, upstream=upstream, step=step
            )
        except RuntimeError as exc:
            raise click.ClickException(f"the gateway benchmark failed: {exc}") from None
        progress.update(task, completed=phases)

    if as_json:
        click.echo(json.dumps(_as_dict(decode, gateway), indent=2))
        return

    console.print(
        f"[bold]tokenwire bench[/] - {_bench.machine()}, Python {platform.python_version()}, "
        f"load average {_bench.loadavg()}"
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
