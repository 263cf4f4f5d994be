"""Fuzz the request parser and the vendor ingress parsers: a Request or InvalidRequest."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from tests.fuzz.fuzz_inputs import FUZZ, json_values, mutated

from tokenwire import request as rq
from tokenwire.errors import InvalidRequest
from tokenwire.gateway.ingress import AnthropicMessagesIngress, OpenAIChatIngress
from tokenwire.server import Exchange

#: A valid request using every part of §4: content parts, tools, tool calls, parameters.
VALID: dict[str, Any] = {
    "version": "1.0",
    "stream": True,
    "model": "demo",
    "messages": [
        {"role": "system", "content": "Be brief."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is in this picture?"},
                {"type": "image", "media_type": "image/png", "data": "iVBORw0KGgo="},
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "name": "look", "arguments": '{"q": "x"}'}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "a cat"},
    ],
    "tools": [{"name": "look", "description": "Look", "parameters": {"type": "object"}}],
    "parameters": {"max_tokens": 10, "temperature": 0.5, "top_p": 1, "stop_sequences": ["x"]},
    "metadata": {"request_id": "r-1"},
    "extensions": {"vendor:thing": {"a": 1}},
}
VALID_BODY = json.dumps(VALID).encode()

OPENAI: dict[str, Any] = {
    "model": "demo",
    "stream": True,
    "stream_options": {"include_usage": True},
    "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    ],
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
    "max_tokens": 5,
}
ANTHROPIC: dict[str, Any] = {
    "model": "demo",
    "stream": True,
    "max_tokens": 5,
    "system": "Be brief.",
    "messages": [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}],
        },
    ],
    "tools": [{"name": "f", "input_schema": {"type": "object"}}],
}


@st.composite
def _edited(draw: st.DrawFn, base: dict[str, Any]) -> bytes:
    """``base`` with a few values somewhere in it replaced by arbitrary JSON."""
    doc = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 3))):
        node: Any = doc
        parent: Any = None
        key: Any = None
        for _depth in range(draw(st.integers(0, 4))):
            if isinstance(node, dict) and node:
                parent, key = node, draw(st.sampled_from(sorted(node)))
            elif isinstance(node, list) and node:
                parent, key = node, draw(st.integers(0, len(node) - 1))
            else:
                break
            node = parent[key]
        if parent is None:
            continue
        if draw(st.booleans()) and isinstance(parent, dict):
            del parent[key]
        else:
            parent[key] = draw(json_values)
    return json.dumps(doc).encode()


def _parse(body: bytes) -> None:
    try:
        req = rq.parse(body, max_bytes=1 << 16, max_depth=16)
    except InvalidRequest as exc:
        assert isinstance(exc.path, str)
        return
    assert isinstance(req, rq.Request)
    # A parsed request survives a trip through the encoder.
    assert rq.parse(rq.dumps(req)) == req


@FUZZ
@given(body=st.one_of(st.binary(max_size=300), mutated(VALID_BODY, max_ops=3)))
def test_request_bytes_give_a_request_or_invalid_request(body: bytes) -> None:
    _parse(body)


@FUZZ
@given(body=_edited(VALID))
def test_request_structures_give_a_request_or_invalid_request(body: bytes) -> None:
    _parse(body)


@FUZZ
@given(body=st.one_of(_edited(OPENAI), mutated(json.dumps(OPENAI).encode(), max_ops=2)))
def test_openai_bodies_give_a_request_or_invalid_request(body: bytes) -> None:
    try:
        req, encode = OpenAIChatIngress().parse(body, Exchange())
    except InvalidRequest:
        return
    assert isinstance(req, rq.Request) and callable(encode)


@FUZZ
@given(body=st.one_of(_edited(ANTHROPIC), mutated(json.dumps(ANTHROPIC).encode(), max_ops=2)))
def test_anthropic_bodies_give_a_request_or_invalid_request(body: bytes) -> None:
    try:
        req, encode = AnthropicMessagesIngress().parse(body, Exchange())
    except InvalidRequest:
        return
    assert isinstance(req, rq.Request) and callable(encode)
