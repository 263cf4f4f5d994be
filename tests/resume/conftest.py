"""Fixtures of the resume tests: a real ``redis-server`` and real ``tokenwire serve`` replicas.

``redis_server`` starts ``redis-server`` on a free 127.0.0.1 port with
``--save '' --appendonly no``, installing Debian's package first when the
binary is missing (as root, with apt-get). Without it the tests skip locally;
with ``CI=true`` they fail instead. ``redis_cluster`` is a Redis Cluster of
three primaries with a replica each (tests/production/redis_cluster.py).
``replicas`` are two gateway processes sharing that server; ``memory_gateway``
is one process with the in-memory store.
Their providers include the test plugin ``Recorder`` (tests/gateway/gateway_plugins.py),
which writes ``<record_dir>/<request_id>.json`` when it is cancelled or completes.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.gateway.gateway_procs import Gateway
from tests.production.redis_cluster import RedisCluster
from tests.resume.redis_proc import RedisServer, redis_binary

IN_CI = os.environ.get("CI") == "true"

#: The replicas' timings: short, so that grace expiry and a dead replica show quickly.
GRACE_S = 2.0
LEASE_S = 1.0


def unavailable(reason: str) -> None:
    """Skip locally; with CI=true a missing prerequisite fails instead."""
    if IN_CI:
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def redis_bin() -> str:
    binary, why = redis_binary()
    if binary is None:
        unavailable(why)
    assert binary is not None
    return binary


@pytest.fixture(scope="session")
def redis_server(redis_bin: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """One ``redis-server`` for the session."""
    with RedisServer(redis_bin, tmp_path_factory.mktemp("redis")) as server:
        yield server


@pytest.fixture(scope="session")
def redis_cluster(
    redis_bin: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RedisCluster]:
    """A Redis Cluster for the session: three primaries, each with a replica."""
    with RedisCluster(redis_bin, tmp_path_factory.mktemp("cluster"), 3, replicas=1) as cluster:
        yield cluster


@pytest.fixture
def fresh_redis(redis_bin: str, tmp_path: Path) -> Iterator[RedisServer]:
    """A ``redis-server`` of the test's own (for tests that kill it)."""
    server = RedisServer(redis_bin, tmp_path).start()
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture(scope="session")
def record_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("records")


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value)


def gateway_config(record_dir: Path, **resume: Any) -> str:
    """A config: the test plugins and a ``[resume]`` table from ``resume``."""
    lines = ["[server]", "keepalive_s = 0.5", "", "[resume]"]
    lines += [f"{key} = {_toml(value)}" for key, value in resume.items()]
    for name, options in {
        # A token every 50 ms, for minutes: it only ends when cancelled.
        "recorder": {"interval_ms": 50},
        # 40 tokens, 100 ms apart: 4 s, longer than the grace period.
        "recorder-short": {"interval_ms": 100, "limit": 40},
    }.items():
        table = ", ".join(f"{k} = {_toml(v)}" for k, v in options.items())
        lines += [
            "",
            "[[models]]",
            f'name = "{name}"',
            'provider = "python"',
            'factory = "gateway_plugins:Recorder"',
            f'options = {{ record_dir = "{record_dir}", {table} }}',
        ]
    return "\n".join(lines) + "\n"


def redis_config(record_dir: Path, url: str, **extra: Any) -> str:
    settings: dict[str, Any] = {
        "backend": "redis",
        "url": url,
        "grace_s": GRACE_S,
        "lease_s": LEASE_S,
    }
    return gateway_config(record_dir, **{**settings, **extra})


def start_all(*gateways: Gateway) -> None:
    """Start gateway processes side by side (each takes seconds on a busy machine)."""
    with concurrent.futures.ThreadPoolExecutor(len(gateways)) as pool:
        failures = [f.exception() for f in [pool.submit(g.start) for g in gateways]]
    errors = [f for f in failures if f is not None]
    if errors:
        for gateway in gateways:
            gateway.stop()
        raise errors[0]


@pytest.fixture(scope="session")
def replicas(
    tmp_path_factory: pytest.TempPathFactory, record_dir: Path, redis_server: RedisServer
) -> Iterator[tuple[Gateway, Gateway]]:
    """Two ``tokenwire serve`` replicas sharing ``redis_server``."""
    workdir = tmp_path_factory.mktemp("replicas")
    config = redis_config(record_dir, redis_server.url)
    a, b = Gateway(workdir, config=config), Gateway(workdir, config=config)
    start_all(a, b)
    try:
        yield a, b
    finally:
        a.stop()
        b.stop()


@pytest.fixture(scope="session")
def memory_gateway(tmp_path_factory: pytest.TempPathFactory, record_dir: Path) -> Iterator[Gateway]:
    """One replica with the default in-memory store; a stream keeps its last 64 events."""
    workdir = tmp_path_factory.mktemp("memory")
    config = gateway_config(record_dir, grace_s=GRACE_S, max_events_per_stream=64)
    with Gateway(workdir, config=config) as gateway:
        yield gateway
