"""Helpers of the playground tests: the gateway process, Chromium, CI rules."""

from __future__ import annotations

import contextlib
import importlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tokenwire.testing import processes

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
IN_CI = os.environ.get("CI") == "true"
CHROMIUM = "/usr/bin/chromium"
#: The flags the brief asks for: no sandbox (root in a container), no GPU, no network chatter.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def unavailable(reason: str) -> None:
    """Skip locally; with CI=true a missing prerequisite is a failure."""
    if IN_CI:
        pytest.fail(reason)
    pytest.skip(reason)


free_port = processes.free_port


class ServerProcess:
    """A server subprocess on 127.0.0.1 with its output in files; always stopped.

    ``tokenwire.testing.processes.ServedProcess`` (the one launcher): ``start``
    waits for ``/healthz``; ``stop`` interrupts it, then kills its own process
    group (the server and its workers), never anything else.
    """

    def __init__(self, argv: list[str], port: int, workdir: Path, name: str) -> None:
        self.argv = argv
        self.port = port
        self.name = name
        self.stdout_path = workdir / f"{name}-{port}.stdout"
        self.stderr_path = workdir / f"{name}-{port}.stderr"
        self._served: processes.ServedProcess | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def start(self, wait: float = 30.0) -> ServerProcess:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        # The playground's WebSocket transport and the node tests' ws client need
        # WebSocket upgrades (/v1/ws), which the granian engine serves (h1: 501).
        env.setdefault("TOKENWIRE_SERVER_ENGINE", "granian")
        self._served = processes.ServedProcess(
            self.argv,
            self.port,
            env=env,
            cwd=ROOT,
            timeout_s=wait,
            stderr_path=self.stderr_path,
            stdout_path=self.stdout_path,
        ).start()
        return self

    def stop(self) -> None:
        if self._served is not None:
            self._served.close()
            self._served = None


def serve_argv(port: int) -> list[str]:
    """``tokenwire serve`` with the built-in demo model."""
    return [sys.executable, "-m", "tokenwire", "serve", "--host", "127.0.0.1", "--port", str(port)]


def local_argv(port: int) -> list[str]:
    """granian serving ``local_gateway:app`` (the gateway app + the playground routes)."""
    return [
        sys.executable,
        "-m",
        "granian",
        "--interface",
        "asgi",
        "--factory",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--no-ws",
        "--log-level",
        "warning",
        "--no-access-log",
        "tests.playground.local_gateway:app",
    ]


@contextlib.contextmanager
def playground_server(workdir: Path) -> Iterator[ServerProcess]:
    """``tokenwire serve`` when it serves the playground, else the local stand-in.

    The stand-in is the same gateway app plus ``playground.routes()``: used
    until the lead wires the routes into ``gateway/app.py``.
    """
    port = free_port()
    server = ServerProcess(serve_argv(port), port, workdir, "tokenwire-serve").start()
    try:
        wired = httpx.get(server.url + "/", timeout=5.0).status_code == 200
    except BaseException:
        server.stop()
        raise
    if wired:
        try:
            yield server
        finally:
            server.stop()
        return
    server.stop()
    port = free_port()
    local = ServerProcess(local_argv(port), port, workdir, "local-gateway").start()
    try:
        yield local
    finally:
        local.stop()


# --- Chromium ------------------------------------------------------------------------


def ensure_chromium() -> str:
    """The path of Debian's Chromium, installing the package when it is missing.

    Installs with apt-get (as root) when ``/usr/bin/chromium`` is absent;
    skips (fails under CI=true) when that is not possible.
    """
    if Path(CHROMIUM).exists():
        return CHROMIUM
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        unavailable(f"{CHROMIUM} is missing and apt-get cannot run here (not root / no apt)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for argv in (["apt-get", "update"], ["apt-get", "install", "-y", "chromium"]):
        result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=1200)
        if result.returncode != 0:
            unavailable(f"{' '.join(argv)} failed: {result.stderr[-2000:]}")
    if not Path(CHROMIUM).exists():
        unavailable(f"apt-get install chromium did not provide {CHROMIUM}")
    return CHROMIUM


def ensure_playwright() -> Any:
    """``playwright.sync_api``, installed with pip when missing.

    Only the Python package: its own browser download is never used (Debian's
    Chromium is). Skips (fails under CI=true) when it cannot be installed.
    """
    try:
        from playwright import sync_api
    except ImportError:
        argv = [sys.executable, "-m", "pip", "install", "-q", "playwright"]
        result = subprocess.run(argv, capture_output=True, text=True, timeout=600)
        if result.returncode != 0:
            unavailable(f"pip install playwright failed: {result.stderr[-2000:]}")
        importlib.invalidate_caches()
        from playwright import sync_api
    return sync_api


@contextlib.contextmanager
def chromium_context(**options: Any) -> Iterator[Any]:
    """A headless Chromium (Debian's) with a fresh user-data-dir, as a Playwright context."""
    sync_api = ensure_playwright()
    executable = ensure_chromium()
    with sync_api.sync_playwright() as pw, tempfile.TemporaryDirectory(prefix="tw-chromium-") as d:
        context = pw.chromium.launch_persistent_context(
            d, executable_path=executable, headless=True, args=CHROMIUM_ARGS, **options
        )
        try:
            yield context
        finally:
            context.close()
