"""Issue 18: a cross-vendor loop that still works: anthropic SDK -> ``/v1/messages`` ->
an OpenAI Chat upstream (DeepSeek-style ``reasoning_content``).

Turn 1's reasoning reaches the Anthropic client as a thinking block (without an
Anthropic signature: it was never Anthropic's); the client sends it back on
turn 2 with the tool result, and the Chat upstream, which takes no
signatures, gets the plain history and answers.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import msgspec
import pytest
from tests.gateway.gateway_procs import Gateway

from tokenwire.testing.upstream import FakeUpstream, RecordedRequest, Script, ScriptedToolCall

FIRST = Script(
    text="Let me check.",
    thinking="The user wants the weather.",
    tool_calls=[ScriptedToolCall("get_weather", {"city": "Paris"})],
)
SECOND = Script(text="Sunny in Paris.")
TOOLS: list[Any] = [
    {
        "name": "get_weather",
        "description": "The weather in a city.",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
]


def script_for(request: RecordedRequest) -> Script:
    messages = request.json()["messages"]
    return SECOND if any(m.get("role") == "tool" for m in messages) else FIRST


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Gateway, FakeUpstream]]:
    with FakeUpstream("openai", script_for) as fake:
        config = (
            '[[models]]\nname = "claude-via-openai"\nprovider = "openai"\n'
            f'base_url = "{fake.url}/v1"\nupstream_model = "deepseek-up"\n'
        )
        with Gateway(tmp_path_factory.mktemp("cross-vendor"), config=config) as gw:
            yield gw, fake


def turn(client: anthropic.Anthropic, messages: list[Any]) -> Any:
    with client.messages.stream(
        model="claude-via-openai",
        max_tokens=1024,
        thinking={"type": "enabled", "budget_tokens": 512},
        tools=TOOLS,
        messages=messages,
    ) as stream:
        return stream.get_final_message()


def test_anthropic_sdk_loop_against_an_openai_upstream(
    gateway: tuple[Gateway, FakeUpstream],
) -> None:
    gw, fake = gateway
    client = anthropic.Anthropic(base_url=gw.url, api_key="unused", max_retries=0)
    messages: list[Any] = [{"role": "user", "content": "Weather in Paris?"}]
    first = turn(client, messages)
    kinds = [b.type for b in first.content]
    assert kinds == ["thinking", "text", "tool_use"]
    assert first.content[0].thinking == FIRST.thinking
    call = first.content[-1]
    assert (call.name, call.input) == ("get_weather", {"city": "Paris"})
    messages += [
        {"role": "assistant", "content": first.content},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "18C"}],
        },
    ]
    second = turn(client, messages)
    client.close()
    assert second.content[-1].text == SECOND.text
    assert fake.errors == []
    sent = msgspec.json.decode(fake.requests[-1].body)
    assert [m["role"] for m in sent["messages"]] == ["user", "assistant", "tool"]
    assert sent["messages"][1]["tool_calls"][0]["id"] == call.id
    # api.openai.com takes no reasoning_content: nothing but the plain history went.
    assert "reasoning_content" not in sent["messages"][1]
