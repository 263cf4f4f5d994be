"""The gateway's Gemini route, ``POST /v1beta/models/{model}:streamGenerateContent``
(§7.3 dual format): google-genai in front of any upstream, here the demo model."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.gateway.gateway_procs import Gateway

import tokenwire
from tokenwire import request as rq
from tokenwire.gateway.providers.demo import plan_reply

PROFILE = 'text/event-stream; profile="llm-stream-1.0"'
ROUTE = "/v1beta/models/{}:streamGenerateContent?alt=sse"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    workdir: Path = tmp_path_factory.mktemp("gemini-route")
    with Gateway(workdir) as gw:
        yield gw


def test_genai_sdk_streams_the_demo_model(gateway: Gateway) -> None:
    from google import genai
    from google.genai import types

    client = genai.Client(
        api_key="unused",
        http_options=types.HttpOptions(base_url=gateway.url),
    )
    question = "Hello from google-genai"
    chunks = list(client.models.generate_content_stream(model="demo", contents=question))
    client.close()
    text = "".join(chunk.text or "" for chunk in chunks)
    assert text == plan_reply(rq.build(model="demo", messages=question)).text
    last = chunks[-1]
    assert last.candidates[0].finish_reason == types.FinishReason.STOP
    assert last.usage_metadata is not None and last.usage_metadata.candidates_token_count


def test_the_route_answers_in_the_standard_on_request(gateway: Gateway) -> None:
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    with httpx.Client(base_url=gateway.url, timeout=10.0) as http:
        response = http.post(ROUTE.format("demo"), json=body, headers={"accept": PROFILE})
    assert response.status_code == 200
    assert tokenwire.validate(response.content).ok
    assert b"event: stream.start" in response.content


def test_the_route_names_what_is_wrong(gateway: Gateway) -> None:
    with httpx.Client(base_url=gateway.url, timeout=10.0) as http:
        empty = http.post(ROUTE.format("demo"), json={"contents": []})
        unknown = http.post(ROUTE.format("nope"), json={"contents": [{"parts": [{"text": "hi"}]}]})
    # Google's error shape (issue 23): google-genai raises ClientError from it.
    assert empty.status_code == 400
    error = empty.json()["error"]
    assert (error["code"], error["status"]) == (400, "INVALID_ARGUMENT")
    assert error["message"].startswith("contents: ")
    assert unknown.status_code == 404
    assert unknown.json()["error"]["status"] == "NOT_FOUND"
