"""A three-node Redis Cluster on 127.0.0.1 for the limits tests (no replicas, no persistence).

Built on tests/resume/redis_proc.py (binary lookup, free ports). Each node's
cluster bus listens on its port + 10000, so ports are picked where both are free.
The slots are assigned and the nodes introduced with redis-py (no redis-cli).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import redis
from tests.resume.redis_proc import free_port

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
        self.procs: list[subprocess.Popen[bytes]] = []

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
            with open(self.workdir / f"redis-{port}.log", "ab") as log:
                self.procs.append(
                    subprocess.Popen(
                        argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
                    )
                )
        try:
            self._form(wait)
        except BaseException:
            self.stop()
            raise
        return self

    def _client(self, port: int) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=port, socket_timeout=5.0)

    def _form(self, wait: float) -> None:
        deadline = time.monotonic() + wait
        clients = [self._client(port) for port in self.ports]
        try:
            for client in clients:
                while True:
                    with contextlib.suppress(redis.ConnectionError):
                        if client.ping():
                            break
                    if time.monotonic() > deadline:
                        raise RuntimeError("a cluster node did not answer PING")
                    time.sleep(0.05)
            share = SLOTS // len(clients)
            for i, client in enumerate(clients):
                last = SLOTS - 1 if i == len(clients) - 1 else (i + 1) * share - 1
                client.execute_command("CLUSTER", "ADDSLOTSRANGE", i * share, last)
            for port in self.ports[1:]:
                clients[0].execute_command("CLUSTER", "MEET", "127.0.0.1", port)
            while not all(
                b"cluster_state:ok" in c.execute_command("CLUSTER", "INFO") for c in clients
            ):
                if time.monotonic() > deadline:
                    raise RuntimeError("the cluster did not reach cluster_state:ok")
                time.sleep(0.05)
        finally:
            for client in clients:
                client.close()

    def stop(self) -> None:
        for proc in self.procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        self.procs = []

    def __enter__(self) -> RedisCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
