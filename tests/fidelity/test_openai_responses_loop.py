"""Issue 18: a Codex-style tool loop with reasoning through the gateway.

openai SDK Responses -> ``tokenwire serve`` ``/v1/responses`` -> the strict
Responses fake. The first turn asks for ``include: ["reasoning.encrypted_content"]``
and answers with a reasoning item (encrypted, signed by the fake) and a
function call; the second turn sends ``response.output`` back with the tool's
output. The fake refuses that turn (HTTP 400, as OpenAI does) unless the
reasoning item came back, before its call, unchanged, so the loop passes only
if the encrypted content survived the translation both ways.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import openai
import pytest
from tests.gateway.gateway_procs import Gateway

from tokenwire.testing import openai_responses as fake_responses
from tokenwire.testing.upstream import FakeUpstream, RecordedRequest, Script, ScriptedToolCall

FIRST = Script(
    text="Let me check the weather.",
    thinking="The user asks for the weather in Paris. I will call get_weather.",
    tool_calls=[ScriptedToolCall("get_weather", {"city": "Paris"})],
    input_tokens=40,
)
SECOND = Script(text="It is 18°C and sunny in Paris.")
TOOLS: list[Any] = [
    {
        "type": "function",
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
        "strict": False,
    }
]
INCLUDE: Any = ["reasoning.encrypted_content"]
REASONING: Any = {"effort": "medium", "summary": "auto"}


def script_for(request: RecordedRequest) -> Script:
    """The second turn (it carries a function_call_output) gets the final answer."""
    items = request.json()["input"]
    answered = any(item.get("type") == "function_call_output" for item in items)
    return SECOND if answered else FIRST


@pytest.fixture(scope="module")
def loop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Gateway, FakeUpstream]]:
    with FakeUpstream("openai-responses", script_for) as fake:
        config = (
            '[[models]]\nname = "codex-think"\nprovider = "openai-responses"\n'
            f'base_url = "{fake.url}"\nupstream_model = "gpt-up"\n'
        )
        workdir: Path = tmp_path_factory.mktemp("responses-loop")
        with Gateway(workdir, config=config) as gateway:
            yield gateway, fake


def turn(client: openai.OpenAI, items: list[Any]) -> Any:
    with client.responses.stream(
        model="codex-think",
        input=items,
        tools=TOOLS,
        include=INCLUDE,
        reasoning=REASONING,
        store=False,
    ) as stream:
        return stream.get_final_response()


def first_turn(client: openai.OpenAI) -> tuple[list[Any], Any]:
    items: list[Any] = [{"role": "user", "content": "What is the weather in Paris?"}]
    return items, turn(client, items)


def test_two_turn_tool_loop_with_encrypted_reasoning(loop: tuple[Gateway, FakeUpstream]) -> None:
    gateway, fake = loop
    client = openai.OpenAI(base_url=gateway.url + "/v1", api_key="unused", max_retries=0)
    items, first = first_turn(client)
    # Turn 1 reached the SDK whole: the reasoning item (id, summary, encrypted
    # content exactly as the fake made it), the text, the call.
    assert [o.type for o in first.output] == ["reasoning", "message", "function_call"]
    reasoning = first.output[0]
    assert reasoning.id == fake_responses.REASONING_ID
    assert [s.text for s in reasoning.summary] == [FIRST.thinking]
    assert reasoning.encrypted_content == fake_responses.encrypted_content(
        fake_responses.REASONING_ID, FIRST.thinking
    )
    assert first.output_text == FIRST.text
    call = first.output[2]
    assert (call.name, msgspec.json.decode(call.arguments)) == ("get_weather", {"city": "Paris"})
    assert first.usage is not None and first.usage.input_tokens == 40

    items += [
        *first.output,
        {"type": "function_call_output", "call_id": call.call_id, "output": "18°C"},
    ]
    second = turn(client, items)
    client.close()
    assert second.output_text == SECOND.text
    assert second.status == "completed"
    assert fake.errors == []
    # What the upstream received on turn 2: the reasoning item before its call
    # (same vendor, so the SDK's own items: a message may omit its type).
    sent = msgspec.json.decode(fake.requests[-1].body)
    kinds = [item.get("type", "message") for item in sent["input"]]
    assert kinds == ["message", "reasoning", "message", "function_call", "function_call_output"]
    assert sent["input"][1]["encrypted_content"] == reasoning.encrypted_content
    assert sent["input"][1]["id"] == reasoning.id
    assert sent["include"] == INCLUDE


@pytest.mark.parametrize("tamper", ["dropped", "altered", "reordered"])
def test_the_loop_fails_when_the_reasoning_does_not_survive(
    loop: tuple[Gateway, FakeUpstream], tamper: str
) -> None:
    # The same second turn with the reasoning item dropped, altered or moved
    # after its call: the fake refuses it as OpenAI would (HTTP 400, OpenAI's
    # error body), and the SDK raises with the fake's words (so the test above
    # can fail). The gateway has answered 200 before the upstream does, so the
    # refusal arrives as the Responses in-stream ``error`` event: APIError.
    gateway, fake = loop
    client = openai.OpenAI(base_url=gateway.url + "/v1", api_key="unused", max_retries=0)
    items, first = first_turn(client)
    output = [o.model_dump(exclude_none=True) for o in first.output]
    if tamper == "dropped":
        output = output[1:]
    elif tamper == "altered":
        output[0]["encrypted_content"] = output[0]["encrypted_content"][:-4] + "AAA="
    else:
        output = [*output[1:], output[0]]
    call = first.output[2]
    items += [*output, {"type": "function_call_output", "call_id": call.call_id, "output": "18°C"}]
    errors_before = len(fake.errors)
    with pytest.raises(openai.APIError) as raised:
        turn(client, items)
    client.close()
    assert fake.wait_for(lambda f: len(f.errors) > errors_before)
    expected = "could not be verified" if tamper == "altered" else "without its required"
    assert expected in fake.errors[-1]
    assert expected in str(raised.value)
