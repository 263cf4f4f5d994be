"""``/v1/responses`` against the published Open Responses schema itself.

``tests/vectors/openresponses/openapi.json`` is the specification's OpenAPI
document (its README says where from). Every answer of the route, streamed
(each event against the ``text/event-stream`` schema of ``POST /responses``)
and whole (against ``ResponseResource``), validates, for a model on each
upstream format, with and without tools.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
from tests.dropin.conftest import QUESTION, WEATHER_TOOL, Served

SPEC: dict[str, Any] = json.loads(
    (Path(__file__).resolve().parents[1] / "vectors" / "openresponses" / "openapi.json").read_text()
)
_ANSWERS = SPEC["paths"]["/responses"]["post"]["responses"]["200"]["content"]


def _validator(schema: dict[str, Any]) -> jsonschema.Draft202012Validator:
    # OpenAPI 3.1 schemas are JSON Schema 2020-12; the refs point into components.
    return jsonschema.Draft202012Validator({**schema, "components": SPEC["components"]})


WHOLE = _validator(_ANSWERS["application/json"]["schema"])
EVENT = _validator(_ANSWERS["text/event-stream"]["schema"])
MODELS = ["resp", "oa", "claude", "gem", "demo"]


def _problems(validator: jsonschema.Draft202012Validator, value: Any) -> list[str]:
    # oneOf failures name every branch; the best match says which field is wrong.
    error = jsonschema.exceptions.best_match(validator.iter_errors(value))
    if error is None:
        return []
    where = "/".join(str(p) for p in error.absolute_path)
    return [f"{where}: {error.message[:300]}"]


def _answer(served: Served, model: str, stream: bool, tools: bool) -> httpx.Response:
    """The route's answer to a question to ``model``, with the weather tool or none."""
    body: dict[str, Any] = {"model": model, "input": QUESTION, "stream": stream}
    if tools:
        body["tools"] = [{"type": "function", **WEATHER_TOOL}]
    with served.gateway.client(timeout=30.0) as http:
        answer = http.post("/v1/responses", json=body)
    assert answer.status_code == 200, answer.text
    return answer


@pytest.mark.parametrize("tools", [False, True], ids=["text", "tools"])
@pytest.mark.parametrize("model", MODELS)
def test_streamed_events_validate(served: Served, model: str, tools: bool) -> None:
    answer = _answer(served, model, True, tools)
    events = [
        json.loads(line[len("data: ") :])
        for line in answer.text.splitlines()
        if line.startswith("data: ") and line != "data: [DONE]"
    ]
    assert events and events[-1]["type"] == "response.completed"
    problems = {e["type"]: _problems(EVENT, e) for e in events}
    assert not {k: v for k, v in problems.items() if v}
    if tools:
        final = events[-1]["response"]
        assert [item["type"] for item in final["output"]][-1] == "function_call"
        assert all("strict" in tool for tool in final["tools"])


@pytest.mark.parametrize("tools", [False, True], ids=["text", "tools"])
@pytest.mark.parametrize("model", MODELS)
def test_whole_answer_validates(served: Served, model: str, tools: bool) -> None:
    answer = _answer(served, model, False, tools)
    assert not _problems(WHOLE, answer.json())


def test_the_schema_is_strict_enough_to_fail() -> None:
    """The validators refuse a resource without a required field (the check can fail)."""
    example = SPEC["components"]["schemas"]["ResponseResource"]["example"]
    assert _problems(WHOLE, example)  # the spec's own example lacks required fields
    event = {"type": "response.output_text.delta", "sequence_number": 1}
    assert _problems(EVENT, event)


def test_compaction_is_forwarded_to_a_responses_upstream(served: Served) -> None:
    body = {"model": "resp", "input": [{"role": "user", "content": QUESTION}]}
    fake = served.fakes["resp"]
    with served.gateway.client(timeout=30.0) as http:
        answer = http.post("/v1/responses/compact", json=body)
    assert answer.status_code == 200, answer.text
    compacted = answer.json()
    assert compacted["object"] == "response.compaction"
    assert [item["type"] for item in compacted["output"]] == ["compaction"]
    sent = fake.requests[-1]
    assert sent.path == "/v1/responses/compact"
    assert json.loads(sent.body)["model"] == "resp-up"  # renamed, the rest as sent


@pytest.mark.parametrize("model", ["oa", "claude", "gem", "demo"])
def test_compaction_elsewhere_is_a_404_in_openai_shape(served: Served, model: str) -> None:
    """A 404 on the compaction route makes Codex compact the conversation itself."""
    body = {"model": model, "input": [{"role": "user", "content": QUESTION}]}
    with served.gateway.client(timeout=30.0) as http:
        answer = http.post("/v1/responses/compact", json=body)
    assert answer.status_code == 404
    error = answer.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert "compact the conversation locally" in error["message"]
