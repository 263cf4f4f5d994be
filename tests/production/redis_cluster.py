"""A three-node Redis Cluster on 127.0.0.1 for the limits tests (no replicas, no persistence).

Built on tests/resume/redis_proc.py (binary lookup, free ports); each node is a
``tokenwire.testing.processes.ServedProcess`` (ready once it answers ``PING``). Each node's
cluster bus listens on its port + 10000, so ports are picked where both are free.
The slots are assigned and the nodes introduced with redis-py (no redis-cli).
"""

from __future__ import annotations

import contextlib
import functools
import socket
from pathlib import Path

import redis
from tests.resume.redis_proc import free_port

from tokenwire.testing import processes, wait_until

SLOTS = 16384


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def cluster_ports(count: int) -> list[int]:
    ports: list[int] = []
    while len(ports) < count:
        port = free_port()
        if port <= 55000 and port not in ports and _bindable(port + 10000):
            ports.append(port)
    return ports


class RedisCluster:
    """``count`` redis-server processes in cluster mode, slots split evenly."""

    def __init__(self, binary: str, workdir: Path, count: int = 3) -> None:
        self.binary = binary
        self.workdir = workdir
        self.ports = cluster_ports(count)
        self.nodes: list[processes.ServedProcess] = []

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.ports[0]}/0"

    def start(self, wait: float = 30.0) -> RedisCluster:
        for port in self.ports:
            argv = [
                self.binary,
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                str(self.workdir / f"nodes-{port}.conf"),
                "--dir",
                str(self.workdir),
                "--daemonize",
                "no",
            ]
            log = self.workdir / f"redis-{port}.log"
            node = processes.ServedProcess(
                argv,
                port,
                ready=functools.partial(self._ping, port),
                timeout_s=wait,
                stderr_path=log,
                stdout_path=log,
                append=True,
            )
            self.nodes.append(node)
        try:
            for node in self.nodes:
                node.start()
            self._form(wait)
        except BaseException:
            self.stop()
            raise
        return self

    def _client(self, port: int) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=port, socket_timeout=5.0)

    def _ping(self, port: int) -> bool:
        with contextlib.suppress(redis.ConnectionError), self._client(port) as client:
            return bool(client.ping())
        return False

    def _form(self, wait: float) -> None:
        clients = [self._client(port) for port in self.ports]
        try:
            share = SLOTS // len(clients)
            for i, client in enumerate(clients):
                last = SLOTS - 1 if i == len(clients) - 1 else (i + 1) * share - 1
                client.execute_command("CLUSTER", "ADDSLOTSRANGE", i * share, last)
            for port in self.ports[1:]:
                clients[0].execute_command("CLUSTER", "MEET", "127.0.0.1", port)
            wait_until(
                lambda: all(
                    b"cluster_state:ok" in c.execute_command("CLUSTER", "INFO") for c in clients
                ),
                timeout=wait,
                what="the cluster reaching cluster_state:ok",
            )
        finally:
            for client in clients:
                client.close()

    def stop(self) -> None:
        for node in self.nodes:
            node.kill()
            node.close()
        self.nodes = []

    def __enter__(self) -> RedisCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
