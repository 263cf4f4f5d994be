"""Issue 23: the vendors' TypeScript SDKs (npm ``openai``, ``@anthropic-ai/sdk``,
``@google/genai``) at their defaults against the gateway: whole and streamed answers,
tool calls, ``n``, counting and errors, on the strict fakes and the demo
(``ts_sdks.mjs`` makes the calls; this test checks what came back).

The packages are installed (pinned) into ``tests/dropin/.node`` when missing, a
cache git ignores; without node/npm the test skips, or fails under CI=true.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from tests.dropin.conftest import ARGS, QUESTION, TEXT, Served

from tokenwire import request as rq
from tokenwire.gateway.providers.demo import plan_reply
from tokenwire.writer import estimate_tokens

HERE = Path(__file__).resolve().parent
NODE_DIR = HERE / ".node"
PACKAGES = ("openai@7.59.0", "@anthropic-ai/sdk@1.15.0", "@google/genai@3.3.0")


def _unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: the TypeScript SDKs are required)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def node_modules() -> Path:
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        _unavailable("node and npm are needed for the TypeScript SDKs")
    modules = NODE_DIR / "node_modules"
    wanted = {p.rsplit("@", 1)[0]: p.rsplit("@", 1)[1] for p in PACKAGES}
    installed = {}
    for name in wanted:
        manifest = modules / name / "package.json"
        if manifest.is_file():
            installed[name] = json.loads(manifest.read_text())["version"]
    if installed != wanted:
        NODE_DIR.mkdir(parents=True, exist_ok=True)
        (NODE_DIR / ".gitignore").write_text("*\n")  # a cache, never part of the repository
        result = subprocess.run(
            [str(npm), "install", "--prefix", str(NODE_DIR), "--no-audit", "--no-fund"]
            + ["--loglevel=error", *PACKAGES],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if result.returncode != 0:
            _unavailable(f"npm install failed: {result.stderr[-2000:]}")
    return modules


@pytest.fixture(scope="module")
def answers(served: Served, node_modules: Path) -> dict[str, Any]:
    # The script runs from the install's folder, where node resolves the packages.
    script = NODE_DIR / "ts_sdks.mjs"
    shutil.copyfile(HERE / "ts_sdks.mjs", script)
    result = subprocess.run(
        ["node", str(script), served.url],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=NODE_DIR,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


DEMO = plan_reply(rq.build(model="demo", messages=QUESTION)).text


@pytest.mark.parametrize("model", ["oa", "demo"])
def test_openai_ts(answers: dict[str, Any], model: str) -> None:
    got = answers[f"openai.{model}"]
    text = TEXT if model == "oa" else DEMO
    assert (got["whole"], got["finish"], got["streamed"]) == (text, "stop", text)
    assert got["call"] == [["get_weather", ARGS]]
    assert got["responses"] == text


def test_openai_ts_n_and_errors(answers: dict[str, Any]) -> None:
    assert answers["openai.n"] == [[0, TEXT], [1, f"Choice 1: {TEXT}"]]
    assert answers["openai.unknown"] == ["NotFoundError", 404]


@pytest.mark.parametrize("model", ["claude", "demo"])
def test_anthropic_ts(answers: dict[str, Any], model: str) -> None:
    got = answers[f"anthropic.{model}"]
    text = TEXT if model == "claude" else DEMO
    assert (got["whole"], got["stop"], got["streamed"]) == (text, "end_turn", text)
    assert got["call"] == [["get_weather", ARGS]]
    assert got["count"] > 0
    if model == "demo":
        assert got["count"] == estimate_tokens(QUESTION)


def test_anthropic_ts_errors(answers: dict[str, Any]) -> None:
    assert answers["anthropic.error.nope"] == ["NotFoundError", 404]
    assert answers["anthropic.error.claude-down"][1] == 529


@pytest.mark.parametrize("version", ["default", "v1beta"])
@pytest.mark.parametrize("model", ["gem", "demo"])
def test_genai_ts(answers: dict[str, Any], version: str, model: str) -> None:
    got = answers[f"genai.{version}.{model}"]
    text = TEXT if model == "gem" else DEMO
    assert (got["whole"], got["streamed"]) == (text, text)
    assert got["call"] == [["get_weather", ARGS]]
    assert got["count"] > 0
