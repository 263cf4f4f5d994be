"""Fixtures of the production tests: keys, gateway processes, a real ``redis-server``.

The gateway processes are real ``tokenwire serve`` (tests/gateway/gateway_procs.py);
Redis is started by tests/resume/redis_proc.py, the resume tests' own module.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.gateway.gateway_procs import Gateway
from tests.resume.redis_proc import RedisServer, redis_binary

from tokenwire.gateway.policy.keys import hash_key, new_key

IN_CI = os.environ.get("CI") == "true"


def unavailable(reason: str) -> None:
    """Skip locally; with CI=true a missing prerequisite fails instead."""
    if IN_CI:
        pytest.fail(reason)
    pytest.skip(reason)


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return json.dumps(value)


def table(name: str, fields: dict[str, Any], *, array: bool = False) -> str:
    head = f"[[{name}]]" if array else f"[{name}]"
    return "\n".join([head, *(f"{k} = {toml_value(v)}" for k, v in fields.items())]) + "\n"


class Keys:
    """Fresh keys by name, and their ``[[keys]]`` entries."""

    def __init__(self) -> None:
        self.secrets: dict[str, str] = {}
        self.entries: list[str] = []

    def add(self, key_id: str, **limits: Any) -> str:
        secret = new_key()
        self.secrets[key_id] = secret
        self.entries.append(
            table("keys", {"id": key_id, "hash": hash_key(secret), **limits}, array=True)
        )
        return secret

    def toml(self) -> str:
        return "\n".join(self.entries)


@pytest.fixture(scope="session")
def redis_bin() -> str:
    binary, why = redis_binary()
    if binary is None:
        unavailable(why)
    assert binary is not None
    return binary


@pytest.fixture(scope="session")
def redis_server(redis_bin: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    with RedisServer(redis_bin, tmp_path_factory.mktemp("redis")) as server:
        yield server


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return tmp_path


def start(workdir: Path, config: str, *args: str) -> Gateway:
    return Gateway(workdir, config=config, args=args).start()
