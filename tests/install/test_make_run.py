"""Must show (issue 25): ``make run`` from a fresh clone, timed and sized.

The time (spawn to the gateway's first ``/healthz`` 200, the install
included) and the venv's size are printed, not asserted: they depend on the
machine and on pip's cache. Bounded: 10 minutes, one gateway, stopped after.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from tests.install.helpers import check_served, clean_env, fresh_copy, size_mb

from tokenwire.testing.processes import ServedProcess, free_port

pytestmark = [pytest.mark.install, pytest.mark.timeout(900)]


def test_make_run_from_a_fresh_clone_serves_the_demo_and_the_playground(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert shutil.which("make"), "make is needed: it is the README's first command"
    clone = fresh_copy(tmp_path / "tokenwire")
    port = free_port()
    with ServedProcess(
        ["make", "run", f"PORT={port}"], port, cwd=clone, env=clean_env(), timeout_s=600
    ) as served:
        check_served(served)
        started = served.started_s
    venv = clone / ".venv"
    listed = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "list", "--format=freeze"],
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    installed = {line.split("==")[0].lower() for line in listed.splitlines()}
    with capsys.disabled():
        print(
            f"\nmake run from a fresh clone: {started:.1f} s to the first /healthz 200, "
            f"venv {size_mb(venv):.0f} MB, {len(installed)} distributions"
        )
    # What only the tests need stays out (the heavy half of the old 594 MB venv).
    assert not installed & {"pytest", "mypy", "playwright", "openai", "anthropic", "cohere"}
    assert (venv / "bin" / "tokenwire").exists()
