"""Issue 24: two-turn loops through the standard route against the strict Anthropic fake.

``tokenwire.Client`` -> ``/v1/stream`` -> ``FakeUpstream("anthropic")``:

- compaction: turn 1 compacts the context (a ``compaction`` block, carried as
  ``tokenwire:compaction``) and calls a tool; turn 2 (``follow_up``) sends the
  block back byte-identical before the call, through
  ``tokenwire:block_history``. The fake refuses the turn when the block is
  dropped or its summary altered.
- pause_turn: turn 1 pauses on a server tool in a container (the container on
  ``tokenwire.stop``); the continuation sends the paused blocks back and names
  the container (``tokenwire:container``). The fake refuses a continuation
  whose container is dropped or altered, or whose paused block is altered.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec
import pytest
from tests.gateway.gateway_procs import Gateway

import tokenwire
from tokenwire.testing import anthropic as fake_anthropic
from tokenwire.testing.upstream import FakeUpstream, RecordedRequest, Script, ScriptedToolCall
from tokenwire.translate import _extensions as x

SUMMARY = "The user is planning a trip to Paris and asked about the weather."
COMPACTING = Script(
    text="Checking.",
    items=[{"type": "compaction", "content": SUMMARY}],
    tool_calls=[ScriptedToolCall("get_weather", {"city": "Paris"})],
)
SEARCH = {"type": "server_tool_use", "name": "web_search", "input": {"query": "Paris weather"}}
PAUSING = Script(text="", items=[SEARCH], container="yes")
DONE = Script(text="Sunny, 18C.")
TOOL: Any = {
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}


def script_for(request: RecordedRequest) -> Script:
    body = request.json()
    if len(body["messages"]) > 1:
        return DONE
    return COMPACTING if "tools" in body else PAUSING


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Gateway, FakeUpstream]]:
    with FakeUpstream("anthropic", script_for) as fake:
        config = f'[[models]]\nname = "claude"\nprovider = "anthropic"\nbase_url = "{fake.url}"\n'
        with Gateway(tmp_path_factory.mktemp("lossless-anthropic"), config=config) as gw:
            yield gw, fake


def replace_extensions(
    request: tokenwire.request.Request, **changes: Any
) -> tokenwire.request.Request:
    extensions = msgspec.json.decode(msgspec.json.encode(request.extensions or {}))
    for key, value in changes.items():
        key = f"tokenwire:{key}"
        if value is None:
            extensions.pop(key, None)
        elif callable(value):
            value(extensions[key])
        else:
            extensions[key] = value
    return msgspec.structs.replace(request, extensions=extensions)


def test_a_compaction_goes_back_byte_identical_and_is_refused_when_dropped_or_altered(
    gateway: tuple[Gateway, FakeUpstream],
) -> None:
    gw, fake = gateway
    request = tokenwire.request.build(model="claude", messages="Weather in Paris?", tools=[TOOL])
    with tokenwire.Client(gw.url) as client:
        first = client.create(request)
        assert first.error is None, first.error
        [block] = [b for e in first.events if (b := x.fields(e, x.BLOCK)) and x.COMPACTION in b]
        assert block[x.COMPACTION] == {
            k: v for k, v in fake_anthropic.compaction_block(SUMMARY).items() if k != "type"
        }
        assert block[x.VENDOR] == "anthropic"
        assert first.text == "Checking."  # the summary is not the answer
        [call] = first.tool_calls
        follow = first.follow_up(request, {call.id: "18C"})
        second = client.create(follow)
        assert second.error is None and second.text == DONE.text, second.error
        sent = msgspec.json.decode(fake.requests[-1].body)
        assistant = sent["messages"][1]["content"]
        assert assistant[0] == fake_anthropic.compaction_block(SUMMARY)
        assert [b["type"] for b in assistant] == ["compaction", "text", "tool_use"]
        dropped = client.create(replace_extensions(follow, block_history=None))

        def alter(history: list[dict[str, Any]]) -> None:
            history[0]["parts"][0][x.COMPACTION]["content"] += " (edited)"

        altered = client.create(replace_extensions(follow, block_history=alter))
    assert dropped.error is not None and "is missing" in dropped.error.message
    assert altered.error is not None and "differs" in altered.error.message


def test_a_pause_turn_continues_in_its_container_and_is_refused_without_it(
    gateway: tuple[Gateway, FakeUpstream],
) -> None:
    gw, fake = gateway
    request = tokenwire.request.build(model="claude", messages="Search the weather in Paris.")
    with tokenwire.Client(gw.url) as client:
        first = client.create(request)
        assert first.error is None, first.error
        [stop] = [b for e in first.events if (b := x.fields(e, x.STOP))]
        assert stop[x.RAW_STOP_REASON] == "pause_turn"
        container = stop[x.CONTAINER]
        [server] = [b for e in first.events if (b := x.fields(e, x.BLOCK)) and x.SERVER_TOOL in b]
        assert container["id"] == fake_anthropic.container_id(server[x.SERVER_TOOL]["id"])
        # The continuation: the paused turn as it came, in its container.
        follow = replace_extensions(first.follow_up(request, {}), container={"id": container["id"]})
        second = client.create(follow)
        assert second.error is None and second.text == DONE.text, second.error
        sent = msgspec.json.decode(fake.requests[-1].body)
        assert sent["container"] == container["id"]
        assert sent["messages"][-1]["content"] == [server[x.SERVER_TOOL]]
        dropped = client.create(replace_extensions(follow, container=None))
        altered = client.create(replace_extensions(follow, container={"id": "container_other"}))

        def alter(history: list[dict[str, Any]]) -> None:
            history[0]["parts"][0][x.SERVER_TOOL]["input"] = {"query": "Rome weather"}

        edited = client.create(replace_extensions(follow, block_history=alter))
    assert dropped.error is not None and "requires the container" in dropped.error.message
    assert altered.error is not None and "requires the container" in altered.error.message
    assert edited.error is not None and "was modified" in edited.error.message
