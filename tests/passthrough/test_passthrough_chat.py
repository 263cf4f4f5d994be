"""OpenAI Chat Completions same-vendor passthrough with the real ``openai`` SDK.

A Chat stream carries usage only when the client asks for it
(``stream_options.include_usage``); the passthrough needs it to charge keys and
limits, so only such a body passes through, and any other is translated as before.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec
import openai
import pytest
from tests.passthrough.conftest import UPSTREAM_MODEL, Fakes

from tokenwire.testing.processes import ServedProcess

_CLIENTS: dict[str, openai.OpenAI] = {}


def _client(base_url: str) -> openai.OpenAI:
    if base_url not in _CLIENTS:
        _CLIENTS[base_url] = openai.OpenAI(base_url=base_url, api_key="k")
    return _CLIENTS[base_url]


@pytest.fixture(scope="module", autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    for client in _CLIENTS.values():
        client.close()
    _CLIENTS.clear()


def _chunks(base_url: str, model: str, **params: Any) -> list[dict[str, Any]]:
    stream = _client(base_url).chat.completions.create(model=model, stream=True, **params)
    return [chunk.model_dump() for chunk in stream]


PARAMS: dict[str, Any] = {
    "messages": [{"role": "user", "content": "hi"}],
    "stream_options": {"include_usage": True},
    "logit_bias": {"50256": -100},
    "seed": 7,
}


def test_a_body_asking_for_usage_passes_through(gateway: ServedProcess, fakes: Fakes) -> None:
    direct = _chunks(fakes.direct["openai"].url + "/v1", UPSTREAM_MODEL, **PARAMS)
    passed = _chunks(gateway.url + "/v1", "chat-pt", **PARAMS)
    sent_direct, sent_passed = fakes.last("openai")
    assert sent_passed.body == sent_direct.body
    assert passed == direct
    assert passed[-1]["usage"] is not None


def test_without_usage_the_body_is_translated_as_before(
    gateway: ServedProcess, fakes: Fakes
) -> None:
    params = {k: v for k, v in PARAMS.items() if k != "stream_options"}
    chunks = _chunks(gateway.url + "/v1", "chat-pt", **params)
    assert "".join(c["choices"][0]["delta"]["content"] or "" for c in chunks if c["choices"])
    sent = msgspec.json.decode(fakes.upstream["openai"].requests[-1].body)
    assert sent["stream_options"] == {"include_usage": True}  # the gateway asked itself
