"""Runs the JavaScript unit tests of ``tokenwire.js`` with Node's own test runner.

``node --test tests/playground/js/``: the shared SSE vectors, the shared
lifecycle vectors, seq-gap detection and ``stream()``. So ``make test`` runs
them too. Without ``node`` the test skips locally and fails under CI=true.
"""

from __future__ import annotations

import shutil
import subprocess

from tests.playground.servers import ROOT, unavailable


def test_node_unit_tests() -> None:
    node = shutil.which("node")
    if node is None:
        unavailable("node is not installed: the tokenwire.js unit tests need Node 18+")
    result = subprocess.run(
        [node, "--test", "tests/playground/js/"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    summary = "\n".join(line for line in result.stdout.splitlines() if line.startswith("# "))
    assert result.returncode == 0, result.stdout[-8000:] + result.stderr[-4000:]
    assert "# fail 0" in summary, summary
