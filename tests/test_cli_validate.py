"""`tokenwire validate`: exit codes, output, and bad input without tracebacks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from tests.test_lifecycle import VECTORS, wire


def run(args: list[str], stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "tokenwire", "validate", *args],
        input=stdin,
        capture_output=True,
        timeout=120,
    )


def case(name: str) -> dict[str, object]:
    return next(c for c in VECTORS if c["name"] == name)


def test_clean_stream_from_stdin_exits_zero() -> None:
    res = run([], wire(case("spec-5.5-complete-example")))
    assert res.returncode == 0, res.stderr
    assert res.stdout == b""
    assert b"8 events: conformant" in res.stderr


def test_violation_lines_and_exit_one(tmp_path: Path) -> None:
    f = tmp_path / "gap.sse"
    f.write_bytes(wire(case("seq-gap")))
    res = run([str(f)])
    assert res.returncode == 1
    assert res.stdout.decode().splitlines() == [
        "seq 5: seq-gap (§5.2.1, MUST): expected seq 3, got 5: 2 lost"
    ]


def test_warnings_pass_unless_strict() -> None:
    body = wire(case("missing-usage"))
    assert run([], body).returncode == 0
    assert run(["--strict"], body).returncode == 1


def test_request_enables_tool_checks(tmp_path: Path) -> None:
    c = case("undeclared-tool")
    req = tmp_path / "req.json"
    req.write_text(json.dumps(c["request"]))
    assert run([], wire(c)).returncode == 0
    res = run(["--request", str(req)], wire(c))
    assert res.returncode == 1 and b"undeclared-tool" in res.stdout


def test_json_report() -> None:
    res = run(["--json"], wire(case("after-end")))
    report = json.loads(res.stdout)
    assert res.returncode == 1
    assert report["ok"] is False
    assert [v["rule"] for v in report["violations"]] == ["after-end"]


GARBAGE = {
    "random-bytes": bytes(range(256)) * 40,
    "nul-bytes": b"\x00" * 10_000,
    "invalid-utf8": b"event: stream.start\ndata: \xff\xfe{\n\n",
    "8mb-line-no-newline": b"data: " + b"a" * (8 << 20),
    "100k-nested-brackets": b"event: usage\ndata: " + b"[" * 100_000 + b"\n\n",
}


@pytest.mark.parametrize("name", list(GARBAGE))
def test_garbage_gives_one_clear_line_and_no_traceback(name: str) -> None:
    res = run([], GARBAGE[name])
    assert res.returncode == 1
    lines = res.stdout.decode().splitlines()
    assert len(lines) == 1, lines
    assert b"Traceback" not in res.stderr + res.stdout


def test_bad_request_file_is_one_line(tmp_path: Path) -> None:
    req = tmp_path / "req.json"
    req.write_bytes(b"[" * 100_000)
    res = run(["--request", str(req)], wire(case("spec-5.5-complete-example")))
    assert res.returncode != 0
    assert b"Traceback" not in res.stderr
    assert len(res.stderr.decode().strip().splitlines()) == 1
