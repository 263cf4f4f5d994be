"""The real coding-agent CLIs from npm: installed once, run in a sandboxed HOME.

``install()`` puts the pinned packages of ``tests/vectors/agents/clis.json``
into ``.cache/agents/<hash of the pins>/`` (ignored by git; a lock keeps
parallel sessions from installing twice). Without Node or npm, or when the
install fails, the tests skip, except with ``CI=true``, where they fail.

``run_agent`` starts one agent in its own process group with a fresh HOME,
telemetry, update checks and error reporting off, a dead proxy for anything
that is not 127.0.0.1, bounded by a timeout, and kills the whole group at the
end, whatever happened.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib
import json
import os
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PINS: dict[str, Any] = json.loads((ROOT / "tests/vectors/agents/clis.json").read_text())
#: Bound of one agent run (a two-round loop against local fakes takes seconds).
RUN_TIMEOUT_S = 120.0
INSTALL_TIMEOUT_S = 600.0
#: Where anything that is not 127.0.0.1 goes: nowhere (a closed port).
DEAD_PROXY = "http://127.0.0.1:9"


def skip_or_fail(reason: str) -> None:
    """Skip the test, or fail it under ``CI=true`` (where nothing is skipped)."""
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


def require(module: str, reason: str) -> Any:
    """``module`` imported; skipped without it, failed without it under ``CI=true``."""
    try:
        return importlib.import_module(module)
    except ImportError:
        skip_or_fail(f"{module} is not installed: {reason}")
        raise


def install() -> Path:
    """The ``node_modules/.bin`` directory with the pinned agent CLIs."""
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        skip_or_fail("the agent tests need Node.js and npm on PATH")
        raise AssertionError("unreachable")
    specs = [f"{a['package']}@{a['version']}" for a in PINS["agents"].values()]
    key = hashlib.sha256(" ".join(sorted(specs)).encode()).hexdigest()[:16]
    prefix = ROOT / ".cache" / "agents" / key
    prefix.mkdir(parents=True, exist_ok=True)
    bin_dir = prefix / "node_modules" / ".bin"
    done = prefix / "installed"
    with (prefix / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            # Claude Code's package says it needs Node 22, but it runs a native
            # binary that works on Node 20: --engine-strict stays off.
            argv = [npm, "install", "--no-audit", "--no-fund", "--prefix", str(prefix), *specs]
            env = {**os.environ, "npm_config_update_notifier": "false"}
            try:
                proc = subprocess.run(
                    argv, env=env, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S
                )
            except subprocess.TimeoutExpired:
                skip_or_fail(f"npm install of {specs} took over {INSTALL_TIMEOUT_S:.0f} s")
            if proc.returncode != 0:
                skip_or_fail(f"npm install of {specs} failed:\n{proc.stderr[-2000:]}")
            done.write_text("\n".join(specs) + "\n")
    return bin_dir


@dataclass(frozen=True)
class AgentRun:
    """What one agent run printed and how it ended."""

    returncode: int
    stdout: str
    stderr: str

    def describe(self) -> str:
        out, err = self.stdout[-3000:], self.stderr[-3000:]
        return f"exit {self.returncode}\nstdout:\n{out}\nstderr:\n{err}"


def _base_env(home: Path) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "TERM": "dumb",
        "LANG": "C.UTF-8",
        "NO_COLOR": "1",
        # Anything not for 127.0.0.1 goes to a closed port, so it cannot leave the machine.
        "HTTP_PROXY": DEAD_PROXY,
        "HTTPS_PROXY": DEAD_PROXY,
        "http_proxy": DEAD_PROXY,
        "https_proxy": DEAD_PROXY,
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    }


def claude_code(
    bin_dir: Path, home: Path, url: str, model: str, prompt: str
) -> tuple[list[str], dict[str, str]]:
    env = _base_env(home) | {
        "ANTHROPIC_BASE_URL": url,
        "ANTHROPIC_API_KEY": "sk-agent-test",
        # Side calls (titles, summaries) go to the same gateway model.
        "ANTHROPIC_DEFAULT_HAIKU_MODEL": model,
        "ANTHROPIC_SMALL_FAST_MODEL": model,
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }
    # As root, --dangerously-skip-permissions is refused: allow the two tools by name.
    argv = [str(bin_dir / "claude"), "-p", prompt, "--model", model]
    argv += ["--allowedTools", "Read,Bash", "--max-turns", "6"]
    return argv, env


def codex(
    bin_dir: Path, home: Path, url: str, model: str, prompt: str
) -> tuple[list[str], dict[str, str]]:
    config = home / ".codex"
    config.mkdir(parents=True, exist_ok=True)
    # A custom provider (Codex's way to name an OpenAI-compatible base URL), no retries.
    (config / "config.toml").write_text(
        f'model = "{model}"\n'
        'model_provider = "tokenwire"\n'
        "check_for_update_on_startup = false\n"
        "[analytics]\nenabled = false\n"
        "[model_providers.tokenwire]\n"
        'name = "tokenwire"\n'
        f'base_url = "{url}/v1"\n'
        'env_key = "TOKENWIRE_AGENT_KEY"\n'
        'wire_api = "responses"\n'
        "request_max_retries = 0\n"
        "stream_max_retries = 0\n"
    )
    env = _base_env(home) | {"TOKENWIRE_AGENT_KEY": "sk-agent-test", "CODEX_HOME": str(config)}
    argv = [str(bin_dir / "codex"), "exec", "--skip-git-repo-check"]
    argv += ["--dangerously-bypass-approvals-and-sandbox", prompt]
    return argv, env


def gemini_cli(
    bin_dir: Path, home: Path, url: str, model: str, prompt: str
) -> tuple[list[str], dict[str, str]]:
    settings = home / ".gemini"
    settings.mkdir(parents=True, exist_ok=True)
    # Without the API-key auth type selected, Gemini CLI ignores GOOGLE_GEMINI_BASE_URL.
    (settings / "settings.json").write_text(
        json.dumps(
            {
                "security": {"auth": {"selectedType": "gemini-api-key"}},
                "privacy": {"usageStatisticsEnabled": False},
                "telemetry": {"enabled": False},
                "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
            }
        )
    )
    env = _base_env(home) | {
        "GEMINI_API_KEY": "sk-agent-test",
        "GOOGLE_GEMINI_BASE_URL": url,
        # Non-interactive runs refuse an untrusted folder.
        "GEMINI_CLI_TRUST_WORKSPACE": "true",
    }
    argv = [str(bin_dir / "gemini"), "-p", prompt, "-m", model, "--yolo"]
    return argv, env


AGENTS = {"claude-code": claude_code, "codex": codex, "gemini-cli": gemini_cli}


def run_agent(
    agent: str, bin_dir: Path, workdir: Path, project: Path, url: str, model: str, prompt: str
) -> AgentRun:
    """Run ``agent`` once in ``project`` against ``url``; returns what it printed."""
    home = workdir / "home"
    home.mkdir(parents=True, exist_ok=True)
    argv, env = AGENTS[agent](bin_dir, home, url, model, prompt)
    out, err = workdir / "agent.stdout", workdir / "agent.stderr"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        proc = subprocess.Popen(
            argv,
            env=env,
            cwd=project,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,  # its own group: the whole tree is killed at the end
        )
        try:
            returncode = proc.wait(timeout=RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            returncode = -1
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    timed_out = "" if returncode != -1 else f"\n(killed after {RUN_TIMEOUT_S:.0f} s)"
    return AgentRun(
        returncode, out.read_text(errors="replace"), err.read_text(errors="replace") + timed_out
    )
