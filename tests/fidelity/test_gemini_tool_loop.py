"""Issue 18: a two-turn tool loop with reasoning, google-genai -> the gateway's Gemini route
(``POST /v1beta/models/{model}:streamGenerateContent``) -> the strict Gemini fake.

The fake behaves like Gemini 3 with thinking: the first turn streams a thought
part and a function call whose ``thoughtSignature`` it signs; the second turn
(the SDK's chat history with the function response) is refused with HTTP 400
``INVALID_ARGUMENT`` unless the signature came back on that function-call part,
unchanged. So the loop passes only if the signature survived the gateway both
ways: Gemini stream -> standard -> Gemini stream, and Gemini request -> standard ->
Gemini request.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from tests.gateway.gateway_procs import Gateway

from tokenwire.testing import gemini as fake_gemini
from tokenwire.testing.upstream import FakeUpstream, RecordedRequest, Script, ScriptedToolCall

FIRST = Script(
    text="",
    thinking="The user wants the weather in Paris: call get_weather.",
    tool_calls=[ScriptedToolCall("get_weather", {"city": "Paris"})],
    input_tokens=40,
)
SECOND = Script(text="It is 18°C and sunny in Paris.", thinking="The tool answered.")
CALL = {"name": "get_weather", "args": {"city": "Paris"}}


def script_for(request: RecordedRequest) -> Script:
    """The second turn (it carries a functionResponse) gets the final answer."""
    last = request.json()["contents"][-1]["parts"]
    return SECOND if any("functionResponse" in p for p in last) else FIRST


@pytest.fixture(scope="module")
def loop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Gateway, FakeUpstream]]:
    with FakeUpstream("gemini", script_for) as fake:
        config = (
            '[[models]]\nname = "gemini-think"\nprovider = "gemini"\n'
            f'base_url = "{fake.url}"\nupstream_model = "gemini-up"\n'
        )
        workdir: Path = tmp_path_factory.mktemp("gemini-loop")
        with Gateway(workdir, config=config) as gateway:
            yield gateway, fake


def _client(gateway: Gateway) -> Any:
    from google import genai
    from google.genai import types

    return genai.Client(
        api_key="unused",
        http_options=types.HttpOptions(base_url=gateway.url),
    )


def _config() -> Any:
    from google.genai import types

    declaration = types.FunctionDeclaration(
        name="get_weather",
        description="The weather in a city.",
        parameters_json_schema={
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    )
    return types.GenerateContentConfig(
        tools=[types.Tool(function_declarations=[declaration])],
        thinking_config=types.ThinkingConfig(include_thoughts=True, thinking_budget=1024),
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
    )


def _parts(chunks: list[Any]) -> list[Any]:
    return [
        part
        for chunk in chunks
        for candidate in chunk.candidates or ()
        for part in (candidate.content.parts if candidate.content else None) or ()
    ]


def test_two_turn_tool_loop_with_thought_signatures(loop: tuple[Gateway, FakeUpstream]) -> None:
    from google.genai import types

    gateway, fake = loop
    client = _client(gateway)
    chat = client.chats.create(model="gemini-think", config=_config())
    first = list(chat.send_message_stream("What is the weather in Paris?"))
    parts = _parts(first)
    # Turn 1 reached the SDK whole: the thought, then the signed call.
    thoughts = [p.text for p in parts if p.thought]
    assert thoughts == [FIRST.thinking]
    (call,) = [p for p in parts if p.function_call is not None]
    assert (call.function_call.name, call.function_call.args) == ("get_weather", {"city": "Paris"})
    signature = fake_gemini.signature("call", CALL)
    assert call.thought_signature == base64.b64decode(signature)
    assert first[-1].candidates[0].finish_reason == types.FinishReason.STOP
    usage = first[-1].usage_metadata
    assert usage.thoughts_token_count == len(FIRST.thinking.split())
    assert usage.prompt_token_count == FIRST.input_tokens

    response = types.Part.from_function_response(name="get_weather", response={"temp": "18°C"})
    second = list(chat.send_message_stream(response))
    client.close()
    text = "".join(p.text or "" for p in _parts(second) if not p.thought)
    assert text == SECOND.text
    assert fake.errors == []
    # What the upstream received on turn 2: the signature on its functionCall part.
    sent = msgspec.json.decode(fake.requests[-1].body)
    model_turn = sent["contents"][1]
    assert model_turn["role"] == "model"
    (signed,) = [p for p in model_turn["parts"] if "functionCall" in p]
    assert signed["functionCall"] == CALL
    # The same bytes (google-genai writes bytes as URL-safe base64, Google reads both).
    assert base64.urlsafe_b64decode(signed["thoughtSignature"]) == base64.b64decode(signature)
    assert sent["generationConfig"]["thinkingConfig"]["includeThoughts"] is True
    assert fake.requests[-1].path.startswith("/v1beta/models/gemini-up:streamGenerateContent")


def test_the_loop_fails_when_the_signature_is_dropped(loop: tuple[Gateway, FakeUpstream]) -> None:
    # The same second turn with the call's signature removed: the fake refuses it
    # as Gemini 3 does, and the SDK raises its ClientError 400 (so the test above can fail).
    from google.genai import errors, types

    gateway, fake = loop
    client = _client(gateway)
    config = _config()
    question = types.Content(role="user", parts=[types.Part.from_text(text="Weather in Paris?")])
    first = list(
        client.models.generate_content_stream(
            model="gemini-think", contents=[question], config=config
        )
    )
    calls = [p for p in _parts(first) if p.function_call is not None]
    assert calls and calls[0].thought_signature
    unsigned = types.Part(function_call=calls[0].function_call)  # no thought_signature
    history = [
        question,
        types.Content(role="model", parts=[unsigned]),
        types.Content(
            role="user",
            parts=[types.Part.from_function_response(name="get_weather", response={"t": 18})],
        ),
    ]
    errors_before = len(fake.errors)
    with pytest.raises(errors.ClientError) as refused:
        for _ in client.models.generate_content_stream(
            model="gemini-think", contents=history, config=config
        ):
            pass
    client.close()
    assert refused.value.code == 400
    assert refused.value.status == "INVALID_ARGUMENT"
    assert fake.wait_for(lambda f: len(f.errors) > errors_before)
    assert "missing a thought_signature" in fake.errors[-1]


def test_an_altered_signature_is_refused_too(loop: tuple[Gateway, FakeUpstream]) -> None:
    from google.genai import errors, types

    gateway, fake = loop
    client = _client(gateway)
    forged = types.Part(
        function_call=types.FunctionCall(name="get_weather", args={"city": "Lyon"}),
        thought_signature=base64.b64decode(fake_gemini.signature("call", CALL)),
    )
    history = [
        types.Content(role="user", parts=[types.Part.from_text(text="Weather in Paris?")]),
        types.Content(role="model", parts=[forged]),
        types.Content(
            role="user",
            parts=[types.Part.from_function_response(name="get_weather", response={"t": 18})],
        ),
    ]
    errors_before = len(fake.errors)
    with pytest.raises(errors.ClientError) as refused:
        for _ in client.models.generate_content_stream(
            model="gemini-think", contents=history, config=_config()
        ):
            pass
    client.close()
    assert refused.value.code == 400
    # The fake records the refusal after answering it: wait for the record.
    assert fake.wait_for(lambda f: len(f.errors) > errors_before)
    assert "Corrupted thought signature" in fake.errors[-1]
