"""A real ``redis-server`` for the resume tests: on a free 127.0.0.1 port, no persistence.

``redis_binary`` finds the binary, installing Debian's ``redis-server`` package
with apt-get when it is missing and the tests run as root (``make test`` needs
nothing installed up front). ``RedisServer`` starts, kills and restarts one
server on the same port, through ``tokenwire.testing.processes.ServedProcess``
(the one launcher: ready once it answers ``PING``).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
from pathlib import Path

from tokenwire.testing import processes

APT_TIMEOUT_S = 900


def _find() -> str | None:
    return shutil.which("redis-server") or (
        "/usr/bin/redis-server" if os.path.exists("/usr/bin/redis-server") else None
    )


def redis_binary() -> tuple[str | None, str]:
    """The ``redis-server`` path, or ``None`` and why it could not be had."""
    found = _find()
    if found:
        return found, ""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return None, "redis-server is not installed and the tests do not run as root to install it"
    if shutil.which("apt-get") is None:
        return None, "redis-server is not installed and there is no apt-get to install it"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for argv in (["apt-get", "update"], ["apt-get", "install", "-y", "redis-server"]):
        done = subprocess.run(argv, env=env, capture_output=True, timeout=APT_TIMEOUT_S)
        if done.returncode != 0:
            tail = done.stderr.decode(errors="replace")[-500:]
            return None, f"{' '.join(argv)} failed ({done.returncode}): {tail}"
    found = _find()
    return (found, "") if found else (None, "apt-get installed redis-server but no binary")


free_port = processes.free_port


class RedisServer:
    """One ``redis-server`` process on 127.0.0.1 (``--save '' --appendonly no``; with
    ``persistent``, an append-only file fsynced on every write, so ``stop`` and
    ``start`` again is a restart that keeps everything)."""

    def __init__(
        self, binary: str, workdir: Path, port: int | None = None, *, persistent: bool = False
    ) -> None:
        self.binary = binary
        self.workdir = workdir
        self.persistent = persistent
        self.port = port or free_port()
        self._served: processes.ServedProcess | None = None
        self.log_path = workdir / f"redis-{self.port}.log"

    @property
    def proc(self) -> subprocess.Popen[bytes] | None:
        return self._served.proc if self._served is not None else None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, wait: float = 20.0) -> RedisServer:
        argv = [
            self.binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "yes" if self.persistent else "no",
            "--appendfsync",
            "always",
            "--appendfilename",
            f"appendonly-{self.port}.aof",
            "--appenddirname",
            f"aof-{self.port}",
            "--daemonize",
            "no",
            "--dir",
            str(self.workdir),
            "--maxclients",
            "10000",
        ]
        # One log of stdout and stderr, appended to: a restart keeps the first run's.
        self._served = processes.ServedProcess(
            argv,
            self.port,
            ready=self.ping,
            timeout_s=wait,
            stderr_path=self.log_path,
            stdout_path=self.log_path,
            append=True,
        ).start()
        return self

    def ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1.0) as s:
                s.sendall(b"PING\r\n")
                return s.recv(64).startswith(b"+PONG")
        except OSError:
            return False

    def command(self, *args: str) -> bytes:
        """Send one inline command and return the raw reply (enough for INFO/DBSIZE)."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=5.0) as s:
            s.sendall(" ".join(args).encode() + b"\r\n")
            s.settimeout(5.0)
            data = s.recv(1 << 20)
            return data

    def stop(self) -> None:
        """SIGTERM: Redis finishes its append-only file and exits (a clean restart)."""
        served = self._served
        if served is None or served.proc is None:
            return
        served.proc.send_signal(signal.SIGTERM)
        served.proc.wait(timeout=30)
        served.close()
        self._served = None

    def kill(self) -> None:
        """SIGKILL: Redis vanishes with everything it held (no persistence)."""
        if self._served is not None:
            self._served.kill()
            self._served.close()
            self._served = None

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.kill()
