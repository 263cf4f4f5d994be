"""Issue 18: ``tokenwire.Client`` and its ``follow_up`` keep the reasoning a vendor needs back.

``tokenwire.Client`` -> gateway ``/v1/stream`` -> the strict Anthropic fake. Turn 1
answers with a signed thinking block, a redacted thinking block and a tool call;
``Response.follow_up`` builds turn 2 with ``tokenwire:reasoning_history`` for that
assistant message, and the gateway's request builder sends the blocks back first.
The fake refuses (HTTP 400, as Anthropic does) a turn whose reasoning was dropped
or altered, so the loop passes only if every piece survived both ways.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from tests.gateway.gateway_procs import Gateway

from tokenwire import Client
from tokenwire.request import build
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
WEATHER: Any = {
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}
EXTENSIONS: Any = {
    "tokenwire:reasoning": True,
    "vendor:anthropic": {"thinking": {"type": "enabled", "budget_tokens": 1024}},
}


def script_for(request: RecordedRequest) -> Script:
    """The second turn (it carries a tool_result) gets the final answer."""
    last = request.json()["messages"][-1]["content"]
    answered = isinstance(last, list) and any(b.get("type") == "tool_result" for b in last)
    return SECOND if answered else FIRST


@pytest.fixture(scope="module")
def loop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Gateway, FakeUpstream]]:
    with FakeUpstream("anthropic", script_for) as fake:
        config = (
            '[[models]]\nname = "claude-think"\nprovider = "anthropic"\n'
            f'base_url = "{fake.url}"\nupstream_model = "claude-up"\n'
        )
        workdir: Path = tmp_path_factory.mktemp("std-follow-up")
        with Gateway(workdir, config=config) as gateway:
            yield gateway, fake


def test_follow_up_sends_the_reasoning_back(loop: tuple[Gateway, FakeUpstream]) -> None:
    gateway, fake = loop
    request = build(
        model="claude-think",
        messages="What is the weather in Paris?",
        tools=[WEATHER],
        extensions=EXTENSIONS,
    )
    with Client(gateway.url, strict=True) as client:
        first = client.create(request)
        [call] = first.tool_calls
        assert (call.name, call.arguments) == ("get_weather", {"city": "Paris"})
        assert first.reasoning == FIRST.thinking
        follow_up = first.follow_up(request, {call.id: "18°C, sunny"})
        second = client.create(follow_up)
    # The history entry names the assistant message and carries both blocks, in order.
    history = (follow_up.extensions or {})["tokenwire:reasoning_history"]
    assert history == [
        {
            "message": 1,
            "parts": [
                {
                    "type": "tokenwire:reasoning",
                    "text": FIRST.thinking,
                    "tokenwire:signature": fake_anthropic.signature(FIRST.thinking),
                    "tokenwire:vendor": "anthropic",
                },
                {
                    "type": "tokenwire:reasoning",
                    "tokenwire:redacted": fake_anthropic.redacted_data(FIRST.thinking),
                    "tokenwire:vendor": "anthropic",
                },
            ],
        }
    ]
    assert follow_up.messages[1].role == "assistant"
    # Turn 2 passed the strict fake: the blocks went back first and unchanged.
    assert fake.errors == []
    assert second.text == SECOND.text and second.stop_reason == "end_turn"
    assert second.violations == [] and first.violations == []
    sent = msgspec.json.decode(fake.requests[-1].body)
    assert [b["type"] for b in sent["messages"][1]["content"]][:2] == [
        "thinking",
        "redacted_thinking",
    ]
    # A third turn keeps turn 1's entry (the history grows with the conversation).
    third = second.follow_up(follow_up, {})
    assert (third.extensions or {})["tokenwire:reasoning_history"][0] == history[0]


def test_without_the_history_the_upstream_refuses(loop: tuple[Gateway, FakeUpstream]) -> None:
    # The same turn 2 without tokenwire:reasoning_history: the fake refuses it as
    # Anthropic would, so the test above can fail.
    gateway, fake = loop
    request = build(
        model="claude-think",
        messages="What is the weather in Paris?",
        tools=[WEATHER],
        extensions=EXTENSIONS,
    )
    with Client(gateway.url) as client:
        first = client.create(request)
        [call] = first.tool_calls
        follow_up = first.follow_up(request, {call.id: "18°C"})
        extensions = dict(follow_up.extensions or {})
        del extensions["tokenwire:reasoning_history"]
        errors_before = len(fake.errors)
        second = client.create(msgspec.structs.replace(follow_up, extensions=extensions))
    assert second.error is not None
    assert fake.wait_for(lambda f: len(f.errors) > errors_before)
    assert "Expected `thinking` or `redacted_thinking`" in fake.errors[-1]
