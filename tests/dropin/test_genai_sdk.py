"""Issue 23: google-genai at its defaults (only ``base_url`` set: API version ``v1``) and on
``v1beta``: plain, streaming, function calling (its own ``types.Schema`` form), counting and
a second candidate, against the Gemini fake and the demo."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from google import genai
from google.genai import errors, types
from tests.dropin.conftest import ARGS, QUESTION, TEXT, Served

from tokenwire import request as rq
from tokenwire.gateway.providers.demo import plan_reply
from tokenwire.testing.upstream import counted_tokens
from tokenwire.writer import estimate_tokens

VERSIONS = [None, "v1beta"]  # None: the SDK's default
WEATHER = types.Tool(
    function_declarations=[
        types.FunctionDeclaration(
            name="get_weather",
            description="Get the current weather for a city",
            parameters=types.Schema(
                type=types.Type.OBJECT,
                properties={"city": types.Schema(type=types.Type.STRING, nullable=True)},
                required=["city"],
            ),
        )
    ]
)
NO_AUTO_CALL = types.AutomaticFunctionCallingConfig(disable=True)


@pytest.fixture(params=VERSIONS, ids=["default", "v1beta"])
def client(served: Served, request: pytest.FixtureRequest) -> Iterator[genai.Client]:
    options = types.HttpOptions(base_url=served.url)
    if request.param is not None:
        options = types.HttpOptions(base_url=served.url, api_version=request.param)
    client = genai.Client(api_key="unused", http_options=options)
    yield client
    client.close()


def _expected(model: str) -> str:
    return TEXT if model == "gem" else plan_reply(rq.build(model="demo", messages=QUESTION)).text


@pytest.mark.parametrize("model", ["gem", "demo"])
def test_generate_content(client: genai.Client, model: str) -> None:
    answer = client.models.generate_content(model=model, contents=QUESTION)
    assert answer.text == _expected(model)
    assert answer.candidates and answer.candidates[0].finish_reason == types.FinishReason.STOP
    assert answer.usage_metadata is not None and answer.usage_metadata.candidates_token_count


@pytest.mark.parametrize("model", ["gem", "demo"])
def test_generate_content_stream(client: genai.Client, model: str) -> None:
    chunks = list(client.models.generate_content_stream(model=model, contents=QUESTION))
    assert "".join(chunk.text or "" for chunk in chunks) == _expected(model)
    assert chunks[-1].candidates[0].finish_reason == types.FinishReason.STOP  # type: ignore[index]


@pytest.mark.parametrize("model", ["gem", "demo"])
@pytest.mark.parametrize("streaming", [False, True])
def test_function_calling(client: genai.Client, model: str, streaming: bool) -> None:
    config = types.GenerateContentConfig(tools=[WEATHER], automatic_function_calling=NO_AUTO_CALL)
    if streaming:
        chunks = client.models.generate_content_stream(
            model=model, contents=QUESTION, config=config
        )
        calls = [call for chunk in chunks for call in chunk.function_calls or []]
    else:
        answer = client.models.generate_content(model=model, contents=QUESTION, config=config)
        calls = answer.function_calls or []
    assert [(c.name, c.args) for c in calls] == [("get_weather", ARGS)]


def test_gemini_schema_is_mapped_to_json_schema(served: Served, client: genai.Client) -> None:
    config = types.GenerateContentConfig(tools=[WEATHER], automatic_function_calling=NO_AUTO_CALL)
    client.models.generate_content(model="gem", contents=QUESTION, config=config)
    (declaration,) = served.last_body("gem")["tools"][0]["functionDeclarations"]
    # The standard carried JSON Schema: lower-case types, nullable as a "null" type.
    assert declaration["parameters"] == {
        "type": "object",
        "properties": {"city": {"type": ["string", "null"]}},
        "required": ["city"],
    }


def test_count_tokens_asks_the_upstream(served: Served, client: genai.Client) -> None:
    counted = client.models.count_tokens(model="gem", contents=QUESTION)
    body = served.last_body("gem")
    assert served.fakes["gem"].requests[-1].path.endswith("/models/gem-up:countTokens")
    assert counted.total_tokens == counted_tokens(body)
    assert counted.sdk_http_response is not None
    assert (counted.sdk_http_response.headers or {})["tokenwire-token-count"] == "upstream"


def test_count_tokens_on_the_demo_is_an_estimate(client: genai.Client) -> None:
    counted = client.models.count_tokens(model="demo", contents=QUESTION)
    assert counted.total_tokens == estimate_tokens(QUESTION)
    assert counted.sdk_http_response is not None
    assert (counted.sdk_http_response.headers or {})["tokenwire-token-count"] == "estimate"


@pytest.mark.parametrize("streaming", [False, True])
def test_second_candidate_is_kept_apart(client: genai.Client, streaming: bool) -> None:
    config = types.GenerateContentConfig(candidate_count=2)
    if streaming:
        texts: dict[int, str] = {}
        for chunk in client.models.generate_content_stream(
            model="gem", contents=QUESTION, config=config
        ):
            for cand in chunk.candidates or []:
                parts = cand.content.parts if cand.content else None
                texts[cand.index or 0] = texts.get(cand.index or 0, "") + "".join(
                    p.text or "" for p in parts or []
                )
    else:
        answer = client.models.generate_content(model="gem", contents=QUESTION, config=config)
        texts = {
            c.index or 0: "".join(p.text or "" for p in (c.content.parts or []))  # type: ignore[union-attr]
            for c in answer.candidates or []
        }
    assert texts == {0: TEXT, 1: f"Choice 1: {TEXT}"}


def test_unknown_model_is_not_found(client: genai.Client) -> None:
    with pytest.raises(errors.ClientError) as caught:
        client.models.generate_content(model="nope", contents=QUESTION)
    assert caught.value.code == 404 and caught.value.status == "NOT_FOUND"
