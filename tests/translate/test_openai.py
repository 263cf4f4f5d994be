"""OpenAI Chat Completions <-> the standard: recordings, vectors, splits, SDK fidelity."""

from __future__ import annotations

import base64
import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.translate.conftest import (
    CaptureBody,
    Summary,
    assert_conformant,
    assert_tool_deltas_only_add_deltas,
    summarize,
    translate_pieces,
)

from tokenwire import events as ev
from tokenwire import request as rq
from tokenwire.errors import InvalidRequest
from tokenwire.testing.upstream import FakeUpstream, Fault, Script, ScriptedToolCall
from tokenwire.translate import translator, vendor_request
from tokenwire.translate._extensions import RAW_STOP_REASON, STOP, extension
from tokenwire.translate.openai import (
    ERROR_TYPES,
    ChunkEncoder,
    Translator,
    build_request,
    error_code,
    http_error,
    request_from_vendor,
)
from tokenwire.writer import Writer

RECORDINGS_FOLDER = "openai-chat"
VECTORS_DIR = Path(__file__).resolve().parents[1] / "vectors" / "translate" / "openai"


# --- Vectors: shared with test_mistral --------------------------------------------


def load_vectors(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text(encoding="utf-8")) for p in sorted(folder.glob("*.json"))]


def vector_body(vector: dict[str, Any]) -> bytes:
    """The raw SSE body of a vector: ``body`` as is, or ``data`` framed (+ ``[DONE]``)."""
    if "body" in vector:
        return str(vector["body"]).encode()
    frames = []
    for item in vector["data"]:
        payload = item if isinstance(item, str) else json.dumps(item, ensure_ascii=False)
        frames.append(f"data: {payload}\n\n")
    if vector.get("done", True):
        frames.append("data: [DONE]\n\n")
    return "".join(frames).encode()


def expected_summary(expect: dict[str, Any]) -> Summary:
    return Summary(
        text={int(k): v for k, v in expect["text"].items()},
        reasoning={int(k): v for k, v in expect["reasoning"].items()},
        tool_calls=[(c["index"], c["id"], c["name"], c["arguments"]) for c in expect["tool_calls"]],
        stops={int(k): v for k, v in expect["stops"].items()},
        usage=[] if expect["usage"] is None else [tuple(expect["usage"])],
        errors=[] if expect["error"] is None else [expect["error"]],
    )


def check_vector(vendor: str, vector: dict[str, Any]) -> None:
    out = translate_pieces(vendor, [vector_body(vector)], **vector.get("options", {}))
    assert_conformant(out)
    assert summarize(out) == expected_summary(vector["expect"]), vector["description"]
    if vector["expect"]["error"] is not None:
        # §5.3.6: the error is followed only by usage, then stream.end.
        tail = out[[type(e) for e in out].index(ev.ErrorEvent) + 1 :]
        assert all(isinstance(e, ev.Usage) for e in tail[:-1])
        assert isinstance(tail[-1], ev.StreamEnd)


VECTORS = load_vectors(VECTORS_DIR)


def test_vectors_are_there() -> None:
    assert len(VECTORS) >= 30


@pytest.mark.parametrize("vector", VECTORS, ids=[v["name"] for v in VECTORS])
def test_vector(vector: dict[str, Any]) -> None:
    check_vector("openai", vector)


# --- Recordings -------------------------------------------------------------------


def oracle_text(body: bytes) -> dict[int, str]:
    """The answer text per choice, read with plain json: an independent oracle."""
    text: dict[int, str] = {}
    for line in body.decode().splitlines():
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        for choice in json.loads(line[6:]).get("choices") or ():
            delta = choice.get("delta") or {}
            piece = (delta.get("content") or "") + (delta.get("refusal") or "")
            if piece:
                text[choice["index"]] = text.get(choice["index"], "") + piece
    return text


def weather(city: str) -> dict[str, Any]:
    return {"city": city}


#: file -> (text prefix per block, tool calls, stops, usage, errors).
EXPECTED: dict[str, tuple[dict[int, str], list[Any], dict[int, str], list[Any], list[str]]] = {
    "raw-sse-content-logprobs.sse": ({0: "Foo!"}, [], {0: "end_turn"}, [(9, 2)], []),
    "raw-sse-finish-length.sse": ({0: '{"'}, [], {0: "max_tokens"}, [(79, 1)], []),
    "raw-sse-midstream-error.sse": ({}, [], {}, [], ["internal_error"]),
    "raw-sse-n3-multiple-choices.sse": (
        {
            0: '{"city":"San Francisco","temperature":65,"units":"f"}',
            1: '{"city":"San Francisco","temperature":61,"units":"f"}',
            2: '{"city":"San Francisco","temperature":59,"units":"f"}',
        },
        [],
        {0: "end_turn", 1: "end_turn", 2: "end_turn"},
        [(79, 42)],
        [],
    ),
    "raw-sse-parallel-tool-calls.sse": (
        {},
        [
            (
                0,
                "call_JMW1whyEaYG438VE1OIflxA2",
                "GetWeatherArgs",
                {"city": "Edinburgh", "country": "GB", "units": "c"},
            ),
            (
                1,
                "call_DNYTawLBoN8fj3KN6qU9N1Ou",
                "get_stock_price",
                {"ticker": "AAPL", "exchange": "NASDAQ"},
            ),
        ],
        {0: "tool_use", 1: "tool_use"},
        [(149, 60)],
        [],
    ),
    "raw-sse-refusal.sse": (
        {0: "I'm sorry, I can't assist with that request."},
        [],
        {0: "content_filter"},
        [(79, 11)],
        [],
    ),
    "raw-sse-text-stop.sse": (
        {0: "I'm unable to provide real-time weather updates."},
        [],
        {0: "end_turn"},
        [(14, 30)],
        [],
    ),
    "raw-sse-tool-call-single.sse": (
        {},
        [(0, "call_4XzlGBLtUe9dy3GVNV4jhq7h", "get_weather", weather("New York City"))],
        {0: "tool_use"},
        [(44, 16)],
        [],
    ),
    "vercel-azure-model-router.1.jsonl": (
        {0: "Capital of Denmark."},
        [],
        {0: "end_turn"},
        [(15, 78)],
        [],
    ),
    "vercel-deepseek-tool-call.jsonl": (
        {},
        [(0, "call_00_ioIn7yN9p1ZOMNpDLwd4MgAF", "weather", {"location": "San Francisco"})],
        {0: "tool_use"},
        [(339, 83)],
        [],
    ),
    "vercel-groq-tool-call.jsonl": (
        {},
        [(0, "tk85n1k4m", "weather", {})],
        {0: "tool_use"},
        [(210, 15)],
        [],
    ),
    "vercel-openai-text.jsonl": (
        {0: "**Holiday Name:** Harmony Day\n\n**Date:**"},
        [],
        {0: "end_turn"},
        [(16, 300)],
        [],
    ),
}


def body_of(capture_body: CaptureBody, path: Path) -> bytes:
    # The vercel chunk files are OpenAI-family streams, which end with [DONE].
    return capture_body(path, done=True)


@pytest.mark.fixtures
def test_recording(recording: Path, capture_body: CaptureBody) -> None:
    assert recording.name in EXPECTED, f"add a row for the new recording {recording.name}"
    prefixes, calls, stops, usage, errors = EXPECTED[recording.name]
    body = body_of(capture_body, recording)
    out = translate_pieces("openai", [body])
    assert_conformant(out)
    s = summarize(out)
    assert s.text == oracle_text(body)
    assert s.text.keys() == prefixes.keys()
    for index, prefix in prefixes.items():
        assert s.text[index].startswith(prefix)
    assert s.reasoning == {}
    assert s.tool_calls == calls
    assert s.stops == stops
    assert s.usage == usage  # exactly the final totals, once
    assert s.errors == errors


@pytest.mark.fixtures
def test_deepseek_reasoning_carried_on_request(vendor_fixtures: Path) -> None:
    body = (vendor_fixtures / RECORDINGS_FOLDER / "vercel-deepseek-tool-call.jsonl").read_text()
    framed = "".join(f"data: {line}\n\n" for line in body.splitlines()) + "data: [DONE]\n\n"
    out = translate_pieces("openai", [framed.encode()], reasoning=True)
    assert_conformant(out)
    s = summarize(out)
    assert s.reasoning[1].startswith("The")
    assert s.text == {}
    assert all(e.reasoning for e in out if isinstance(e, ev.ContentDelta))
    assert [c[0] for c in s.tool_calls] == [0]
    assert s.stops == {0: "tool_use", 1: "end_turn"}


# --- Any split gives the same events ------------------------------------------------


def split(body: bytes, cuts: list[int]) -> Iterator[bytes]:
    last = 0
    for cut in sorted(set(cuts)):
        yield body[last:cut]
        last = cut
    yield body[last:]


SPLIT_SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.mark.parametrize("vector", VECTORS, ids=[v["name"] for v in VECTORS])
@SPLIT_SETTINGS
@given(data=st.data())
def test_any_split_of_a_vector_gives_the_same_events(
    vector: dict[str, Any], data: st.DataObject
) -> None:
    body = vector_body(vector)
    options = vector.get("options", {})
    whole = translate_pieces("openai", [body], **options)
    cuts = data.draw(st.lists(st.integers(0, len(body)), max_size=12))
    assert translate_pieces("openai", split(body, cuts), **options) == whole


@pytest.mark.fixtures
@SPLIT_SETTINGS
@given(data=st.data())
def test_any_split_of_a_recording_gives_the_same_events(
    recording: Path, capture_body: CaptureBody, data: st.DataObject
) -> None:
    body = body_of(capture_body, recording)
    whole = translate_pieces("openai", [body])
    cuts = data.draw(st.lists(st.integers(0, len(body)), max_size=30))
    assert translate_pieces("openai", split(body, cuts)) == whole


@pytest.mark.fixtures
def test_byte_by_byte_recording_gives_the_same_events(
    recording: Path, capture_body: CaptureBody
) -> None:
    body = body_of(capture_body, recording)
    bytewise = (body[i : i + 1] for i in range(len(body)))
    assert translate_pieces("openai", bytewise) == translate_pieces("openai", [body])


# --- Truncation: a body without [DONE] never looks finished ------------------------


@pytest.mark.fixtures
@SPLIT_SETTINGS
@given(data=st.data())
def test_any_prefix_of_a_recording_ends_in_an_error(
    recording: Path, capture_body: CaptureBody, data: st.DataObject
) -> None:
    body = body_of(capture_body, recording)
    if b"[DONE]" not in body:
        return
    cut = data.draw(st.integers(0, len(body) - 1))
    out = translate_pieces("openai", [body[:cut]])
    assert_conformant(out)
    assert summarize(out).errors, f"a body cut at byte {cut} looked like a clean finish"


def test_truncation_error_names_the_problem() -> None:
    out = translate_pieces(
        "openai", [b'data: {"choices":[{"index":0,"delta":{"content":"Hi"}}]}\n\n']
    )
    err = next(e for e in out if isinstance(e, ev.ErrorEvent))
    assert err.code == "internal_error"
    assert "[DONE]" in err.message and "truncated" in err.message


def test_feed_after_end_and_double_close_are_harmless() -> None:
    t = translator("openai", model="m", created=0)
    out = t.feed(b"data: [DONE]\n\n")
    assert t.done and isinstance(out[-1], ev.StreamEnd)
    assert t.feed(b'data: {"choices":[]}\n\n') == [] and t.close() == []


def test_translator_registry_and_name() -> None:
    t = translator("openai", model="m", request_id="r9", reasoning=True)
    assert isinstance(t, Translator) and t.name == "openai" and t.reasoning


# --- Error codes --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("type_", "code", "message", "expected"),
    [
        ("requests", "rate_limit_exceeded", "", "rate_limited"),
        ("tokens", None, "", "rate_limited"),
        ("insufficient_quota", "insufficient_quota", "", "rate_limited"),
        ("invalid_request_error", "context_length_exceeded", "", "context_length_exceeded"),
        (
            "invalid_request_error",
            None,
            "maximum context length is 8192",
            "context_length_exceeded",
        ),
        (None, "content_filter", "", "content_filtered"),
        ("server_error", "overloaded", "", "overloaded"),
        ("server_error", None, "The engine is currently overloaded", "overloaded"),
        ("service_tier_capacity_exceeded", "3505", "", "overloaded"),
        ("server_error", None, "Something broke", "internal_error"),
        (None, None, None, "internal_error"),
    ],
)
def test_error_code(type_: str | None, code: str | None, message: str, expected: str) -> None:
    assert error_code(type_, code, message) == expected


def test_error_types_round_trip() -> None:
    for code, (etype, ecode) in ERROR_TYPES.items():
        assert error_code(etype, ecode, "x") == code


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (429, b'{"error":{"message":"slow down","type":"requests","code":null}}', "rate_limited"),
        (400, b'{"error":{"message":"too long","code":"context_length_exceeded"}}',
         "context_length_exceeded"),
        (503, b'{"error":{"message":"busy","type":"server_error"}}', "overloaded"),
        (500, b"<html>oops</html>", "internal_error"),
        (429, b'{"object":"error","message":"cap","type":"rate_limited","code":"1300"}',
         "rate_limited"),
        (401, b'{"error":"bad key"}', "internal_error"),
    ],
)  # fmt: skip
def test_http_error(status: int, body: bytes, expected: str) -> None:
    code, message = http_error(status, body)
    assert code == expected
    assert str(status) in message


# --- Request side -------------------------------------------------------------------

PNG = base64.b64encode(b"\x89PNG fake").decode()
WAV = base64.b64encode(b"RIFF fake").decode()
PDF = base64.b64encode(b"%PDF fake").decode()


def full_request(**extensions: Any) -> rq.Request:
    return rq.build(
        model="standard-model",
        messages=[
            {"role": "system", "content": "Be brief."},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is in these?"},
                    {"type": "image", "media_type": "image/png", "data": PNG},
                    {"type": "audio", "media_type": "audio/wav", "data": WAV},
                    {"type": "document", "media_type": "application/pdf", "data": PDF},
                ],
                "name": "ann",
            },
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "call_1", "name": "get_weather", "arguments": '{"city":"Oslo"}'}
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": 3}'},
        ],
        tools=[
            {
                "name": "get_weather",
                "description": "Weather for a city",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            }
        ],
        parameters={"max_tokens": 100, "temperature": 0.5, "top_p": 0.9, "stop_sequences": ["END"]},
        metadata={"request_id": "r-1"},
        extensions=extensions or None,
    )


def test_build_request_maps_everything() -> None:
    vr = build_request(
        full_request(), base_url="https://api.example.com/v1/", api_key="sk-test",
        upstream_model="gpt-4o-mini", headers={"X-Trace": "t1"},
    )  # fmt: skip
    assert vr.method == "POST"
    assert vr.url == "https://api.example.com/v1/chat/completions"
    assert vr.headers["authorization"] == "Bearer sk-test"
    assert vr.headers["content-type"] == "application/json"
    assert vr.headers["x-trace"] == "t1"
    body = json.loads(vr.body)
    assert body["model"] == "gpt-4o-mini"
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["max_completion_tokens"] == 100 and "max_tokens" not in body
    assert (body["temperature"], body["top_p"], body["stop"]) == (0.5, 0.9, ["END"])
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Weather for a city",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        }
    ]
    system, user, assistant, tool = body["messages"]
    assert system == {"role": "system", "content": "Be brief."}
    assert user["name"] == "ann"
    assert user["content"] == [
        {"type": "text", "text": "What is in these?"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
        {"type": "input_audio", "input_audio": {"data": WAV, "format": "wav"}},
        {
            "type": "file",
            "file": {
                "filename": "document-3.pdf",
                "file_data": f"data:application/pdf;base64,{PDF}",
            },
        },
    ]
    assert assistant == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'},
            }
        ],
    }
    assert tool == {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": 3}'}


def test_build_request_minimal_and_registry() -> None:
    req = rq.build(model="m", messages="hi")
    vr = vendor_request("openai", req, base_url="http://127.0.0.1:1/v1")
    body = json.loads(vr.body)
    assert body == {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    assert "authorization" not in vr.headers


def test_extension_is_merged_but_cannot_stop_streaming() -> None:
    req = full_request(
        **{
            "vendor:openai": {
                "stream": False,
                "n": 2,
                "temperature": 1.0,
                "stream_options": {"include_obfuscation": False},
            },
            "vendor:other": {"n": 9},
        }
    )
    body = json.loads(build_request(req, base_url="http://x/v1").body)
    assert body["stream"] is True
    assert body["n"] == 2 and body["temperature"] == 1.0
    assert body["stream_options"] == {"include_usage": True, "include_obfuscation": False}


def test_extension_must_be_an_object() -> None:
    req = rq.build(model="m", messages="hi", extensions={"vendor:openai": [1]})
    with pytest.raises(InvalidRequest) as info:
        build_request(req, base_url="http://x/v1")
    assert info.value.path == 'extensions["vendor:openai"]'


def test_request_from_vendor_maps_everything() -> None:
    body = {
        "model": "gpt-4o",
        "messages": [
            {"role": "developer", "content": "Be brief."},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Look"},
                    {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
                    {"type": "input_audio", "input_audio": {"data": WAV, "format": "wav"}},
                    {"type": "file", "file": {"file_data": f"data:application/pdf;base64,{PDF}"}},
                ],
            },
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "ok"}]},
        ],
        "tools": [{"type": "function", "function": {"name": "f"}}],
        "max_completion_tokens": 50,
        "temperature": 0.2,
        "stop": "END",
        "stream": True,
        "stream_options": {"include_usage": True},
        "metadata": {"request_id": "abc"},
        "n": 2,
        "tool_choice": "auto",
    }
    req = request_from_vendor(body)
    assert req.model == "gpt-4o" and req.stream is True and req.request_id == "abc"
    system, user, assistant, tool = req.messages
    assert system.role == "system" and system.content == "Be brief."
    assert user.content == [
        rq.TextPart(text="Look"),
        rq.ImagePart(media_type="image/png", data=PNG),
        rq.AudioPart(media_type="audio/wav", data=WAV),
        rq.DocumentPart(media_type="application/pdf", data=PDF),
    ]
    assert assistant.tool_calls == [rq.ToolCallRef(id="c1", name="f", arguments="{}")]
    assert tool.tool_call_id == "c1" and tool.content == "ok"
    assert req.tools == [
        rq.Tool(name="f", description="", parameters={"type": "object", "properties": {}})
    ]
    assert req.parameters == rq.Parameters(max_tokens=50, temperature=0.2, stop_sequences=["END"])
    # Unmapped fields travel on, so an OpenAI upstream still receives them.
    assert req.extension("vendor:openai") == {"n": 2, "tool_choice": "auto"}
    again = json.loads(build_request(req, base_url="http://x/v1").body)
    assert again["n"] == 2 and again["tool_choice"] == "auto"
    assert again["messages"][1]["content"][1] == body["messages"][1]["content"][1]  # type: ignore[index]


@pytest.mark.parametrize(
    ("body", "path"),
    [
        ([], "$"),
        ({"messages": []}, "model"),
        ({"model": "m"}, "messages"),
        ({"model": "m", "messages": [{"role": "robot", "content": "x"}]}, "messages[0].role"),
        ({"model": "m", "messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
        (
            {"model": "m", "messages": [{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": "https://x/cat.png"}}]}]},
            "messages[0].content[0].image_url.url",
        ),
        (
            {"model": "m", "messages": [{"role": "user", "content": [{"type": "video"}]}]},
            "messages[0].content[0].type",
        ),
        (
            {"model": "m", "messages": [{"role": "tool", "content": "x"}]},
            "messages[0].tool_call_id",
        ),
        (
            {"model": "m", "messages": [{"role": "user", "content": "x"}],
             "tools": [{"type": "function", "function": {"description": "d"}}]},
            "tools[0].function.name",
        ),
        ({"model": "m", "messages": [{"role": "user", "content": "x"}], "max_tokens": 0},
         "max_tokens"),
        ({"model": "m", "messages": [{"role": "user", "content": "x"}], "top_p": 2},
         "top_p"),
        ({"model": "m", "messages": []}, "messages"),
    ],
)  # fmt: skip
def test_request_from_vendor_names_the_path(body: Any, path: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        request_from_vendor(body)
    assert info.value.path == path


# --- Fidelity: the real openai SDK and our translator read the fake the same ---------

SCRIPTS = {
    "plain-text": Script(text="Hello from the fake upstream, twice over.", input_tokens=7),
    "parallel-tools": Script(
        text="",
        tool_calls=[
            ScriptedToolCall("get_weather", {"city": "Paris", "units": "c"}, id="call_p"),
            ScriptedToolCall("get_time", {"tz": "Europe/Paris", "nested": {"a": [1, "\u00e9"]}}),
            ScriptedToolCall("ping", {}),
        ],
        output_tokens=33,
    ),
    "text-and-usage": Script(text="Counting: one two three.", input_tokens=40, output_tokens=5),
}


def sdk_read(fake: FakeUpstream) -> tuple[str, list[tuple[str, str, Any]], tuple[int, int] | None]:
    """Text, tool calls (id, name, args) and usage, as the openai SDK parses the fake."""
    client = openai.OpenAI(base_url=fake.url + "/v1", api_key="x", max_retries=0)
    stream = client.chat.completions.create(
        model="gpt-test",
        messages=[{"role": "user", "content": "hi"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    text = ""
    calls: dict[int, list[str]] = {}
    usage = None
    for chunk in stream:
        if chunk.usage is not None:
            usage = (chunk.usage.prompt_tokens, chunk.usage.completion_tokens)
        for choice in chunk.choices:
            text += choice.delta.content or ""
            for frag in choice.delta.tool_calls or ():
                slot = calls.setdefault(frag.index, ["", "", ""])
                assert frag.function is not None
                slot[0] += frag.id or ""
                slot[1] += frag.function.name or ""
                slot[2] += frag.function.arguments or ""
    client.close()
    parsed = [(i, n, json.loads(a)) for i, n, a in (calls[k] for k in sorted(calls))]
    return text, parsed, usage


@pytest.mark.parametrize("name", list(SCRIPTS))
def test_sdk_and_translator_agree_on_the_fake(name: str) -> None:
    script = SCRIPTS[name]
    with FakeUpstream("openai", script) as fake:
        text, calls, usage = sdk_read(fake)
        # The very body the SDK was sent, fetched again as raw bytes...
        sdk_body = fake.requests[0].body
        raw = httpx.post(
            fake.url + "/v1/chat/completions",
            headers={"content-type": "application/json"},
            content=sdk_body,
        ).content
        # ...and the one our own request gets: identical (both ask for usage).
        req = rq.build(model="gpt-test", messages="hi")
        vr = build_request(req, base_url=fake.url + "/v1", api_key="x")
        assert httpx.post(vr.url, headers=vr.headers, content=vr.body).content == raw
        assert fake.errors == []
    scripted_calls = [(c.name, c.arguments) for c in script.tool_calls]
    # The SDK sees exactly what the script intended...
    assert text == script.text
    assert [(n, a) for _, n, a in calls] == scripted_calls
    assert usage == (script.input_tokens, script.usage_output_tokens)
    # ...and so does the translator, on the same bytes.
    out = translate_pieces("openai", [raw])
    assert_conformant(out)
    s = summarize(out)
    assert "".join(s.text.values()) == script.text
    assert [(c[1], c[2], c[3]) for c in s.tool_calls] == [(i, n, a) for i, n, a in calls]
    assert s.usage == [usage]
    assert s.errors == []


def test_fake_in_stream_error_reaches_sdk_and_translator() -> None:
    script = Script(text="Partial answer", error=("rate_limited", "slow down"))
    with FakeUpstream("openai", script) as fake:
        client = openai.OpenAI(base_url=fake.url + "/v1", api_key="x", max_retries=0)
        with pytest.raises(openai.APIError, match="slow down"):
            for _ in client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}], stream=True
            ):
                pass
        client.close()
        raw = httpx.post(
            fake.url + "/v1/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "x"}], "stream": True},
        ).content
    s = summarize(translate_pieces("openai", [raw]))
    assert s.text == {0: "Partial answer"} and s.errors == ["rate_limited"]


# --- Reverse stream side: ChunkEncoder output parsed by the real SDK ------------------


class _BodyServer:
    """A tiny HTTP server on 127.0.0.1 answering every POST with one fixed SSE body."""

    def __init__(self, body: bytes) -> None:
        payload = body

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length", "0")))
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> _BodyServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


def standard_stream() -> list[ev.Event]:
    w = Writer(model="demo", request_id="r1", created=1234)
    out = w.text("Hel") + w.text("lo \u00e9\u2028!") + w.text("thinking", 1, reasoning=True)
    out += w.stop(0, "end_turn") + w.stop(1, "end_turn")
    out += w.tool_call(id="call_a", name="f", arguments='{"x": 1}', index=2) + w.stop(2, "tool_use")
    out += w.tool_call(id="call_b", name="g", arguments="{}", index=3) + w.stop(3, "tool_use")
    return out + w.usage(10, 20) + w.end()


def encode_all(encoder: ChunkEncoder, events_: list[ev.Event]) -> bytes:
    return b"".join(encoder.encode(e) for e in events_)


def test_chunk_encoder_output_parses_in_the_sdk() -> None:
    encoder = ChunkEncoder(model="demo", id="chatcmpl-x", include_usage=True)
    body = encode_all(encoder, standard_stream())
    assert body.endswith(b"data: [DONE]\n\n")
    with _BodyServer(body) as server:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0)
        with client.chat.completions.stream(
            model="demo", messages=[{"role": "user", "content": "hi"}]
        ) as stream:
            final = stream.get_final_completion()
        chunks = list(
            client.chat.completions.create(
                model="demo", messages=[{"role": "user", "content": "hi"}], stream=True
            )
        )
        client.close()
    assert final.id == "chatcmpl-x" and final.created == 1234
    message = final.choices[0].message
    assert message.content == "Hello \u00e9\u2028!"
    assert [(c.id, c.function.name, c.function.arguments) for c in message.tool_calls or ()] == [
        ("call_a", "f", '{"x": 1}'),
        ("call_b", "g", "{}"),
    ]
    assert final.choices[0].finish_reason == "tool_calls"
    assert final.usage is not None
    assert (final.usage.prompt_tokens, final.usage.completion_tokens) == (10, 20)
    assert chunks[-1].choices == [] and chunks[-1].usage is not None


def test_chunk_encoder_error_becomes_an_sdk_error() -> None:
    w = Writer(model="demo", created=1)
    events_ = w.text("Hi") + w.fail("overloaded", "try later")
    body = encode_all(ChunkEncoder(model="demo"), events_)
    assert b'"code":"overloaded"' in body and body.endswith(b"data: [DONE]\n\n")
    with _BodyServer(body) as server:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0)
        with pytest.raises(openai.APIError, match="try later"):
            for _ in client.chat.completions.create(
                model="demo", messages=[{"role": "user", "content": "hi"}], stream=True
            ):
                pass
        client.close()


def test_chunk_encoder_round_trips_through_the_translator() -> None:
    original = standard_stream()
    body = encode_all(ChunkEncoder(model="demo", include_usage=True), original)
    back = summarize(translate_pieces("openai", [body], reasoning=True))
    assert back.text == {0: "Hello \u00e9\u2028!"}
    assert back.reasoning == {1: "thinking"}
    assert [(c[1], c[2], c[3]) for c in back.tool_calls] == [
        ("call_a", "f", {"x": 1}),
        ("call_b", "g", {}),
    ]
    assert back.usage == [(10, 20)] and back.errors == []


@pytest.mark.parametrize(
    ("stop", "finish"),
    [("end_turn", "stop"), ("max_tokens", "length"), ("content_filter", "content_filter")],
)
def test_chunk_encoder_finish_reasons(stop: str, finish: str) -> None:
    w = Writer(model="demo", created=1)
    body = encode_all(ChunkEncoder(model="demo"), w.text("x") + w.stop(0, stop) + w.end())
    frames = [json.loads(line[6:]) for line in body.decode().split("\n\n") if line[6:7] == "{"]
    assert frames[-1]["choices"][0]["finish_reason"] == finish
    assert "usage" not in frames[-1]  # include_usage=False: no usage key at all


def test_chunk_encoder_ignores_events_after_the_end() -> None:
    encoder = ChunkEncoder(model="demo", created=5)
    w = Writer(model="demo", created=5)
    assert encoder.encode(w.end()[-1]).endswith(b"data: [DONE]\n\n")
    assert encoder.encode(ev.Usage(v="1.0", seq=9, input_tokens=1, output_tokens=1)) == b""


# --- The hot path, framing limits, and the fake's faults through the translator -------


def test_hot_path_events_equal_what_the_writer_builds() -> None:
    pieces = ["Hel", "lo", " wor", "ld"]
    chunks = [{"choices": [{"index": 0, "delta": {"content": p}}]} for p in pieces]
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks)
    body += 'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
    w = Writer(model="test-model", request_id="req-1", created=0)
    expected: list[ev.Event] = []
    for p in pieces:
        expected += w.text(p, 0)
    raw_stop = extension(STOP, {RAW_STOP_REASON: "stop"})  # issue 18: the vendor's own value
    expected += w.add(raw_stop) + w.stop(0, "end_turn") + w.end()
    assert translate_pieces("openai", [body.encode()]) == expected


def test_an_event_over_the_size_limit_is_a_framing_error() -> None:
    class Small(Translator):
        max_event_bytes = 1024

    t = Small(model="m", created=0)
    ok = b'data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n'
    out = t.feed(ok) + t.feed(b'data: {"pad":"' + b"x" * 4096) + t.close()
    assert_conformant(out)
    s = summarize(out)
    assert s.text == {0: "hi"} and s.errors == ["internal_error"]
    err = next(e for e in out if isinstance(e, ev.ErrorEvent))
    assert "framing" in err.message


def read_through_fault(fault: Fault) -> bytes:
    """What a client received from the fake with ``fault``, up to where it broke."""
    received = b""
    with FakeUpstream("openai", SCRIPTS["text-and-usage"], fault=fault) as fake:
        vr = build_request(rq.build(model="m", messages="hi"), base_url=fake.url + "/v1")
        with httpx.Client(timeout=httpx.Timeout(10, read=0.5)) as client:
            try:
                with client.stream("POST", vr.url, headers=vr.headers, content=vr.body) as r:
                    for piece in r.iter_raw():
                        received += piece
            except (httpx.RemoteProtocolError, httpx.ReadTimeout):
                pass
    return received


@pytest.mark.parametrize(
    ("fault", "clean"),
    [
        (Fault(kind="cut", after_events=3), False),
        (Fault(kind="cut", after_events=3, graceful=True), False),
        (Fault(kind="bad_json", after_events=2), False),
        (Fault(kind="huge_event", size=9 << 20), False),
        (Fault(kind="stall_after_first_event", stall_s=30), False),
        (Fault(kind="split_bytes", split_every=3), True),
    ],
    ids=["cut", "cut-graceful", "bad-json", "huge-event", "stall", "split-bytes"],
)
def test_every_fault_still_gives_a_conformant_stream(fault: Fault, clean: bool) -> None:
    out = translate_pieces("openai", [read_through_fault(fault)])
    assert_conformant(out)
    s = summarize(out)
    if clean:
        assert "".join(s.text.values()) == SCRIPTS["text-and-usage"].text and s.errors == []
    else:
        assert s.errors == ["internal_error"]


def test_missing_recordings_skip_but_fail_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.translate import conftest

    monkeypatch.setattr(conftest, "FIXTURES_DIR", Path("/nonexistent/vendor-fixtures"))
    assert conftest.recordings("openai-chat") == []
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="not found"):
        conftest.require_fixtures()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true"):
        conftest.require_fixtures()


@pytest.mark.parametrize("vector", VECTORS, ids=[v["name"] for v in VECTORS])
def test_tool_deltas_only_add_deltas(vector: dict[str, Any]) -> None:
    body, options = vector_body(vector), vector.get("options", {})
    sent = assert_tool_deltas_only_add_deltas("openai", body, options)
    calls = [e for e in translate_pieces("openai", [body], **options) if isinstance(e, ev.ToolCall)]
    if vector["name"] in ("tool-call-fragments", "parallel-tool-calls-interleaved"):
        assert sent and set(sent) == {c.id for c in calls}  # streamed arguments: deltas


@pytest.mark.parametrize(
    "model",
    ["demo", 'a "quoted" model', "\x00tokenwire-text\x00", 'x","choices":[]'],
)
def test_chunk_encoder_text_frames_are_each_one_chunk_object(model: str) -> None:
    # The text frames come from a template built once per stream: whatever
    # the model name (even the template's own placeholder) and the text, each
    # frame is one chunk whose fields are the ones an OpenAI client reads.
    w = Writer(model=model, created=7)
    texts = ["Hello", ' "quoted" ', "line\nbreak", "\u00e9\u2028", "\\u0000", ""]
    events_ = w.text(texts[0])
    for text in texts[1:]:
        events_ += w.text(text)
    events_ += w.end()
    encoder = ChunkEncoder(model=model, id="chatcmpl-t")
    frames = [encoder.encode(e) for e in events_]
    deltas = [json.loads(f[len(b"data: ") : -2]) for f in frames[1 : 1 + len(texts)]]
    assert [d["choices"][0]["delta"] for d in deltas] == [{"content": t} for t in texts]
    for chunk in deltas:
        assert chunk["id"] == "chatcmpl-t" and chunk["model"] == model
        assert chunk["created"] == 7 and chunk["object"] == "chat.completion.chunk"
        assert chunk["choices"][0]["finish_reason"] is None and "usage" not in chunk


def test_chunk_encoder_without_stream_start_stamps_each_frame() -> None:
    # No stream.start seen: no template (created comes from the clock each time).
    encoder = ChunkEncoder(model="demo")
    delta = ev.ContentDelta(v="1.0", seq=1, index=0, role="assistant", delta=ev.Delta(text="hi"))
    body = encoder.encode(delta) + encoder.encode(delta)
    frames = [json.loads(f[len(b"data: ") :]) for f in body.split(b"\n\n") if f]
    assert frames[0]["choices"][0]["delta"] == {"role": "assistant", "content": None}
    assert [f["choices"][0]["delta"] for f in frames[1:]] == [{"content": "hi"}] * 2
    assert all(isinstance(f["created"], int) for f in frames)
