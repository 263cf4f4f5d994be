"""The "Production" section of docs/gateway.md runs: every ``sh`` block against a real
gateway serving examples/production.toml, every ``toml`` block is a valid config, every
``json`` block parses."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from tests.gateway.gateway_procs import Gateway

from tokenwire.gateway import config

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "production.toml"


def section() -> str:
    text = (ROOT / "docs" / "gateway.md").read_text()
    start = text.index("\n## Production\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def blocks(info: str) -> list[str]:
    return re.findall(rf"```{info}\n(.*?)```", section(), flags=re.S)


def test_the_example_config_is_valid_and_uses_every_feature() -> None:
    loaded = config.load(EXAMPLE)
    production = loaded.production
    assert production.keys and production.routing["reliable"].deployments
    assert production.routing["reliable"].fallbacks == ["demo"]


@pytest.mark.parametrize("block", blocks("toml"))
def test_toml_blocks_are_valid_configs(block: str) -> None:
    config.parse(tomllib.loads(block))


@pytest.mark.parametrize("block", blocks("json"))
def test_json_blocks_parse(block: str) -> None:
    json.loads(block)


def test_sh_blocks_run_against_the_example_gateway(tmp_path: Path) -> None:
    runnable = blocks("sh")  # "```sh no-run" blocks do not match
    assert runnable
    gateway = Gateway(tmp_path, config=EXAMPLE.read_text()).start()
    try:
        env = dict(os.environ)
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env["PATH"]])
        for block in runnable:
            # The gateway is the test's own, on a free port.
            lines = [line for line in block.splitlines() if not line.startswith("tokenwire serve")]
            script = "\n".join(lines).replace("127.0.0.1:8080", f"127.0.0.1:{gateway.port}")
            done = subprocess.run(
                ["bash", "-e", "-o", "pipefail", "-c", script],
                cwd=ROOT,
                env=env,
                capture_output=True,
                timeout=60,
            )
            assert done.returncode == 0, (script, done.stdout, done.stderr)
            if "curl" in script:
                assert b"event: stream.end" in done.stdout
                assert b"event: error" not in done.stdout
    finally:
        gateway.stop()
