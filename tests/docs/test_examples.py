"""`examples/`: the ready gateway config passes the config check, and the captures convert."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import tokenwire
from tokenwire.gateway import config

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def test_example_gateway_config_loads_with_every_provider_the_readme_names() -> None:
    loaded = config.load(EXAMPLES / "gateway.toml")
    by_name = {m.name: m for m in loaded.models}
    assert set(by_name) == {"gpt", "claude", "gemini", "local", "demo"}
    assert {m.provider for m in loaded.models} == {"openai", "anthropic", "gemini", "demo"}
    for name, env in (("gpt", "OPENAI_API_KEY"), ("claude", "ANTHROPIC_API_KEY"),
                      ("gemini", "GEMINI_API_KEY")):  # fmt: skip
        assert by_name[name].api_key_env == env
        assert (by_name[name].base_url or "").startswith("https://")
    # The local OpenAI-compatible server (Ollama) needs no key.
    local = by_name["local"]
    assert (local.provider, local.api_key_env) == ("openai", None)
    assert local.base_url == "http://127.0.0.1:11434/v1"


def test_example_config_holds_no_literal_secret() -> None:
    raw = tomllib.loads((EXAMPLES / "gateway.toml").read_text())
    for entry in raw["models"]:
        assert not {"api_key", "access_token", "headers"} & set(entry), entry


def test_example_captures_convert_to_conformant_streams() -> None:
    for capture in sorted((EXAMPLES / "captures").iterdir()):
        res = subprocess.run(
            [sys.executable, "-m", "tokenwire", "convert", str(capture)],
            capture_output=True,
            timeout=120,
        )
        assert res.returncode == 0, (capture.name, res.stderr)
        assert tokenwire.validate([res.stdout]).ok, capture.name
        text = "".join(
            e.delta.text
            for e in tokenwire.iter_events(res.stdout)
            if isinstance(e, tokenwire.events.ContentDelta)
        )
        assert text == "Hello, world!", capture.name
