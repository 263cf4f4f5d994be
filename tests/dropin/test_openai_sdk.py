"""Issue 23: the openai SDK at its defaults (only ``base_url`` set), every everyday call.

Chat Completions (plain, tools, ``response_format``, ``parse``, ``n``, ``stop``)
and Responses, streaming and not, against the strict fakes and the demo;
each asserts what came back.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pydantic
import pytest
from tests.dropin.conftest import ARGS, JSON_TEXT, QUESTION, TEXT, WEATHER_TOOL, Served

from tokenwire import request as rq
from tokenwire.gateway.providers.demo import plan_reply
from tokenwire.testing.upstream import choice_text

TOOLS: Any = [{"type": "function", "function": WEATHER_TOOL}]
MESSAGES: Any = [{"role": "user", "content": QUESTION}]


@pytest.fixture
def client(served: Served) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=served.url + "/v1", api_key="unused", max_retries=0) as client:
        yield client


def _demo_text(**kwargs: Any) -> str:
    return plan_reply(rq.build(model="demo", messages=QUESTION, **kwargs)).text


def _expected(model: str) -> str:
    return TEXT if model == "oa" else _demo_text()


def _streamed(stream: Any) -> tuple[dict[int, str], dict[int, str | None], list[Any], Any]:
    texts: dict[int, str] = {}
    finish: dict[int, str | None] = {}
    calls: list[Any] = []
    usage = None
    for chunk in stream:
        usage = chunk.usage or usage
        for choice in chunk.choices:
            texts[choice.index] = texts.get(choice.index, "") + (choice.delta.content or "")
            finish[choice.index] = choice.finish_reason or finish.get(choice.index)
            calls += choice.delta.tool_calls or []
    return texts, finish, calls, usage


@pytest.mark.parametrize("model", ["oa", "demo"])
def test_chat_plain_whole(client: openai.OpenAI, model: str) -> None:
    completion = client.chat.completions.create(model=model, messages=MESSAGES)
    assert completion.object == "chat.completion"
    (choice,) = completion.choices
    assert choice.message.content == _expected(model)
    assert choice.message.role == "assistant"
    assert choice.finish_reason == "stop"
    assert completion.usage is not None and completion.usage.completion_tokens > 0
    assert completion.usage.total_tokens == (
        completion.usage.prompt_tokens + completion.usage.completion_tokens
    )


@pytest.mark.parametrize("model", ["oa", "demo"])
def test_chat_plain_streamed(client: openai.OpenAI, model: str) -> None:
    stream = client.chat.completions.create(
        model=model, messages=MESSAGES, stream=True, stream_options={"include_usage": True}
    )
    texts, finish, _, usage = _streamed(stream)
    assert texts == {0: _expected(model)}
    assert finish == {0: "stop"}
    assert usage is not None and usage.completion_tokens > 0


@pytest.mark.parametrize("model", ["oa", "demo"])
@pytest.mark.parametrize("streaming", [False, True])
def test_chat_tools(client: openai.OpenAI, model: str, streaming: bool) -> None:
    if streaming:
        _, finish, calls, _ = _streamed(
            client.chat.completions.create(model=model, messages=MESSAGES, tools=TOOLS, stream=True)
        )
        assert finish == {0: "tool_calls"}
    else:
        completion = client.chat.completions.create(model=model, messages=MESSAGES, tools=TOOLS)
        (choice,) = completion.choices
        assert choice.finish_reason == "tool_calls"
        assert choice.message.content is None
        calls = choice.message.tool_calls or []
    (call,) = calls
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == ARGS
    assert call.id


SCHEMA_FORMAT: Any = {
    "type": "json_schema",
    "json_schema": {
        "name": "weather",
        "schema": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "celsius": {"type": "integer"}},
            "required": ["city", "celsius"],
            "additionalProperties": False,
        },
        "strict": True,
    },
}


def test_chat_response_format_reaches_the_upstream(served: Served, client: openai.OpenAI) -> None:
    completion = client.chat.completions.create(
        model="oa", messages=MESSAGES, response_format=SCHEMA_FORMAT
    )
    assert json.loads(completion.choices[0].message.content or "") == json.loads(JSON_TEXT)
    assert served.last_body("oa")["response_format"] == SCHEMA_FORMAT


class Weather(pydantic.BaseModel):
    city: str
    celsius: int


def test_chat_parse(client: openai.OpenAI) -> None:
    parsed = client.chat.completions.parse(model="oa", messages=MESSAGES, response_format=Weather)
    assert parsed.choices[0].message.parsed == Weather(city="Vienna", celsius=21)


def test_chat_parse_streamed(client: openai.OpenAI) -> None:
    with client.chat.completions.stream(
        model="oa", messages=MESSAGES, response_format=Weather
    ) as stream:
        final = stream.get_final_completion()
    assert final.choices[0].message.parsed == Weather(city="Vienna", celsius=21)


def test_chat_n_keeps_every_choice_apart(served: Served, client: openai.OpenAI) -> None:
    completion = client.chat.completions.create(model="oa", messages=MESSAGES, n=2)
    from tests.dropin.conftest import script_for

    script = script_for(served.fakes["oa"].requests[-1])
    texts = {c.index: c.message.content for c in completion.choices}
    assert texts == {0: choice_text(script, 0), 1: choice_text(script, 1)}
    assert [c.finish_reason for c in completion.choices] == ["stop", "stop"]
    assert served.last_body("oa")["n"] == 2


def test_chat_n_streamed_keeps_every_choice_apart(served: Served, client: openai.OpenAI) -> None:
    texts, finish, _, _ = _streamed(
        client.chat.completions.create(model="oa", messages=MESSAGES, n=2, stream=True)
    )
    assert texts == {0: TEXT, 1: f"Choice 1: {TEXT}"}
    assert finish == {0: "stop", 1: "stop"}


def test_chat_stop_on_the_demo(client: openai.OpenAI) -> None:
    # The demo honors stop sequences: the answer ends before the first one.
    full = _demo_text()
    cut = client.chat.completions.create(model="demo", messages=MESSAGES, stop=["."])
    assert cut.choices[0].message.content == full.split(".", 1)[0]
    assert cut.choices[0].finish_reason == "stop"


def test_chat_stop_reaches_the_upstream(served: Served, client: openai.OpenAI) -> None:
    client.chat.completions.create(model="oa", messages=MESSAGES, stop=["END"])
    assert served.last_body("oa")["stop"] == ["END"]


@pytest.mark.parametrize("model", ["resp", "demo"])
def test_responses_whole(client: openai.OpenAI, model: str) -> None:
    response = client.responses.create(model=model, input=QUESTION)
    assert response.status == "completed"
    assert response.output_text == (TEXT if model == "resp" else _demo_text())
    assert response.usage is not None and response.usage.output_tokens > 0
    assert response.completed_at is not None


@pytest.mark.parametrize("model", ["resp", "demo"])
def test_responses_streamed(client: openai.OpenAI, model: str) -> None:
    with client.responses.stream(model=model, input=QUESTION) as stream:
        deltas = "".join(e.delta for e in stream if e.type == "response.output_text.delta")
        final = stream.get_final_response()
    expected = TEXT if model == "resp" else _demo_text()
    assert deltas == expected and final.output_text == expected


@pytest.mark.parametrize("model", ["resp", "demo"])
def test_responses_tools(client: openai.OpenAI, model: str) -> None:
    tools: Any = [{"type": "function", **WEATHER_TOOL}]
    response = client.responses.create(model=model, input=QUESTION, tools=tools)
    calls = [item for item in response.output if item.type == "function_call"]
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [("get_weather", ARGS)]
    assert response.tools and response.tools[0].type == "function"  # echoed, as OpenAI does


def test_unknown_model_is_not_found(client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        client.chat.completions.create(model="nope", messages=MESSAGES)
    assert caught.value.status_code == 404
    with pytest.raises(openai.NotFoundError):
        client.responses.create(model="nope", input="hi")


@pytest.mark.parametrize("streaming", [False, True])
def test_upstream_refusal_keeps_its_status(client: openai.OpenAI, streaming: bool) -> None:
    # The upstream answered 429 before any token: the SDK sees 429, not 200 + an error.
    with pytest.raises(openai.RateLimitError) as caught:
        answer = client.chat.completions.create(
            model="oa-down", messages=MESSAGES, stream=streaming
        )
        if streaming:
            list(answer)  # type: ignore[arg-type]
    assert caught.value.status_code == 429
