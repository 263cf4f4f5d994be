"""Issue 18: ``/v1/chat/completions`` answers with everything a reasoning model streams.

openai SDK Chat Completions -> ``tokenwire serve`` -> the OpenAI Chat fake
(DeepSeek-style ``reasoning_content``). The caller enabled reasoning at the
vendor (``reasoning_effort``), so the gateway carries it, and answers in
OpenAI's own format: ``reasoning_content`` deltas apart from the answer, the
usage chunk (``stream_options.include_usage``) with its token details.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import openai
import pytest
from tests.gateway.gateway_procs import Gateway

from tokenwire.testing.upstream import FakeUpstream, Script, split_words

SCRIPT = Script(text="It is sunny.", thinking="The user wants the weather.", input_tokens=21)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Gateway, FakeUpstream]]:
    with FakeUpstream("openai", lambda request: SCRIPT) as fake:
        config = (
            '[[models]]\nname = "deep-think"\nprovider = "openai"\n'
            f'base_url = "{fake.url}/v1"\nupstream_model = "deepseek-up"\n'
        )
        workdir: Path = tmp_path_factory.mktemp("chat-ingress")
        with Gateway(workdir, config=config) as gateway:
            yield gateway, fake


def test_reasoning_and_usage_details_reach_the_chat_sdk(
    served: tuple[Gateway, FakeUpstream],
) -> None:
    gateway, fake = served
    client = openai.OpenAI(base_url=gateway.url + "/v1", api_key="unused", max_retries=0)
    stream = client.chat.completions.create(
        model="deep-think",
        messages=[{"role": "user", "content": "Weather?"}],
        stream=True,
        stream_options={"include_usage": True},
        reasoning_effort="low",
    )
    reasoning, answer, finish, usage = "", "", None, None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            extra: dict[str, Any] = choice.delta.model_extra or {}
            reasoning += extra.get("reasoning_content") or ""
            answer += choice.delta.content or ""
            finish = choice.finish_reason or finish
    client.close()
    assert reasoning == SCRIPT.thinking
    assert answer == SCRIPT.text
    assert finish == "stop"
    assert usage is not None and usage.prompt_tokens == 21
    assert usage.completion_tokens_details is not None
    assert usage.completion_tokens_details.reasoning_tokens == len(split_words(SCRIPT.thinking))
    assert usage.prompt_tokens_details is not None
    assert usage.prompt_tokens_details.cached_tokens == 0
    # reasoning_effort travelled on to the upstream (an OpenAI body field).
    assert msgspec.json.decode(fake.requests[-1].body)["reasoning_effort"] == "low"
