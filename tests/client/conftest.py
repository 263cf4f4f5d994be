"""Fixtures for the client tests: scripted fault servers and a real gateway process."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.client.client_servers import (
    ScriptedServer,
    ServerProcess,
    free_port,
    gateway_argv,
    granian_argv,
)

from tokenwire.testing.upstream import FakeUpstream, Script

ROOT = Path(__file__).resolve().parents[2]
IN_CI = os.environ.get("CI") == "true"


def unavailable(reason: str) -> None:
    """Skip locally; in CI a missing piece is a failure, not a skip."""
    if IN_CI:
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture
def scripted() -> Iterator[ScriptedServer]:
    """A raw HTTP/1.1 server on 127.0.0.1 answering with scripted steps."""
    with ScriptedServer() as server:
        yield server


def gateway_available() -> bool:
    return importlib.util.find_spec("tokenwire.cli.serve") is not None


@pytest.fixture(scope="session")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """``tokenwire serve`` with the built-in demo model, as a subprocess.

    It also speaks cleartext HTTP/2 (prior knowledge), which ``tokenwire serve``
    serves only when asked: the client's HTTP/2 path is tested over it.
    """
    if not gateway_available():
        unavailable("the gateway (tokenwire.cli.serve) is not in this tree yet")
    config = tmp_path_factory.mktemp("gateway") / "gateway.toml"
    # engine granian: the binary binding's WebSocket (/v1/ws) needs an engine that serves
    # WebSocket upgrades; h1 answers them 501.
    config.write_text('[server]\ncleartext_http2 = true\nengine = "granian"\n')
    port = free_port()
    server = ServerProcess(gateway_argv(port, config), port).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def rogue_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """``tokenwire serve`` with a plugin model (``rogue``) that calls an undeclared tool."""
    if not gateway_available():
        unavailable("the gateway (tokenwire.cli.serve) is not in this tree yet")
    config = tmp_path_factory.mktemp("gateway") / "gateway.toml"
    config.write_text(
        '[[models]]\nname = "rogue"\nprovider = "python"\nfactory = "client_apps:RogueProvider"\n'
    )
    port = free_port()
    here = str(Path(__file__).resolve().parent)
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")]))}
    server = ServerProcess(gateway_argv(port, config), port, env=env).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def starlette_apps() -> Iterator[ServerProcess]:
    """``client_apps:app`` (plain Starlette endpoints) under granian."""
    port = free_port()
    server = ServerProcess(granian_argv("client_apps:app", port), port, health="/health").start()
    try:
        yield server
    finally:
        server.stop()


#: About 40 s of answer at one word per 20 ms: only a cancel ends it early.
LONG_TEXT = " ".join(f"word{i}" for i in range(2000))


@pytest.fixture(scope="session")
def slow_upstream() -> Iterator[FakeUpstream]:
    """A fake OpenAI upstream streaming ``LONG_TEXT``, one word per 20 ms."""
    with FakeUpstream("openai", Script(text=LONG_TEXT, delay_s=0.02)) as fake:
        yield fake


@pytest.fixture(scope="session")
def slow_gateway(
    slow_upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """``tokenwire serve`` with model ``slow``: the ``slow_upstream`` behind it.

    Every stream is resumable unless its request opts out (``[resume] default``):
    the default client must still cancel on a hang-up.
    """
    if not gateway_available():
        unavailable("the gateway (tokenwire.cli.serve) is not in this tree yet")
    config = tmp_path_factory.mktemp("slow") / "gateway.toml"
    config.write_text(
        '[[models]]\nname = "slow"\nprovider = "openai"\n'
        f'base_url = "{slow_upstream.url}/v1"\nupstream_model = "up-model"\n'
        "[resume]\ndefault = true\n"
        '[server]\nengine = "granian"\n'  # /v1/ws: granian serves WebSocket upgrades
    )
    port = free_port()
    server = ServerProcess(gateway_argv(port, config), port).start()
    try:
        yield server
    finally:
        server.stop()
