"""``tokenwire serve --workers 1`` is one process (granian's embedded server), and it
keeps what the multi-process server does: the socket options, streaming, the
graceful drain on SIGTERM, the shutdown timeout, a second signal ending at once.
``--workers 2`` keeps granian's supervisor and its worker processes.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.gateway.gateway_http import StreamReader

from tokenwire import events as ev
from tokenwire.testing import wait_until
from tokenwire.testing.processes import ServedProcess, children, gateway_config, serve_gateway

HERE = Path(__file__).resolve().parent
#: The plugins (gateway_plugins) load in the served process.
PLUGIN_ENV = {
    "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))
}

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc (Linux)")


def _wait(predicate: Callable[[], object], timeout: float = 30.0) -> None:
    wait_until(predicate, timeout=timeout)


def _listening_inodes(port: int) -> set[str]:
    """The socket inodes listening on ``port`` (``/proc/net/tcp``, state 0A)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    found.add(fields[9])
    return found


def _socket_fds(pid: int) -> dict[str, int]:
    """Socket inode -> file descriptor number, for the sockets ``pid`` holds."""
    out = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
            if link.startswith("socket:["):
                out[link[len("socket:[") : -1]] = int(fd)
    return out


def _borrow_fd(pid: int, fd: int) -> socket.socket:
    """A duplicate of another process's socket (``pidfd_getfd``, Linux 5.6)."""
    libc = ctypes.CDLL(None, use_errno=True)
    pidfd = libc.syscall(434, pid, 0)  # pidfd_open
    assert pidfd >= 0, os.strerror(ctypes.get_errno())
    try:
        dup = libc.syscall(438, pidfd, fd, 0)  # pidfd_getfd
        assert dup >= 0, os.strerror(ctypes.get_errno())
    finally:
        os.close(pidfd)
    return socket.socket(fileno=dup)


def _demo_stream(url: str) -> list[ev.Event]:
    reader = StreamReader(url, "demo")
    reader.run()
    assert reader.failure is None
    return reader.events


@contextlib.contextmanager
def _serving(
    models: dict[str, dict[str, Any]] | None = None, **server: Any
) -> Iterator[ServedProcess]:
    config = gateway_config(models or {}, server) if (models or server) else None
    with serve_gateway(config, env=PLUGIN_ENV) as served:
        yield served


def _exit_status(served: ServedProcess, timeout: float = 60.0) -> int:
    assert served.proc is not None
    return served.proc.wait(timeout=timeout)


def test_one_worker_is_one_process_holding_its_listening_socket() -> None:
    with _serving() as served:
        # No supervisor and no worker: the spawned process has no child at all.
        assert children(served.pid) == []
        listening = _listening_inodes(served.port)
        assert listening, "nothing listens on the port"
        assert listening <= set(_socket_fds(served.pid))
        events = _demo_stream(served.url)
        assert isinstance(events[0], ev.StreamStart) and isinstance(events[-1], ev.StreamEnd)
        assert children(served.pid) == []


def test_the_listening_socket_has_the_unread_connection_limits() -> None:
    send_buffer = 65536
    with _serving(send_buffer_bytes=send_buffer, write_timeout_s=7.5) as served:
        fds = _socket_fds(served.pid)
        inode = next(iter(_listening_inodes(served.port)))
        with _borrow_fd(served.pid, fds[inode]) as listener:
            # Set when granian bound the socket (serving.limit_unread_connections);
            # Linux reports SO_SNDBUF doubled.
            _wait(
                lambda: listener.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) == 2 * send_buffer
            )
            user_timeout = listener.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT)
            assert user_timeout == 7500


def test_sigterm_lets_an_in_flight_stream_finish_then_exits_0() -> None:
    # ~40 events 50 ms apart: a couple of seconds, well within drain_s and the shutdown timeout.
    with _serving(
        {"demo": {"provider": "demo", "delay_ms": 50}}, shutdown_timeout_s=60.0
    ) as served:
        reader = StreamReader(served.url, "demo")
        reader.start()
        _wait(lambda: len(reader.events) >= 3)
        assert served.proc is not None
        served.proc.send_signal(signal.SIGTERM)
        at_signal = len(reader.events)
        reader.join(60)
        assert reader.failure is None
        assert len(reader.events) > at_signal  # it kept streaming during the drain
        assert isinstance(reader.events[-1], ev.StreamEnd)
        assert not [e for e in reader.events if isinstance(e, ev.ErrorEvent)]
        assert _exit_status(served) == 0
        assert '"draining"' in served.stderr()


def test_the_drain_time_over_ends_a_stream_with_error_and_stream_end_and_exits_0() -> None:
    models = {"slow": {"provider": "demo", "delay_ms": 1000}}
    with _serving(models, drain_s=0.5, shutdown_timeout_s=60.0) as served:
        reader = StreamReader(served.url, "slow")
        reader.start()
        _wait(lambda: len(reader.events) >= 2)
        assert served.proc is not None
        served.proc.send_signal(signal.SIGTERM)
        reader.join(60)
        assert reader.failure is None
        assert isinstance(reader.events[-1], ev.StreamEnd)
        errors = [e for e in reader.events if isinstance(e, ev.ErrorEvent)]
        assert [e.code for e in errors] == ["overloaded"]
        assert _exit_status(served) == 0
        assert "drain_time_over" in served.stderr()


@pytest.mark.parametrize("mode", ["ignore-cancel", "block-loop"])
def test_a_hung_stream_is_ended_after_the_shutdown_timeout(mode: str) -> None:
    models = {
        "stuck": {
            "provider": "python",
            "factory": "gateway_plugins:Stuck",
            "options": {"mode": mode},
        }
    }
    # The shortest shutdown timeout a drain of 0.2 s allows (drain_s + 2).
    with _serving(models, drain_s=0.2, shutdown_timeout_s=2.2) as served:
        reader = StreamReader(served.url, "stuck")
        reader.start()
        _wait(lambda: len(reader.events) >= 2)
        assert served.proc is not None
        served.proc.send_signal(signal.SIGTERM)
        # Nothing ends the stream but the watchdog: the process exits, status 1.
        assert _exit_status(served) == 1
        reader.join(30)
        assert not reader.is_alive()
        assert not isinstance(reader.events[-1], ev.StreamEnd)
        assert '"shutdown_timeout"' in served.stderr()


def test_a_second_signal_ends_the_process_at_once() -> None:
    models = {"slow": {"provider": "demo", "delay_ms": 1000}}
    with _serving(models, drain_s=600.0, shutdown_timeout_s=602.0) as served:
        reader = StreamReader(served.url, "slow")
        reader.start()
        _wait(lambda: len(reader.events) >= 2)
        assert served.proc is not None
        served.proc.send_signal(signal.SIGINT)
        _wait(lambda: '"draining"' in served.stderr())
        assert served.proc.poll() is None  # draining: the stream has minutes left
        served.proc.send_signal(signal.SIGTERM)
        assert _exit_status(served) == -signal.SIGTERM


#: An app whose lifespan startup fails, served the way ``serve --workers 1`` serves.
_FAILING_STARTUP = r"""
import sys
from granian.constants import Interfaces
from tokenwire.cli._one_process import serve_one_process
from tokenwire.gateway.policy.drain import Drain

async def app(scope, receive, send):
    assert scope["type"] == "lifespan"
    await receive()
    await send({"type": "lifespan.startup.failed", "message": "no store"})

options = dict(address="127.0.0.1", port=int(sys.argv[1]), interface=Interfaces.ASGI)
sys.exit(serve_one_process(
    app, Drain(1.0), options, shutdown_timeout_s=5.0, write_timeout_s=5.0, send_buffer_bytes=65536
))
"""


def test_a_failed_lifespan_startup_exits_1() -> None:
    from tokenwire.testing.processes import free_port

    done = subprocess.run(
        [sys.executable, "-c", _FAILING_STARTUP, str(free_port())],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1, done.stderr
    assert "ASGI lifespan startup failed" in done.stdout + done.stderr  # granian logs to stdout


def test_two_workers_keep_the_supervisor_and_its_worker_processes() -> None:
    with serve_gateway(None, workers=2) as served:
        _wait(lambda: len(children(served.pid)) == 2)
        events = _demo_stream(served.url)
        assert isinstance(events[-1], ev.StreamEnd)
        assert served.proc is not None
        served.proc.send_signal(signal.SIGTERM)
        assert _exit_status(served) == 0


def test_the_url_line_is_printed_before_serving(tmp_path: Path) -> None:
    from tests.gateway.gateway_procs import Gateway

    with Gateway(tmp_path) as gateway:
        assert gateway.stdout().startswith(f"tokenwire gateway on http://127.0.0.1:{gateway.port}")
        assert json.loads(httpx.get(f"{gateway.url}/healthz").text) == {"status": "ok"}
