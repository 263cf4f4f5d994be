"""``tokenwire serve``'s command line: what it refuses before starting a server."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
from click.testing import CliRunner

from tokenwire.cli import main
from tokenwire.cli.serve import command


def test_serve_is_a_subcommand() -> None:
    result = CliRunner().invoke(main, ["serve", "--help"])
    assert result.exit_code == 0
    for option in ("--config", "--host", "--port", "--workers", "--certfile", "--keyfile"):
        assert option in result.output
    assert "--log-content" in result.output


def test_bad_config_stops_with_the_key_named(tmp_path: Path) -> None:
    path = tmp_path / "g.toml"
    path.write_text('[[models]]\nname = "x"\nprovider = "openai"\n')
    result = CliRunner().invoke(command, ["--config", str(path)])
    assert result.exit_code == 1
    assert "models[0].base_url" in result.output


def test_certfile_needs_keyfile(tmp_path: Path) -> None:
    cert = tmp_path / "cert.pem"
    cert.write_text("not used")
    result = CliRunner().invoke(command, ["--certfile", str(cert)])
    assert result.exit_code == 2
    assert "--keyfile" in result.output


# -- ports (issue 13): never shared silently, the bound one announced ------------------


def serve(*args: str) -> subprocess.Popen[str]:
    """``tokenwire serve`` in its own process group, stdout and stderr piped."""
    argv = [sys.executable, "-m", "tokenwire", "serve", "--host", "127.0.0.1", *args]
    return subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )


def stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # granian's workers share its group
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()


def assert_one_line_refusal(proc: subprocess.Popen[str], port: int) -> None:
    try:
        out, err = proc.communicate(timeout=60)
    finally:
        stop(proc)
    assert proc.returncode == 1, (out, err)
    assert "Traceback" not in err
    assert out == ""  # no "gateway on ..." line for a server that never ran
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert f"port {port}" in lines[0] and "in use" in lines[0]


def test_a_port_held_by_another_program_is_refused_in_one_line() -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        assert_one_line_refusal(serve("--port", str(port)), port)


def test_port_zero_announces_the_bound_port_and_a_second_serve_there_is_refused() -> None:
    first = serve("--port", "0")
    try:
        assert first.stdout is not None
        line = first.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:(\d+)", line)
        assert match, line
        port = int(match.group(1))
        assert port != 0
        deadline = time.monotonic() + 60
        while True:  # the announced port is the one that answers
            assert first.poll() is None, first.stderr.read() if first.stderr else ""
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                    break
            assert time.monotonic() < deadline, "the gateway did not answer on its port"
            time.sleep(0.05)
        # granian listens with SO_REUSEPORT: without the check, this one would share it.
        assert_one_line_refusal(serve("--port", str(port)), port)
        assert first.poll() is None
    finally:
        stop(first)


def test_make_run_takes_port_and_host() -> None:
    root = Path(__file__).resolve().parents[2]
    dry = subprocess.run(
        ["make", "-n", "-s", "run", "PORT=9123", "HOST=::1"],
        cwd=root, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert "tokenwire serve --host ::1 --port 9123" in dry.stdout
    default = subprocess.run(
        ["make", "-n", "-s", "run"], cwd=root, capture_output=True, text=True, timeout=60
    )
    assert "tokenwire serve --host 127.0.0.1 --port 8080" in default.stdout
