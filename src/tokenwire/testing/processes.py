"""Processes for tests and benchmarks: one launcher, and what /proc says about them.

- ``ServedProcess`` runs a server (``tokenwire serve``, or any other command) in
  its own process group on a free 127.0.0.1 port, times its start-up (spawn to
  the first ``200`` on its health route) and always stops it;
- ``fake_upstream_process`` runs ``tokenwire.testing.upstream.FakeUpstream`` in a
  process of its own, scripted per upstream model name;
- process probes read ``/proc`` (Linux): CPU seconds of a process tree, ``VmRSS``
  and ``VmHWM``, open file descriptors and sockets.

Loopback only. Nothing here is imported by the gateway or the protocol core.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from .waiting import WaitTimeout, wait_until

_TICKS: Final = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

# --- the machine --------------------------------------------------------------------------


def free_port() -> int:
    """A TCP port that was free on 127.0.0.1 a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def free_udp_port() -> int:
    """A UDP port that was free on 127.0.0.1 a moment ago (a WebTransport server's)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def machine() -> str:
    """CPU model, CPU count and kernel, for the header of a results table."""
    cpu = platform.processor() or "unknown CPU"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return f"{cpu}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()}"


def loadavg() -> str:
    """The 1, 5 and 15 minute load averages, or ``"?"`` off Linux."""
    with contextlib.suppress(OSError):
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    return "?"


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values`` by nearest rank; 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# --- process probes (/proc) ---------------------------------------------------------------


def children(pid: int) -> list[int]:
    """Every descendant of ``pid`` (a server's worker processes), depth first."""
    out: list[int] = []
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError):
                for child in (task / "children").read_text().split():
                    out += [int(child), *children(int(child))]
    return out


def tree(pid: int) -> list[int]:
    """``pid`` and all its descendants."""
    return [pid, *children(pid)]


def cpu_seconds(pids: Sequence[int]) -> float:
    """User + system CPU seconds the processes have used so far (gone ones count 0)."""
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime, in clock ticks
    return total / _TICKS


def status_kib(pid: int, key: str = "VmRSS") -> int:
    """A ``kB`` field of ``/proc/<pid>/status`` (``VmRSS``, ``VmHWM``...); 0 if absent."""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def rss_kib(pids: int | Sequence[int]) -> int:
    """Resident set size in KiB of one process, or the sum over several."""
    if isinstance(pids, int):
        return status_kib(pids)
    return sum(status_kib(pid) for pid in pids)


def open_fds(pid: int) -> int:
    """Open file descriptors of ``pid``."""
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def open_sockets(pid: int) -> int:
    """Open sockets (TCP connections and listeners, socket pairs) of ``pid``."""
    count = 0
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:"):
                    count += 1
    return count


# --- servers in their own process group ---------------------------------------------------


def listening(port: int, timeout: float = 0.5) -> bool:
    """Whether something accepts TCP connections on 127.0.0.1:port (a ``ready`` probe)."""
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout):
        return True
    return False


def http_status(
    port: int, path: str, timeout: float = 1.0, tls: ssl.SSLContext | None = None
) -> int:
    """The status of ``GET path`` on 127.0.0.1:port (0 when nothing answered).

    With ``tls``, over TLS to the host name ``localhost`` (the test certificates').
    """
    try:
        with contextlib.ExitStack() as stack:
            s = stack.enter_context(socket.create_connection(("127.0.0.1", port), timeout=timeout))
            if tls is not None:
                s = stack.enter_context(tls.wrap_socket(s, server_hostname="localhost"))
            s.sendall(
                f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode()
            )
            head = s.recv(64)
    except OSError:  # ssl.SSLError is one: a handshake before the server is ready
        return 0
    parts = head.split(b" ", 2)
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0


class ServedProcess:
    """A server command on 127.0.0.1 in its own process group; always stopped on exit.

    ``start`` spawns ``argv`` and polls ``GET ready_path`` (``wait_until``: every
    millisecond at first) until it answers ``ready_status`` (``None``: any HTTP
    answer; over TLS with ``tls``), or, for a server that is not HTTP (Redis),
    until ``ready()`` is true; ``started_s`` is the time from spawn to that
    answer (the start-up time a user waits). Its stderr goes to ``stderr_path``
    (a temporary file unless given), its stdout to ``stdout_path`` (or nowhere;
    the same path as ``stderr_path``: one log of both), appended to with
    ``append``. ``kill`` ends the group at once, without a goodbye.
    ``stop`` sends SIGINT, then kills the whole process group (workers
    included) if it does not exit in ``grace_s``.
    Raises ``RuntimeError`` with the process's stderr when it dies or does not
    come up within ``timeout_s``.
    """

    def __init__(
        self,
        argv: Sequence[str],
        port: int,
        *,
        ready_path: str = "/healthz",
        ready_status: int | None = 200,
        ready: Callable[[], bool] | None = None,
        tls: ssl.SSLContext | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        timeout_s: float = 60.0,
        grace_s: float = 10.0,
        stderr_path: Path | None = None,
        stdout_path: Path | None = None,
        append: bool = False,
    ) -> None:
        self.argv = list(argv)
        self.port = port
        self.ready_path = ready_path
        self.ready_status = ready_status
        self.ready = ready
        self.tls = tls
        self.append = append
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.timeout_s = timeout_s
        self.grace_s = grace_s
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_s = 0.0
        # A directory of its own only when the caller keeps no stderr file.
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if stderr_path is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="tokenwire-bench-")
            stderr_path = Path(self._tmp.name) / "stderr"
        self.stderr_path = stderr_path
        self.stdout_path = stdout_path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None, "not started"
        return self.proc.pid

    def pids(self) -> list[int]:
        """The server and its workers, now."""
        return tree(self.pid)

    def worker(self) -> int:
        """The last-spawned process of the tree (granian's worker; the server itself alone)."""
        return self.pids()[-1]

    def stderr(self) -> str:
        with contextlib.suppress(OSError):
            return self.stderr_path.read_text(errors="replace")
        return ""

    def start(self) -> ServedProcess:
        """Spawn and wait until ready. Returns ``self``."""
        with contextlib.ExitStack() as files:
            mode = "ab" if self.append else "wb"
            err = files.enter_context(open(self.stderr_path, mode))
            out: Any = subprocess.DEVNULL
            if self.stdout_path == self.stderr_path:
                out = err
            elif self.stdout_path is not None:
                out = files.enter_context(open(self.stdout_path, mode))
            t0 = time.perf_counter()
            self.proc = subprocess.Popen(
                self.argv,
                env=self.env,
                cwd=self.cwd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )
        proc = self.proc

        def ready() -> bool:
            if self.ready is not None:
                if self.ready():
                    return True
            else:
                status = http_status(self.port, self.ready_path, tls=self.tls)
                if status and (self.ready_status is None or status == self.ready_status):
                    return True
            if proc.poll() is not None:
                raise RuntimeError(f"{self.argv[0]} exited at start:\n{self.stderr()[-4000:]}")
            return False

        try:
            try:
                wait_until(ready, timeout=self.timeout_s, max_interval=0.01)
            except WaitTimeout:
                raise RuntimeError(
                    f"{self.argv[0]} did not come up:\n{self.stderr()[-4000:]}"
                ) from None
            self.started_s = time.perf_counter() - t0
            return self
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop the server and every process of its group. Idempotent."""
        proc = self.proc
        if proc is None:
            return
        self.proc = None
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=self.grace_s)
            except subprocess.TimeoutExpired:
                pass
        # Workers live in the server's process group: none may outlive it.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=self.grace_s)

    def kill(self) -> None:
        """SIGKILL the whole process group now (a crash, not a shutdown). Idempotent."""
        proc = self.proc
        if proc is None:
            return
        self.proc = None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=self.grace_s)

    def close(self) -> None:
        """Stop, and remove the stderr file (unless it is the caller's)."""
        self.stop()
        if self._tmp is not None:
            self._tmp.cleanup()

    def __enter__(self) -> ServedProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def gateway_argv(config_path: str | None, port: int, *, workers: int = 1) -> list[str]:
    """The ``tokenwire serve`` command line for ``config_path`` on 127.0.0.1:port."""
    argv = [sys.executable, "-m", "tokenwire", "serve", "--host", "127.0.0.1"]
    argv += ["--port", str(port), "--workers", str(workers)]
    if config_path is not None:
        argv += ["--config", config_path]
    return argv


@contextlib.contextmanager
def serve_gateway(
    config: str | None = None,
    *,
    workers: int = 1,
    env: Mapping[str, str] | None = None,
    timeout_s: float = 60.0,
) -> Iterator[ServedProcess]:
    """``tokenwire serve`` with ``config`` (TOML text; ``None``: demo only) on a free port.

    Yields the running ``ServedProcess``; stops it (and its workers) on exit.
    """
    with tempfile.TemporaryDirectory(prefix="tokenwire-gw-") as tmp:
        path = None
        if config is not None:
            path = str(Path(tmp) / "gateway.toml")
            Path(path).write_text(config)
        port = free_port()
        full_env = {**os.environ, **(env or {})}
        served = ServedProcess(
            gateway_argv(path, port, workers=workers), port, env=full_env, timeout_s=timeout_s
        )
        with served:
            yield served


def gateway_config(models: Mapping[str, Mapping[str, Any]], server: Mapping[str, Any] = {}) -> str:  # noqa: B006 - never mutated
    """TOML for ``tokenwire serve``: ``[server]`` keys and one ``[[models]]`` table per name."""
    lines: list[str] = []
    if server:
        lines.append("[server]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in server.items()]
        lines.append("")
    for name, options in models.items():
        lines += ["[[models]]", f"name = {json.dumps(name)}"]
        for key, value in options.items():
            if isinstance(value, Mapping):
                items = ", ".join(f"{k} = {json.dumps(v)}" for k, v in value.items())
                lines.append(f"{key} = {{ {items} }}")
            else:
                lines.append(f"{key} = {json.dumps(value)}")
        lines.append("")
    return "\n".join(lines)


#: The fake upstream process: a FakeUpstream whose script is chosen by the
#: ``model`` of each request (what the gateway sends as ``upstream_model``).
_FAKE_UPSTREAM: Final = r"""
import asyncio, json, sys
try:
    import uvloop
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
except ImportError:
    pass
import functools
# A listen backlog of 100 (asyncio's default) drops the SYNs of a thousand
# connections opened at once, and each dropped one costs a 1 s retransmit.
asyncio.start_server = functools.partial(asyncio.start_server, backlog=4096)
from tokenwire.testing.upstream import FakeUpstream, Fault, Script
vendor, specs = sys.argv[1], json.loads(sys.argv[2])
fault = Fault(**json.loads(sys.argv[3])) if len(sys.argv) > 3 else None
scripts = {name: Script(**spec) for name, spec in specs.items()}
default = next(iter(scripts.values()), Script())
def pick(request):
    try:
        return scripts.get(request.json().get("model"), default)
    except Exception:
        return default
fake = FakeUpstream(vendor, pick, fault=fault).start()
# Recorded requests would pile up over a long run: keep none.
fake.requests = type("NoList", (list,), {"append": lambda self, item: None})()
print(fake.url, flush=True)
sys.stdin.read()
fake.stop()
"""


@dataclass
class UpstreamProcess:
    """A running fake upstream: its URL, port and process."""

    url: str
    port: int
    proc: subprocess.Popen[str]

    @property
    def pid(self) -> int:
        return self.proc.pid


def words(n: int, prefix: str = "word") -> str:
    """``n`` distinct words joined by spaces: a script text of ``n`` chunks."""
    return " ".join(f"{prefix}{i}" for i in range(n))


@contextlib.contextmanager
def fake_upstream_process(
    scripts: Mapping[str, Mapping[str, Any]],
    vendor: str = "openai",
    fault: Mapping[str, Any] | None = None,
) -> Iterator[UpstreamProcess]:
    """``FakeUpstream(vendor)`` in its own process, scripted by upstream model name.

    ``scripts`` maps a model name to ``Script`` keyword arguments (``text``,
    ``delay_s``...); an unknown name gets the first script. The process ends
    when the context exits (its stdin closes).
    """
    argv = [sys.executable, "-c", _FAKE_UPSTREAM, vendor, json.dumps(scripts)]
    if fault is not None:
        argv.append(json.dumps(fault))
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        if not url.startswith("http://"):
            raise RuntimeError("the fake upstream did not start")
        yield UpstreamProcess(url, int(url.rsplit(":", 1)[1]), proc)
    finally:
        with contextlib.suppress(Exception):
            assert proc.stdin is not None
            proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
