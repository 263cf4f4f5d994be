"""Issue 18: ``tokenwire.Client`` -> ``/v1/stream`` -> the strict Gemini fake, two turns.

Turn 1 enables thinking at the vendor (``vendor:gemini`` generationConfig); the
stream carries the thought and each ``thoughtSignature`` in ``tokenwire.block``
events, the function call's with its ``tokenwire:tool_call_id``. Turn 2 is
``follow_up``, which carries them back by itself (``tokenwire:reasoning_history``);
the fake, like Gemini 3, refuses a function-call turn whose signature is missing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from tests.gateway.gateway_procs import Gateway

import tokenwire
from tokenwire.testing.upstream import FakeUpstream, RecordedRequest, Script, ScriptedToolCall
from tokenwire.translate import _extensions as x

FIRST = Script(
    text="",
    thinking="The user wants the weather in Paris: call get_weather.",
    tool_calls=[ScriptedToolCall("get_weather", {"city": "Paris"})],
)
SECOND = Script(text="It is 18°C and sunny in Paris.")
TOOL: Any = {
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}
THINKING = {"generationConfig": {"thinkingConfig": {"includeThoughts": True}}}


def script_for(request: RecordedRequest) -> Script:
    last = request.json()["contents"][-1]["parts"]
    return SECOND if any("functionResponse" in p for p in last) else FIRST


@pytest.fixture(scope="module")
def loop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Gateway, FakeUpstream]]:
    with FakeUpstream("gemini", script_for) as fake:
        config = (
            '[[models]]\nname = "gemini-think"\nprovider = "gemini"\n'
            f'base_url = "{fake.url}"\nupstream_model = "gemini-up"\n'
        )
        workdir: Path = tmp_path_factory.mktemp("gemini-standard")
        with Gateway(workdir, config=config) as gateway:
            yield gateway, fake


def test_follow_up_carries_the_gemini_signatures_to_the_next_turn(
    loop: tuple[Gateway, FakeUpstream],
) -> None:
    gateway, fake = loop
    extensions = {x.REASONING: True, "vendor:gemini": THINKING}
    request = tokenwire.request.build(
        model="gemini-think", messages="Weather in Paris?", tools=[TOOL], extensions=extensions
    )
    with tokenwire.Client(gateway.url) as client:
        first = client.create(request)
        assert first.error is None, first.error
        call = first.tool_calls[0]
        signed = [
            body
            for body in (x.fields(e, x.BLOCK) for e in first.events)
            if body is not None and x.SIGNATURE in body
        ]
        assert any(b.get(x.TOOL_CALL_ID) == call.id for b in signed), signed
        follow = first.follow_up(request, {call.id: {"t": 18}})
        history = (follow.extensions or {}).get(x.REASONING_HISTORY)
        assert history, "follow_up carries the signatures back"
        second = client.create(follow)
        # Without the history the same turn is refused, as Gemini 3 refuses it.
        stripped = {k: v for k, v in (follow.extensions or {}).items() if k != x.REASONING_HISTORY}
        refused = client.create(msgspec.structs.replace(follow, extensions=stripped))
    assert second.error is None, second.error
    assert second.text == SECOND.text
    assert refused.error is not None
    assert fake.wait_for(lambda f: any("thought_signature" in e for e in f.errors)), fake.errors
