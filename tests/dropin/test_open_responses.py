"""Issue 23: ``/v1/responses`` as Open Responses requires it, streamed and whole.

The required fields of its ``ResponseResource`` and their JSON types are our
own vector, derived from the published schema
(``tests/vectors/gateway/open-responses-resource.json``); every response
object the route sends carries them, with the request's own values echoed.
Plus ``/v1/responses/input_tokens``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from tests.dropin.conftest import QUESTION, Served

from tokenwire.testing.upstream import counted_tokens
from tokenwire.writer import estimate_tokens

VECTOR: dict[str, Any] = json.loads(
    (
        Path(__file__).resolve().parents[1] / "vectors" / "gateway" / "open-responses-resource.json"
    ).read_text()
)
_JSON_TYPES = {
    "string": str,
    "integer": int,
    "number": (int, float),
    "boolean": bool,
    "object": dict,
    "array": list,
    "null": type(None),
}


def _json_type(value: Any) -> str:
    for name, kind in _JSON_TYPES.items():
        if name == "integer" and isinstance(value, bool):
            continue
        if isinstance(value, kind) and not (name == "number" and isinstance(value, bool)):
            return name
    raise AssertionError(f"not JSON: {value!r}")


def check_resource(resource: dict[str, Any]) -> None:
    """``resource`` has every required field, each of an allowed JSON type."""
    missing = [name for name in VECTOR["required"] if name not in resource]
    assert not missing, f"missing {missing}"
    for name, allowed in VECTOR["types"].items():
        kind = _json_type(resource[name])
        if kind == "integer" and "number" in allowed:
            continue
        assert kind in allowed, f"{name}: {kind} not in {allowed}"
    for name, values in VECTOR["enums"].items():
        assert resource[name] in values, name
    if isinstance(resource["reasoning"], dict):
        assert set(VECTOR["reasoning_required"]) <= set(resource["reasoning"])
    if resource["usage"] is not None:
        assert set(VECTOR["usage_required"]) <= set(resource["usage"])


def _body(model: str, stream: bool, **extra: Any) -> dict[str, Any]:
    return {"model": model, "input": QUESTION, "stream": stream, **extra}


def _events(answer: httpx.Response) -> list[dict[str, Any]]:
    return [
        json.loads(line[len("data: ") :])
        for line in answer.text.splitlines()
        if line.startswith("data: ")
    ]


@pytest.mark.parametrize("model", ["resp", "demo"])
def test_streamed_snapshots_carry_every_required_field(served: Served, model: str) -> None:
    with served.gateway.client(timeout=30.0) as http:
        answer = http.post("/v1/responses", json=_body(model, True))
    assert answer.status_code == 200
    events = _events(answer)
    snapshots = {e["type"]: e for e in events if "response" in e}
    assert {"response.created", "response.in_progress", "response.completed"} <= set(snapshots)
    for event in snapshots.values():
        assert set(VECTOR["streaming_event_required"]) <= set(event)
        check_resource(event["response"])
    completed = snapshots["response.completed"]["response"]
    assert completed["status"] == "completed" and isinstance(completed["completed_at"], int)
    assert snapshots["response.created"]["response"]["completed_at"] is None


@pytest.mark.parametrize("model", ["resp", "demo"])
def test_whole_answer_carries_every_required_field(served: Served, model: str) -> None:
    with served.gateway.client(timeout=30.0) as http:
        answer = http.post("/v1/responses", json=_body(model, False))
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "application/json"
    check_resource(answer.json())


@pytest.mark.parametrize("stream", [False, True])
def test_the_request_is_echoed(served: Served, stream: bool) -> None:
    echo = VECTOR["request_echo"]
    with served.gateway.client(timeout=30.0) as http:
        answer = http.post("/v1/responses", json=_body("demo", stream, **echo["request"]))
    assert answer.status_code == 200
    resource = (
        [e for e in _events(answer) if e["type"] == "response.completed"][0]["response"]
        if stream
        else answer.json()
    )
    check_resource(resource)
    for name, value in echo["expect"].items():
        assert resource[name] == value, name


def test_input_tokens_asks_the_upstream(served: Served) -> None:
    with openai.OpenAI(base_url=served.url + "/v1", api_key="unused", max_retries=0) as client:
        counted = client.responses.input_tokens.count(model="resp", input=QUESTION)
        demo = client.responses.input_tokens.with_raw_response.count(model="demo", input=QUESTION)
    body = served.last_body("resp")
    assert served.fakes["resp"].requests[-1].path.endswith("/v1/responses/input_tokens")
    assert counted.input_tokens == counted_tokens(body)
    assert demo.headers["tokenwire-token-count"] == "estimate"
    assert demo.parse().input_tokens == estimate_tokens(QUESTION)
