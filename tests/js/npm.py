"""Node, npm and the built ``js/`` package, shared by the JavaScript tests.

``ensure_built()`` runs at most once per test session: it finds (or, as root,
apt-installs) ``node`` and ``npm``, runs ``npm ci`` in ``js/`` unless
``js/node_modules`` already matches ``package-lock.json``, then
``npm run build``. Anything missing skips the test, or fails it under CI=true.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.playground.servers import ROOT, unavailable

JS = ROOT / "js"
STAMP = JS / "node_modules" / ".tokenwire-npm-ci"
STATIC = ROOT / "src" / "tokenwire" / "gateway" / "static" / "tokenwire.js"
BROWSER_BUILD = JS / "dist" / "tokenwire.browser.js"


@dataclass(frozen=True)
class JSPackage:
    """The built package: where it is and the tools that built it."""

    root: Path
    node: str
    npm: str

    def run(
        self,
        *argv: str,
        cwd: Path | None = None,
        timeout: float = 600,
        env: dict[str, str] | None = None,
    ) -> str:
        """Run a command (``node`` / ``npm`` ...) and return its stdout; fail with its output."""
        result = subprocess.run(
            list(argv),
            cwd=cwd or self.root,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            env=_env(env),
        )
        assert result.returncode == 0, (
            f"{' '.join(argv)} exited {result.returncode}\n"
            f"{result.stdout[-6000:]}\n{result.stderr[-4000:]}"
        )
        return result.stdout


def _env(extra: dict[str, str] | None) -> dict[str, str]:
    env = {**os.environ, "NO_UPDATE_NOTIFIER": "1", "npm_config_fund": "false"}
    env["npm_config_audit"] = "false"
    return {**env, **(extra or {})}


def _apt_install(*packages: str) -> None:
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        unavailable(f"{' '.join(packages)} missing and apt-get cannot run here (not root / no apt)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for argv in (["apt-get", "update"], ["apt-get", "install", "-y", *packages]):
        result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=1200)
        if result.returncode != 0:
            unavailable(f"{' '.join(argv)} failed: {result.stderr[-2000:]}")


def find_tools() -> tuple[str, str]:
    """``node`` and ``npm``, installing Debian's packages when they are missing."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        _apt_install("nodejs", "npm")
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        unavailable("node and npm are needed for the JavaScript package tests")
    assert node is not None and npm is not None
    major = subprocess.run([node, "--version"], capture_output=True, text=True).stdout
    if int(major.strip().lstrip("v").split(".")[0]) < 18:
        unavailable(f"node {major.strip()} is too old: the package needs Node 18+")
    return node, npm


def lock_hash() -> str:
    return hashlib.sha256((JS / "package-lock.json").read_bytes()).hexdigest()


@functools.cache
def ensure_built() -> JSPackage:
    node, npm = find_tools()
    package = JSPackage(JS, node, npm)
    if not STAMP.exists() or STAMP.read_text() != lock_hash():
        result = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund"],
            cwd=JS,
            capture_output=True,
            text=True,
            timeout=900,
            stdin=subprocess.DEVNULL,
            env=_env(None),
        )
        if result.returncode != 0:
            unavailable(f"npm ci failed (is the npm registry reachable?): {result.stderr[-3000:]}")
        STAMP.write_text(lock_hash())
    package.run(npm, "run", "build")
    return package
