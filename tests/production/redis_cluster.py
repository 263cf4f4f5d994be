"""A Redis Cluster on 127.0.0.1 for the limits and resume tests (no persistence).

``count`` primaries, each with ``replicas`` replicas (none by default, as the
limits' own tests use it). Each node is a
``tokenwire.testing.processes.ServedProcess`` (the one launcher: ready once it
answers ``PING``); tests/resume/redis_proc.py finds the binary. Each node's
cluster bus listens on its port + 10000, so ports are picked where both are
free. The slots are assigned, the nodes introduced and the replicas attached
with redis-py (no redis-cli).

For failover tests: ``kill`` a node (SIGKILL: whatever it had not replicated is
gone), ``wait_promoted`` until one of its replicas serves its slots (read from
``CLUSTER NODES`` of a live node: a condition, never a sleep), ``restart`` a
killed node (it rejoins from its nodes file, as a replica of its heir), and
``primary_of`` the node serving a key now.
"""

from __future__ import annotations

import contextlib
import socket
import time
from pathlib import Path

import redis
from tests.resume.redis_proc import free_port

from tokenwire.testing import processes

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


class Node:
    """One line of ``CLUSTER NODES``."""

    def __init__(self, line: str) -> None:
        fields = line.split()
        self.id = fields[0]
        self.port = int(fields[1].split("@")[0].rsplit(":", 1)[1])
        self.flags = set(fields[2].split(","))
        self.primary_id = fields[3] if fields[3] != "-" else None
        self.connected = fields[7] == "connected"
        self.slots = fields[8:]

    @property
    def serving(self) -> bool:
        """A primary that is up and holds slots."""
        return (
            "master" in self.flags
            and not self.flags & {"fail", "fail?", "handshake", "noaddr"}
            and bool(self.slots)
        )


class RedisCluster:
    """``count`` primaries (slots split evenly), each with ``replicas`` replicas."""

    def __init__(
        self,
        binary: str,
        workdir: Path,
        count: int = 3,
        *,
        replicas: int = 0,
        node_timeout_ms: int = 15000,
    ) -> None:
        self.binary = binary
        self.workdir = workdir
        self.count = count
        self.replicas = replicas
        self.node_timeout_ms = node_timeout_ms
        self.ports = cluster_ports(count * (1 + replicas))
        self.procs: dict[int, processes.ServedProcess] = {}

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.ports[0]}/0"

    @property
    def urls(self) -> list[str]:
        """Every node's URL (a client given several survives the first one's death)."""
        return [f"redis://127.0.0.1:{port}/0" for port in self.ports]

    def _spawn(self, port: int) -> None:
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
            "--cluster-node-timeout",
            str(self.node_timeout_ms),
            # A replica takes over however long ago it last heard its primary.
            "--cluster-replica-validity-factor",
            "0",
            # The other primaries' slots stay served while one fails over.
            "--cluster-require-full-coverage",
            "no",
            "--dir",
            str(self.workdir),
            "--daemonize",
            "no",
        ]
        # One log of stdout and stderr, appended to: a restart keeps the first run's.
        log = self.workdir / f"redis-{port}.log"
        served = processes.ServedProcess(
            argv,
            port,
            ready=lambda: self._pings(port),
            stderr_path=log,
            stdout_path=log,
            append=True,
        )
        self.procs[port] = served
        served.start()

    def _pings(self, port: int) -> bool:
        with (
            contextlib.suppress(redis.RedisError, OSError),
            contextlib.closing(self.client(port)) as client,
        ):
            return bool(client.ping())
        return False

    def start(self, wait: float = 60.0) -> RedisCluster:
        try:
            for port in self.ports:
                self._spawn(port)
            self._form(wait)
        except BaseException:
            self.stop()
            raise
        return self

    def client(self, port: int) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=port, socket_timeout=5.0)

    def _until(self, what: str, deadline: float, ready: object) -> None:
        while True:
            with contextlib.suppress(redis.RedisError, OSError):
                if ready():  # type: ignore[operator]
                    return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the cluster: {what}")
            time.sleep(0.05)

    def _form(self, wait: float) -> None:
        deadline = time.monotonic() + wait
        clients = {port: self.client(port) for port in self.ports}
        try:
            for client in clients.values():
                self._until("a node did not answer PING", deadline, client.ping)
            primaries = self.ports[: self.count]
            share = SLOTS // self.count
            for i, port in enumerate(primaries):
                last = SLOTS - 1 if i == self.count - 1 else (i + 1) * share - 1
                clients[port].execute_command("CLUSTER", "ADDSLOTSRANGE", i * share, last)
            first = clients[primaries[0]]
            for port in self.ports[1:]:
                first.execute_command("CLUSTER", "MEET", "127.0.0.1", port)
            total = len(self.ports)

            def everyone_known() -> bool:
                return all(len(self.nodes(port)) == total for port in self.ports)

            self._until("the nodes did not all meet", deadline, everyone_known)
            for i, port in enumerate(self.ports[self.count :]):
                primary = primaries[i % self.count]
                primary_id = clients[primary].execute_command("CLUSTER", "MYID").decode()
                self._until(
                    "a replica was not attached",
                    deadline,
                    lambda c=clients[port], p=primary_id: c.execute_command(
                        "CLUSTER", "REPLICATE", p
                    ),
                )

            def formed() -> bool:
                for port, client in clients.items():
                    if b"cluster_state:ok" not in client.execute_command("CLUSTER", "INFO"):
                        return False
                    if port in primaries:
                        info = client.info("replication")
                        if int(info.get("connected_slaves", 0)) < self.replicas:
                            return False
                    elif client.info("replication").get("master_link_status") != "up":
                        return False
                return True

            self._until("did not reach cluster_state:ok with its replicas", deadline, formed)
        finally:
            for client in clients.values():
                client.close()

    # -- failover ---------------------------------------------------------------------

    def nodes(self, port: int) -> list[Node]:
        """``CLUSTER NODES`` as node ``port`` sees it."""
        with contextlib.closing(self.client(port)) as client:
            text = client.execute_command("CLUSTER", "NODES")
        if isinstance(text, bytes):
            text = text.decode()
        return [Node(line) for line in str(text).splitlines() if line.strip()]

    def live_ports(self) -> list[int]:
        return [
            port
            for port, served in self.procs.items()
            if served.proc is not None and served.proc.poll() is None
        ]

    def primary_of(self, key: str) -> int:
        """The port of the node serving ``key``'s slot now."""
        from redis.cluster import key_slot

        slot = key_slot(key.encode())
        for node in self.nodes(self.live_ports()[0]):
            if not node.serving:
                continue
            for part in node.slots:
                if part.startswith("["):
                    continue  # a slot being migrated
                low, _, high = part.partition("-")
                if int(low) <= slot <= int(high or low):
                    return node.port
        raise LookupError(f"no node serves slot {slot}")

    def replicas_of(self, port: int) -> list[int]:
        """The ports of node ``port``'s replicas, as a live node sees them."""
        nodes = self.nodes(self.live_ports()[0])
        primary = next(n for n in nodes if n.port == port)
        return [n.port for n in nodes if n.primary_id == primary.id]

    def kill(self, port: int) -> None:
        """SIGKILL node ``port``: it vanishes with whatever it had not replicated."""
        self.procs.pop(port).kill()

    def restart(self, port: int, timeout: float = 60.0) -> None:
        """Start killed node ``port`` again (no data: it rejoins from its nodes file)
        and wait until it is a replica in sync with its primary."""
        self._spawn(port)
        deadline = time.monotonic() + timeout

        def in_sync() -> bool:
            with contextlib.closing(self.client(port)) as client:
                info = client.info("replication")
                return bool(info.get("role") == "slave" and info.get("master_link_status") == "up")

        self._until(f"node {port} did not rejoin as a replica", deadline, in_sync)

    def wait_promoted(self, heirs: list[int], timeout: float = 60.0) -> int:
        """Wait until one of ``heirs`` (a dead primary's replicas) is a primary serving
        slots in every live node's ``CLUSTER NODES``, with ``cluster_state:ok``
        everywhere; returns its port."""
        deadline = time.monotonic() + timeout
        found: list[int] = []

        def taken_over() -> bool:
            found.clear()
            for port in self.live_ports():
                serving = {n.port for n in self.nodes(port) if n.serving} & set(heirs)
                if not serving:
                    return False
                found.extend(serving)
                with contextlib.closing(self.client(port)) as client:
                    if b"cluster_state:ok" not in client.execute_command("CLUSTER", "INFO"):
                        return False
            return len(set(found)) == 1

        self._until(f"none of {heirs} took over", deadline, taken_over)
        return found[0]

    def stop(self) -> None:
        for port in list(self.procs):
            self.kill(port)

    def __enter__(self) -> RedisCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
