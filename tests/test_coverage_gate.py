"""The coverage gate of `make test` (tests/coverage_gate.py) fails on either number alone."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.coverage_gate import ROOT, failures, totals

GATE = ROOT / "tests" / "coverage_gate.py"


def _report(lines: tuple[int, int], branches: tuple[int, int]) -> dict[str, object]:
    return {
        "totals": {
            "covered_lines": lines[0],
            "num_statements": lines[1],
            "covered_branches": branches[0],
            "num_branches": branches[1],
        }
    }


def test_lines_and_branches_are_counted_apart() -> None:
    assert totals(_report((90, 100), (30, 40))) == (90.0, 75.0)
    assert totals(_report((0, 0), (0, 0))) == (100.0, 100.0)  # nothing to cover


def test_either_number_below_its_floor_fails() -> None:
    floors = {"line": 90, "branch": 80}
    assert failures(95.0, 85.0, floors) == []
    assert failures(90.0, 80.0, floors) == []  # at the floor passes
    assert failures(95.0, 79.9, floors) == ["branch coverage 79.90% is below its floor 80%"]
    assert [m.split()[0] for m in failures(89.0, 79.0, floors)] == ["line", "branch"]


def test_the_script_exits_1_below_the_floors_in_pyproject(tmp_path: Path) -> None:
    low = tmp_path / "low.json"
    low.write_text(json.dumps(_report((0, 100), (0, 100))))
    done = subprocess.run([sys.executable, str(GATE), str(low)], capture_output=True, text=True)
    assert done.returncode == 1, done.stdout
    assert "line coverage 0.00% is below its floor" in done.stdout
    full = tmp_path / "full.json"
    full.write_text(json.dumps(_report((100, 100), (100, 100))))
    done = subprocess.run([sys.executable, str(GATE), str(full)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout
    assert "line 100.00%" in done.stdout and "branch 100.00%" in done.stdout
