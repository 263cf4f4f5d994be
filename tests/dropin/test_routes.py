"""Issue 23: the routes the SDKs do not cover by default, over plain HTTP.

Gemini's JSON-array stream (``:streamGenerateContent`` without ``alt=sse``) and its
``v1alpha`` version, the router's own 404/405 in the vendor's shape, a whole answer
whose head says ``application/json`` with a length, and the standard route, which
keeps §4.2.
"""

from __future__ import annotations

import json

import pytest
from tests.dropin.conftest import QUESTION, TEXT, Served

from tokenwire import request as rq
from tokenwire.gateway.providers.demo import plan_reply

GEMINI_BODY = {"contents": [{"role": "user", "parts": [{"text": QUESTION}]}]}


@pytest.mark.parametrize("version", ["v1", "v1beta", "v1alpha"])
def test_gemini_stream_without_alt_sse_is_a_json_array(served: Served, version: str) -> None:
    with served.gateway.client(timeout=30.0) as http:
        answer = http.post(f"/{version}/models/gem:streamGenerateContent", json=GEMINI_BODY)
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "application/json"
    chunks = answer.json()
    assert isinstance(chunks, list) and len(chunks) > 1
    text = "".join(
        part.get("text", "")
        for chunk in chunks
        for cand in chunk.get("candidates", [])
        for part in cand["content"]["parts"]
    )
    assert text == TEXT
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP"


@pytest.mark.parametrize("version", ["v1", "v1beta", "v1alpha"])
def test_gemini_whole_on_every_version(served: Served, version: str) -> None:
    with served.gateway.client(timeout=30.0) as http:
        answer = http.post(f"/{version}/models/demo:generateContent", json=GEMINI_BODY)
    assert answer.status_code == 200
    assert int(answer.headers["content-length"]) == len(answer.content)
    parts = answer.json()["candidates"][0]["content"]["parts"]
    assert parts == [{"text": plan_reply(rq.build(model="demo", messages=QUESTION)).text}]


@pytest.mark.parametrize(
    ("method", "path", "check"),
    [
        ("GET", "/v1/messages", lambda b: b["type"] == "error"),
        (
            "GET",
            "/v1/messages/count_tokens",
            lambda b: b["error"]["type"] == "invalid_request_error",
        ),
        ("GET", "/v1beta/models/demo:generateContent", lambda b: b["error"]["code"] == 405),
        ("GET", "/v1/responses", lambda b: b["error"]["type"] == "invalid_request_error"),
    ],
)
def test_router_errors_are_in_the_vendor_shape(
    served: Served, method: str, path: str, check: object
) -> None:
    with served.gateway.client(timeout=30.0) as http:
        answer = http.request(method, path)
    assert answer.status_code == 405
    assert check(answer.json()), answer.text  # type: ignore[operator]


def test_the_standard_route_still_requires_stream(served: Served) -> None:
    body = {"version": "1.0", "model": "demo", "messages": [{"role": "user", "content": "hi"}]}
    with served.gateway.client(timeout=30.0) as http:
        answer = http.post(
            "/v1/stream",
            content=json.dumps(body),
            headers={"content-type": "application/llm-request+json"},
        )
    assert answer.status_code == 400
    assert answer.json()["error"]["path"] == "stream"


def test_a_whole_answer_in_the_standard_on_request(served: Served) -> None:
    # Accept: the standard profile still gets the standard stream (§7.3), whole or not.
    body = {"model": "demo", "messages": [{"role": "user", "content": QUESTION}]}
    with served.gateway.client(timeout=30.0) as http:
        answer = http.post(
            "/v1/chat/completions",
            json=body,
            headers={"accept": 'text/event-stream; profile="llm-stream-1.0"'},
        )
    assert answer.status_code == 200
    assert b"event: stream.start" in answer.content and b"event: stream.end" in answer.content
