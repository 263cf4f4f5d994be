"""tokenwire's gateway and the LiteLLM proxy, side by side, in one invocation.

Both sit in front of the **same** fake OpenAI upstream
(``tokenwire.testing.upstream.FakeUpstream("openai")``, in a process of its own, on
127.0.0.1) and are asked the same thing: OpenAI Chat Completions streaming requests
(``POST /v1/chat/completions``), answered in OpenAI's chunk format. tokenwire
serves them through its OpenAI ingress (§7.3) and its ``openai`` provider; LiteLLM
through its ``openai/<model>`` route with ``api_base`` at the fake. So each gateway
does the same job: parse the client's request, call the upstream, translate its
stream, re-encode it.

For each gateway (one worker each, started and measured one after the other so
that they never compete for the CPUs):

- **start-up time**: spawn to the first ``200`` on its health route;
- **idle RSS**: the gateway's whole process tree (server + workers), after start
  and again after a warm-up;
- **CPU µs per streamed chunk**: user+system CPU of the process tree
  (``/proc/<pid>/stat``) divided by the upstream chunks streamed, over ten
  2,000-chunk streams one after the other (``LONG_STREAMS``: CPU time counts in
  10 ms ticks, so fewer chunks would blur the figure by more than 1 µs), and over
  100 concurrent streams of 200 chunks;
- **peak RSS** of the tree (sampled every 20 ms) while the 100 streams run;
- **non-streaming latency added** (issue 23): a Chat Completions call without
  ``stream``, request written to the last byte of its JSON answer, median of as
  many sequential requests as the first-token figure, minus the same straight
  to the fake (which answers whole ``chat.completion`` objects too);
- **first-token overhead**: the time to the first *content* chunk (the first
  SSE frame whose ``choices[0].delta.content`` is a non-empty string: not the
  role-only opening chunk, not tokenwire's ``stream.start``), median of 50
  sequential requests through the gateway, minus the same median straight to
  the fake upstream (measured right before, with the same raw client).

LiteLLM runs from its own venv, ``bench/.venv-litellm`` (made here with
``python3 -m venv`` + ``pip install 'litellm[proxy]'`` when missing; git ignores it),
with ``LITELLM_LOCAL_MODEL_COST_MAP=True`` and ``LITELLM_TELEMETRY_DISABLED=true``
so that it makes no outbound call. LiteLLM refuses to start without a master key,
so it gets a random one, and the client sends it to both gateways.

It prints the table and the ratios and rewrites the "## vs-litellm" section of
bench/RESULTS.md.

Run: ``.venv/bin/python bench/vs_litellm.py [--rounds 1] [--sdk 200] [--no-write] [--skip-litellm]``
(``--sdk``: interleaved request pairs per client for the openai SDK rows, ``_sdk_latency.py``;
``--skip-litellm``: tokenwire's figures alone, never written to RESULTS.md).

It also measures what an openai SDK user feels (issue 29, ``_sdk_latency.py``): added
first-token latency at p50 and p99 through ``openai.OpenAI`` and ``openai.AsyncOpenAI``
(and the raw client as a second row), direct and gateway requests interleaved; the added
per-chunk gap of a paced reply; the added latency of a non-streaming call (reported as
not served while the route answers anything but 200).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import _sdk_latency as sdk
from _common import ROOT, header, md_table, write_section
from tokenwire.testing import loadgen as lg
from tokenwire.testing import processes as tb

#: LiteLLM's own venv (never tokenwire's dependency); ``LITELLM_VENV`` puts it elsewhere
#: (a /tmp path on a machine whose checkout is shared).
VENV = Path(os.environ.get("LITELLM_VENV", ROOT / "bench" / ".venv-litellm"))
LITELLM = VENV / "bin" / "litellm"
#: The upstream model names and how many content chunks each streams.
SCRIPTS = {"c2000": 2000, "c200": 200, "short": 4, "paced": 16}
#: The paced reply's pause between chunks (the per-chunk gap figure).
PACED_DELAY_S = 0.004
#: 2,000-chunk streams timed one after the other: 20,000 chunks make a 10 ms CPU tick 0.5 µs.
LONG_STREAMS = 10
#: Requests per CPU-per-request figure: enough 10 ms CPU ticks for tokenwire's (~1 ms each).
CPU_REQUESTS = 300
MASTER_KEY = "sk-" + secrets.token_hex(32)
#: tokenwire's HTTP/1.1 server (``[server] engine``; ``--engine``).
ENGINE = ["granian"]
#: Both gateways get the same headers (tokenwire ignores this one).
AUTH = {"Authorization": f"Bearer {MASTER_KEY}"}
#: The hand-written subsection (profiles of missed targets) a rerun keeps.
PROFILES = "Where a target is missed: profiles"
#: Issue 14's targets (start-up has none: it is shown next to them).
CPU_RATIO = 1 / 40
FIRST_TOKEN_MS = 0.5
IDLE_RSS_MB = 60
TARGETS = (
    f"CPU per chunk at most 1/{round(1 / CPU_RATIO)} of LiteLLM's, at most {FIRST_TOKEN_MS} ms "
    f"added to the first content chunk, idle RSS under {IDLE_RSS_MB} MB (start-up is shown)"
)


class FirstContent:
    """``search(data)``: does this read hold a chunk with non-empty ``choices[0].delta.content``?

    What ``loadgen.exchange`` calls (in place of a regex) on each HTTP chunk
    it reads until it matches. Each complete ``data:`` frame in the read is
    decoded; a frame split across two reads is seen in neither, which can only
    make the figure later, never earlier.
    """

    def search(self, data: bytes) -> bool:
        for frame in data.split(b"\n\n"):
            for line in frame.split(b"\n"):
                if not line.startswith(b"data:") or line.endswith(b"[DONE]"):
                    continue
                try:
                    chunk = json.loads(line[5:])
                    content = chunk["choices"][0]["delta"].get("content")
                except (ValueError, LookupError, TypeError, AttributeError):
                    continue
                if isinstance(content, str) and content:
                    return True
        return False


FIRST_CONTENT: Any = FirstContent()


def ensure_litellm() -> str:
    """Create bench/.venv-litellm with litellm[proxy] if needed; return LiteLLM's version."""
    if not LITELLM.exists():
        print(f"creating {VENV.relative_to(ROOT)} with litellm[proxy] (a few minutes)...")
        subprocess.run(["python3", "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(VENV / "bin" / "pip"), "install", "-q", "litellm[proxy]"], check=True)
    out = subprocess.run(
        [
            str(VENV / "bin" / "python"),
            "-c",
            "import importlib.metadata as m; print(m.version('litellm'))",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


@dataclass
class Figures:
    """Everything measured for one gateway in one round."""

    name: str
    start_s: float = 0.0
    idle_rss_mib: float = 0.0
    warm_rss_mib: float = 0.0
    cpu_seq_us: float = 0.0  # per chunk, LONG_STREAMS x 2,000 chunks one after the other
    cpu_conc_us: float = 0.0  # per chunk, 100 x 200 chunks at once
    cpu_stream_req_us: float = 0.0  # per short streaming request, CPU_REQUESTS in a row
    cpu_whole_req_us: float = 0.0  # per non-streaming request, CPU_REQUESTS in a row
    peak_rss_mib: float = 0.0
    ttfe_ms: float = 0.0
    direct_ms: float = 0.0
    frames: dict[str, int] = field(default_factory=dict)
    conc_wall_s: float = 0.0
    whole_ms: float = 0.0  # a whole (non-streaming) answer through the gateway, median
    whole_direct_ms: float = 0.0  # the same answer straight from the upstream, median
    #: Added latency per client (``_sdk_latency``): "openai.OpenAI", "openai.AsyncOpenAI", "raw".
    sdk: dict[str, sdk.Samples] = field(default_factory=dict)

    @property
    def added_ms(self) -> float:
        return self.ttfe_ms - self.direct_ms

    @property
    def whole_added_ms(self) -> float:
        return self.whole_ms - self.whole_direct_ms


def whole_request(port: int, model: str, headers: dict[str, str] | None = None) -> bytes:
    """A non-streaming Chat Completions request (issue 23): no ``stream`` field."""
    data = json.dumps({"model": model, "messages": [{"role": "user", "content": "bench"}]})
    extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Type: application/json\r\n{extra}Content-Length: {len(data)}\r\n\r\n"
    )
    return head.encode() + data.encode()


async def whole_times(port: int, request: bytes, n: int) -> list[float]:
    """Seconds from writing ``request`` to the last byte of its JSON answer, ``n`` times
    on one kept-alive connection; every answer must be a 200 ``chat.completion``."""
    reader, writer = await lg.connect(port)
    times = []
    try:
        for _ in range(n):
            started = time.perf_counter()
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                int(line.split(b":", 1)[1])
                for line in head.lower().split(b"\r\n")
                if line.startswith(b"content-length:")
            )
            body = await reader.readexactly(length)
            times.append(time.perf_counter() - started)
            if b" 200 " not in head.split(b"\r\n", 1)[0] or b'"chat.completion"' not in body:
                raise RuntimeError(f"unexpected whole answer: {head[:200]!r} {body[:200]!r}")
    finally:
        writer.close()
    return times


def tokenwire_server(upstream: str, workdir: Path) -> tb.ServedProcess:
    models = {
        name: {"provider": "openai", "base_url": upstream + "/v1", "upstream_model": name}
        for name in SCRIPTS
    }
    config = workdir / "tokenwire.toml"
    config.write_text(tb.gateway_config(models, {"engine": ENGINE[0]}))
    port = tb.free_port()
    return tb.ServedProcess(tb.gateway_argv(str(config), port), port, ready_path="/healthz")


def litellm_server(upstream: str, workdir: Path) -> tb.ServedProcess:
    lines = ["model_list:"]
    for name in SCRIPTS:
        lines += [
            f"  - model_name: {name}",
            "    litellm_params:",
            f"      model: openai/{name}",
            f"      api_base: {upstream}/v1",
            "      api_key: sk-fake",
        ]
    lines += ["litellm_settings:", "  telemetry: false", "  drop_params: true"]
    # LiteLLM refuses to start without a master key; requests then carry it.
    lines += ["general_settings:", f"  master_key: {MASTER_KEY}"]
    config = workdir / "litellm.yaml"
    config.write_text("\n".join(lines) + "\n")
    port = tb.free_port()
    env = {
        **os.environ,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "LITELLM_TELEMETRY_DISABLED": "true",
        "LITELLM_LOG": "ERROR",
    }
    env.pop("VIRTUAL_ENV", None)
    argv = [str(LITELLM), "--config", str(config), "--host", "127.0.0.1", "--port", str(port)]
    argv += ["--num_workers", "1"]
    return tb.ServedProcess(
        argv, port, ready_path="/health/liveliness", env=env, cwd=workdir, timeout_s=180
    )


async def measure(
    fig: Figures, port: int, pids: Callable[[], list[int]], fake: tb.UpstreamProcess, ttfe_n: int
) -> None:
    first = FIRST_CONTENT
    reader, writer = await lg.connect(port)
    try:
        # Warm up: imports, pools, caches on both sides.
        for name in ("short", "c200", "short"):
            request = lg.openai_request(port, name, headers=AUTH)
            ex = await lg.exchange(reader, writer, request, first=first)
            fig.frames[name] = ex.frames
        await asyncio.sleep(0.5)
        fig.warm_rss_mib = tb.rss_kib(pids()) / 1024

        # Time to first chunk, minus the upstream's own (measured right before),
        # first, while nothing else has run through the gateway but the warm-up.
        direct = await lg.first_chunk_times(
            fake.port, lg.openai_request(fake.port, "short"), ttfe_n, first=first
        )
        request = lg.openai_request(port, "short", headers=AUTH)
        via = await lg.first_chunk_times(port, request, ttfe_n, first=first)
        fig.direct_ms = statistics.median(direct) * 1e3
        fig.ttfe_ms = statistics.median(via) * 1e3

        # A fresh connection: the one above idled while the upstream was timed, and
        # uvicorn (LiteLLM) closes a keep-alive connection idle for 5 s.
        writer.close()
        reader, writer = await lg.connect(port)
        # CPU per chunk: LONG_STREAMS 2,000-chunk streams, one after the other.
        cpu0 = tb.cpu_seconds(pids())
        for _ in range(LONG_STREAMS):
            request = lg.openai_request(port, "c2000", headers=AUTH)
            ex = await lg.exchange(reader, writer, request, first=first)
            fig.frames["c2000"] = ex.frames
        fig.cpu_seq_us = (tb.cpu_seconds(pids()) - cpu0) / (LONG_STREAMS * SCRIPTS["c2000"]) * 1e6
        # CPU per request: short streams (a few chunks), one after the other.
        cpu0 = tb.cpu_seconds(pids())
        for _ in range(CPU_REQUESTS):
            request = lg.openai_request(port, "short", headers=AUTH)
            await lg.exchange(reader, writer, request, first=first)
        fig.cpu_stream_req_us = (tb.cpu_seconds(pids()) - cpu0) / CPU_REQUESTS * 1e6
    finally:
        writer.close()

    # A whole (non-streaming) answer, added to the upstream's own (issue 23), on
    # connections of its own (uvicorn closes one idle for 5 s: the one above would be).
    direct = await whole_times(fake.port, whole_request(fake.port, "short"), ttfe_n)
    via = await whole_times(port, whole_request(port, "short", AUTH), ttfe_n)
    fig.whole_direct_ms = statistics.median(direct) * 1e3
    fig.whole_ms = statistics.median(via) * 1e3
    cpu0 = tb.cpu_seconds(pids())
    await whole_times(port, whole_request(port, "short", AUTH), CPU_REQUESTS)
    fig.cpu_whole_req_us = (tb.cpu_seconds(pids()) - cpu0) / CPU_REQUESTS * 1e6

    # CPU per chunk and peak RSS: 100 concurrent streams of 200 chunks.
    peak = [0]
    procs = pids()

    def sample() -> None:
        peak[0] = max(peak[0], tb.rss_kib(procs))

    cpu0 = tb.cpu_seconds(procs)
    results, fig.conc_wall_s = await lg.stream_concurrently(
        port, lg.openai_request(port, "c200", headers=AUTH), 100, first=first, on_sample=sample
    )
    fig.cpu_conc_us = (tb.cpu_seconds(procs) - cpu0) / (100 * SCRIPTS["c200"]) * 1e6
    fig.peak_rss_mib = peak[0] / 1024
    short_of = [r.frames for r in results if r.frames < SCRIPTS["c200"]]
    if short_of:
        raise RuntimeError(f"{fig.name}: {len(short_of)} of 100 streams came back short")


def run_one(
    name: str,
    make: Callable[[str, Path], tb.ServedProcess],
    fake: tb.UpstreamProcess,
    ttfe_n: int,
    sdk_n: int,
) -> Figures:
    fig = Figures(name)
    with tempfile.TemporaryDirectory(prefix="vs-litellm-") as tmp:
        server = make(fake.url, Path(tmp))
        with server:
            fig.start_s = server.started_s
            time.sleep(1.0)  # let start-up work (and allocations) settle
            fig.idle_rss_mib = tb.rss_kib(server.pids()) / 1024
            asyncio.run(measure(fig, server.port, server.pids, fake, ttfe_n))
            measure_clients(fig, server.port, fake, sdk_n)
    return fig


def measure_clients(fig: Figures, port: int, fake: tb.UpstreamProcess, n: int) -> None:
    """Added latency through the openai SDK's clients and the raw one (``_sdk_latency``)."""
    direct, via = fake.url + "/v1", f"http://127.0.0.1:{port}/v1"
    paced_n = max(10, n // 10)
    fig.sdk["openai.OpenAI"] = sdk.measure_sync(
        direct,
        via,
        MASTER_KEY,
        n=n,
        first_model="short",
        paced_model="paced",
        paced_n=paced_n,
        whole_n=n,
    )
    fig.sdk["openai.AsyncOpenAI"] = sdk.measure_async(
        direct, via, MASTER_KEY, n=n, first_model="short", paced_model="paced", paced_n=paced_n
    )
    fig.sdk["raw"] = sdk.measure_raw(fake.port, port, AUTH, n=n, model="short")


def best(figs: list[Figures], name: str) -> Figures:
    """Per figure, the median over rounds."""
    mine = [f for f in figs if f.name == name]
    out = Figures(name)
    for attr in (
        "start_s",
        "idle_rss_mib",
        "warm_rss_mib",
        "cpu_seq_us",
        "cpu_conc_us",
        "cpu_stream_req_us",
        "cpu_whole_req_us",
        "peak_rss_mib",
        "ttfe_ms",
        "direct_ms",
        "conc_wall_s",
        "whole_ms",
        "whole_direct_ms",
    ):
        setattr(out, attr, statistics.median(getattr(f, attr) for f in mine))
    out.frames = mine[-1].frames
    return out


#: The targets through the openai SDK's clients (first token and non-streaming p99 as
#: a ratio to LiteLLM's, first token p50 in ms), and CPU per chunk and per request.
SDK_P99_RATIO = 1 / 75
SDK_P50_MS = 0.25
CPU_RATIO_29 = 1 / 100
CPU_REQUEST_RATIO = 1 / 75
CLIENTS = ("openai.OpenAI", "openai.AsyncOpenAI", "raw")


def added(figs: list[Figures], name: str, client: str, figure: str, q: float) -> float | None:
    """The median over rounds of one added-latency figure (``None``: not measured)."""
    values = [
        v
        for f in figs
        if f.name == name and client in f.sdk
        for v in [f.sdk[client].added_ms(figure, q)]
        if v is not None
    ]
    return statistics.median(values) if values else None


def refused(figs: list[Figures], name: str) -> str:
    """What the gateway said to a non-streaming call, when it did not answer 200."""
    for f in figs:
        if f.name == name and "openai.OpenAI" in f.sdk and f.sdk["openai.OpenAI"].whole_refused:
            return f.sdk["openai.OpenAI"].whole_refused
    return ""


def sdk_rows(figs: list[Figures], litellm: bool) -> list[list[str]]:
    """The added-latency table: one row per client and figure."""
    rows: list[list[str]] = []
    what = {
        "first": "first token",
        "gaps": f"per-chunk gap (paced, {PACED_DELAY_S * 1e3:g} ms)",
        "whole": "non-streaming call",
    }
    for client in CLIENTS:
        for figure, label in what.items():
            if client != "openai.OpenAI" and figure == "whole":
                continue
            if client == "raw" and figure == "gaps":
                continue
            for q, qname in ((0.5, "p50"), (0.99, "p99")):
                ours = added(figs, "tokenwire", client, figure, q)
                theirs = added(figs, "LiteLLM", client, figure, q) if litellm else None
                target = ""
                if client.startswith("openai") and figure in ("first", "whole") and q == 0.99:
                    if ours is not None and theirs:
                        ok = ours <= theirs * SDK_P99_RATIO
                        target = f"<= 1/{round(1 / SDK_P99_RATIO)} of LiteLLM's: " + (
                            "met" if ok else "**missed**"
                        )
                    else:
                        target = f"<= 1/{round(1 / SDK_P99_RATIO)} of LiteLLM's: -"
                if client.startswith("openai") and figure == "first" and q == 0.5:
                    ok = ours is not None and ours <= SDK_P50_MS
                    target = f"<= {SDK_P50_MS} ms: " + ("met" if ok else "**missed**")
                shown_ours = sdk.fmt(ours, ".3f")
                if ours is None and figure == "whole":
                    shown_ours = "not served: " + (refused(figs, "tokenwire") or "-")
                shown_theirs = sdk.fmt(theirs, ".2f")
                if litellm and theirs is None and figure == "whole":
                    shown_theirs = "not served: " + (refused(figs, "LiteLLM") or "-")
                ratio = f"{ours / theirs:.3f}" if ours is not None and theirs else "-"
                rows.append([f"{client}: {label} {qname}", shown_ours, shown_theirs, ratio, target])
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=1, help="alternate the two this many times")
    ap.add_argument("--ttfe", type=int, default=50, help="requests timed for the first chunk")
    ap.add_argument(
        "--sdk", type=int, default=200, help="interleaved request pairs per client (SDK rows)"
    )
    ap.add_argument("--no-write", action="store_true", help="do not rewrite bench/RESULTS.md")
    ap.add_argument(
        "--skip-litellm", action="store_true", help="tokenwire alone (implies --no-write)"
    )
    ap.add_argument("--engine", default="granian", choices=["granian", "h1"])
    args = ap.parse_args()
    ENGINE[0] = args.engine

    litellm_version = "-" if args.skip_litellm else ensure_litellm()
    load_before = tb.loadavg()
    scripts: dict[str, dict[str, Any]] = {
        name: {"text": tb.words(n), "input_tokens": 5} for name, n in SCRIPTS.items()
    }
    scripts["paced"]["delay_s"] = PACED_DELAY_S
    figs: list[Figures] = []
    gateways: list[tuple[str, Callable[[str, Path], tb.ServedProcess]]] = [
        ("tokenwire", tokenwire_server)
    ]
    if not args.skip_litellm:
        gateways.append(("LiteLLM", litellm_server))
    with tb.fake_upstream_process(scripts) as fake:
        for r in range(args.rounds):
            for name, make in gateways:
                print(f"round {r + 1}/{args.rounds}: {name}...", flush=True)
                figs.append(run_one(name, make, fake, args.ttfe, args.sdk))
    tw = best(figs, "tokenwire")
    ll = best(figs, "LiteLLM") if not args.skip_litellm else Figures("LiteLLM")

    def ratio(a: float, b: float) -> str:
        return f"{a / b:.3f}" if b else "-"

    def met(ok: bool) -> str:
        return "met" if ok else "**missed**"

    def versus(ours: float, theirs: float) -> str:
        """The CPU target: a ratio to LiteLLM's, so none without it."""
        if not theirs:
            return f"<= {CPU_RATIO:.3f}: -"
        return f"<= {CPU_RATIO:.3f}: " + met(ours <= theirs * CPU_RATIO)

    def per_request(ours: float, theirs: float) -> str:
        target = f"<= 1/{round(1 / CPU_REQUEST_RATIO)} of LiteLLM's: "
        return target + (met(ours <= theirs * CPU_REQUEST_RATIO) if theirs else "-")

    def shown(value: float, fmt: str) -> str:
        return format(value, fmt) if value else "-"

    rows = [
        [
            f"CPU µs per chunk, {LONG_STREAMS} x 2,000-chunk streams",
            f"{tw.cpu_seq_us:.1f}",
            shown(ll.cpu_seq_us, ".1f"),
            ratio(tw.cpu_seq_us, ll.cpu_seq_us),
            versus(tw.cpu_seq_us, ll.cpu_seq_us),
        ],
        [
            "CPU µs per chunk, 100 concurrent x 200 chunks",
            f"{tw.cpu_conc_us:.1f}",
            shown(ll.cpu_conc_us, ".1f"),
            ratio(tw.cpu_conc_us, ll.cpu_conc_us),
            versus(tw.cpu_conc_us, ll.cpu_conc_us),
        ],
        [
            f"CPU µs per request, {CPU_REQUESTS} short streams (7 chunks) in a row",
            f"{tw.cpu_stream_req_us:.0f}",
            shown(ll.cpu_stream_req_us, ".0f"),
            ratio(tw.cpu_stream_req_us, ll.cpu_stream_req_us),
            per_request(tw.cpu_stream_req_us, ll.cpu_stream_req_us),
        ],
        [
            f"CPU µs per request, {CPU_REQUESTS} non-streaming calls in a row",
            f"{tw.cpu_whole_req_us:.0f}",
            shown(ll.cpu_whole_req_us, ".0f"),
            ratio(tw.cpu_whole_req_us, ll.cpu_whole_req_us),
            per_request(tw.cpu_whole_req_us, ll.cpu_whole_req_us),
        ],
        [
            "first-token overhead: first content chunk, added to the upstream's (ms, median of "
            f"{args.ttfe}; upstream alone {tw.direct_ms:.2f} / {shown(ll.direct_ms, '.2f')})",
            f"{tw.added_ms:.2f}",
            shown(ll.added_ms, ".2f"),
            ratio(tw.added_ms, ll.added_ms),
            f"<= {FIRST_TOKEN_MS} ms: " + met(tw.added_ms <= FIRST_TOKEN_MS),
        ],
        [
            "non-streaming call: whole answer, added to the upstream's (ms, median of "
            f"{args.ttfe}; upstream alone {tw.whole_direct_ms:.2f} / "
            f"{shown(ll.whole_direct_ms, '.2f')})",
            f"{tw.whole_added_ms:.2f}",
            shown(ll.whole_added_ms, ".2f"),
            ratio(tw.whole_added_ms, ll.whole_added_ms),
            "(shown)",
        ],
        [
            "peak RSS, 100 concurrent streams (MiB)",
            f"{tw.peak_rss_mib:.1f}",
            shown(ll.peak_rss_mib, ".1f"),
            ratio(tw.peak_rss_mib, ll.peak_rss_mib),
            "",
        ],
        [
            "idle RSS after start (MiB)",
            f"{tw.idle_rss_mib:.1f}",
            shown(ll.idle_rss_mib, ".1f"),
            ratio(tw.idle_rss_mib, ll.idle_rss_mib),
            f"< {IDLE_RSS_MB} MB: " + met(tw.idle_rss_mib * 1.048576 < IDLE_RSS_MB),
        ],
        [
            "idle RSS after warm-up (MiB)",
            f"{tw.warm_rss_mib:.1f}",
            shown(ll.warm_rss_mib, ".1f"),
            ratio(tw.warm_rss_mib, ll.warm_rss_mib),
            "",
        ],
        [
            "start-up, spawn to first 200 (s)",
            f"{tw.start_s:.2f}",
            shown(ll.start_s, ".2f"),
            ratio(tw.start_s, ll.start_s),
            "(shown)",
        ],
    ]
    table = md_table(
        ["figure", "tokenwire", f"LiteLLM {litellm_version}", "tokenwire / LiteLLM", "target"],
        rows,
        "lrrrl",
    )
    sdk_table = md_table(
        [
            "added latency (ms), through the gateway minus straight to the upstream",
            "tokenwire",
            f"LiteLLM {litellm_version}",
            "tokenwire / LiteLLM",
            "target",
        ],
        sdk_rows(figs, not args.skip_litellm),
        "lrrrl",
    )

    def per_round(name: str, client: str, figure: str, q: float) -> str:
        values = [
            f.sdk[client].added_ms(figure, q) for f in figs if f.name == name and client in f.sdk
        ]
        return ", ".join(sdk.fmt(v, ".3f") for v in values)

    def absolute(name: str, client: str, path: str, q: float) -> str:
        values = [
            f.sdk[client].absolute_ms("first", path, q)
            for f in figs
            if f.name == name and client in f.sdk
        ]
        shown = [v for v in values if v is not None]
        return sdk.fmt(statistics.median(shown) if shown else None, ".3f")

    cpu_ratio_row = (
        f"- CPU per chunk, issue 29's target (<= 1/{round(1 / CPU_RATIO_29)} of LiteLLM's): "
        f"sequential {ratio(tw.cpu_seq_us, ll.cpu_seq_us)} "
        f"({met(bool(ll.cpu_seq_us) and tw.cpu_seq_us <= ll.cpu_seq_us * CPU_RATIO_29)}), "
        f"concurrent {ratio(tw.cpu_conc_us, ll.cpu_conc_us)} "
        f"({met(bool(ll.cpu_conc_us) and tw.cpu_conc_us <= ll.cpu_conc_us * CPU_RATIO_29)})."
    )
    sdk_notes = [
        cpu_ratio_row,
        f"- {args.sdk} interleaved pairs per client and round (direct, gateway; then gateway, "
        "direct; ...), concurrency 1, each client kept alive per path; the paced reply: "
        f"{max(10, args.sdk // 10)} pairs of {SCRIPTS['paced']} chunks. Each figure: the "
        "quantile through the gateway minus the same quantile straight to the upstream, "
        "median over rounds.",
        "- first token through the gateway, absolute p50 / p99 (ms): "
        + "; ".join(
            f"{client} tokenwire {absolute('tokenwire', client, 'via', 0.5)} / "
            f"{absolute('tokenwire', client, 'via', 0.99)}"
            + (
                f", LiteLLM {absolute('LiteLLM', client, 'via', 0.5)} / "
                f"{absolute('LiteLLM', client, 'via', 0.99)}"
                if not args.skip_litellm
                else ""
            )
            + f", upstream alone {absolute('tokenwire', client, 'direct', 0.5)} / "
            f"{absolute('tokenwire', client, 'direct', 0.99)}"
            for client in CLIENTS
        )
        + ".",
        "- per round, added first token p50 / p99 (ms) through openai.OpenAI: tokenwire "
        + per_round("tokenwire", "openai.OpenAI", "first", 0.5)
        + " / "
        + per_round("tokenwire", "openai.OpenAI", "first", 0.99)
        + "; LiteLLM "
        + per_round("LiteLLM", "openai.OpenAI", "first", 0.5)
        + " / "
        + per_round("LiteLLM", "openai.OpenAI", "first", 0.99)
        + ".",
    ]
    notes = [
        f"- 100 concurrent streams took {tw.conc_wall_s:.2f} s through tokenwire and "
        f"{ll.conc_wall_s:.2f} s through LiteLLM (the fake upstream and the client share "
        "the same CPUs).",
        f"- chunks (SSE frames) a client received per stream: tokenwire {tw.frames}, "
        f"LiteLLM {ll.frames}; CPU is divided by the upstream's content chunks.",
        f"- rounds: {args.rounds} (each figure is the median over rounds); per round, first "
        "content chunk added (ms) tokenwire "
        + ", ".join(f"{f.added_ms:.2f}" for f in figs if f.name == "tokenwire")
        + "; LiteLLM "
        + ", ".join(f"{f.added_ms:.2f}" for f in figs if f.name == "LiteLLM")
        + "; CPU µs/chunk (sequential) tokenwire "
        + ", ".join(f"{f.cpu_seq_us:.1f}" for f in figs if f.name == "tokenwire")
        + "; LiteLLM "
        + ", ".join(f"{f.cpu_seq_us:.1f}" for f in figs if f.name == "LiteLLM")
        + ".",
    ]
    print("\n".join(table))
    print("\n".join(notes))
    print("\n".join(sdk_table))
    print("\n".join(sdk_notes))
    if not (args.no_write or args.skip_litellm):
        text = [
            "## vs-litellm",
            "",
            "tokenwire's gateway and the LiteLLM proxy side by side, one worker each, in front "
            "of the same fake OpenAI upstream (`tokenwire.testing.upstream.FakeUpstream`, one "
            "HTTP chunk per event, its own process) on 127.0.0.1; both asked OpenAI Chat "
            "Completions streaming requests and answering OpenAI chunks (tokenwire via its "
            "OpenAI ingress and `openai` provider). Each gateway is started and measured alone. "
            "CPU and RSS are the gateway's whole process tree (`/proc`); first-chunk times are "
            "from a raw asyncio client, request written to the first chunk read whose "
            "`choices[0].delta.content` is non-empty (not the role-only opening chunk). LiteLLM "
            "runs from `bench/.venv-litellm` with `LITELLM_LOCAL_MODEL_COST_MAP=True` and "
            "`LITELLM_TELEMETRY_DISABLED=true` and a random master key (it refuses to start "
            f"without one; the client sends it to both). Targets: {TARGETS}.",
            "",
            *header("bench/vs_litellm.py", load_before),
            f"- LiteLLM: {litellm_version} (uvicorn, `--num_workers 1`); tokenwire: "
            f'`[server] engine = "{args.engine}"`',
            "",
            *table,
            "",
            *notes,
            "",
            "Added latency as a user of the openai SDK feels it (issue 29): the SDK's own "
            "clients, default httpx transport, only `base_url` and `api_key` set; the raw "
            "asyncio client as a second row (`bench/_sdk_latency.py`). Targets: first token "
            f"p99 <= 1/{round(1 / SDK_P99_RATIO)} of LiteLLM's and p50 <= {SDK_P50_MS} ms, "
            f"non-streaming p99 <= 1/{round(1 / SDK_P99_RATIO)} of LiteLLM's, CPU per chunk "
            f"<= 1/{round(1 / CPU_RATIO_29)} of LiteLLM's.",
            "",
            *sdk_table,
            "",
            *sdk_notes,
            "",
        ]
        write_section("vs-litellm", "\n".join(text), keep=PROFILES)
        print("wrote the '## vs-litellm' section of bench/RESULTS.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
