"""Dual-format ingress (§7.3) with the real ``openai`` and ``anthropic`` SDKs."""

from __future__ import annotations

import json

import anthropic
import httpx
import msgspec
import openai
from tests.gateway.gateway_http import (
    MEDIA,
    WEATHER_TOOL,
    body,
    events_of,
    post,
    request_of,
    text_of,
)
from tests.gateway.gateway_procs import Gateway

import tokenwire
from tokenwire import events as ev
from tokenwire import request as rq
from tokenwire.gateway.providers.demo import plan_reply

PROFILE = 'text/event-stream; profile="llm-stream-1.0"'


def _demo_text(question: str, **parameters: object) -> str:
    req = rq.build(model="demo", messages=question, parameters=parameters or None)
    return plan_reply(req).text


def test_openai_sdk_streams_a_chat_completion(gateway: Gateway) -> None:
    client = openai.OpenAI(base_url=gateway.url + "/v1", api_key="unused", max_retries=0)
    question = "What does the demo model say?"
    stream = client.chat.completions.create(
        model="demo",
        messages=[{"role": "user", "content": question}],
        stream=True,
        stream_options={"include_usage": True},
    )
    pieces, finish, usage = [], None, None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            if choice.delta.content:
                pieces.append(choice.delta.content)
            finish = choice.finish_reason or finish
    assert "".join(pieces) == _demo_text(question)
    assert finish == "stop"
    assert usage is not None and usage.completion_tokens == len(pieces)
    client.close()


def test_openai_sdk_tool_call(gateway: Gateway) -> None:
    client = openai.OpenAI(base_url=gateway.url + "/v1", api_key="unused", max_retries=0)
    tool = {
        "type": "function",
        "function": {
            "name": WEATHER_TOOL["name"],
            "description": WEATHER_TOOL["description"],
            "parameters": WEATHER_TOOL["parameters"],
        },
    }
    stream = client.chat.completions.create(
        model="demo",
        messages=[{"role": "user", "content": "What is the weather in Vienna?"}],
        tools=[tool],  # type: ignore[list-item]
        stream=True,
    )
    calls, finish = [], None
    for chunk in stream:
        for choice in chunk.choices:
            calls += choice.delta.tool_calls or []
            finish = choice.finish_reason or finish
    assert finish == "tool_calls"
    assert [c.function.name for c in calls if c.function] == ["get_weather"]
    assert json.loads(calls[0].function.arguments) == {"city": "Vienna"}  # type: ignore[union-attr]
    client.close()


def test_anthropic_sdk_streams_a_message(gateway: Gateway) -> None:
    client = anthropic.Anthropic(base_url=gateway.url, api_key="unused", max_retries=0)
    question = "Hello from the Anthropic SDK"
    with client.messages.stream(
        model="demo", max_tokens=25, messages=[{"role": "user", "content": question}]
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == _demo_text(question, max_tokens=25)
    assert final.stop_reason == "max_tokens"
    assert final.usage.output_tokens == 25
    client.close()


def test_openai_body_answered_in_the_standard_on_request(http: httpx.Client) -> None:
    # §7.3: the Accept profile selects the standard stream on a vendor route.
    payload = {"model": "demo", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    response = http.post(
        "/v1/chat/completions",
        content=msgspec.json.encode(payload),
        headers={"content-type": "application/json", "accept": PROFILE},
    )
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream"
    assert tokenwire.validate(response.content).ok
    assert text_of(events_of(response.content)) == _demo_text("hi")


def test_standard_body_on_a_vendor_route(http: httpx.Client) -> None:
    # §7.3: the request Content-Type selects the standard, body and answer.
    payload = body("demo", "standard here")
    for path in ("/v1/messages", "/v1/chat/completions"):
        response = post(http, payload, path=path)
        assert response.status_code == 200
        report = tokenwire.validate(response.content, request_of(payload))
        assert report.ok, report.violations


def test_vendor_formats_without_the_profile(http: httpx.Client) -> None:
    payload = {"model": "demo", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    chat = http.post("/v1/chat/completions", json=payload)
    assert chat.status_code == 200
    assert chat.content.endswith(b"data: [DONE]\n\n")
    assert b"event: stream.start" not in chat.content
    messages = http.post("/v1/messages", json={**payload, "max_tokens": 10})
    assert messages.status_code == 200
    assert b"event: message_start" in messages.content
    assert b"event: message_stop" in messages.content


def test_openai_sdk_in_front_of_an_anthropic_upstream(gateway: Gateway) -> None:
    # Vendor in, another vendor upstream: OpenAI chunks out of an Anthropic stream.
    client = openai.OpenAI(base_url=gateway.url + "/v1", api_key="unused", max_retries=0)
    stream = client.chat.completions.create(
        model="fake-anthropic", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == "Hello from the fake upstream."
    client.close()


def test_ingress_request_reaches_the_provider_intact(http: httpx.Client) -> None:
    # The OpenAI body's parameters arrive as standard parameters (max_tokens).
    payload = {
        "model": "demo",
        "stream": True,
        "max_tokens": 7,
        "messages": [{"role": "user", "content": "count"}],
    }
    response = http.post("/v1/chat/completions", json=payload, headers={"accept": PROFILE})
    events = events_of(response.content)
    assert sum(isinstance(e, ev.ContentDelta) for e in events) == 7
    assert [e.stop_reason for e in events if isinstance(e, ev.ContentStop)] == ["max_tokens"]
    assert response.headers["content-type"] == "text/event-stream"
    assert MEDIA not in response.headers["content-type"]
