"""Fixtures of the gateway tests: fake upstreams and a real ``tokenwire serve`` process.

The session gateway serves the demo model, test plugins (``gateway_plugins``),
one model per vendor in front of ``FakeUpstream`` (plus fault variants), and
one model per vendor in front of ``gateway_replay.Replay`` (exact bodies from
``tests/vectors/gateway`` and, when present, the shared vendor recordings).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.gateway.gateway_procs import Gateway
from tests.gateway.gateway_replay import Replay, fixture_body

from tokenwire.gateway.config import HTTP_VENDORS
from tokenwire.testing.upstream import RENDERERS, FakeUpstream, Fault, Script

ROOT = Path(__file__).resolve().parents[2]
VECTORS = ROOT / "tests" / "vectors" / "gateway"
FIXTURES = Path(__file__).resolve().parents[2].parent / "shared" / "vendor-fixtures"
IN_CI = os.environ.get("CI") == "true"

#: Vendors the gateway serves over HTTP that the fake upstream can play.
VENDORS = sorted(set(RENDERERS) & HTTP_VENDORS)

#: The base_url a vendor's ``build_request`` expects, from the server's root URL.
BASE_PATHS = {
    "openai": "/v1",
    "mistral": "/v1",
    "openai-responses": "",
    "anthropic": "",
    "gemini": "",
    "cohere": "",
}

#: Recorded raw bodies (exact ``.sse`` files) per vendor folder.
FIXTURE_DIRS = {"openai": "openai-chat", "anthropic": "anthropic", "gemini": "gemini"}

LONG_TEXT = " ".join(f"word{i}" for i in range(400))


def unavailable(reason: str) -> None:
    """Skip locally; with CI=true a missing prerequisite fails instead."""
    if IN_CI:
        pytest.fail(reason)
    pytest.skip(reason)


def load_vectors(prefix: str) -> list[dict[str, Any]]:
    """The gateway vectors whose file name starts with ``prefix``."""
    out = []
    for path in sorted(VECTORS.glob(f"{prefix}*.json")):
        vector = json.loads(path.read_text())
        vector.setdefault("name", path.stem)
        out.append(vector)
    return out


def fixture_files() -> list[tuple[str, Path]]:
    """``(vendor, path)`` of every raw recorded body, or ``[]`` without the folder."""
    if not FIXTURES.is_dir():
        return []
    return [
        (vendor, path)
        for vendor, folder in sorted(FIXTURE_DIRS.items())
        for path in sorted((FIXTURES / folder).glob("raw-sse-*.sse"))
    ]


def _model(name: str, provider: str, **options: Any) -> str:
    lines = ["[[models]]", f'name = "{name}"', f'provider = "{provider}"']
    table = options.pop("options", None)
    for key, value in options.items():
        lines.append(f"{key} = {json.dumps(value)}")
    if table:
        items = ", ".join(f"{k} = {json.dumps(v)}" for k, v in table.items())
        lines.append(f"options = {{ {items} }}")
    return "\n".join(lines) + "\n"


class Upstreams:
    """Every fake upstream of the session, by model name."""

    def __init__(self) -> None:
        self.fakes: dict[str, FakeUpstream] = {}
        bodies: dict[str, dict[str, Any]] = {}
        for vector in load_vectors("upstream-"):
            bodies[vector["name"]] = vector
        for vendor, path in fixture_files():
            bodies[f"fixture-{vendor}-{path.stem}"] = fixture_body(path)
        self.replay = Replay(bodies)

    def add(self, model: str, vendor: str, script: Script | None = None, **kw: Any) -> None:
        self.fakes[model] = FakeUpstream(vendor, script, **kw)

    def start(self) -> Upstreams:
        for fake in self.fakes.values():
            fake.start()
        self.replay.start()
        return self

    def stop(self) -> None:
        for fake in self.fakes.values():
            fake.stop()
        self.replay.stop()

    def config(self) -> str:
        out = []
        for model, fake in self.fakes.items():
            extra: dict[str, Any] = {}
            if model.endswith("-stall"):
                extra["timeout_s"] = 0.3
            out.append(
                _model(
                    model,
                    fake.vendor,
                    base_url=fake.url + BASE_PATHS[fake.vendor],
                    upstream_model="up-model",
                    **extra,
                )
            )
        for vendor in VENDORS:
            out.append(
                _model(
                    f"replay-{vendor}",
                    vendor,
                    base_url=self.replay.url + BASE_PATHS[vendor],
                    upstream_model="up-model",
                )
            )
        return "\n".join(out)


@pytest.fixture(scope="session")
def upstreams() -> Iterator[Upstreams]:
    ups = Upstreams()
    for vendor in VENDORS:
        ups.add(f"fake-{vendor}", vendor, Script(text="Hello from the fake upstream."))
    ups.add("fake-openai-429", "openai", fault=Fault(kind="status", status=429))
    ups.add("fake-anthropic-529", "anthropic", fault=Fault(kind="status", status=529))
    ups.add("fake-openai-cut", "openai", Script(text=LONG_TEXT), fault=Fault(kind="cut"))
    ups.add("fake-openai-slow", "openai", Script(text=LONG_TEXT, delay_s=0.02))
    ups.add("fake-openai-stall", "openai", fault=Fault(kind="stall_before_first_byte", stall_s=5))
    ups.start()
    try:
        yield ups
    finally:
        ups.stop()


@pytest.fixture(scope="session")
def record_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("records")


def gateway_config(record_dir: Path, upstreams: Upstreams) -> str:
    plugin = "gateway_plugins:"
    parts = [
        "[server]\nkeepalive_s = 0.5\n",
        _model("demo-slow", "demo", delay_ms=100),
        _model(
            "recorder",
            "python",
            factory=plugin + "Recorder",
            options={"record_dir": str(record_dir), "interval_ms": 20},
        ),
        _model(
            "quiet",
            "python",
            factory=plugin + "Recorder",
            options={"record_dir": str(record_dir), "interval_ms": 1600, "limit": 1},
        ),
        _model("failing", "python", factory=plugin + "Failing"),
        _model(
            "failing-timeout", "python", factory=plugin + "Failing", options={"mode": "timeout"}
        ),
        _model(
            "failing-protocol", "python", factory=plugin + "Failing", options={"mode": "protocol"}
        ),
        upstreams.config(),
    ]
    return "\n".join(parts)


@pytest.fixture(scope="session")
def gateway(
    tmp_path_factory: pytest.TempPathFactory, record_dir: Path, upstreams: Upstreams
) -> Iterator[Gateway]:
    """The session's ``tokenwire serve`` process (HTTP/1.1 on 127.0.0.1)."""
    workdir = tmp_path_factory.mktemp("gateway")
    with Gateway(workdir, config=gateway_config(record_dir, upstreams)) as gw:
        yield gw


@pytest.fixture
def http(gateway: Gateway) -> Iterator[Any]:
    with gateway.client(timeout=20.0) as client:
        yield client
