"""Inbound keys, their config, the CLI that makes them, and the open-bind warning."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from tokenwire.cli import main
from tokenwire.gateway import config as gwconfig
from tokenwire.gateway.config.production import KeyConfig, bind_warning
from tokenwire.gateway.policy.keys import KeyRing, credential, hash_key, new_key


def test_a_key_is_found_by_its_hash_only() -> None:
    key = new_key()
    assert key.startswith("tw-") and len(key) >= 40
    ring = KeyRing([KeyConfig(id="a", hash=hash_key(key), models=["demo"])])
    record = ring.find(key)
    assert record is not None and record.id == "a"
    assert record.allows("demo") and not record.allows("other")
    assert ring.find(key[:-1]) is None
    assert ring.find("") is None
    assert ring.find("x" * 10_000) is None


@pytest.mark.parametrize(
    ("headers", "query", "expected"),
    [
        ([(b"authorization", b"Bearer tw-1")], b"", "tw-1"),
        ([(b"authorization", b"bearer  tw-1 ")], b"", "tw-1"),
        ([(b"x-api-key", b"tw-2")], b"", "tw-2"),
        ([(b"x-goog-api-key", b"tw-3")], b"", "tw-3"),
        ([], b"alt=sse&key=tw-4", "tw-4"),
        ([(b"authorization", b"Basic abc")], b"", None),
        ([], b"", None),
    ],
)
def test_each_sdks_credential_is_read(
    headers: list[tuple[bytes, bytes]], query: bytes, expected: str | None
) -> None:
    assert credential(headers, query) == expected


def test_key_config_errors_name_the_key() -> None:
    good = {"id": "a", "hash": hash_key(new_key())}
    with pytest.raises(gwconfig.ConfigError, match=r"keys\[0\]\.hash"):
        gwconfig.parse({"keys": [{"id": "a", "hash": "plain-secret"}]})
    with pytest.raises(gwconfig.ConfigError, match=r"keys\[1\]\.id"):
        gwconfig.parse({"keys": [good, {**good, "hash": hash_key(new_key())}]})
    with pytest.raises(gwconfig.ConfigError, match=r"keys\[0\]\.models\[0\]"):
        gwconfig.parse({"keys": [{**good, "models": ["nope"]}]})
    with pytest.raises(gwconfig.ConfigError, match=r"keys\[0\]\.id"):
        gwconfig.parse({"keys": [{**good, "id": "{a}"}]})
    with pytest.raises(gwconfig.ConfigError, match=r"keys\[0\]\.requests_per_minute"):
        gwconfig.parse({"keys": [{**good, "requests_per_minute": 0}]})
    with pytest.raises(gwconfig.ConfigError, match=r"keys\[0\]: .*colour"):
        gwconfig.parse({"keys": [{**good, "colour": "red"}]})
    with pytest.raises(gwconfig.ConfigError, match=r"limits\.url"):
        gwconfig.parse({"limits": {"backend": "redis"}})
    with pytest.raises(gwconfig.ConfigError, match=r"limits\.cluster"):
        gwconfig.parse({"limits": {"cluster": True}})
    with pytest.raises(gwconfig.ConfigError, match=r"limits\.backend"):
        gwconfig.parse({"limits": {"backend": "etcd"}})
    with pytest.raises(gwconfig.ConfigError, match=r"^production"):
        gwconfig.parse({"production": {}})
    with pytest.raises(gwconfig.ConfigError, match=r"server\.drain_s"):
        gwconfig.parse({"server": {"drain_s": -1}})
    for listen in ("9464", "127.0.0.1:", "127.0.0.1:http", "127.0.0.1:70000"):
        with pytest.raises(gwconfig.ConfigError, match=r"metrics\.listen.*127\.0\.0\.1:9464"):
            gwconfig.parse({"metrics": {"listen": listen}})
    assert gwconfig.parse({"metrics": {"listen": "[::1]:9464"}}).metrics.address() == ("::1", 9464)
    # The [resume] url serves the limits too.
    shared = gwconfig.parse(
        {
            "resume": {"backend": "redis", "url": "redis://127.0.0.1:1/0"},
            "limits": {"backend": "redis"},
        }
    )
    assert shared.production.limits.url is None and shared.resume.url


def test_keys_create_prints_the_key_once_and_its_hash() -> None:
    result = CliRunner().invoke(
        main, ["keys", "create", "--id", "team-a", "--model", "demo", "--rpm", "60"]
    )
    assert result.exit_code == 0, result.output
    key = re.search(r"^key: (tw-\S+)$", result.output, re.M)
    assert key is not None
    entry = result.output[result.output.index("[[keys]]") :]
    assert key.group(1) not in entry
    config = gwconfig.parse(__import__("tomllib").loads(entry))
    ring = KeyRing(config.production.keys)
    record = ring.find(key.group(1))
    assert record is not None and record.id == "team-a"
    assert record.requests_per_minute == 60 and record.allows("demo")


def test_binding_beyond_loopback_without_keys_warns_once(monkeypatch: pytest.MonkeyPatch) -> None:
    assert bind_warning(gwconfig.parse({}).production, "127.0.0.1") is None
    assert bind_warning(gwconfig.parse({}).production, "::1") is None
    keyed = gwconfig.parse({"keys": [{"id": "a", "hash": hash_key(new_key())}]})
    assert bind_warning(keyed.production, "0.0.0.0") is None
    from granian.server import Server

    from tokenwire.cli import _one_process
    from tokenwire.cli import serve as serve_command

    monkeypatch.setattr(Server, "serve", lambda self: None)  # --workers N
    monkeypatch.setattr(_one_process, "serve_one_process", lambda *a, **k: 0)  # granian, one
    monkeypatch.setattr(serve_command, "_serve_h1", lambda *a, **k: 0)  # the h1 engine
    result = CliRunner().invoke(main, ["serve", "--host", "0.0.0.0", "--port", "0"])
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.output.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "0.0.0.0" in warnings[0]
    quiet = CliRunner().invoke(main, ["serve", "--host", "127.0.0.1", "--port", "0"])
    assert "warning:" not in quiet.output
