"""Real peers for the SignalR and Connect bindings, installed by the tests themselves.

- PyPI ``connectrpc`` (with ``uvicorn`` and ``hypercorn``) and ``signalrcore`` go into
  this interpreter's environment (``sys.executable -m pip install``) when missing;
- npm ``@microsoft/signalr`` goes into ``tests/peers/.node`` (git-ignored) and runs on
  the machine's ``node``.

A peer that cannot be had skips its tests with the reason, except under
``CI=true``, where nothing may be skipped: the test fails instead.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tokenwire.testing import eventually, processes

PEERS = Path(__file__).resolve().parent
ROOT = PEERS.parents[1]
NODE_DIR = PEERS / ".node"
SIGNALR_JS = "@microsoft/signalr@10"

CONNECT_PACKAGES = {
    # import name -> requirement. connect-python is the old name of the same
    # project and ships the same import package: never install both.
    "connectrpc": "connectrpc>=0.13,<0.14",
    "uvicorn": "uvicorn>=0.30",
    "hypercorn": "hypercorn>=0.17",
}


def unavailable(reason: str) -> None:
    """Skip, or fail under CI=true (real peers are required there)."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: real peers are required)")
    pytest.skip(reason)


def pip_install(packages: dict[str, str]) -> None:
    """Install the requirements whose import name is missing, into this environment."""
    missing = [req for name, req in packages.items() if importlib.util.find_spec(name) is None]
    if not missing:
        return
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", *missing],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if result.returncode != 0:
        unavailable(f"pip install {' '.join(missing)} failed: {result.stderr[-2000:]}")
    importlib.invalidate_caches()


free_port = processes.free_port


class PeerServer:
    """A connectrpc app (``tests.peers.connect_servers:app``) in a server subprocess,
    launched by ``tokenwire.testing.processes`` (ready once its port accepts)."""

    def __init__(self, argv: list[str], port: int, log: Path, stderr: Path) -> None:
        self.port = port
        self.log = log
        env = dict(os.environ, TOKENWIRE_PEER_LOG=str(log))
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        self.stderr = stderr
        self._served = processes.ServedProcess(
            argv,
            port,
            ready=lambda: processes.listening(port),
            env=env,
            cwd=ROOT,
            timeout_s=30.0,
            stderr_path=stderr,
            stdout_path=stderr,
        ).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def lines(self) -> list[str]:
        return self.log.read_text(encoding="utf-8").splitlines() if self.log.exists() else []

    def wait_for_line(self, line: str, timeout: float = 10.0) -> bool:
        return eventually(lambda: line in self.lines(), timeout=timeout)

    def stop(self) -> None:
        self._served.close()


@pytest.fixture(scope="session")
def connectrpc_peer() -> None:
    """connectrpc (+ uvicorn, hypercorn) installed from PyPI."""
    pip_install(CONNECT_PACKAGES)


def _server(kind: str, tmp: Path) -> PeerServer:
    port = free_port()
    if kind == "uvicorn":
        argv = [sys.executable, "-m", "uvicorn", "tests.peers.connect_servers:app"]
        argv += ["--host", "127.0.0.1", "--port", str(port), "--lifespan", "off"]
        argv += ["--log-level", "warning"]
    else:
        argv = [sys.executable, "-m", "hypercorn", "tests.peers.connect_servers:app"]
        argv += ["--bind", f"127.0.0.1:{port}"]
    return PeerServer(argv, port, tmp / f"{kind}.log", tmp / f"{kind}.stderr")


@pytest.fixture(scope="session")
def uvicorn_server(
    connectrpc_peer: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PeerServer]:
    """The real connectrpc server under uvicorn (HTTP/1.1), as the capture was made."""
    server = _server("uvicorn", tmp_path_factory.mktemp("uvicorn"))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def hypercorn_server(
    connectrpc_peer: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PeerServer]:
    """The same app under hypercorn, which speaks HTTP/2 (h2c with prior knowledge)."""
    server = _server("hypercorn", tmp_path_factory.mktemp("hypercorn"))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def signalrcore_peer() -> None:
    """PyPI signalrcore, the Python SignalR client."""
    pip_install({"signalrcore": "signalrcore>=1.0.2,<2"})


@pytest.fixture(scope="session")
def signalr_js() -> Path:
    """``node_modules`` holding npm ``@microsoft/signalr``; installed when missing."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        unavailable("node and npm are needed for the Microsoft SignalR client")
    modules = NODE_DIR / "node_modules"
    if not (modules / "@microsoft" / "signalr" / "package.json").is_file():
        NODE_DIR.mkdir(parents=True, exist_ok=True)
        # The install is a cache, never part of the repository.
        (NODE_DIR / ".gitignore").write_text("*\n")
        result = subprocess.run(
            [str(npm), "install", "--prefix", str(NODE_DIR), "--no-audit", "--no-fund"]
            + ["--loglevel=error", SIGNALR_JS],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if result.returncode != 0:
            unavailable(f"npm install {SIGNALR_JS} failed: {result.stderr[-2000:]}")
    return modules
