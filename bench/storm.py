"""Storm: the memory and stall attacks of issue 16 against a real ``tokenwire serve``.

One ``tokenwire serve`` (one worker, the default config: the demo model) on
127.0.0.1, with ``--write-timeout``/``--body-timeout``/``--header-timeout``
given. Each attack in turn:

- ``never-read``: ``--clients`` clients POST a long demo stream and never read
  a byte (a 4 KiB receive buffer); held until the gateway has closed them all;
- ``slowloris``: half the clients trickle a request head a byte at a time,
  half send the head and trickle the body; held until the gateway has closed
  them all;
- ``max-tokens``: a few requests with ``"max_tokens": 1e30`` to the demo model;
- ``schema``: a few requests declaring a tool whose schema asks for an array
  with ``"minItems": 10000000``, and a message that makes the demo call it.

For each attack it samples the serving process tree's RSS (``/proc``) every
50 ms and ``GET /healthz`` latency every 20 ms (one keep-alive connection)
while the attack runs, and prints baseline, peak and after RSS (after: once
the attack's connections are gone and 5 s have passed) and the ``/healthz``
p50/p99, against the targets: peak within baseline + 100 MB, after within
10 % of baseline, ``/healthz`` p99 under 50 ms.

Bounded: every attack has a time limit, every client socket a timeout, and an
attack is aborted (the server killed and restarted) when the tree's RSS
passes baseline + ``--rss-cap`` MiB, so a gateway without the fixes cannot
take the machine down. Everything started is stopped.

Run: ``.venv/bin/python bench/storm.py [--clients 300] [--write-timeout 5]
[--attacks never-read,slowloris,max-tokens,schema] [--engine granian,h1] [--no-write]``
(``--engine``: the HTTP/1.1 server, ``[server] engine``; several: a row for each).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import header, md_table, write_section  # noqa: E402
from tokenwire.testing import processes  # noqa: E402

MEDIA_TYPE = "application/llm-request+json"
ATTACKS = ("never-read", "slowloris", "max-tokens", "schema")
#: Tokens each never-reading client asks for: the demo's hard limit, ~3.5 MB of frames,
#: far more than the socket, server and outbox buffers together.
TOKENS = 32768
TARGET_PEAK_MB = 100.0
TARGET_AFTER = 0.10
TARGET_P99_MS = 50.0
#: "after" is the RSS this long after the attack's connections are gone (issue 29: 5 s).
AFTER_S = 5.0


@dataclass
class Row:
    attack: str
    clients: int
    baseline: float  # MiB
    peak: float
    after: float
    p50_ms: float
    p99_ms: float
    probes: int
    notes: list[str] = field(default_factory=list)

    @property
    def peak_ok(self) -> bool:
        return (self.peak - self.baseline) * 1.048576 <= TARGET_PEAK_MB

    @property
    def after_ok(self) -> bool:
        return self.after <= self.baseline * (1 + TARGET_AFTER)

    @property
    def p99_ok(self) -> bool:
        return self.p99_ms < TARGET_P99_MS


def standard_body(**fields: object) -> bytes:
    body: dict[str, object] = {"version": "1.0", "stream": True, "model": "demo"}
    body["messages"] = [{"role": "user", "content": "Tell me everything about storms."}]
    body.update(fields)
    return json.dumps(body).encode()


def head(body_len: int) -> bytes:
    return (
        f"POST /v1/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {MEDIA_TYPE}\r\n"
        f"Content-Length: {body_len}\r\n\r\n"
    ).encode()


class Sampler:
    """RSS of the tree every 50 ms and /healthz latency every 20 ms, in threads."""

    def __init__(self, gw: processes.ServedProcess) -> None:
        self.gw = gw
        self.pids = gw.pids()
        self.peak_kib = 0
        self.latencies: list[float] = []
        self.failures = 0
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._rss, daemon=True),
            threading.Thread(target=self._health, daemon=True),
        ]

    def rss_mib(self) -> float:
        return processes.rss_kib(self.pids) / 1024

    def _rss(self) -> None:
        while not self._stop.is_set():
            self.peak_kib = max(self.peak_kib, processes.rss_kib(self.pids))
            self._stop.wait(0.05)

    def _health(self) -> None:
        sock: socket.socket | None = None
        request = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        while not self._stop.is_set():
            t0 = time.perf_counter()
            try:
                if sock is None:
                    sock = socket.create_connection(("127.0.0.1", self.gw.port), timeout=10)
                sock.sendall(request)
                got = b""
                while b"\r\n\r\n" not in got or not got.endswith(b"}"):
                    chunk = sock.recv(4096)
                    if not chunk:
                        raise ConnectionError("closed")
                    got += chunk
                self.latencies.append(time.perf_counter() - t0)
            except OSError:
                self.failures += 1
                self.latencies.append(time.perf_counter() - t0)
                if sock is not None:
                    sock.close()
                sock = None
            self._stop.wait(0.02)
        if sock is not None:
            sock.close()

    def __enter__(self) -> Sampler:
        for thread in self._threads:
            thread.start()
        # The probe's own keep-alive connection is open before the attack counts
        # the worker's idle connections.
        deadline = time.monotonic() + 30
        while not self.latencies and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.1)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=15)


class RssCapExceeded(Exception):
    pass


def wait_until(
    condition: Callable[[], bool], limit_s: float, sampler: Sampler, cap_kib: int
) -> bool:
    """Poll ``condition`` every 100 ms for ``limit_s``; abort over the RSS cap."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if sampler.peak_kib > cap_kib:
            raise RssCapExceeded
        if condition():
            return True
        time.sleep(0.1)
    return False


def connections(gw: processes.ServedProcess) -> int:
    return processes.open_sockets(gw.worker())


@contextlib.contextmanager
def client_sockets() -> Iterator[list[socket.socket]]:
    socks: list[socket.socket] = []
    try:
        yield socks
    finally:
        for sock in socks:
            sock.close()


def attack_never_read(
    gw: processes.ServedProcess, clients: int, sampler: Sampler, cap: int
) -> list[str]:
    idle = connections(gw)
    body = standard_body(extensions={"tokenwire:demo": {"tokens": TOKENS}})
    with client_sockets() as socks:
        for _ in range(clients):
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.settimeout(10)
            sock.connect(("127.0.0.1", gw.port))
            sock.sendall(head(len(body)) + body)
            socks.append(sock)
        closed = wait_until(lambda: connections(gw) <= idle, 120, sampler, cap)
        # Only now (the attack is over) look at what each client was answered.
        seen: dict[str, int] = {}
        for sock in socks:
            sock.setblocking(False)
            try:
                status = sock.recv(12)[9:12].decode() or "closed"
            except BlockingIOError:
                status = "nothing"
            except OSError:
                status = "reset"
            seen[status] = seen.get(status, 0) + 1
    notes = ["answered: " + ", ".join(f"{n}x {what}" for what, n in sorted(seen.items()))]
    return notes if closed else [*notes, "the gateway had not closed every connection within 120 s"]


def attack_slowloris(
    gw: processes.ServedProcess, clients: int, sampler: Sampler, cap: int
) -> list[str]:
    idle = connections(gw)
    body = standard_body()
    request_head = head(len(body))
    with client_sockets() as socks:
        for _ in range(clients):
            sock = socket.socket()
            sock.settimeout(10)
            sock.connect(("127.0.0.1", gw.port))
            socks.append(sock)
        # Trickle: even clients send their head a byte at a time; odd ones send
        # the whole head, then the body a byte at a time.
        plans = [request_head if i % 2 == 0 else request_head + body for i in range(clients)]
        sent = [0 if i % 2 == 0 else len(request_head) for i in range(clients)]
        for i in range(1, clients, 2):
            with contextlib.suppress(OSError):
                socks[i].sendall(request_head)
        alive = set(range(clients))
        deadline = time.monotonic() + 60
        while alive and time.monotonic() < deadline and connections(gw) > idle:
            if sampler.peak_kib > cap:
                raise RssCapExceeded
            for i in list(alive):
                chunk = plans[i][sent[i] : sent[i] + 1]
                try:
                    socks[i].sendall(chunk)
                    sent[i] += 1
                except OSError:
                    alive.discard(i)
            time.sleep(0.5)
        closed = wait_until(lambda: connections(gw) <= idle, 60, sampler, cap)
    return [] if closed else ["some trickling connections were still open after 60 s"]


def _post_and_read(gw: processes.ServedProcess, body: bytes, limit_s: float) -> str:
    """POST, read the reply up to 64 MiB or ``limit_s``; a short description of the outcome."""
    with socket.create_connection(("127.0.0.1", gw.port), timeout=limit_s) as sock:
        sock.sendall(head(len(body)) + body)
        got = b""
        deadline = time.monotonic() + limit_s
        try:
            while time.monotonic() < deadline and len(got) < 64 << 20:
                chunk = sock.recv(1 << 16)
                if not chunk:
                    break
                got += chunk
                if got.endswith(b"0\r\n\r\n") or (
                    b"content-length" in got[:300].lower() and b"}" in got[-2:]
                ):
                    break
        except TimeoutError:
            return "no complete answer within the time limit"
    status = got[9:12].decode(errors="replace")
    if status == "200":
        return "200 stream.end" if b"stream.end" in got else f"200, {len(got)} bytes, unfinished"
    payload = got.split(b"\r\n\r\n", 1)[-1][:120].decode(errors="replace")
    return f"{status} {payload}"


def attack_requests(
    gw: processes.ServedProcess,
    clients: int,
    sampler: Sampler,
    cap: int,
    make: Callable[[int], bytes],
) -> list[str]:
    outcomes: list[str] = []
    errors: list[BaseException] = []

    def one(i: int) -> None:
        try:
            outcomes.append(_post_and_read(gw, make(i), 30))
        except OSError as exc:  # pragma: no cover - reported, not raised
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(clients)]
    for thread in threads:
        thread.start()
    wait_until(lambda: not any(t.is_alive() for t in threads), 60, sampler, cap)
    counts: dict[str, int] = {}
    for outcome in outcomes:
        counts[outcome] = counts.get(outcome, 0) + 1
    notes = [f"{n}x {what}" for what, n in sorted(counts.items())]
    notes += [f"{len(errors)}x {type(errors[0]).__name__}"] if errors else []
    return notes


def absurd_max_tokens(i: int) -> bytes:
    """``max_tokens`` as an attacker writes it: ``1e30``, 10**30 as an integer, 2**31 - 1."""
    value = ("1e30", "1" + "0" * 30, "2147483647")[i % 3]
    return standard_body().replace(
        b'"stream": true', b'"stream": true, "parameters": {"max_tokens": ' + value.encode() + b"}"
    )


def amplifying_schema() -> bytes:
    tool = {
        "name": "collect_storms",
        "description": "collect storms",
        "parameters": {
            "type": "object",
            "properties": {
                "storms": {"type": "array", "minItems": 10_000_000, "items": {"type": "string"}}
            },
            "required": ["storms"],
        },
    }
    body = json.loads(standard_body())
    body["tools"] = [tool]
    body["messages"] = [{"role": "user", "content": "Please collect storms for me."}]
    return json.dumps(body).encode()


def serve(args: argparse.Namespace) -> processes.ServedProcess:
    port = processes.free_port()
    argv = processes.gateway_argv(None, port)
    argv += ["--write-timeout", str(args.write_timeout), "--body-timeout", str(args.body_timeout)]
    argv += ["--header-timeout", str(args.header_timeout)]
    env = {**os.environ, "TOKENWIRE_SERVER_ENGINE": args.engine}
    gw = processes.ServedProcess(argv, port, timeout_s=60, env=env)
    gw.start()
    # Warm up: the first streams allocate what later ones reuse.
    for _ in range(20):
        _post_and_read(gw, standard_body(parameters={"max_tokens": 200}), 30)
    time.sleep(1)
    return gw


def run_attack(args: argparse.Namespace, name: str) -> Row:
    gw = serve(args)
    try:
        baseline_kib = processes.rss_kib(gw.pids())
        cap = baseline_kib + args.rss_cap * 1024
        clients = {"never-read": args.clients, "slowloris": args.clients}.get(name, args.requests)
        notes: list[str] = []
        with Sampler(gw) as sampler:
            try:
                if name == "never-read":
                    notes = attack_never_read(gw, clients, sampler, cap)
                elif name == "slowloris":
                    notes = attack_slowloris(gw, clients, sampler, cap)
                elif name == "max-tokens":
                    notes = attack_requests(gw, clients, sampler, cap, absurd_max_tokens)
                else:
                    notes = attack_requests(
                        gw, clients, sampler, cap, lambda _i: amplifying_schema()
                    )
            except RssCapExceeded:
                notes = [f"ABORTED: RSS passed baseline + {args.rss_cap} MiB"]
            peak_kib = sampler.peak_kib
            latencies = list(sampler.latencies)
            failures = sampler.failures
        if failures:
            notes.append(f"{failures} /healthz probes failed")
        if notes and notes[0].startswith("ABORTED"):
            after = float("nan")
        else:
            time.sleep(AFTER_S)
            after = processes.rss_kib(gw.pids()) / 1024
        return Row(
            name,
            clients,
            baseline_kib / 1024,
            peak_kib / 1024,
            after,
            processes.percentile(latencies, 0.5) * 1000,
            processes.percentile(latencies, 0.99) * 1000,
            len(latencies),
            notes,
        )
    finally:
        gw.close()


def mark(ok: bool) -> str:
    return "met" if ok else "**missed**"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=300)
    parser.add_argument("--requests", type=int, default=6, help="max-tokens and schema requests")
    parser.add_argument("--write-timeout", type=float, default=5.0)
    parser.add_argument("--body-timeout", type=float, default=5.0)
    parser.add_argument("--header-timeout", type=float, default=5.0)
    parser.add_argument("--rss-cap", type=int, default=1024, help="MiB over baseline: abort")
    parser.add_argument("--attacks", default=",".join(ATTACKS))
    parser.add_argument(
        "--engine",
        default="granian",
        help='the HTTP/1.1 server: "granian", "h1", or both ("granian,h1": rows for each)',
    )
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    engines = args.engine.split(",")
    load_before = processes.loadavg()
    rows = []
    for engine, name in [(e, n) for n in args.attacks.split(",") for e in engines]:
        args.engine = engine
        print(f"-- {name} ({engine}) ...", flush=True)
        row = run_attack(args, name)
        row.attack = f"{name} ({engine})" if len(engines) > 1 else name
        rows.append(row)
        print(
            f"{row.attack:>10}: {row.clients} clients; RSS baseline {row.baseline:.1f} MiB, "
            f"peak {row.peak:.1f} (+{row.peak - row.baseline:.1f}, {mark(row.peak_ok)}), "
            f"after {row.after:.1f} ({(row.after / row.baseline - 1) * 100:+.0f} %, "
            f"{mark(row.after_ok)}); /healthz p50 {row.p50_ms:.1f} ms, p99 {row.p99_ms:.1f} ms "
            f"({mark(row.p99_ok)}, {row.probes} probes)"
            + (f"; {'; '.join(row.notes)}" if row.notes else ""),
            flush=True,
        )
    if args.no_write:
        return
    table = md_table(
        [
            "attack",
            "clients",
            "baseline MiB",
            "peak MiB",
            "after MiB",
            "/healthz p50 ms",
            "/healthz p99 ms",
            "targets (peak / after / p99)",
            "notes",
        ],
        [
            [
                row.attack,
                str(row.clients),
                f"{row.baseline:.1f}",
                f"{row.peak:.1f} (+{row.peak - row.baseline:.1f})",
                f"{row.after:.1f} ({(row.after / row.baseline - 1) * 100:+.0f} %)",
                f"{row.p50_ms:.1f}",
                f"{row.p99_ms:.1f}",
                " / ".join(mark(ok) for ok in (row.peak_ok, row.after_ok, row.p99_ok)),
                "; ".join(row.notes) or "-",
            ]
            for row in rows
        ],
        align="lrrrrrrll",
    )
    lines = [
        "## storm",
        "",
        *header("bench/storm.py", load_before),
        f"- limits: --write-timeout {args.write_timeout:g} --body-timeout {args.body_timeout:g} "
        f"--header-timeout {args.header_timeout:g}; defaults otherwise (docs/gateway.md, "
        '"Request limits and timeouts")',
        "- RSS: the `tokenwire serve` process tree (server + one worker), from /proc; "
        f"after = {AFTER_S:g} s after the attack's connections are gone",
        "- engines: " + ", ".join(engines) + ' (`[server] engine`; "h1" is `server.http1`)',
        f"- targets: peak within baseline + {TARGET_PEAK_MB:g} MB, after within "
        f"{TARGET_AFTER:.0%} of baseline, /healthz p99 under {TARGET_P99_MS:g} ms",
        "",
        *table,
    ]
    write_section("storm", "\n".join(lines), keep="Where a target is missed")
    print("wrote the storm section of bench/RESULTS.md")


if __name__ == "__main__":
    main()
