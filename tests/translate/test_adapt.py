"""The adaptation table (``tokenwire.translate.adapt``): what a client body of one
format keeps, maps, drops or has refused when its model is served by an upstream of
another format; the report; ``strict``; the generated docs table.

Vectors: tests/vectors/adapt/cases.json.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokenwire import request as rq
from tokenwire.errors import InvalidRequest
from tokenwire.translate import adapt, get
from tokenwire.translate.adapt import maps
from tokenwire.translate.adapt.table import RULES

ROOT = Path(__file__).resolve().parents[2]
CASES: list[dict[str, Any]] = json.loads(
    (ROOT / "tests" / "vectors" / "adapt" / "cases.json").read_text()
)["cases"]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_vector(case: dict[str, Any]) -> None:
    body = json.loads(json.dumps(case["body"]))
    if "refuse" in case:
        with pytest.raises(InvalidRequest) as caught:
            adapt.adapt(case["source"], body, case["targets"])
        assert caught.value.path == case["refuse"]
        assert "would change the answer" in caught.value.reason
        return
    out = adapt.adapt(case["source"], body, case["targets"])
    assert body == case["body"]  # the client's body is never edited in place
    assert [[a.path, a.target, a.outcome] for a in out.report] == case["report"]
    for target, fields in case.get("fields", {}).items():
        got = out.outs[adapt.target_of(target)].fields
        assert {k: got.get(k) for k in fields} == fields, target
    for target, extensions in case.get("extensions", {}).items():
        assert out.outs[target].extensions == extensions
    for target, hosted in case.get("hosted", {}).items():
        assert out.outs[target].hosted == hosted
    for key in case.get("gone", ()):
        assert key not in out.body
    if "tools_left" in case:
        assert len(out.body["tools"]) == case["tools_left"]
    # What is left parses with the client format's own ingress parser.
    ingress = get(case["source"]).ingress
    assert ingress is not None
    request, _encode = ingress.parse(out.body)
    finished = adapt.finish(out, request)
    final = case.get("final_report", case["report"])
    assert adapt.report_of(finished) == [tuple(r) for r in final]


@pytest.mark.parametrize("case", [c for c in CASES if c.get("report")], ids=lambda c: c["name"])
def test_strict_refuses_every_map_and_drop(case: dict[str, Any]) -> None:
    first = case["report"][0]
    with pytest.raises(InvalidRequest) as caught:
        adapt.adapt(case["source"], case["body"], case["targets"], strict=True)
    assert caught.value.path == first[0]
    assert "strict" in caught.value.reason and first[1] in caught.value.reason


def test_finish_puts_mapped_fields_where_the_target_builder_merges_them() -> None:
    body = {
        "model": "m",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "news?"}],
        "tools": [
            {"name": "f", "description": "d", "input_schema": {"type": "object"}},
            {"type": "web_search_20250305", "name": "web_search"},
        ],
        "output_config": {"format": {"type": "json_schema", "schema": {"type": "object"}}},
    }
    out = adapt.adapt("anthropic", body, ["openai-responses", "gemini"])
    ingress = get("anthropic").ingress
    assert ingress is not None
    request = adapt.finish(out, ingress.parse(out.body)[0])
    built = json.loads(get("openai-responses").build_request(request, base_url="http://x").body)
    assert built["tools"] == [
        {"type": "function", "name": "f", "description": "d", "parameters": {"type": "object"},
         "strict": False},
        {"type": "web_search"},
    ]  # fmt: skip
    assert built["text"]["format"]["type"] == "json_schema"
    gemini = json.loads(get("gemini").build_request(request, base_url="http://x").body)
    # Gemini 2.x takes no search beside function declarations: dropped, and said so.
    assert gemini["tools"] == [
        {
            "functionDeclarations": [
                {"name": "f", "description": "d", "parameters": {"type": "object"}}
            ]
        }
    ]
    assert ("tools[1]", "gemini", "drop") in adapt.report_of(request)
    assert gemini["generationConfig"]["responseMimeType"] == "application/json"


def test_every_row_has_a_cell_for_every_target_but_its_source() -> None:
    for source, rules in RULES.items():
        for rule in rules:
            assert rule.source == source
            assert set(rule.actions) == set(adapt.TARGETS) - {source}, rule.path
            for action in rule.actions.values():
                assert action.outcome in adapt.OUTCOMES and action.how


def test_the_docs_table_is_generated_from_the_code() -> None:
    doc = (ROOT / "docs" / "translation.md").read_text()
    start = "<!-- adaptation table: generated by tokenwire.translate.adapt.table_markdown() -->\n"
    end = "<!-- end of the adaptation table -->"
    assert start in doc and end in doc
    assert doc.split(start, 1)[1].split(end, 1)[0] == adapt.table_markdown()


def test_the_header_is_bounded_and_names_each_path_once() -> None:
    report = [(f"tools[{i}].cache_control", "openai", "drop") for i in range(400)]
    report += [("tools[0].cache_control", "gemini", "drop")]
    value = adapt.header_value(report)
    assert len(value) <= adapt.MAX_HEADER_CHARS
    assert value.startswith("tools[0].cache_control=drop, tools[1].cache_control=drop")
    assert value.count("tools[0].cache_control") == 1
    assert value.endswith(")") and "...(+" in value and value.isascii()
    assert adapt.header_value([("a,b\u00e9", "openai", "map")]) == "a%2Cb\\xe9=map"


def test_a_request_without_adaptations_reports_none() -> None:
    request = rq.build(model="m", messages="hi")
    assert adapt.report_of(request) == [] and adapt.report_of(None) == []


def _chat_to_anthropic(messages: list[dict[str, Any]], max_tokens: int, **extra: Any) -> rq.Request:
    body = {
        "model": "m",
        "messages": messages,
        "max_completion_tokens": max_tokens,
        "reasoning_effort": "high",
        **extra,
    }
    out = adapt.adapt("openai", body, ["anthropic"])
    ingress = get("openai").ingress
    assert ingress is not None
    return adapt.finish(out, ingress.parse(out.body)[0])


def test_thinking_reaches_anthropic_only_as_anthropic_takes_it() -> None:
    first = [{"role": "user", "content": "hi"}]
    request = _chat_to_anthropic(first, 30000)
    assert request.extension("vendor:anthropic")["thinking"] == {
        "type": "enabled",
        "budget_tokens": 24576,
    }
    # The budget stays under max_tokens...
    request = _chat_to_anthropic(first, 5000)
    assert request.extension("vendor:anthropic")["thinking"]["budget_tokens"] == 4999
    # ...and is dropped (reported) below Anthropic's minimum, or in a tool loop whose
    # last turn carries no thinking Anthropic signed (Anthropic refuses that turn).
    assert "thinking" not in (_chat_to_anthropic(first, 1000).extension("vendor:anthropic") or {})
    cold = _chat_to_anthropic(first, 30000, temperature=0.2)
    assert "thinking" not in (cold.extension("vendor:anthropic") or {})
    loop = [
        *first,
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    ]  # fmt: skip
    request = _chat_to_anthropic(loop, 30000)
    assert "thinking" not in (request.extension("vendor:anthropic") or {})
    assert adapt.report_of(request)[0] == ("reasoning_effort", "anthropic", "drop")


@pytest.mark.parametrize(
    ("budget", "effort"),
    [(None, "medium"), (-1, "medium"), (100, "low"), (5000, "medium"), (90000, "high")],
)
def test_budgets_and_efforts(budget: int | None, effort: str) -> None:
    assert maps.effort_of(budget) == effort
    assert maps.budget_of(effort) == maps.BUDGETS[effort]
    assert maps.budget_of("max") == maps.BUDGETS["high"] and maps.budget_of("none") is None


ANY_SERIAL = {"type": "any", "disable_parallel_tool_use": True}


@pytest.mark.parametrize(
    ("target", "choice", "parallel", "expected"),
    [
        ("anthropic", "required", False, [("tool_choice", ANY_SERIAL)]),
        ("anthropic", {"name": "f"}, None, [("tool_choice", {"type": "tool", "name": "f"})]),
        ("openai", {"name": "f"}, True, [
            ("tool_choice", {"type": "function", "function": {"name": "f"}}),
            ("parallel_tool_calls", True),
        ]),
        ("openai-responses", "none", None, [("tool_choice", "none")]),
        ("gemini", "auto", None, [("toolConfig.functionCallingConfig", {"mode": "AUTO"})]),
        ("standard", "required", None, []),
    ],
)  # fmt: skip
def test_tool_choice_per_target(
    target: str, choice: Any, parallel: bool | None, expected: list[Any]
) -> None:
    assert maps.tool_choice(target, choice, parallel) == expected


def test_any_json_object_per_target() -> None:
    assert maps.schema_format("anthropic", None) == [
        ("output_config.format", {"type": "json_schema", "schema": {"type": "object"}})
    ]
    assert maps.schema_format("openai-responses", None) == [
        ("text.format", {"type": "json_object"})
    ]
    assert maps.schema_format("gemini", None) == [
        ("generationConfig.responseMimeType", "application/json")
    ]
    assert maps.schema_format("standard", {"type": "object"}) is None


def test_an_upstream_of_the_clients_own_format_still_gets_what_was_adapted_away() -> None:
    # Anthropic first, an OpenAI fallback: the Anthropic upstream gets the body's own
    # fields as they came; the fallback gets them adapted.
    body = {
        "model": "m",
        "max_tokens": 9000,
        "messages": [{"role": "user", "content": "x"}],
        "thinking": {"type": "enabled", "budget_tokens": 4000},
        "context_management": {"edits": [{"type": "clear_thinking_20251015"}]},
        "tools": [{"type": "web_search_20250305", "name": "web_search"}],
    }
    out = adapt.adapt("anthropic", body, ["anthropic", "openai"])
    ingress = get("anthropic").ingress
    assert ingress is not None
    request = adapt.finish(out, ingress.parse(out.body)[0])
    own = json.loads(get("anthropic").build_request(request, base_url="http://x").body)
    assert {k: own[k] for k in ("thinking", "context_management", "tools")} == {
        k: body[k] for k in ("thinking", "context_management", "tools")
    }
    chat = json.loads(get("openai").build_request(request, base_url="http://x").body)
    assert chat["reasoning_effort"] == "medium" and "context_management" not in chat


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
_KEYS = sorted(
    {r.path.split(" ")[0].split(".")[0].split("[")[0] for rs in RULES.values() for r in rs}
)
#: A first turn in each source format, for the parser to have a conversation.
_TURN: dict[str, dict[str, Any]] = {
    "anthropic": {"max_tokens": 50, "messages": [{"role": "user", "content": "q"}]},
    "openai": {"messages": [{"role": "user", "content": "q"}]},
    "openai-responses": {"input": "q"},
    "gemini": {"contents": [{"role": "user", "parts": [{"text": "q"}]}]},
}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    source=st.sampled_from(adapt.SOURCES),
    target=st.sampled_from(adapt.TARGETS),
    fields=st.dictionaries(st.sampled_from(_KEYS), _JSON, max_size=4),
)
def test_any_value_adapts_or_is_refused_by_path(
    source: str, target: str, fields: dict[str, Any]
) -> None:
    # Whatever a client puts in the fields the table reads: adapted and parsed, or a
    # 400 with a path; never another exception.
    body = {"model": "m", **_TURN[source], **fields}
    ingress = get(source).ingress
    assert ingress is not None
    try:
        out = adapt.adapt(source, body, [target])
        request = adapt.finish(out, ingress.parse(out.body)[0])
    except InvalidRequest as exc:
        assert exc.path
        return
    assert all(a.outcome in ("map", "drop") and a.path for a in out.report)
    assert adapt.report_of(request) == [(a.path, a.target, a.outcome) for a in out.report]
