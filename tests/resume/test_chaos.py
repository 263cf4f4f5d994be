"""Chaos under load: Redis failing over, again and again, under 50 resumable streams.

Two gateways share a Redis Cluster of three primaries with a replica each
(``cluster-node-timeout 1000``, ``lease_s = 15`` as docs/scaling.md advises).
Each round starts 50 resumable streams (half on each gateway) and uses up a
limited key's one request a minute, then kills a primary, waits for its replica
to be promoted, kills another primary, restarts the first one, and lets the
streams finish. Then every stream, resumed from the start on the other
gateway, is the live client's stream: every seq once, the same events. The
key is still refused (its count came through), and each gateway logged its
``resume_store_unavailable`` and ``resume_store_available`` lines in pairs per
node. Three rounds in one test; the same with a single Redis restarted.

Light on CPU: short streams of the paced demo model. Every wait is a condition
(``wait_until``) with a bound, never a sleep.
"""

from __future__ import annotations

import collections
import concurrent.futures
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from redis.cluster import key_slot
from tests.gateway.gateway_procs import Gateway
from tests.production.conftest import Keys, table
from tests.production.redis_cluster import SLOTS, RedisCluster
from tests.resume.conftest import redis_config, start_all
from tests.resume.redis_proc import RedisServer
from tests.resume.resume_http import MEDIA, TOKEN_HEADER, events_of, new_id, payload, wait_for

import tokenwire
from tokenwire import events as ev
from tokenwire.gateway.resume.manager import ResumeManager

#: Streams per round, half on each gateway.
STREAMS = 50
ROUNDS = 3
#: The demo's pace: 80 tokens 100 ms apart, 8 s, so the streams run through the
#: failovers of a round; short enough to keep two shared cores free.
PACE = {"delay_ms": 100, "tokens": 80}
LEASE_S = 15.0
#: A bound on each wait for the cluster, a gateway or the streams.
WAIT_S = 60.0

pytestmark = pytest.mark.timeout(900)


class Live:
    """One resumable stream read whole by its client, in a thread of the pool."""

    def __init__(self, gateway: Gateway, request_id: str, headers: dict[str, str]) -> None:
        self.gateway = gateway
        self.request_id = request_id
        self.headers = headers
        self.raw = b""
        self.token: str | None = None
        self.status: int | None = None

    def read(self) -> None:
        body = payload(request_id=self.request_id)
        body["extensions"]["tokenwire:demo"] = PACE
        with (
            self.gateway.client(timeout=WAIT_S) as client,
            client.stream(
                "POST",
                "/v1/stream",
                content=msgspec.json.encode(body),
                headers={"content-type": MEDIA, **self.headers},
            ) as response,
        ):
            self.status = response.status_code
            self.token = response.headers.get(TOKEN_HEADER)
            for chunk in response.iter_raw():
                self.raw += chunk

    def events(self) -> list[ev.Event]:
        return events_of(self.raw[: self.raw.rfind(b"\n\n") + 2])

    def store_key(self) -> str:
        return store_key(self.headers, self.request_id)


def store_key(headers: dict[str, str], request_id: str) -> str:
    """The key of a stream's stored events (its slot is the stream's)."""
    credential = [(b"authorization", headers["authorization"].encode())]
    return f"tw:{{{ResumeManager.stream_id(credential, request_id)}}}:s"


class Streams:
    """The round's live streams, read by a bounded pool of threads."""

    def __init__(self, pool: concurrent.futures.ThreadPoolExecutor) -> None:
        self.pool = pool
        self.lives: list[Live] = []
        self.reads: list[concurrent.futures.Future[None]] = []

    def start(self, gateway: Gateway, headers: dict[str, str], request_id: str) -> Live:
        live = Live(gateway, request_id, headers)
        self.lives.append(live)
        self.reads.append(self.pool.submit(live.read))
        return live

    @classmethod
    def started(
        cls,
        pool: concurrent.futures.ThreadPoolExecutor,
        gateways: tuple[Gateway, Gateway],
        headers: dict[str, str],
        prefix: str,
    ) -> Streams:
        """``STREAMS`` streams, half on each gateway, once each has its first events."""
        streams = cls(pool)
        for i in range(STREAMS):
            streams.start(gateways[i % 2], headers, new_id(prefix))
        streams.wait_started()
        return streams

    def wait_started(self) -> None:
        wait_for(
            lambda: all(len(live.events()) >= 3 for live in self.lives),
            timeout=WAIT_S,
            what="every stream's first events",
        )

    def wait_done(self) -> None:
        done, pending = concurrent.futures.wait(self.reads, timeout=WAIT_S * 2)
        assert not pending, "a live read hung"
        for read in done:
            read.result()  # raises what the read raised


def _resume_all(gateway: Gateway, live: Live) -> list[ev.Event]:
    """The whole stored stream, from another gateway than the one that served it."""
    assert live.token is not None, f"{live.request_id}: its POST carried no resume token"
    headers = {**live.headers, TOKEN_HEADER: live.token}
    with gateway.client(timeout=WAIT_S) as client:
        response = client.get(f"/v1/streams/{live.request_id}", headers=headers)
    assert response.status_code == 200, (live.request_id, response.status_code, response.text)
    return events_of(response.content)


def _check_whole(
    gateways: tuple[Gateway, Gateway], lives: list[Live], cancelled: tuple[Live, ...] = ()
) -> None:
    """Every stream ended whole (``cancelled`` ones with their ``cancelled`` error), and
    its stored copy, from either gateway, is what its client read."""
    for i, live in enumerate(lives):
        assert live.status == 200, live.raw[-300:]
        seen = live.events()
        assert isinstance(seen[-1], ev.StreamEnd), (live.request_id, live.raw[-300:])
        errors = [e.code for e in seen if isinstance(e, ev.ErrorEvent)]
        assert errors == (["cancelled"] if live in cancelled else []), live.raw[-400:]
        other = gateways[1] if live.gateway is gateways[0] else gateways[0]
        # Every other stream is also resumed where it was served: any replica is whole.
        for gateway in (other, live.gateway) if i % 2 else (other,):
            stored = _resume_all(gateway, live)
            assert [e.seq for e in stored] == list(range(len(stored))), live.request_id
            assert stored == seen, f"{live.request_id}: the stored stream is not the live one"
        assert tokenwire.validate([live.raw]).ok


def _log_lines(gateway: Gateway) -> list[dict[str, Any]]:
    lines = []
    for line in gateway.stderr().splitlines():
        if line.startswith("{") and '"resume_store_' in line:
            lines.append(json.loads(line))
    return lines


def _store_log(gateway: Gateway, msg: str, node: str) -> int:
    return sum(1 for line in _log_lines(gateway) if line["msg"] == msg and line["node"] == node)


def _paired(gateways: tuple[Gateway, ...]) -> bool:
    """Every node a gateway logged as unavailable, it logged as available as often."""
    for gateway in gateways:
        counts: collections.Counter[tuple[str, str]] = collections.Counter(
            (line["msg"], line["node"])
            for line in _log_lines(gateway)
            if line["msg"] in ("resume_store_unavailable", "resume_store_available")
        )
        nodes = {node for _msg, node in counts}
        for node in nodes:
            down = counts["resume_store_unavailable", node]
            if down != counts["resume_store_available", node]:
                return False
    return True


def _status(gateway: Gateway, method: str, path: str, headers: dict[str, str]) -> int:
    with gateway.client(timeout=WAIT_S) as client:
        if method == "HEAD":
            return client.head(path, headers=headers).status_code
        body = msgspec.json.encode(payload(resumable=None))
        return client.post(
            path, content=body, headers={"content-type": MEDIA, **headers}
        ).status_code


def _resume_status(gateway: Gateway, live: Live) -> int:
    assert live.token is not None
    headers = {**live.headers, TOKEN_HEADER: live.token}
    return _status(gateway, "HEAD", f"/v1/streams/{live.request_id}", headers)


def _cancel_status(gateway: Gateway, live: Live) -> int:
    assert live.token is not None
    headers = {**live.headers, TOKEN_HEADER: live.token}
    with gateway.client(timeout=WAIT_S) as client:
        return client.delete(f"/v1/streams/{live.request_id}", headers=headers).status_code


def _limited_post(gateway: Gateway, headers: dict[str, str]) -> int:
    return _status(gateway, "POST", "/v1/stream", headers)


# --- Redis Cluster ------------------------------------------------------------------------


def _range_of(slot: int) -> int:
    """Which third of the slots (one primary's, whichever node serves it now)."""
    return min(2, slot // (SLOTS // 3))


def _keys_per_range(prefix: str, rounds: int) -> dict[tuple[int, int], str]:
    """A key id per (round, third of the slots) whose counters live in that third."""
    found: dict[tuple[int, int], str] = {}
    i = 0
    while len(found) < rounds * 3:
        key_id = f"chaos-{i}"
        third = _range_of(key_slot(f"{prefix}:{{{key_id}}}:req".encode()))
        for round_ in range(rounds):
            if (round_, third) not in found:
                found[round_, third] = key_id
                break
        i += 1
    return found


def _primary_with_replica(cluster: RedisCluster, exclude: frozenset[int] = frozenset()) -> int:
    """A primary serving slots with a replica in sync (one that can fail over)."""
    nodes = cluster.nodes(cluster.live_ports()[0])
    live = set(cluster.live_ports())
    for node in nodes:
        if node.serving and node.port in live and node.port not in exclude:
            heirs = [n for n in nodes if n.primary_id == node.id and n.port in live]
            if heirs:
                return node.port
    raise AssertionError("no primary has a live replica")


def _node(port: int) -> str:
    return f"127.0.0.1:{port}"


def _wait_logged(gateways: tuple[Gateway, ...], msg: str, node: str, at_least: int) -> None:
    wait_for(
        lambda: all(_store_log(g, msg, node) >= at_least for g in gateways),
        timeout=WAIT_S,
        what=f"every gateway logging {msg} for {node}",
    )


@pytest.fixture
def chaos_cluster(redis_bin: str, tmp_path: Path) -> Iterator[RedisCluster]:
    workdir = tmp_path / "cluster"
    workdir.mkdir()
    with RedisCluster(redis_bin, workdir, 3, replicas=1, node_timeout_ms=1000) as cluster:
        yield cluster


def _gateways(tmp_path: Path, resume: str, keys: Keys, limits: str) -> tuple[Gateway, Gateway]:
    config = resume + "\n" + keys.toml() + "\n" + limits
    a, b = Gateway(tmp_path, config=config), Gateway(tmp_path, config=config)
    start_all(a, b)
    return a, b


def test_resume_and_limits_survive_cluster_failovers(
    chaos_cluster: RedisCluster, tmp_path: Path, record_dir: Path
) -> None:
    cluster = chaos_cluster
    prefix = "test:chaos"
    keys = Keys()
    load = {"authorization": f"Bearer {keys.add('chaos-load')}"}
    limited = {
        place: {"authorization": f"Bearer {keys.add(key_id, requests_per_minute=1)}"}
        for place, key_id in _keys_per_range(prefix, ROUNDS).items()
    }
    resume = redis_config(record_dir, cluster.url, cluster=True, lease_s=LEASE_S, grace_s=60.0)
    limits = table(
        "limits",
        {"backend": "redis", "url": cluster.url, "cluster": True, "prefix": prefix},
    )
    gateways = _gateways(tmp_path, resume, keys, limits)
    a, b = gateways
    try:
        with concurrent.futures.ThreadPoolExecutor(STREAMS + 4) as pool:
            for round_ in range(ROUNDS):
                _cluster_round(cluster, gateways, pool, load, limited, round_)
    finally:
        a.stop()
        b.stop()


def _cluster_round(
    cluster: RedisCluster,
    gateways: tuple[Gateway, Gateway],
    pool: concurrent.futures.ThreadPoolExecutor,
    load: dict[str, str],
    limited: dict[tuple[int, int], dict[str, str]],
    round_: int,
) -> None:
    a, b = gateways
    streams = Streams.started(pool, gateways, load, f"chaos{round_}")
    doomed = _primary_with_replica(cluster)
    key = limited[round_, _range_served_by(cluster, doomed)]
    # The key's one request a minute, counted on the node about to die.
    assert _limited_post(a, key) == 200
    on_doomed = [s for s in streams.lives if cluster.primary_of(s.store_key()) == doomed]
    elsewhere = [s for s in streams.lives if s not in on_doomed]
    assert on_doomed and elsewhere
    heirs = cluster.replicas_of(doomed)
    downs = {g: _store_log(g, "resume_store_unavailable", _node(doomed)) for g in gateways}
    cluster.kill(doomed)
    wait_for(
        lambda: all(
            _store_log(g, "resume_store_unavailable", _node(doomed)) > downs[g] for g in gateways
        ),
        timeout=WAIT_S,
        what="both gateways finding the primary dead",
    )
    # Resumes and cancels of the streams in the other slots answer as usual throughout.
    for gateway in gateways:
        assert _resume_status(gateway, elsewhere[0]) == 200
    victim = elsewhere[-1]
    assert _cancel_status(a if victim.gateway is b else b, victim) in (200, 202)
    heir = cluster.wait_promoted(heirs)
    # Each gateway finds the promoted replica by itself (no traffic needed) and says so.
    _wait_logged(gateways, "resume_store_available", _node(doomed), downs[a] + 1)
    for gateway in gateways:
        # One line when it stopped answering, one when it was back: no flapping between.
        assert _store_log(gateway, "resume_store_unavailable", _node(doomed)) == downs[gateway] + 1
    for gateway in gateways:
        assert _resume_status(gateway, on_doomed[0]) == 200
    # A stream started now, in the promoted replica's slots, is recorded there.
    late = [streams.start(g, load, _request_id_on(cluster, heir, load)) for g in gateways]
    wait_for(lambda: all(live.token for live in late), timeout=WAIT_S, what="late streams")
    second = _primary_with_replica(cluster, exclude=frozenset({heir}))
    heirs = cluster.replicas_of(second)
    cluster.kill(second)
    cluster.wait_promoted(heirs)
    cluster.restart(doomed)
    streams.wait_done()
    _check_whole(gateways, streams.lives, cancelled=(victim,))
    # The key's count came through both failovers (on the gateway that did not count
    # it). Until its limiter client has found the new primary, it fails open.
    wait_for(lambda: _limited_post(b, key) == 429, timeout=WAIT_S, what="the count kept")
    cluster.restart(second)
    wait_for(lambda: _paired(gateways), timeout=WAIT_S, what="the log lines in pairs per node")


def _range_served_by(cluster: RedisCluster, port: int) -> int:
    """The third of the slots node ``port`` serves now."""
    (node,) = [n for n in cluster.nodes(cluster.live_ports()[0]) if n.port == port]
    return _range_of(int(node.slots[0].partition("-")[0]))


def _request_id_on(cluster: RedisCluster, port: int, headers: dict[str, str]) -> str:
    """A request_id whose stored stream lives on node ``port``."""
    while True:
        request_id = new_id("late")
        if cluster.primary_of(store_key(headers, request_id)) == port:
            return request_id


# --- a single Redis -----------------------------------------------------------------------


def test_resume_and_limits_survive_single_redis_restarts(
    redis_bin: str, tmp_path: Path, record_dir: Path
) -> None:
    # Persistent (appendonly, every write fsynced): a restart keeps streams and counters.
    server = RedisServer(redis_bin, tmp_path, persistent=True).start()
    try:
        keys = Keys()
        load = {"authorization": f"Bearer {keys.add('chaos-load')}"}
        limited = [
            {"authorization": f"Bearer {keys.add(f'chaos-{i}', requests_per_minute=1)}"}
            for i in range(ROUNDS)
        ]
        resume = redis_config(record_dir, server.url, lease_s=LEASE_S, grace_s=60.0)
        limits = table("limits", {"backend": "redis", "url": server.url, "prefix": "test:chaos1"})
        gateways = _gateways(tmp_path, resume, keys, limits)
        try:
            with concurrent.futures.ThreadPoolExecutor(STREAMS + 4) as pool:
                for round_ in range(ROUNDS):
                    _restart_round(server, gateways, pool, load, limited[round_], round_)
        finally:
            for gateway in gateways:
                gateway.stop()
    finally:
        server.kill()


def _restart_round(
    server: RedisServer,
    gateways: tuple[Gateway, Gateway],
    pool: concurrent.futures.ThreadPoolExecutor,
    load: dict[str, str],
    key: dict[str, str],
    round_: int,
) -> None:
    a, b = gateways
    node = f"redis://127.0.0.1:{server.port}/0"
    streams = Streams.started(pool, gateways, load, f"restart{round_}")
    assert _limited_post(a, key) == 200
    downs = {g: _store_log(g, "resume_store_unavailable", node) for g in gateways}
    server.stop()  # SIGTERM: Redis writes its append-only file and exits
    _wait_logged(gateways, "resume_store_unavailable", node, min(downs.values()) + 1)
    seen = sum(len(live.events()) for live in streams.lives)
    # The streams go on live while Redis is down.
    wait_for(
        lambda: sum(len(live.events()) for live in streams.lives) > seen + STREAMS,
        timeout=WAIT_S,
        what="events while Redis is down",
    )
    server.start()
    _wait_logged(gateways, "resume_store_available", node, min(downs.values()) + 1)
    streams.wait_done()
    _check_whole(gateways, streams.lives)
    assert _limited_post(b, key) == 429
    wait_for(lambda: _paired(gateways), timeout=WAIT_S, what="the log lines in pairs")
