"""Mistral <-> the standard: recordings, vectors, splits, the fake upstream, requests."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.translate.conftest import CaptureBody, assert_conformant, summarize, translate_pieces
from tests.translate.test_openai import (
    SPLIT_SETTINGS,
    check_vector,
    load_vectors,
    oracle_text,
    split,
    vector_body,
)

from tokenwire import events as ev
from tokenwire import request as rq
from tokenwire.errors import InvalidRequest
from tokenwire.testing.upstream import FakeUpstream, Fault, Script, ScriptedToolCall
from tokenwire.translate import translator, vendor_request
from tokenwire.translate.mistral import Translator, build_request, request_from_vendor

RECORDINGS_FOLDER = "mistral"
VECTORS = load_vectors(Path(__file__).resolve().parents[1] / "vectors" / "translate" / "mistral")


def test_vectors_are_there() -> None:
    assert len(VECTORS) >= 10


@pytest.mark.parametrize("vector", VECTORS, ids=[v["name"] for v in VECTORS])
def test_vector(vector: dict[str, Any]) -> None:
    check_vector("mistral", vector)


@pytest.mark.parametrize("vector", VECTORS, ids=[v["name"] for v in VECTORS])
@SPLIT_SETTINGS
@given(data=st.data())
def test_any_split_of_a_vector_gives_the_same_events(
    vector: dict[str, Any], data: st.DataObject
) -> None:
    body = vector_body(vector)
    options = vector.get("options", {})
    whole = translate_pieces("mistral", [body], **options)
    cuts = data.draw(st.lists(st.integers(0, len(body)), max_size=12))
    assert translate_pieces("mistral", split(body, cuts), **options) == whole


# --- Recordings -------------------------------------------------------------------

#: file -> (text per block, tool calls, stops, usage).
EXPECTED: dict[str, tuple[dict[int, str], list[Any], dict[int, str], list[Any]]] = {
    "vercel-mistral-text.jsonl": (
        {0: "Hello, world! This is a test response."},
        [],
        {0: "end_turn"},
        [(13, 8)],
    ),
    "vercel-mistral-tool-call.jsonl": (
        {},
        [(0, "gSIMJiOkT", "weather", {"location": "San Francisco"})],
        {0: "tool_use"},
        [(124, 22)],
    ),
    "vercel-mistral-incremental-tool-call.jsonl": (
        {},
        [
            (
                0,
                "chatcmpl-tool-9f149c74c42f265b",
                "webSearchTool",
                {"query": "current Berlin weather"},
            )
        ],
        {0: "tool_use"},
        [(171, 14)],
    ),
    "vercel-mistral-reasoning.jsonl": ({0: "2 + 2 = 4"}, [], {0: "end_turn"}, [(10, 46)]),
}


@pytest.mark.fixtures
def test_recording(recording: Path, capture_body: CaptureBody) -> None:
    assert recording.name in EXPECTED, f"add a row for the new recording {recording.name}"
    text, calls, stops, usage = EXPECTED[recording.name]
    body = capture_body(recording, done=True)
    out = translate_pieces("mistral", [body])
    assert_conformant(out)
    s = summarize(out)
    if "reasoning" not in recording.name:  # Magistral's content arrays need the translator
        assert s.text == oracle_text(body)
    assert (s.text, s.tool_calls, s.stops, s.usage, s.errors) == (text, calls, stops, usage, [])
    assert s.reasoning == {}


@pytest.mark.fixtures
def test_magistral_thinking_carried_on_request(vendor_fixtures: Path) -> None:
    lines = (vendor_fixtures / "mistral" / "vercel-mistral-reasoning.jsonl").read_text()
    body = "".join(f"data: {line}\n\n" for line in lines.splitlines()) + "data: [DONE]\n\n"
    out = translate_pieces("mistral", [body.encode()], reasoning=True)
    assert_conformant(out)
    s = summarize(out)
    assert s.text == {0: "2 + 2 = 4"}
    assert s.reasoning == {1: "The user is asking for 2+2. This is basic arithmetic. 2+2=4."}
    assert s.stops == {0: "end_turn", 1: "end_turn"}
    first = next(e for e in out if isinstance(e, ev.ContentDelta))
    assert first.reasoning and b'"tokenwire:reasoning":true' in ev.dump(first)


@pytest.mark.fixtures
@SPLIT_SETTINGS
@given(data=st.data())
def test_any_split_of_a_recording_gives_the_same_events(
    recording: Path, capture_body: CaptureBody, data: st.DataObject
) -> None:
    body = capture_body(recording, done=True)
    whole = translate_pieces("mistral", [body])
    cuts = data.draw(st.lists(st.integers(0, len(body)), max_size=30))
    assert translate_pieces("mistral", split(body, cuts)) == whole
    bytewise = (body[i : i + 1] for i in range(len(body)))
    assert translate_pieces("mistral", bytewise) == whole


@pytest.mark.fixtures
def test_recording_without_done_is_an_error(recording: Path, capture_body: CaptureBody) -> None:
    out = translate_pieces("mistral", [capture_body(recording, done=False)])
    assert_conformant(out)
    assert summarize(out).errors == ["internal_error"]


def test_registry() -> None:
    t = translator("mistral", model="m")
    assert isinstance(t, Translator) and t.name == "mistral"


# --- The fake upstream, read by an OpenAI-compatible SDK and by the translator ------

SCRIPTS = {
    "plain-text": Script(text="Bonjour from the fake Mistral.", input_tokens=6),
    "parallel-tools": Script(
        text="",
        tool_calls=[
            ScriptedToolCall("weather", {"city": "Lyon"}),
            ScriptedToolCall("clock", {}, id="abcdefghi"),
        ],
        input_tokens=50,
        output_tokens=20,
    ),
    "max-tokens": Script(text="Cut short", stop_reason="max_tokens"),
}


@pytest.mark.parametrize("name", list(SCRIPTS))
def test_fake_mistral_read_by_sdk_and_translator(name: str) -> None:
    script = SCRIPTS[name]
    with FakeUpstream("mistral", script) as fake:
        client = openai.OpenAI(base_url=fake.url + "/v1", api_key="x", max_retries=0)
        text, usage = "", None
        for chunk in client.chat.completions.create(
            model="mistral-small-latest", messages=[{"role": "user", "content": "hi"}], stream=True
        ):
            if chunk.usage is not None:  # on the finish chunk, without being asked
                usage = (chunk.usage.prompt_tokens, chunk.usage.completion_tokens)
            text += "".join(c.delta.content or "" for c in chunk.choices)
        client.close()
        vr = build_request(
            rq.build(model="mistral-small-latest", messages="hi"), base_url=fake.url + "/v1"
        )
        raw = httpx.post(vr.url, headers=vr.headers, content=vr.body).content
        assert fake.errors == []
    assert text == script.text
    assert usage == (script.input_tokens, script.usage_output_tokens)
    out = translate_pieces("mistral", [raw])
    assert_conformant(out)
    s = summarize(out)
    assert "".join(s.text.values()) == script.text
    assert [(c[2], c[3]) for c in s.tool_calls] == [
        (c.name, c.arguments) for c in script.tool_calls
    ]
    assert s.usage == [usage]
    reasons = {"end_turn": "end_turn", "tool_use": "tool_use", "max_tokens": "max_tokens"}
    assert set(s.stops.values()) == {reasons[script.final_stop_reason]}


def test_fake_mistral_in_stream_error() -> None:
    script = Script(text="Par", error=("overloaded", "capacity"))
    with FakeUpstream("mistral", script) as fake:
        vr = build_request(rq.build(model="m", messages="hi"), base_url=fake.url + "/v1")
        raw = httpx.post(vr.url, headers=vr.headers, content=vr.body).content
    s = summarize(translate_pieces("mistral", [raw]))
    assert s.text == {0: "Par"} and s.errors == ["overloaded"]


def test_fake_mistral_http_error_body() -> None:
    with FakeUpstream("mistral", fault=Fault(kind="status", status=429)) as fake:
        vr = build_request(rq.build(model="m", messages="hi"), base_url=fake.url + "/v1")
        resp = httpx.post(vr.url, headers=vr.headers, content=vr.body)
    assert resp.status_code == 429
    assert resp.json()["object"] == "error"


# --- Request side -------------------------------------------------------------------

PNG = base64.b64encode(b"png").decode()
MP3 = base64.b64encode(b"mp3").decode()
PDF = base64.b64encode(b"pdf").decode()


def test_build_request_uses_mistral_shapes() -> None:
    req = rq.build(
        model="std",
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "see"},
                    {"type": "image", "media_type": "image/jpeg", "data": PNG},
                    {"type": "audio", "media_type": "audio/mpeg", "data": MP3},
                    {"type": "document", "media_type": "application/pdf", "data": PDF},
                ],
            },
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": "abcdefghi", "name": "t", "arguments": "{}"}],
            },
            {"role": "tool", "tool_call_id": "abcdefghi", "content": "42"},
        ],
        tools=[{"name": "t", "description": "d", "parameters": {"type": "object"}}],
        parameters={"max_tokens": 64, "temperature": 0.1, "stop_sequences": ["\n\n"]},
        extensions={"vendor:mistral": {"safe_prompt": True, "stream": False}},
    )
    vr = build_request(
        req, base_url="https://api.mistral.ai/v1", api_key="k", upstream_model="mistral-large"
    )
    assert vr.url == "https://api.mistral.ai/v1/chat/completions"
    assert vr.headers["authorization"] == "Bearer k"
    body = json.loads(vr.body)
    assert body["model"] == "mistral-large" and body["stream"] is True
    assert "stream_options" not in body  # Mistral streams usage unasked, rejects unknown fields
    assert body["max_tokens"] == 64 and "max_completion_tokens" not in body
    assert body["stop"] == ["\n\n"] and body["temperature"] == 0.1
    assert body["safe_prompt"] is True
    assert body["messages"][0]["content"] == [
        {"type": "text", "text": "see"},
        {"type": "image_url", "image_url": f"data:image/jpeg;base64,{PNG}"},
        {"type": "input_audio", "input_audio": MP3},
        {
            "type": "document_url",
            "document_url": f"data:application/pdf;base64,{PDF}",
            "document_name": "document-3.pdf",
        },
    ]
    assert body["messages"][1]["tool_calls"][0]["function"] == {"name": "t", "arguments": "{}"}
    assert body["messages"][2] == {"role": "tool", "tool_call_id": "abcdefghi", "content": "42"}
    assert body["tools"][0]["type"] == "function"
    assert vendor_request("mistral", req, base_url="https://api.mistral.ai/v1").url == vr.url


def test_openai_extension_is_not_sent_to_mistral() -> None:
    req = rq.build(model="m", messages="hi", extensions={"vendor:openai": {"n": 3}})
    assert "n" not in json.loads(build_request(req, base_url="http://x/v1").body)


def test_request_from_vendor_keeps_mistral_fields() -> None:
    req = request_from_vendor(
        {
            "model": "mistral-small",
            "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 10,
            "safe_prompt": True,
            "random_seed": 7,
        }
    )
    assert req.parameters == rq.Parameters(max_tokens=10)
    assert req.extension("vendor:mistral") == {"safe_prompt": True, "random_seed": 7}
    with pytest.raises(InvalidRequest) as info:
        request_from_vendor({"model": "m", "messages": "hi"})
    assert info.value.path == "messages"
