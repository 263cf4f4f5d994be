"""Failover: how long resume is off for a Redis Cluster primary's slots when it dies.

Starts a Redis Cluster of three primaries with a replica each on 127.0.0.1
(``cluster-node-timeout 1000``, the launcher of the test suite,
tests/production/redis_cluster.py) and two ``tokenwire serve`` gateways whose
``[resume]`` store is that cluster (``lease_s = 15``). Paced resumable demo
streams run on both gateways the whole time, in every slot range. Then, ``--failovers``
times: SIGKILL a primary, and measure from that moment

- *promoted*: until ``CLUSTER NODES`` of every live node shows its replica serving
  its slots (Redis's own part: ``cluster-node-timeout`` plus an election);
- *first record*: until a stream of those slots has a new event on the promoted
  replica (polled every 10 ms): the first successful record there;
- *every gateway healthy*: until each gateway has logged ``resume_store_available``
  for the dead node (the log line's timestamp).

The killed node is restarted (it rejoins as a replica) before the next failover.
Prints a table and rewrites the "## failover" section of bench/RESULTS.md.

Run: ``.venv/bin/python bench/failover.py [--failovers 10] [--no-write]`` from the
checkout. Needs ``redis-server`` (Debian: ``apt-get install redis-server``).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import json
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import msgspec
import redis

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))  # the cluster launcher of the test suite

from tests.production.redis_cluster import RedisCluster  # noqa: E402

from _common import header, md_table, write_section  # noqa: E402
from tokenwire.testing.processes import ServedProcess, free_port, gateway_argv, loadavg  # noqa: E402
from tokenwire.testing.waiting import wait_until  # noqa: E402

STREAMS_PER_GATEWAY = 12
#: Each stream: a token every 100 ms for as long as the run lasts (it is cancelled at the end).
PACE = {"delay_ms": 100, "tokens": 20_000}
WAIT_S = 60.0


def _config(url: str) -> str:
    return "\n".join(
        [
            "[resume]",
            'backend = "redis"',
            f'url = "{url}"',
            "cluster = true",
            "lease_s = 15.0",
            "grace_s = 60.0",
            "",
        ]
    )


@contextlib.contextmanager
def _gateway(workdir: Path, config: str) -> Iterator[ServedProcess]:
    port = free_port()
    path = workdir / f"gateway-{port}.toml"
    path.write_text(config)
    served = ServedProcess(
        gateway_argv(str(path), port), port, stderr_path=workdir / f"gateway-{port}.log"
    )
    with served:
        yield served


def _stream(url: str, request_id: str, stop: threading.Event) -> None:
    body = {
        "version": "1.0",
        "stream": True,
        "model": "demo",
        "messages": [{"role": "user", "content": "failover"}],
        "metadata": {"request_id": request_id},
        "extensions": {"tokenwire:resumable": True, "tokenwire:demo": PACE},
    }
    headers = {"content-type": "application/llm-request+json"}
    with (
        httpx.Client(base_url=url, timeout=WAIT_S) as client,
        client.stream(
            "POST", "/v1/stream", content=msgspec.json.encode(body), headers=headers
        ) as r,
    ):
        for _chunk in r.iter_raw():
            if stop.is_set():
                return


def _top(client: redis.Redis, key: str) -> int:
    """The last seq stored in stream ``key`` on that node (-1: none)."""
    last = client.execute_command("XREVRANGE", key, "+", "-", "COUNT", 1)
    if not last:
        return -1
    entry_id = last[0][0]
    return int((entry_id.decode() if isinstance(entry_id, bytes) else entry_id).split("-")[1]) - 1


def _recorded(cluster: RedisCluster, request_id: str) -> bool:
    key = f"tw:{{{request_id}}}:s"
    with contextlib.closing(
        redis.Redis(host="127.0.0.1", port=cluster.primary_of(key), socket_timeout=5.0)
    ) as client:
        return _top(client, key) >= 0


def _available_at(gateway: ServedProcess, node: str, after: float) -> float | None:
    """The wall time of the gateway's first ``resume_store_available`` for ``node`` after
    ``after``."""
    for line in gateway.stderr().splitlines():
        if '"resume_store_available"' not in line:
            continue
        with contextlib.suppress(ValueError):
            fields = json.loads(line)
            if fields.get("node") == node and fields["ts"] >= after:
                return float(fields["ts"])
    return None


def _failover(cluster: RedisCluster, gateways: list[ServedProcess], ids: list[str]) -> list[float]:
    """One failover: (promoted, first record, every gateway healthy) in seconds."""
    live = set(cluster.live_ports())
    nodes = cluster.nodes(cluster.live_ports()[0])
    doomed = next(
        n.port
        for n in nodes
        if n.serving and any(r.primary_id == n.id and r.port in live for r in nodes)
    )
    heirs = cluster.replicas_of(doomed)
    ours = [i for i in ids if cluster.primary_of(f"tw:{{{i}}}:s") == doomed]
    assert ours, "no stream in the dying primary's slots"
    wall, start = time.time(), time.monotonic()
    cluster.kill(doomed)
    heir = cluster.wait_promoted(heirs)
    promoted = time.monotonic() - start
    reader = redis.Redis(host="127.0.0.1", port=heir, socket_timeout=5.0)
    try:
        tops = {i: _top(reader, f"tw:{{{i}}}:s") for i in ours}
        recorded: list[float] = []

        def advanced() -> bool:
            if any(_top(reader, f"tw:{{{i}}}:s") > tops[i] for i in ours):
                recorded.append(time.monotonic() - start)
                return True
            return False

        wait_until(advanced, timeout=WAIT_S, max_interval=0.01, what="a record on the heir")
    finally:
        reader.close()
    node = f"127.0.0.1:{doomed}"
    marks: list[float] = []

    def all_healthy() -> bool:
        marks[:] = [t for g in gateways if (t := _available_at(g, node, wall)) is not None]
        return len(marks) == len(gateways)

    wait_until(all_healthy, timeout=WAIT_S, what="every gateway healthy")
    cluster.restart(doomed)
    return [promoted, recorded[0], max(marks) - wall]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--failovers", type=int, default=10)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    binary = shutil.which("redis-server")
    if binary is None:
        sys.exit("redis-server is not installed (Debian: apt-get install redis-server)")
    load_before = loadavg()
    results: list[list[float]] = []
    with (
        tempfile.TemporaryDirectory(prefix="tokenwire-failover-") as tmp,
        RedisCluster(binary, Path(tmp), 3, replicas=1, node_timeout_ms=1000) as cluster,
    ):
        config = _config(cluster.url)
        with (
            _gateway(Path(tmp), config) as a,
            _gateway(Path(tmp), config) as b,
            concurrent.futures.ThreadPoolExecutor(2 * STREAMS_PER_GATEWAY) as pool,
        ):
            stop = threading.Event()
            ids = [f"failover-{i}-{time.time_ns()}" for i in range(2 * STREAMS_PER_GATEWAY)]
            reads = [
                pool.submit(_stream, (a, b)[i % 2].url, request_id, stop)
                for i, request_id in enumerate(ids)
            ]
            try:
                wait_until(
                    lambda: all(_recorded(cluster, i) for i in ids) or any(r.done() for r in reads),
                    timeout=WAIT_S,
                    what="every stream recorded",
                )
                for read in reads:
                    if read.done():
                        read.result()  # raises why it ended
                for n in range(args.failovers):
                    results.append(_failover(cluster, [a, b], ids))
                    print(f"failover {n + 1}: " + ", ".join(f"{x:.2f} s" for x in results[-1]))
            finally:
                stop.set()
                a.stop()
                b.stop()
                concurrent.futures.wait(reads, timeout=WAIT_S)
    _report(results, load_before, args.no_write)


def _report(results: list[list[float]], load_before: str, no_write: bool) -> None:
    columns = ["from the primary's death to", "median (s)", "max (s)"]
    names = [
        "its replica promoted (`CLUSTER NODES` of every node)",
        "the first successful record on the promoted replica",
        "every gateway reporting healthy (`resume_store_available`)",
    ]
    columns_of = [list(col) for col in zip(*results, strict=True)]
    # What the gateways add to Redis's own failover: the time after the promotion.
    names += [
        "(after the promotion) the first record on the promoted replica",
        "(after the promotion) every gateway reporting healthy",
    ]
    columns_of += [
        [r[1] - r[0] for r in results],
        [r[2] - r[0] for r in results],
    ]
    rows = [
        [name, f"{statistics.median(col):.2f}", f"{max(col):.2f}"]
        for name, col in zip(names, columns_of, strict=True)
    ]
    table = md_table(columns, rows)
    print("\n".join(table))
    if no_write:
        return
    lines = [
        "## failover",
        "",
        f"A Redis Cluster primary killed (SIGKILL) {len(results)} times under "
        f"{2 * STREAMS_PER_GATEWAY} paced resumable demo streams (a token every 100 ms) "
        "on two `tokenwire serve` gateways sharing the cluster (three primaries with a "
        "replica each, `cluster-node-timeout 1000`, `lease_s = 15`; the killed node "
        "restarted as a replica before the next). *First record*: a stream of the dead "
        "node's slots has a new event on the promoted replica (polled every 10 ms). "
        "*Every gateway healthy*: the last of the two gateways' `resume_store_available` "
        "lines for the dead node. Gateways, Redis and the streams share the machine.",
        "",
        *header("bench/failover.py", load_before),
        "",
        *table,
        "",
        "The gateways read the slot map again and ask the slots' new owner every 0.25 s "
        "while a node is down, so the first record and the healthy line follow the "
        "promotion (as `CLUSTER NODES` shows it) by at most about that, well within a "
        "second; the rest is Redis's own failure detection and election.",
    ]
    write_section("failover", "\n".join(lines))


if __name__ == "__main__":
    main()
