"""Issue 18: the standard route keeps what a Responses upstream needs on the next turn.

``tokenwire.Client`` -> ``/v1/stream`` -> the strict Responses fake. Turn 1 asks
for encrypted reasoning (through ``vendor:openai-responses``); the stream
carries the reasoning item's id and encrypted content in a ``tokenwire.block``.
Turn 2 is ``follow_up`` plus ``tokenwire:reasoning_history`` built from those
events (what a client does with docs/extensions.md's reasoning parts), and the
fake accepts it only if the reasoning item reached it before its call.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec
import pytest
from tests.gateway.gateway_procs import Gateway

import tokenwire
from tokenwire import events as ev
from tokenwire.testing import openai_responses as fake_responses
from tokenwire.testing.upstream import FakeUpstream, RecordedRequest, Script, ScriptedToolCall
from tokenwire.translate import _extensions as x

FIRST = Script(
    text="Checking.",
    thinking="I need the weather tool.",
    tool_calls=[ScriptedToolCall("get_weather", {"city": "Paris"})],
)
SECOND = Script(text="Sunny.")
TOOL: Any = {
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}


def script_for(request: RecordedRequest) -> Script:
    items = request.json()["input"]
    return SECOND if any(i.get("type") == "function_call_output" for i in items) else FIRST


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Gateway, FakeUpstream]]:
    with FakeUpstream("openai-responses", script_for) as fake:
        config = (
            f'[[models]]\nname = "codex"\nprovider = "openai-responses"\nbase_url = "{fake.url}"\n'
        )
        with Gateway(tmp_path_factory.mktemp("responses-standard"), config=config) as gw:
            yield gw, fake


def reasoning_parts(events: list[ev.Event]) -> list[dict[str, Any]]:
    """Each reasoning block as a ``tokenwire:reasoning`` part: its text and its metadata."""
    parts: dict[int, dict[str, Any]] = {}
    for event in events:
        body = x.fields(event, x.BLOCK)
        if body is not None and body.get(x.REASONING):
            part = parts.setdefault(body["index"], {"type": x.REASONING, "text": ""})
            part.update({k: v for k, v in body.items() if k not in ("type", "v", "seq", "index")})
        elif isinstance(event, ev.ContentDelta) and event.reasoning:
            parts.setdefault(event.index, {"type": x.REASONING, "text": ""})["text"] += event.text
    return [parts[i] for i in sorted(parts)]


def test_the_standard_route_carries_encrypted_reasoning_to_the_next_turn(
    gateway: tuple[Gateway, FakeUpstream],
) -> None:
    gw, fake = gateway
    extensions = {
        x.REASONING: True,
        "vendor:openai-responses": {"include": ["reasoning.encrypted_content"], "store": False},
    }
    request = tokenwire.request.build(
        model="codex", messages="Weather in Paris?", tools=[TOOL], extensions=extensions
    )
    with tokenwire.Client(gw.url) as client:
        first = client.create(request)
        assert first.error is None
        parts = reasoning_parts(first.events)
        assert parts == [
            {
                "type": x.REASONING,
                "text": FIRST.thinking,
                x.REASONING: True,
                x.ITEM_ID: fake_responses.REASONING_ID,
                x.REDACTED: fake_responses.encrypted_content(
                    fake_responses.REASONING_ID, FIRST.thinking
                ),
                x.VENDOR: "openai-responses",
            }
        ]
        call = first.tool_calls[0]
        # follow_up carries the reasoning back by itself (tokenwire:reasoning_history).
        follow = first.follow_up(request, {call.id: "18C"})
        history = (follow.extensions or {})[x.REASONING_HISTORY]
        assert [p.get(x.REDACTED) for entry in history for p in entry["parts"]] == [
            parts[0][x.REDACTED]
        ]
        second = client.create(follow)
        # Without the history, the same follow-up is refused (the fake's 400).
        stripped = {k: v for k, v in (follow.extensions or {}).items() if k != x.REASONING_HISTORY}
        refused = client.create(msgspec.structs.replace(follow, extensions=stripped))
    assert second.error is None and second.text == SECOND.text
    assert refused.error is not None and "without its required" in refused.error.message
    sent = msgspec.json.decode(fake.requests[-2].body)
    assert [i["type"] for i in sent["input"]] == [
        "message",
        "reasoning",
        "message",
        "function_call",
        "function_call_output",
    ]
