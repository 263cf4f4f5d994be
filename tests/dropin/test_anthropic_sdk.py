"""Issue 23: the anthropic SDK at its defaults (only ``base_url`` set).

``messages.create`` (plain, tools; whole and streamed), ``count_tokens``
(the upstream's own count, or the demo's estimate that says so) and errors
(an unknown model is ``NotFoundError``; an overloaded upstream before the
first token is ``OverloadedError`` with 529, streamed or not).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import pytest
from tests.dropin.conftest import ARGS, QUESTION, TEXT, WEATHER_TOOL, Served

from tokenwire import request as rq
from tokenwire.gateway.providers.demo import plan_reply
from tokenwire.testing.upstream import counted_tokens
from tokenwire.writer import estimate_tokens

MESSAGES: Any = [{"role": "user", "content": QUESTION}]
TOOLS: Any = [{"name": WEATHER_TOOL["name"], "description": WEATHER_TOOL["description"],
               "input_schema": WEATHER_TOOL["parameters"]}]  # fmt: skip


@pytest.fixture
def client(served: Served) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=served.url, api_key="unused", max_retries=0) as client:
        yield client


def _expected(model: str) -> str:
    if model == "claude":
        return TEXT
    return plan_reply(rq.build(model="demo", messages=QUESTION)).text


@pytest.mark.parametrize("model", ["claude", "demo"])
def test_messages_whole(client: anthropic.Anthropic, model: str) -> None:
    message = client.messages.create(model=model, max_tokens=200, messages=MESSAGES)
    assert message.type == "message" and message.role == "assistant"
    assert [block.type for block in message.content] == ["text"]
    assert message.content[0].text == _expected(model)  # type: ignore[union-attr]
    assert message.stop_reason == "end_turn"
    assert message.usage.output_tokens > 0


@pytest.mark.parametrize("model", ["claude", "demo"])
def test_messages_streamed(client: anthropic.Anthropic, model: str) -> None:
    with client.messages.stream(model=model, max_tokens=200, messages=MESSAGES) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == _expected(model)
    assert final.stop_reason == "end_turn"


@pytest.mark.parametrize("model", ["claude", "demo"])
@pytest.mark.parametrize("streaming", [False, True])
def test_messages_tools(client: anthropic.Anthropic, model: str, streaming: bool) -> None:
    if streaming:
        with client.messages.stream(
            model=model, max_tokens=200, messages=MESSAGES, tools=TOOLS
        ) as stream:
            message = stream.get_final_message()
    else:
        message = client.messages.create(
            model=model, max_tokens=200, messages=MESSAGES, tools=TOOLS
        )
    uses = [block for block in message.content if block.type == "tool_use"]
    assert [(u.name, u.input) for u in uses] == [("get_weather", ARGS)]
    assert message.stop_reason == "tool_use"


def test_count_tokens_asks_the_upstream(served: Served, client: anthropic.Anthropic) -> None:
    raw = client.messages.with_raw_response.count_tokens(
        model="claude", messages=MESSAGES, tools=TOOLS
    )
    counted = raw.parse()
    assert raw.headers["tokenwire-token-count"] == "upstream"
    # The fake counted the body it got: the count request, without max_tokens/stream.
    body = served.last_body("claude")
    assert "max_tokens" not in body and "stream" not in body
    assert counted.input_tokens == counted_tokens(body)
    assert served.fakes["claude"].requests[-1].path.endswith("/v1/messages/count_tokens")


def test_count_tokens_on_the_demo_is_an_estimate(client: anthropic.Anthropic) -> None:
    raw = client.messages.with_raw_response.count_tokens(model="demo", messages=MESSAGES)
    counted = raw.parse()
    assert raw.headers["tokenwire-token-count"] == "estimate"
    assert counted.input_tokens == estimate_tokens(QUESTION)
    assert (counted.model_extra or {}).get("tokenwire:estimate") is True


def test_unknown_model_is_not_found(client: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.NotFoundError) as caught:
        client.messages.create(model="nope", max_tokens=10, messages=MESSAGES)
    assert caught.value.status_code == 404
    assert caught.value.body["error"]["type"] == "not_found_error"  # type: ignore[index]
    with pytest.raises(anthropic.NotFoundError):
        client.messages.count_tokens(model="nope", messages=MESSAGES)


def test_bad_body_is_a_bad_request(client: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.messages.create(
            model="claude", max_tokens=10, messages=[{"role": "robot", "content": "hi"}]
        )
    assert caught.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]


@pytest.mark.parametrize("streaming", [False, True])
def test_overloaded_upstream_keeps_its_status(client: anthropic.Anthropic, streaming: bool) -> None:
    # The upstream answered 529 before any token: the SDK sees 529, not 200 + an error event.
    with pytest.raises(anthropic.OverloadedError) as caught:
        if streaming:
            with client.messages.stream(
                model="claude-down", max_tokens=10, messages=MESSAGES
            ) as stream:
                stream.get_final_message()
        else:
            client.messages.create(model="claude-down", max_tokens=10, messages=MESSAGES)
    assert caught.value.status_code == 529
    assert caught.value.body["error"]["type"] == "overloaded_error"  # type: ignore[index]
