"""Fuzz the tool-schema checks (issue 16) and the request rules they join.

Invariants: ``toolschema.check_schema`` accepts a schema or raises
``InvalidRequest``; a schema it accepts compiles, and its ``Checker`` answers
``None`` or a sentence for any arguments, never raising. The request parser,
fed the new rules' inputs (tool results, extension keys, images), gives a
``Request`` or ``InvalidRequest``.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from tests.fuzz.fuzz_inputs import FUZZ, json_values
from tests.fuzz.test_fuzz_request import VALID, _parse

from tokenwire import toolschema
from tokenwire.errors import InvalidRequest

_PATTERNS = ["^(a+)+$", "(a|aa)*b", "(x)\\1", "(?=a)", "[", "\\p{L}+", "^[a-z]{2,8}$", "é+", ""]
_REFS = ["#", "#/$defs/a", "#/$defs/missing", "#a", "http://127.0.0.1:9/x", "file:///x", "a.json"]
_TYPES = ["object", "array", "string", "integer", "number", "boolean", "null", "strin", 3]

_leaves = st.one_of(
    st.fixed_dictionaries({"type": st.sampled_from(_TYPES)}),
    st.fixed_dictionaries({"pattern": st.sampled_from(_PATTERNS)}),
    st.fixed_dictionaries({"$ref": st.sampled_from(_REFS)}),
    st.builds(
        lambda key, value: {key: value},
        st.sampled_from(["minItems", "minLength", "minProperties", "maxLength"]),
        st.integers(-2, 10**6),
    ),
    st.fixed_dictionaries({"enum": st.lists(json_values, max_size=3)}),
    st.fixed_dictionaries({"uniqueItems": st.booleans()}),
    st.fixed_dictionaries(
        {"$schema": st.sampled_from(["http://json-schema.org/draft-07/schema#", "x"])}
    ),
    st.booleans(),
)


def _combine(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.dictionaries(st.sampled_from(["a", "b", "é k"]), children, max_size=3).map(
            lambda props: {"type": "object", "properties": props}
        ),
        st.dictionaries(st.sampled_from(_PATTERNS), children, max_size=2).map(
            lambda props: {"patternProperties": props, "additionalProperties": False}
        ),
        st.lists(children, min_size=1, max_size=3).map(lambda xs: {"anyOf": xs}),
        children.map(lambda x: {"items": x}),
        children.map(lambda x: {"$defs": {"a": x}, "$ref": "#/$defs/a"}),
        st.tuples(children, children).map(
            lambda xy: {**xy[0], **xy[1]} if all(isinstance(v, dict) for v in xy) else xy[0]
        ),
    )


schemas = st.recursive(_leaves, _combine, max_leaves=10)


@FUZZ
@given(schema=schemas, arguments=json_values)
def test_the_schema_checker_only_raises_invalid_request(schema: Any, arguments: Any) -> None:
    try:
        toolschema.check_schema(schema, "tools[0].parameters")
    except InvalidRequest as exc:
        assert exc.path.startswith("tools[0].parameters")
        return
    checker = toolschema.compile_checker(schema)
    for args in (arguments, {"a": arguments}, {"a": "a" * 40 + "!"}):
        result = checker.first_error(args)
        assert result is None or isinstance(result, str)


_tool_edits = st.sampled_from(["tool_call_id", "extension", "image_data", "image_type"])


@st.composite
def _with_new_rule_inputs(draw: st.DrawFn) -> bytes:
    doc = copy.deepcopy(VALID)
    for edit in draw(st.lists(_tool_edits, min_size=1, max_size=3)):
        if edit == "tool_call_id":
            doc["messages"][3]["tool_call_id"] = draw(
                st.sampled_from(["c1", "c2", ""]) | st.text(max_size=8)
            )
        elif edit == "extension":
            doc["extensions"] = {draw(st.text(max_size=70)): draw(json_values)}
        elif edit == "image_data":
            doc["messages"][1]["content"][1]["data"] = draw(st.text("AQw=+/ \n!", max_size=12))
        else:
            doc["messages"][1]["content"][1]["media_type"] = draw(
                st.sampled_from(["image/png", "image/", "text/plain", "IMAGE/PNG"])
                | st.text(max_size=12)
            )
    if draw(st.booleans()):
        doc["tools"][0]["parameters"] = draw(schemas)
    return json.dumps(doc).encode()


@FUZZ
@given(body=_with_new_rule_inputs())
def test_requests_with_the_new_rules_give_a_request_or_invalid_request(body: bytes) -> None:
    _parse(body)
