"""``[translate]``: strict adaptation for every model or one, and the signing key."""

from __future__ import annotations

import pytest

from tokenwire.gateway import config
from tokenwire.gateway.providers.passthrough import Routes

MODELS = """
[[models]]
name = "a"
provider = "openai"
base_url = "http://127.0.0.1:9/v1"

[[models]]
name = "b"
provider = "gemini"
base_url = "http://127.0.0.1:9"
translate = { strict = true }
"""


def _load(text: str) -> config.Config:
    import tomllib

    return config.parse(tomllib.loads(text))


def test_strict_is_per_model_over_the_file() -> None:
    plain = Routes(_load(MODELS))
    assert (plain.strict("a"), plain.strict("b"), plain.strict("nope")) == (False, True, False)
    strict = Routes(_load("[translate]\nstrict = true\n" + MODELS.replace("true", "false")))
    assert (strict.strict("a"), strict.strict("b")) == (True, False)
    assert plain.targets("a") == frozenset({"openai"}) and plain.targets("demo") == {"demo"}


def test_the_signing_key_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TW_TEST_SIGNING_KEY", "s3cret")
    named = _load('[translate]\nsigning_key_env = "TW_TEST_SIGNING_KEY"\n' + MODELS)
    assert Routes(named).signing_key == b"s3cret" == Routes(named).signing_key
    # Without one, each gateway process has its own random key.
    assert Routes(_load(MODELS)).signing_key != Routes(_load(MODELS)).signing_key


def test_an_unknown_translate_key_is_named() -> None:
    with pytest.raises(config.ConfigError, match="translate"):
        _load("[translate]\nstrcit = true\n")
