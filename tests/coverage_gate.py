"""`make test`'s coverage gate: line AND branch coverage may only go up.

``python tests/coverage_gate.py coverage.json`` reads the JSON report pytest-cov
wrote (``--cov-report=json:...``; the files are ``[tool.coverage.run]``'s, the
core and the translators) and the floors in pyproject.toml's
``[tool.tokenwire.coverage]``. It prints the two totals and exits 1, naming
what fell, when either is below its floor. coverage.py's own ``fail_under``
checks one number that mixes lines and branches; this checks each.

It is also the pytest plugin ``make test`` loads (``-p tests.coverage_gate``):
property tests (Hypothesis, hundreds of examples each) still run but are not
traced (pytest-cov's ``no_cover``), because tracing them doubled the in-process
tests' CPU time while adding little coverage the example tests and the shared
vectors lack (bench/RESULTS.md, "## coverage").
"""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def pytest_collection_modifyitems(items: list[Any]) -> None:
    """Mark every Hypothesis test ``no_cover``: it runs, untraced."""
    import pytest

    for item in items:
        if getattr(getattr(item, "obj", None), "is_hypothesis_test", False):
            item.add_marker(pytest.mark.no_cover)


def totals(report: dict[str, Any]) -> tuple[float, float]:
    """(line %, branch %) of a coverage.py JSON report (100 where there is nothing to cover)."""
    t = report["totals"]
    lines = 100.0 * t["covered_lines"] / t["num_statements"] if t["num_statements"] else 100.0
    branches = 100.0 * t["covered_branches"] / t["num_branches"] if t.get("num_branches") else 100.0
    return lines, branches


def failures(line: float, branch: float, floors: dict[str, float]) -> list[str]:
    """What fell below its floor, worded for the log; empty when the gate passes."""
    out = []
    for name, value in (("line", line), ("branch", branch)):
        floor = float(floors[name])
        if value < floor:
            out.append(f"{name} coverage {value:.2f}% is below its floor {floor:g}%")
    return out


def main(argv: list[str]) -> int:
    report = json.loads(Path(argv[1]).read_text())
    floors = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["tokenwire"]["coverage"]
    line, branch = totals(report)
    print(
        f"coverage gate (core + translators): line {line:.2f}% (floor {floors['line']}%), "
        f"branch {branch:.2f}% (floor {floors['branch']}%)"
    )
    fell = failures(line, branch, floors)
    for message in fell:
        print(f"coverage gate: {message}; test the code you added, or see what lost its tests")
    return 1 if fell else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
