"""tokenwire.toolschema: tool schemas checked once, never fetched, bounded, failing closed."""

from __future__ import annotations

from typing import Any

import pytest

from tokenwire import toolschema
from tokenwire.errors import InvalidRequest
from tokenwire.toolschema import check_schema, compile_checker

CATASTROPHIC = "^(a+)+$"  # exponential on backtracking engines for "aaa...a!"


def first_error(schema: dict[str, Any], arguments: object) -> str | None:
    return compile_checker(schema).first_error(arguments)


def test_valid_arguments_pass_and_invalid_ones_are_named() -> None:
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
        "required": ["city"],
    }
    assert first_error(schema, {"city": "Paris", "days": 2}) is None
    assert first_error(schema, {"days": 0}) is not None
    error = first_error(schema, {"city": "Paris", "days": 0})
    assert error is not None and error.startswith("days:")


def test_local_refs_resolve() -> None:
    schema = {
        "$defs": {"city": {"type": "string", "minLength": 2}},
        "properties": {"city": {"$ref": "#/$defs/city"}},
    }
    assert first_error(schema, {"city": "Rome"}) is None
    assert first_error(schema, {"city": "R"}) is not None


def test_a_missing_local_ref_fails_closed() -> None:
    schema = {"properties": {"x": {"$ref": "#/$defs/missing"}}}
    error = first_error(schema, {"x": 1})
    assert error is not None and "could not be checked" in error


@pytest.mark.parametrize(
    "draft", ["http://json-schema.org/draft-07/schema#", "http://json-schema.org/draft-04/schema#"]
)
def test_older_drafts_are_supported(draft: str) -> None:
    schema = {"$schema": draft, "type": "object", "properties": {"n": {"type": "integer"}}}
    assert first_error(schema, {"n": 1}) is None
    assert first_error(schema, {"n": "one"}) is not None


@pytest.mark.timeout(60)  # a hang guard, not a timing assertion
def test_a_catastrophic_pattern_is_matched_in_linear_time() -> None:
    schema = {"properties": {"x": {"type": "string", "pattern": CATASTROPHIC}}}
    error = first_error(schema, {"x": "a" * 30 + "!"})
    assert error is not None and "does not match" in error
    assert first_error(schema, {"x": "a" * 100_000 + "!"}) is not None
    assert first_error(schema, {"x": "a" * 30}) is None


@pytest.mark.timeout(60)
def test_catastrophic_property_patterns_are_linear_too() -> None:
    schema = {
        "patternProperties": {CATASTROPHIC: {"type": "integer"}},
        "additionalProperties": False,
    }
    key = "a" * 40 + "!"
    error = first_error(schema, {key: 1})
    assert error is not None and "additional properties" in error
    assert first_error(schema, {"a" * 40: 1}) is None
    assert first_error(schema, {"a" * 40: "x"}) is not None


def test_strings_too_long_for_a_pattern_fail() -> None:
    schema = {"properties": {"x": {"type": "string", "pattern": "^a*$"}}}
    error = first_error(schema, {"x": "a" * (toolschema.MAX_PATTERN_SUBJECT + 1)})
    assert error is not None and "too long" in error


def test_an_exponential_ref_chain_runs_out_of_budget() -> None:
    # Each level refers to the next twice: 2^40 evaluations without a budget.
    defs = {
        f"d{i}": {"anyOf": [{"$ref": f"#/$defs/d{i + 1}"}, {"$ref": f"#/$defs/d{i + 1}"}]}
        for i in range(40)
    }
    defs["d40"] = {"type": "string"}
    schema = {"$defs": defs, "properties": {"x": {"$ref": "#/$defs/d0"}}}
    checker = compile_checker(schema)
    error = checker.first_error({"x": 1})
    assert error is not None and f"more than {toolschema.MAX_STEPS} steps" in error
    # Refused at once from then on, even for arguments that would be cheap.
    assert checker.first_error({}) == error


def test_unique_items_on_a_huge_array_is_refused_not_quadratic() -> None:
    schema = {"properties": {"xs": {"type": "array", "uniqueItems": True}}}
    error = first_error(schema, {"xs": [{}] * 300_000})
    assert error is not None and "too long to check uniqueItems" in error
    assert first_error(schema, {"xs": [{"a": 1}, {"a": 2}]}) is None
    assert first_error(schema, {"xs": [{"a": 1}, {"a": 1}]}) is not None


@pytest.mark.parametrize(
    ("schema", "path"),
    [
        ({"type": "strin"}, "$.type"),
        ({"properties": {"x": {"$ref": "https://example.com/s.json"}}}, "$.properties.x.$ref"),
        ({"properties": {"x": {"pattern": "(?<=a)b"}}}, "$.properties.x.pattern"),
        (
            {"properties": {"weird key": {"minLength": 10**9}}},
            '$.properties["weird key"].minLength',
        ),
        ({"$schema": "http://json-schema.org/draft-03/schema#"}, "$.$schema"),
    ],
)
def test_unusable_schemas_are_refused_with_their_path(schema: dict[str, Any], path: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        check_schema(schema, "$")
    assert info.value.path == path
    # compile_checker refuses them too: the §8.2 checker never runs on them.
    with pytest.raises(InvalidRequest):
        compile_checker(schema)


def test_a_schema_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(InvalidRequest):
        check_schema([], "tools[0].parameters")


def test_a_hand_built_schema_too_deep_or_not_json_is_refused() -> None:
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(100_000):
        node["not"] = {}
        node = node["not"]
    with pytest.raises(InvalidRequest):
        compile_checker(deep)
    with pytest.raises(InvalidRequest):
        check_schema({"enum": [object()]}, "$")
