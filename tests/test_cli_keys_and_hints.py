"""The CLI and keys (issue 26), and errors that help (issue 25), against a real gateway.

One ``tokenwire serve`` with one ``[[keys]]`` entry (the key's hash only):
``chat``, ``check``, ``Client`` and ``AsyncClient`` get in with ``--api-key``,
``--header`` or ``TOKENWIRE_API_KEY`` and are refused without; ``check``'s
reports never carry the key. The same gateway answers a misspelt model with
the served ones, and the config loader suggests the key that was meant.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import tokenwire
from tokenwire.client import AsyncClient, Client
from tokenwire.errors import HTTPStatusError
from tokenwire.gateway.config import ConfigError, load
from tokenwire.gateway.policy.keys import hash_key, new_key
from tokenwire.testing.processes import ServedProcess, serve_gateway

KEY = new_key()
CONFIG = f"""
[[keys]]
id = "newcomer"
hash = "{hash_key(KEY)}"

[[models]]
name = "gpt-4o-mini"
provider = "demo"
"""


@pytest.fixture(scope="module")
def gateway() -> Iterator[ServedProcess]:
    with serve_gateway(CONFIG) as served:
        yield served


def cli(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k != "TOKENWIRE_API_KEY"}
    return subprocess.run(
        [sys.executable, "-m", "tokenwire", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        env={**base, "COLUMNS": "80", **(env or {})},
    )


# -- chat -------------------------------------------------------------------------------


def test_chat_without_a_key_is_refused_in_one_line(gateway: ServedProcess) -> None:
    res = cli("chat", "--url", gateway.url, "hi")
    assert res.returncode == 1
    assert "Traceback" not in res.stderr
    errors = [line for line in res.stderr.splitlines() if line.startswith("error")]
    assert len(errors) == 1 and "401" in errors[0], res.stderr


@pytest.mark.parametrize(
    ("argv", "env"),
    [
        (["--api-key", KEY], {}),
        (["--header", f"Authorization: Bearer {KEY}"], {}),
        (["--header", f"x-api-key: {KEY}"], {}),
        ([], {"TOKENWIRE_API_KEY": KEY}),
    ],
    ids=["--api-key", "--header-authorization", "--header-x-api-key", "TOKENWIRE_API_KEY"],
)
def test_chat_with_a_key_gets_an_answer(
    gateway: ServedProcess, argv: list[str], env: dict[str, str]
) -> None:
    # host:port, no scheme: the URL grammar's http://.
    url = gateway.url.removeprefix("http://")
    res = cli("chat", "--url", url, *argv, "hello there", env=env)
    assert res.returncode == 0, res.stderr
    assert "hello there" in res.stdout


def test_chat_errors_are_one_line_at_80_columns(gateway: ServedProcess) -> None:
    res = cli("chat", "--url", gateway.url, "--api-key", KEY, "-m", "gpt-4o-minni", "hi")
    assert res.returncode == 1
    (line,) = [ln for ln in res.stderr.splitlines() if "unknown model" in ln]
    assert len(line) > 80  # long, and still whole: the terminal folds it, not the chat
    assert 'did you mean "gpt-4o-mini"?' in line and "demo" in line, line


# -- check ------------------------------------------------------------------------------


def test_check_with_a_key_passes_and_its_reports_redact_it(
    gateway: ServedProcess, tmp_path: Path
) -> None:
    report, junit, saved = tmp_path / "r.json", tmp_path / "r.xml", tmp_path / "saved"
    res = cli(
        "check",
        gateway.url,
        "--only",
        "media-type",
        "--only",
        "envelope",
        "--json",
        str(report),
        "--junit",
        str(junit),
        "--save",
        str(saved),
        env={"TOKENWIRE_API_KEY": KEY},
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert [r["verdict"] for r in json.loads(report.read_text())] == ["pass", "pass"]
    written = [report, junit, *saved.iterdir()]
    assert len(written) > 2
    for path in written:
        text = path.read_text()
        assert KEY not in text, path
    assert "[redacted]" in "".join(p.read_text() for p in saved.iterdir())
    assert KEY not in res.stdout + res.stderr


def test_check_without_a_key_fails_and_with_the_option_passes(gateway: ServedProcess) -> None:
    refused = cli("check", gateway.url, "--only", "media-type")
    assert refused.returncode == 1, refused.stdout
    allowed = cli("check", gateway.url, "--only", "media-type", "--api-key", KEY)
    assert allowed.returncode == 0, allowed.stdout
    # 80 columns: every line fits and the probe's name is whole.
    assert all(len(line) <= 80 for line in allowed.stdout.splitlines()), allowed.stdout
    assert "media-type" in allowed.stdout


# -- Client, AsyncClient ----------------------------------------------------------------


def test_client_takes_the_key_from_the_option_or_the_environment(
    gateway: ServedProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TOKENWIRE_API_KEY", raising=False)
    with Client(gateway.url) as client, pytest.raises(HTTPStatusError) as refused:
        client.create(model="demo", messages="hi")
    assert refused.value.status_code == 401
    with Client(gateway.url, api_key=KEY) as client:
        assert client.create(model="demo", messages="hi").text
    monkeypatch.setenv("TOKENWIRE_API_KEY", KEY)
    with Client(gateway.url) as client:
        assert client.create(model="demo", messages="hi").text
    # A header given by name wins over the environment's key.
    with Client(gateway.url, headers={"Authorization": "Bearer wrong"}) as client:
        with pytest.raises(HTTPStatusError):
            client.create(model="demo", messages="hi")


def test_async_client_takes_the_key_too(
    gateway: ServedProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TOKENWIRE_API_KEY", raising=False)

    async def main() -> tuple[str, int]:
        async with AsyncClient(gateway.url, api_key=KEY) as client:
            text = (await client.create(model="demo", messages="hi")).text
        async with AsyncClient(gateway.url) as client:
            try:
                await client.create(model="demo", messages="hi")
            except HTTPStatusError as exc:
                return text, exc.status_code
        return text, 200

    text, status = asyncio.run(main())
    assert text and status == 401


def test_with_keys_the_resume_route_asks_for_one_too(gateway: ServedProcess) -> None:
    # docs/scaling.md: with [[keys]], /v1/streams/* needs a key like every /v1/* route.
    url = f"{gateway.url}/v1/streams/some-request-id"
    assert httpx.get(url, timeout=30).status_code == 401
    keyed = httpx.get(url, headers={"Authorization": f"Bearer {KEY}"}, timeout=30)
    assert keyed.status_code == 404  # past the key check: no such stream


# -- did you mean ------------------------------------------------------------------------


def test_an_unknown_model_lists_the_served_ones(gateway: ServedProcess) -> None:
    with Client(gateway.url, api_key=KEY) as client, pytest.raises(HTTPStatusError) as info:
        client.create(model="gpt-4o-mni", messages="hi")
    assert info.value.status_code == 404
    message = str(info.value)
    assert 'did you mean "gpt-4o-mini"?' in message, message
    assert "(served: gpt-4o-mini, demo)" in message, message


@pytest.mark.parametrize(
    ("toml", "hint"),
    [
        ("[server]\nprot = 8080\n", "did you mean 'port'?"),
        ("[sever]\nport = 8080\n", "did you mean 'server'?"),
        ('[[models]]\nname = "x"\nprovider = "demo"\nfalbacks = []\n', "did you mean 'fallbacks'?"),
        ("[limits]\nbakend = 'memory'\n", "did you mean 'backend'?"),
        ("[limits]\nrpm = 3\n", "(known keys: backend, url,"),
    ],
)
def test_a_config_typo_suggests_the_key(tmp_path: Path, toml: str, hint: str) -> None:
    path = tmp_path / "gateway.toml"
    path.write_text(toml)
    with pytest.raises(ConfigError) as info:
        load(path)
    assert hint in str(info.value), str(info.value)
    res = cli("serve", "--config", str(path))
    assert res.returncode == 1 and hint in res.stderr and "Traceback" not in res.stderr


# -- validate on a vendor capture, convert keeps the model -------------------------------

CAPTURES = Path(__file__).resolve().parents[1] / "examples" / "captures"


def test_validate_on_a_vendor_capture_suggests_convert() -> None:
    capture = CAPTURES / "openai-hello.sse"
    res = cli("validate", str(capture))
    assert res.returncode == 1
    # One rendering of the citation: "(§5.2, MUST): JSON type...", never "§5.2: §5.2".
    lines = res.stdout.splitlines()
    assert lines and all(line.count("§") == 1 for line in lines), lines
    assert f"tokenwire convert --from openai {capture} | tokenwire validate" in res.stderr
    converted = cli("convert", str(capture)).stdout
    report = tokenwire.validate([converted.encode()])
    assert report.ok
    assert '"model":"gpt-4o-mini"' in converted  # the capture's model, not "unknown"
