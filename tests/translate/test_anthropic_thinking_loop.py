"""Issue 18: a Claude Code style tool loop with extended thinking through the gateway.

anthropic SDK -> ``tokenwire serve`` ``/v1/messages`` -> the strict Anthropic fake.
The first turn answers with a signed thinking block, a redacted thinking block and
a tool call; the second turn sends them back with the tool result. The fake
refuses that turn (HTTP 400, as Anthropic does) unless every reasoning block
came back first and unchanged, so the loop passes only if the signature
survived the translation both ways.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import msgspec
import pytest
from tests.gateway.gateway_procs import Gateway

from tokenwire.testing import anthropic as fake_anthropic
from tokenwire.testing.upstream import FakeUpstream, RecordedRequest, Script, ScriptedToolCall

FIRST = Script(
    text="Let me check the weather.",
    thinking="The user asks for the weather in Paris. I will call get_weather.",
    redacted_thinking=True,
    tool_calls=[ScriptedToolCall("get_weather", {"city": "Paris"})],
    input_tokens=40,
)
SECOND = Script(text="It is 18°C and sunny in Paris.", thinking="The tool answered.")
TOOLS: list[Any] = [
    {
        "name": "get_weather",
        "description": "The weather in a city.",
        "input_schema": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    }
]
THINKING: Any = {"type": "enabled", "budget_tokens": 1024}


def script_for(request: RecordedRequest) -> Script:
    """The second turn (it carries a tool_result) gets the final answer."""
    body = request.json()
    last = body["messages"][-1]["content"]
    answered = isinstance(last, list) and any(b.get("type") == "tool_result" for b in last)
    return SECOND if answered else FIRST


@pytest.fixture(scope="module")
def loop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Gateway, FakeUpstream]]:
    with FakeUpstream("anthropic", script_for) as fake:
        config = (
            '[[models]]\nname = "claude-think"\nprovider = "anthropic"\n'
            f'base_url = "{fake.url}"\nupstream_model = "claude-up"\n'
        )
        workdir: Path = tmp_path_factory.mktemp("thinking-loop")
        with Gateway(workdir, config=config) as gateway:
            yield gateway, fake


def turn(client: anthropic.Anthropic, messages: list[Any]) -> Any:
    with client.messages.stream(
        model="claude-think", max_tokens=2048, thinking=THINKING, tools=TOOLS, messages=messages
    ) as stream:
        return stream.get_final_message()


def test_two_turn_tool_loop_with_extended_thinking(loop: tuple[Gateway, FakeUpstream]) -> None:
    gateway, fake = loop
    client = anthropic.Anthropic(base_url=gateway.url, api_key="unused", max_retries=0)
    messages: list[Any] = [{"role": "user", "content": "What is the weather in Paris?"}]
    first = turn(client, messages)
    # Turn 1 reached the SDK whole: signed thinking, redacted thinking, the call.
    assert [b.type for b in first.content] == [
        "thinking",
        "redacted_thinking",
        "text",
        "tool_use",
    ]
    assert first.content[0].thinking == FIRST.thinking
    assert first.content[0].signature == fake_anthropic.signature(FIRST.thinking)
    assert first.content[1].data == fake_anthropic.redacted_data(FIRST.thinking)
    assert first.stop_reason == "tool_use"
    call = first.content[3]
    assert (call.name, call.input) == ("get_weather", {"city": "Paris"})

    messages += [
        {"role": "assistant", "content": first.content},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "18°C, sunny"}],
        },
    ]
    second = turn(client, messages)
    client.close()
    assert [b.type for b in second.content] == ["thinking", "text"]
    assert second.content[1].text == SECOND.text
    assert second.stop_reason == "end_turn"
    assert fake.errors == []
    # What the upstream received on turn 2: the reasoning first, exactly as sent.
    sent = msgspec.json.decode(fake.requests[-1].body)
    expected = [b.model_dump(exclude_none=True) for b in first.content[:2]]
    assert sent["messages"][1]["content"][:2] == expected
    assert sent["thinking"] == THINKING


def test_the_loop_fails_when_the_reasoning_is_dropped(loop: tuple[Gateway, FakeUpstream]) -> None:
    # The same second turn without the thinking blocks: the fake refuses it as
    # Anthropic would, and the client hears about it (so the test above can fail).
    gateway, fake = loop
    client = anthropic.Anthropic(base_url=gateway.url, api_key="unused", max_retries=0)
    messages: list[Any] = [{"role": "user", "content": "What is the weather in Paris?"}]
    first = turn(client, messages)
    kept = [b for b in first.content if b.type not in ("thinking", "redacted_thinking")]
    call = kept[-1]
    messages += [
        {"role": "assistant", "content": kept},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "18°C"}],
        },
    ]
    errors_before = len(fake.errors)
    with pytest.raises(anthropic.APIError):
        turn(client, messages)
    client.close()
    assert fake.wait_for(lambda f: len(f.errors) > errors_before)
    assert "Expected `thinking` or `redacted_thinking`" in fake.errors[-1]
