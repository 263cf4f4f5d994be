"""The Redis limits against a three-node Redis Cluster started by the test: every script
touches one slot (the key id's hash tag), and two replicas share the limits."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.gateway.gateway_http import body, post
from tests.production.conftest import Keys, start, table
from tests.production.redis_cluster import RedisCluster

from tokenwire.gateway.config.production import KeyConfig
from tokenwire.gateway.policy.keys import KeyRecord, hash_key, new_key
from tokenwire.gateway.policy.limits import RedisLimits
from tokenwire.testing.waiting import wait_until


@pytest.fixture(scope="module")
def cluster(redis_bin: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisCluster]:
    with RedisCluster(redis_bin, tmp_path_factory.mktemp("cluster")) as made:
        yield made


def test_every_keys_counters_live_in_one_slot_of_the_cluster(cluster: RedisCluster) -> None:
    from redis.cluster import key_slot

    async def run() -> None:
        limits = RedisLimits(cluster.url, cluster=True, prefix="test:cluster")
        try:
            # Enough key ids to land on every node.
            ids = [f"cluster-{i}" for i in range(12)]
            nodes = set()
            for key_id in ids:
                key = KeyRecord(
                    KeyConfig(
                        id=key_id,
                        hash=hash_key(new_key()),
                        requests_per_minute=1,
                        tokens_per_minute=10,
                        token_budget=100,
                    )
                )
                slots = {key_slot(name.encode()) for name in limits.keys(key)}
                assert len(slots) == 1
                assert await limits.check(key) is None
                nodes.add(limits.client.get_node_from_key(limits.keys(key)[0]).port)
                refused = await limits.check(key)
                assert refused is not None and refused.limit == "requests"
                await limits.charge(key, 100)
            assert len(nodes) == 3
        finally:
            await limits.aclose()

    asyncio.run(run())


def test_two_replicas_share_limits_through_the_cluster(
    cluster: RedisCluster, tmp_path: Path
) -> None:
    keys = Keys()
    secret = keys.add(f"cl-{new_key()[-6:]}", requests_per_minute=2)
    config = (
        keys.toml()
        + "\n"
        + table(
            "limits", {"backend": "redis", "url": cluster.url, "cluster": True, "prefix": "test:cl"}
        )
    )
    a = start(tmp_path, config)
    try:
        b = start(tmp_path, config)
        try:
            auth = {"authorization": f"Bearer {secret}"}
            with a.client(timeout=10.0) as ca, b.client(timeout=10.0) as cb:
                assert post(ca, body("demo", "hi"), headers=auth).status_code == 200
                assert post(cb, body("demo", "hi"), headers=auth).status_code == 200
                refused = post(ca, body("demo", "hi"), headers=auth)
                assert refused.status_code == 429
                assert int(refused.headers["retry-after"]) >= 1
        finally:
            b.stop()
    finally:
        a.stop()


def test_limits_count_on_a_cluster_whose_url_node_died_before_the_first_limited_request(
    redis_bin: str, tmp_path: Path
) -> None:
    """The gateway's limits client knew only the URL's node until its first request:
    with that node dead by then, it never found the cluster and served without counting
    until the node came back. It reads the slot map at startup, so it counts again on
    the replica that took over."""
    workdir = tmp_path / "cluster"
    workdir.mkdir()
    with RedisCluster(redis_bin, workdir, 3, replicas=1, node_timeout_ms=1000) as cluster:
        keys = Keys()
        secret = keys.add("cl-seed-died", requests_per_minute=1)
        limits = {"backend": "redis", "url": cluster.url, "cluster": True, "prefix": "test:seed"}
        gateway = start(tmp_path, keys.toml() + "\n" + table("limits", limits))
        try:
            seed = cluster.ports[0]  # the URL's node, a primary
            heirs = cluster.replicas_of(seed)
            cluster.kill(seed)
            cluster.wait_promoted(heirs)
            auth = {"authorization": f"Bearer {secret}"}
            with gateway.client(timeout=10.0) as client:
                # One request a minute: once counted, the next one is refused.
                wait_until(
                    lambda: post(client, body("demo", "hi"), headers=auth).status_code == 429,
                    timeout=30.0,
                    what="the key's requests counted on the promoted replica",
                )
        finally:
            gateway.stop()
