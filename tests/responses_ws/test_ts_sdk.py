"""The 3-turn tool loop from the TypeScript openai SDK (``ResponsesWS``, npm ``openai``
with ``ws``), unchanged but for ``baseURL``, against ``tokenwire serve`` and a Chat upstream.

The packages are installed (pinned) into tests/dropin/.node, the TypeScript SDK tests'
cache, when missing; without node/npm the test skips, or fails under CI=true.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.dropin.test_ts_sdks import NODE_DIR, _unavailable
from tests.dropin.test_ts_sdks import node_modules as node_modules  # the shared install
from tests.gateway.gateway_procs import Gateway
from tests.responses_ws.helpers import FINAL, loop_script

from tokenwire.testing.upstream import FakeUpstream

HERE = Path(__file__).resolve().parent
#: The transport ResponsesWS needs on Node (an optional peer dependency of openai).
WS_PACKAGE = ("ws", "8.23.1")


@pytest.fixture(scope="module")
def ws_package(node_modules: Path) -> Path:
    name, wanted = WS_PACKAGE
    manifest = node_modules / name / "package.json"
    if not manifest.is_file() or json.loads(manifest.read_text())["version"] != wanted:
        npm = shutil.which("npm")
        assert npm is not None  # node_modules checked it
        result = subprocess.run(
            [npm, "install", "--prefix", str(NODE_DIR), "--no-audit", "--no-fund"]
            + ["--loglevel=error", f"{name}@{wanted}"],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if result.returncode != 0:
            _unavailable(f"npm install {name} failed: {result.stderr[-2000:]}")
    return node_modules


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Gateway, FakeUpstream]]:
    with FakeUpstream("openai", loop_script) as fake:
        config = (
            f'[[models]]\nname = "chat"\nprovider = "openai"\nbase_url = "{fake.url}"\n'
            'upstream_model = "up-chat"\n'
        )
        with Gateway(tmp_path_factory.mktemp("responses-ws-ts"), config=config) as gateway:
            yield gateway, fake


def test_typescript_sdk_tool_loop(ws_package: Path, served: tuple[Gateway, FakeUpstream]) -> None:
    gateway, fake = served
    script = NODE_DIR / "ts_responses_ws_loop.mjs"  # run where node resolves the packages
    shutil.copyfile(HERE / "ts_loop.mjs", script)
    result = subprocess.run(
        ["node", str(script), gateway.url, "chat"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=NODE_DIR,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    got = json.loads(result.stdout.strip().splitlines()[-1])
    assert got["failures"] == []
    turns = got["turns"]
    assert [t["status"] for t in turns] == ["completed"] * 3
    assert [t["cities"] for t in turns] == [["Paris"], ["Oslo"], []]
    assert turns[-1]["text"] == FINAL
    assert len({t["id"] for t in turns}) == 3
    # The Chat upstream got the whole conversation on the last turn.
    last = fake.requests[-1].json()["messages"]
    assert [m["role"] for m in last] == ["user", "assistant", "tool", "assistant", "tool"]
    assert fake.errors == []
