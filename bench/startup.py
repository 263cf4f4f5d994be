"""Start-up time and idle RSS of ``tokenwire serve``, one process and several.

Layouts, each started ``--rounds`` times, interleaved (round 1 of every layout,
then round 2...) so that a slow moment of the machine does not land on one of them:

- ``serve --workers 1``, demo only: one process (granian's embedded server);
- ``serve --workers 1`` with upstream models: the demo plus an ``openai`` model in
  front of ``tokenwire.testing.upstream.FakeUpstream`` (its own process);
- ``serve --workers 2``: granian's supervisor and two worker processes;
- with ``--before-rev REV``: ``serve --workers 1`` (demo only, and with the
  upstream models) as the git revision ``REV`` of this checkout had it (its
  ``src/`` extracted with ``git archive`` and put first on ``PYTHONPATH``), e.g.
  the revision before ``--workers 1`` served in one process.

For each start: **start-up** is spawn to the first ``200`` on ``/healthz``;
**RSS** is ``VmRSS`` summed over the whole process tree (``/proc``), right after
start-up and again after a warm-up (``--warmup`` streaming requests to each
model, one after the other). The issue's target: one process, idle RSS under
60 MB (57.2 MiB).

It prints the table and rewrites the "## startup" section of bench/RESULTS.md.

Run: ``.venv/bin/python bench/startup.py [--rounds 5] [--warmup 10] [--before-rev REV]
[--no-write]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from _common import ROOT, header, md_table, write_section
from tokenwire.testing import processes as tb

TARGET_MIB = 60e6 / 2**20
#: The hand-written subsection of "## startup" that a new run keeps.
ANALYSIS = "What the one process loads"
MEDIA = "application/llm-request+json"


@dataclass
class Layout:
    name: str
    argv: Callable[[int, str | None], list[str]]
    models: list[str]
    upstream: bool = False
    #: Another ``src/`` to run (``--before-rev``), first on ``PYTHONPATH``.
    source: str | None = None
    starts: list[float] = field(default_factory=list)
    processes: list[int] = field(default_factory=list)
    rss_start: list[float] = field(default_factory=list)
    rss_warm: list[float] = field(default_factory=list)


def _serve(workers: int) -> Callable[[int, str | None], list[str]]:
    return lambda port, config: tb.gateway_argv(config, port, workers=workers)


def _source_of(rev: str, into: Path) -> Path:
    """``src/`` of git revision ``rev``, extracted under ``into``."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "src"], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into / "src"


def _warm_up(url: str, models: Sequence[str], n: int) -> None:
    with httpx.Client(base_url=url, timeout=60.0) as client:
        for model in models:
            for _ in range(n):
                payload = {
                    "version": "1.0",
                    "stream": True,
                    "model": model,
                    "messages": [{"role": "user", "content": "hello there"}],
                }
                reply = client.post(
                    "/v1/stream",
                    content=json.dumps(payload),
                    headers={"content-type": MEDIA},
                )
                if reply.status_code != 200 or "event: stream.end" not in reply.text:
                    raise RuntimeError(f"{model}: {reply.status_code} {reply.text[:300]}")


def measure(layout: Layout, config_path: str | None, warmup: int) -> None:
    port = tb.free_port()
    env = {**os.environ, "FAKE_UPSTREAM_KEY": "sk-bench"}
    if layout.source is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [layout.source, env.get("PYTHONPATH")]))
    with tb.ServedProcess(layout.argv(port, config_path), port, env=env) as served:
        layout.starts.append(served.started_s)
        layout.processes.append(len(served.pids()))
        layout.rss_start.append(tb.rss_kib(served.pids()) / 1024)
        _warm_up(served.url, layout.models, warmup)
        layout.rss_warm.append(tb.rss_kib(served.pids()) / 1024)


def _span(values: list[float], unit: str, digits: int = 1) -> str:
    mid = statistics.median(values)
    return f"{mid:.{digits}f} {unit} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5, help="starts of each layout")
    ap.add_argument("--warmup", type=int, default=10, help="warm-up requests per model")
    ap.add_argument("--before-rev", help="also measure serve --workers 1 at this git revision")
    ap.add_argument("--no-write", action="store_true", help="do not touch bench/RESULTS.md")
    args = ap.parse_args()
    load_before = tb.loadavg()

    with (
        tb.fake_upstream_process({"m": {"text": "hello from the fake upstream"}}) as fake,
        tempfile.TemporaryDirectory(prefix="tokenwire-startup-") as tmp,
    ):
        models = {
            "gpt": {
                "provider": "openai",
                "base_url": f"{fake.url}/v1",
                "api_key_env": "FAKE_UPSTREAM_KEY",
                "upstream_model": "m",
            }
        }
        upstream_config = str(Path(tmp) / "gateway.toml")
        Path(upstream_config).write_text(tb.gateway_config(models))
        layouts = [
            Layout("`serve --workers 1`, demo only", _serve(1), ["demo"]),
            Layout("`serve --workers 1`, demo + openai upstream", _serve(1), ["demo", "gpt"], True),
            Layout("`serve --workers 2`, demo only", _serve(2), ["demo"]),
        ]
        if args.before_rev:
            before = str(_source_of(args.before_rev, Path(tmp)))
            at = f"at `{args.before_rev}`"
            layouts += [
                Layout(f"`serve --workers 1` {at}, demo only", _serve(1), ["demo"], source=before),
                Layout(
                    f"`serve --workers 1` {at}, demo + openai upstream",
                    _serve(1),
                    ["demo", "gpt"],
                    True,
                    source=before,
                ),
            ]
        for round_ in range(args.rounds):
            for layout in layouts:
                measure(layout, upstream_config if layout.upstream else None, args.warmup)
                print(
                    f"round {round_ + 1} {layout.name}: {layout.starts[-1]:.2f} s, "
                    f"{layout.processes[-1]} processes, {layout.rss_start[-1]:.1f} MiB -> "
                    f"{layout.rss_warm[-1]:.1f} MiB",
                    flush=True,
                )

    columns = ["layout", "processes", "start-up", "RSS after start", "RSS after warm-up"]
    rows = [
        [
            layout.name,
            str(statistics.median(layout.processes)),
            _span(layout.starts, "s", 2),
            _span(layout.rss_start, "MiB"),
            _span(layout.rss_warm, "MiB"),
        ]
        for layout in layouts
    ]
    table = md_table(columns, rows)
    worst = max(max(layouts[0].rss_warm), max(layouts[1].rss_warm))
    notes = [
        f"- One process, RSS after warm-up: at most {worst:.1f} MiB over both configurations "
        f"(target: under 60 MB = {TARGET_MIB:.1f} MiB): "
        f"{'met' if worst < TARGET_MIB else 'missed'}."
    ]
    if args.before_rev:
        for now, then in zip(layouts[:2], layouts[3:], strict=True):
            notes.append(
                f"- {now.name} vs {then.name}: RSS after warm-up "
                f"{statistics.median(then.rss_warm):.1f} -> {statistics.median(now.rss_warm):.1f}"
                f" MiB, start-up {statistics.median(then.starts):.2f} -> "
                f"{statistics.median(now.starts):.2f} s (medians)."
            )
    print("\n".join([*table, "", *notes]))
    if not args.no_write:
        text = [
            "## startup",
            "",
            "Start-up (spawn to the first `200` on `/healthz`) and idle RSS (`VmRSS` summed "
            "over the process tree, right after start-up and after a warm-up of "
            f"{args.warmup} streaming requests per model) of `tokenwire serve`, {args.rounds} "
            "starts per layout, interleaved; median (min-max). The openai model streams from "
            "`tokenwire.testing.upstream.FakeUpstream` in its own process (not counted).",
            "",
            *header("bench/startup.py", load_before),
            "",
            *table,
            "",
            *notes,
            "",
        ]
        write_section("startup", "\n".join(text), keep=ANALYSIS)
        print("wrote the '## startup' section of bench/RESULTS.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
