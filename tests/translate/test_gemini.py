"""Gemini ``streamGenerateContent?alt=sse`` <-> the standard: recordings, vectors, splits,
the request side, the fake upstream and the real google-genai SDK against it."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.translate.conftest import CaptureBody, assert_conformant, summarize, translate_pieces
from tests.translate.frame_vectors import check_vector, load_vectors, vector_body, vector_options

from tokenwire import events as ev
from tokenwire import request as rq
from tokenwire.errors import InvalidRequest
from tokenwire.testing import gemini as fake_gemini
from tokenwire.testing.upstream import (
    FakeUpstream,
    Fault,
    RecordedRequest,
    Script,
    ScriptedToolCall,
)
from tokenwire.translate import _extensions as x
from tokenwire.translate import translator, vendor_request
from tokenwire.translate.gemini import (
    FINISH_ERRORS,
    FINISH_REASONS,
    Translator,
    build_request,
    error_code,
    http_error,
)

VENDOR = "gemini"
RECORDINGS_FOLDER = "gemini"
VECTORS_DIR = Path(__file__).resolve().parents[1] / "vectors" / "translate" / "gemini"


# --- Vectors ----------------------------------------------------------------------------


VECTORS = load_vectors(VECTORS_DIR)


def test_vectors_are_there() -> None:
    assert len(VECTORS) >= 20


@pytest.mark.parametrize("vector", VECTORS, ids=[v["name"] for v in VECTORS])
def test_vector(vector: dict[str, Any]) -> None:
    check_vector(VENDOR, vector)


# --- Recordings -------------------------------------------------------------------------

# file -> (answer text by block (a prefix for long texts), tool calls (index, name,
# arguments), stops, usage, errors). Ids are call_req-1_<n>: generated, stable.
Row = tuple[dict[int, str], list[tuple[int, str, Any]], dict[int, str], list[Any], list[str]]
SF = {"location": "San Francisco"}
EXPECTED: dict[str, Row] = {
    # extensions 1.1: the block still ends with content.stop before the error.
    "raw-sse-gemini-2.5-flash-malformed-function-call.sse": (
        {}, [], {0: "end_turn"}, [(61, 0)], ["internal_error"],
    ),
    # The thought part is dropped; thoughtsTokenCount (59) counts as output.
    "raw-sse-gemini-2.5-flash-thought-max-tokens.sse": (
        {0: "We"}, [], {0: "max_tokens"}, [(29, 59)], [],
    ),
    "raw-sse-vertex-gemini-1.5-flash-tail-with-safety.sse": (
        {0: "\n* **Don't use real email addresses:**"}, [], {0: "end_turn"}, [(20, 239)], [],
    ),
    "vercel-google-reasoning.jsonl": (
        {0: 'There are **3** "r"s in strawberry.\n\nHere is the breakdown: st**r**awbe**rr**y.'},
        [], {0: "end_turn"}, [(9, 29 + 256)], [],
    ),
    "vercel-google-stream-no-args-tool-call.jsonl": (
        {},
        [(0, "read_theme", {}), (1, "read_screen", {"id": "A"}), (2, "read_screen", {"id": "B"}),
         (3, "read_screen", {"id": "C"})],
        {0: "tool_use", 1: "tool_use", 2: "tool_use", 3: "tool_use"}, [(249, 58 + 183)], [],
    ),
    "vercel-google-stream-tool-call-arguments.jsonl": (
        {}, [(0, "getWeather", {"location": "Boston"}), (1, "getWeather", SF)],
        {0: "tool_use", 1: "tool_use"}, [(26, 23 + 132)], [],
    ),
    "vercel-google-text.jsonl": (
        {0: 'There are **3** "r"s in strawberry.\n\nst**r**awbe**rr**y'}, [], {0: "end_turn"},
        [(9, 23 + 185)], [],
    ),
    "vercel-google-tool-call-gemini3.jsonl": (
        {}, [(0, "weather", SF)], {0: "tool_use"}, [(29, 15 + 804)], [],
    ),
    "vercel-google-tool-call.jsonl": (
        {}, [(0, "weather", SF)], {0: "tool_use"}, [(29, 15 + 45)], [],
    ),
    # A refused prompt is a refusal (content_filter on block 0), not an error.
    "vercel-issue-19758-prompt-block.jsonl": ({}, [], {0: "content_filter"}, [(9, 0)], []),
}  # fmt: skip


@pytest.mark.fixtures
def test_recording(recording: Path, capture_body: CaptureBody) -> None:
    assert recording.name in EXPECTED, f"add a row for the new recording {recording.name}"
    prefixes, calls, stops, usage, errors = EXPECTED[recording.name]
    out = translate_pieces(VENDOR, [capture_body(recording)])
    assert_conformant(out)
    s = summarize(out)
    assert s.text.keys() == prefixes.keys()
    for index, prefix in prefixes.items():
        assert s.text[index].startswith(prefix)
    assert s.reasoning == {}
    assert [(i, n, a) for i, _, n, a in s.tool_calls] == calls
    assert [c[1] for c in s.tool_calls] == [f"call_req-1_{n}" for n in range(len(calls))]
    assert s.stops == stops
    assert s.usage == usage  # the last running total, once: never a sum
    assert s.errors == errors


@pytest.mark.fixtures
def test_recording_thoughts_carried_on_request(vendor_fixtures: Path) -> None:
    body = (
        vendor_fixtures / "gemini" / "raw-sse-gemini-2.5-flash-thought-max-tokens.sse"
    ).read_bytes()
    out = translate_pieces(VENDOR, [body], reasoning=True)
    assert_conformant(out)
    s = summarize(out)
    assert s.reasoning[0].startswith("**Initiating the Descent**") and "x² + y²" in s.reasoning[0]
    assert s.text == {1: "We"}
    assert s.stops == {0: "max_tokens", 1: "max_tokens"}


@pytest.mark.fixtures
def test_recordings_pass_the_validator_with_reasoning(
    recording: Path, capture_body: CaptureBody
) -> None:
    out = translate_pieces(VENDOR, [capture_body(recording)], reasoning=True)
    assert_conformant(out)
    s = summarize(out)
    assert not set(s.text) & set(s.reasoning)


# --- Any split gives the same events; a truncated body is an error ------------------------


def clean_or_error(out: list[ev.Event], whole: list[ev.Event]) -> bool:
    """A cut body is an error, or it lost nothing but a later usage total.

    Gemini's end marker is the finishReason chunk; Vertex may still send a
    usage-only chunk after it, and a cut just before that one looks finished.
    """
    s, w = summarize(out), summarize(whole)
    return bool(s.errors) or s._replace(usage=[]) == w._replace(usage=[])


def split(body: bytes, cuts: list[int]) -> Iterator[bytes]:
    last = 0
    for cut in sorted(set(cuts)):
        yield body[last:cut]
        last = cut
    yield body[last:]


SPLIT_SETTINGS = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.mark.parametrize("vector", VECTORS, ids=[v["name"] for v in VECTORS])
@SPLIT_SETTINGS
@given(data=st.data())
def test_any_split_of_a_vector_gives_the_same_events(
    vector: dict[str, Any], data: st.DataObject
) -> None:
    body = vector_body(vector)
    options = vector_options(vector)
    whole = translate_pieces(VENDOR, [body], **options)
    cuts = data.draw(st.lists(st.integers(0, len(body)), max_size=12))
    assert translate_pieces(VENDOR, split(body, cuts), **options) == whole


@pytest.mark.parametrize("vector", VECTORS, ids=[v["name"] for v in VECTORS])
@SPLIT_SETTINGS
@given(data=st.data())
def test_any_prefix_of_a_vector_is_the_whole_or_an_error(
    vector: dict[str, Any], data: st.DataObject
) -> None:
    body = vector_body(vector)
    options = vector_options(vector)
    whole = translate_pieces(VENDOR, [body], **options)
    cut = data.draw(st.integers(0, len(body)))
    out = translate_pieces(VENDOR, [body[:cut]], **options)
    assert_conformant(out)
    assert clean_or_error(out, whole), f"cut at byte {cut} looked like a clean finish"


@pytest.mark.fixtures
@SPLIT_SETTINGS
@given(data=st.data())
def test_any_split_of_a_recording_gives_the_same_events(
    recording: Path, capture_body: CaptureBody, data: st.DataObject
) -> None:
    body = capture_body(recording)
    whole = translate_pieces(VENDOR, [body], reasoning=True)
    cuts = data.draw(st.lists(st.integers(0, len(body)), max_size=30))
    assert translate_pieces(VENDOR, split(body, cuts), reasoning=True) == whole


@pytest.mark.fixtures
def test_byte_by_byte_recording_gives_the_same_events(
    recording: Path, capture_body: CaptureBody
) -> None:
    body = capture_body(recording)
    bytewise = (body[i : i + 1] for i in range(len(body)))
    assert translate_pieces(VENDOR, bytewise) == translate_pieces(VENDOR, [body])


@pytest.mark.fixtures
@SPLIT_SETTINGS
@given(data=st.data())
def test_any_prefix_of_a_recording_is_the_whole_or_an_error(
    recording: Path, capture_body: CaptureBody, data: st.DataObject
) -> None:
    body = capture_body(recording)
    whole = translate_pieces(VENDOR, [body])
    cut = data.draw(st.integers(0, len(body) - 1))
    out = translate_pieces(VENDOR, [body[:cut]])
    assert_conformant(out)
    assert clean_or_error(out, whole), f"cut at byte {cut} looked like a clean finish"


@given(st.binary(max_size=300))
@settings(max_examples=200, deadline=None)
def test_arbitrary_bytes_give_a_conformant_stream(body: bytes) -> None:
    assert_conformant(translate_pieces(VENDOR, [b"data: " + body + b"\r\n\r\n", body]))


# --- Stream side details -----------------------------------------------------------------


def chunk(candidate: dict[str, Any], **extra: Any) -> bytes:
    return b"data: " + json.dumps({"candidates": [candidate], **extra}).encode() + b"\r\n\r\n"


@pytest.mark.parametrize(("reason", "stop"), sorted(FINISH_REASONS.items()))
def test_finish_reasons(reason: str, stop: str) -> None:
    body = chunk({"content": {"parts": [{"text": "x"}]}, "finishReason": reason})
    s = summarize(translate_pieces(VENDOR, [body]))
    assert s.stops == {0: stop} and s.errors == []


@pytest.mark.parametrize(("reason", "code"), sorted(FINISH_ERRORS.items()))
def test_finish_errors(reason: str, code: str) -> None:
    body = chunk({"finishReason": reason, "finishMessage": "bad call"})
    out = translate_pieces(VENDOR, [body])
    assert_conformant(out)
    err = next(e for e in out if isinstance(e, ev.ErrorEvent))
    assert (err.code, reason in err.message, "bad call" in err.message) == (code, True, True)


@pytest.mark.parametrize("reason", ["SOMETHING_NEW", "OTHER", "FINISH_REASON_UNSPECIFIED"])
def test_an_unnamed_finish_reason_is_never_a_clean_stop(reason: str) -> None:
    # The endpoint ended the answer for a reason the standard has no name for:
    # content_filter (the endpoint, not the model, stopped), the raw value beside it.
    other = chunk({"content": {"parts": [{"text": "x"}]}, "finishReason": reason})
    events = translate_pieces(VENDOR, [other])
    assert summarize(events).stops == {0: "content_filter"}
    raw = [e for e in events if e.type == "tokenwire.stop"]
    fields = x.fields(raw[0]) if raw else None
    assert fields is not None and fields[x.RAW_STOP_REASON] == reason


def test_stop_after_a_call_is_tool_use() -> None:
    call = {"functionCall": {"name": "f", "args": {"a": 1}}}
    body = chunk({"content": {"parts": [{"text": "Hi"}, call]}}) + chunk({"finishReason": "STOP"})
    assert summarize(translate_pieces(VENDOR, [body])).stops == {0: "tool_use", 1: "tool_use"}


def test_generated_ids_are_stable_and_unique() -> None:
    calls = [{"functionCall": {"name": "f"}}, {"functionCall": {"id": "call_1", "name": "g"}}]
    calls.append({"functionCall": {"id": "call_1", "name": "h"}})  # a duplicate vendor id
    body = chunk({"content": {"parts": calls}, "finishReason": "STOP"})
    first = summarize(translate_pieces(VENDOR, [body], request_id=None)).tool_calls
    again = summarize(translate_pieces(VENDOR, [body], request_id=None)).tool_calls
    # Without a request id, each stream's ids are its own: a client keeps the ids
    # of a whole conversation, and turn 2's first call must not be turn 1's.
    assert [c[1] for c in first][1] == "call_1" and len({c[1] for c in first}) == 3
    fresh = [c[1] for c in first if c[1] != "call_1"]
    assert not set(fresh) & {c[1] for c in again}
    assert all(re.fullmatch(r"call_[0-9a-f]{12}_[02]", i) for i in fresh)
    assert [c[1] for c in summarize(translate_pieces(VENDOR, [body])).tool_calls] == [
        "call_req-1_0", "call_1", "call_req-1_2",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        ("$.a.b", 1, {"a": {"b": 1}}),
        ("$['a b'][1]", "x", {"a b": [None, "x"]}),
        ('$["q"][0].r', True, {"q": [{"r": True}]}),
    ],
)
def test_partial_args_json_paths(path: str, value: Any, expected: dict[str, Any]) -> None:
    key = {str: "stringValue", int: "numberValue", bool: "boolValue"}[type(value)]
    body = chunk({"content": {"parts": [{"functionCall": {"name": "f", "willContinue": True}}]}})
    arg = {"jsonPath": path, key: value}
    part = {"functionCall": {"partialArgs": [arg], "willContinue": False}}
    body += chunk({"content": {"parts": [part]}, "finishReason": "STOP"})
    assert summarize(translate_pieces(VENDOR, [body])).tool_calls[0][3] == expected


@pytest.mark.parametrize(
    "parts",
    [
        [{"functionCall": {"partialArgs": [{"jsonPath": "$.a", "numberValue": 1}]}}],  # no name
        [{"functionCall": {"name": "f", "willContinue": True}}, {"text": "in the middle"}],
        [{"functionCall": {"name": "f", "partialArgs": [{"jsonPath": "a", "numberValue": 1}]}}],
        [{"functionCall": {"name": "f", "partialArgs": [{"jsonPath": "$.a[", "numberValue": 1}]}}],
        [{"functionCall": {"name": "f", "partialArgs": [{"jsonPath": "$", "numberValue": 1}]}}],
    ],
)
def test_broken_function_calls_are_errors(parts: list[dict[str, Any]]) -> None:
    out = translate_pieces(VENDOR, [chunk({"content": {"parts": parts}, "finishReason": "STOP"})])
    assert_conformant(out)
    assert summarize(out).errors == ["internal_error"]


def test_finish_inside_a_streamed_call_is_an_error() -> None:
    part = {"functionCall": {"name": "f", "willContinue": True}}
    out = translate_pieces(VENDOR, [chunk({"content": {"parts": [part]}, "finishReason": "STOP"})])
    assert summarize(out).errors == ["internal_error"]


def test_a_named_call_closes_the_streamed_one_before_it() -> None:
    parts = [
        {"functionCall": {"name": "f", "willContinue": True}},
        {
            "functionCall": {
                "partialArgs": [{"jsonPath": "$.a", "numberValue": 2}],
                "willContinue": True,
            }
        },
        {"functionCall": {"name": "g", "args": {"b": 1}}},
    ]
    out = translate_pieces(VENDOR, [chunk({"content": {"parts": parts}, "finishReason": "STOP"})])
    assert [(c[2], c[3]) for c in summarize(out).tool_calls] == [("f", {"a": 2}), ("g", {"b": 1})]


def test_truncation_error_names_the_problem() -> None:
    out = translate_pieces(VENDOR, [chunk({"content": {"parts": [{"text": "Hi"}]}})])
    err = next(e for e in out if isinstance(e, ev.ErrorEvent))
    assert err.code == "internal_error" and "truncated" in err.message


def test_feed_after_end_and_double_close_are_harmless() -> None:
    t = translator(VENDOR, model="m", created=0)
    out = t.feed(b'data: {"error": {"code": 500, "message": "x", "status": "INTERNAL"}}\r\n\r\n')
    assert t.done and isinstance(out[-1], ev.StreamEnd)
    assert t.feed(chunk({"finishReason": "STOP"})) == [] and t.close() == []


def test_translator_registry_and_name() -> None:
    t = translator(VENDOR, model="m", request_id="r9", reasoning=True)
    assert isinstance(t, Translator) and t.name == "gemini" and t.reasoning


@pytest.mark.parametrize(
    ("status", "code", "message", "expected"),
    [
        ("RESOURCE_EXHAUSTED", 429, "quota", "rate_limited"),
        ("UNAVAILABLE", 503, "overloaded", "overloaded"),
        ("DEADLINE_EXCEEDED", 504, "slow", "overloaded"),
        ("INVALID_ARGUMENT", 400, "The input token count (5) exceeds", "context_length_exceeded"),
        ("INVALID_ARGUMENT", 400, "Request contains an invalid argument.", "internal_error"),
        ("INTERNAL", 500, "oops", "internal_error"),
        (None, 429, "", "rate_limited"),
        (None, None, "", "internal_error"),
    ],
)  # fmt: skip
def test_error_code(status: str | None, code: int | None, message: str, expected: str) -> None:
    assert error_code(status, code, message) == expected


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (429, fake_gemini.error_body(429), "rate_limited"),
        (503, fake_gemini.error_body(503), "overloaded"),
        (500, fake_gemini.error_body(500), "internal_error"),
        (400, b'[{"error": {"code": 400, "message": "The input token count exceeds the limit", '
              b'"status": "INVALID_ARGUMENT"}}]', "context_length_exceeded"),
        (529, b"<html>busy</html>", "overloaded"),
        (404, b"{}", "internal_error"),
        (404, b"[]", "internal_error"),
    ],
)  # fmt: skip
def test_http_error(status: int, body: bytes, expected: str) -> None:
    code, message = http_error(status, body)
    assert code == expected and message.startswith(f"upstream answered HTTP {status}")


# --- Request side --------------------------------------------------------------------------

PNG, WAV, PDF = "iVBORw0KGgo=", "UklGRg==", "JVBERi0="


def full_request(**extensions: Any) -> rq.Request:
    return rq.build(
        model="gemini-2.5-flash",
        messages=[
            {"role": "system", "content": "Be brief."},
            {"role": "system", "content": [{"type": "text", "text": "Use metric."}]},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is in these?"},
                    {"type": "image", "media_type": "image/png", "data": PNG},
                    {"type": "audio", "media_type": "audio/wav", "data": WAV},
                    {"type": "document", "media_type": "application/pdf", "data": PDF},
                ],
            },
            {
                "role": "assistant",
                "content": "Checking.",
                "tool_calls": [
                    {"id": "call_1", "name": "get_weather", "arguments": '{"city":"Oslo"}'},
                    {"id": "call_2", "name": "get_time", "arguments": ""},
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": 3}'},
            {"role": "tool", "tool_call_id": "call_2", "content": "12:00"},
            {"role": "user", "content": "Thanks"},
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
        full_request(), base_url="https://generativelanguage.googleapis.com/", api_key="g-key",
        upstream_model="models/gemini-2.5-pro", headers={"X-Trace": "t1"},
    )  # fmt: skip
    assert vr.method == "POST"
    assert vr.url == (
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-pro"
        ":streamGenerateContent?alt=sse"
    )
    assert vr.headers["x-goog-api-key"] == "g-key"
    assert vr.headers["content-type"] == "application/json"
    assert vr.headers["accept"] == "text/event-stream"
    assert vr.headers["x-trace"] == "t1"
    body = json.loads(vr.body)
    assert body["systemInstruction"] == {"parts": [{"text": "Be brief."}, {"text": "Use metric."}]}
    assert body["generationConfig"] == {
        "maxOutputTokens": 100, "temperature": 0.5, "topP": 0.9, "stopSequences": ["END"],
    }  # fmt: skip
    assert body["tools"] == [
        {
            "functionDeclarations": [
                {
                    "name": "get_weather",
                    "description": "Weather for a city",
                    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
                }
            ]
        }
    ]
    user, model, results, thanks = body["contents"]
    assert user == {
        "role": "user",
        "parts": [
            {"text": "What is in these?"},
            {"inlineData": {"mimeType": "image/png", "data": PNG}},
            {"inlineData": {"mimeType": "audio/wav", "data": WAV}},
            {"inlineData": {"mimeType": "application/pdf", "data": PDF}},
        ],
    }
    assert model == {
        "role": "model",
        "parts": [
            {"text": "Checking."},
            {"functionCall": {"name": "get_weather", "args": {"city": "Oslo"}}},
            {"functionCall": {"name": "get_time", "args": {}}},
        ],
    }
    # Parallel results go back in one turn, named after the matching calls.
    assert results == {
        "role": "user",
        "parts": [
            {"functionResponse": {"name": "get_weather", "response": {"temp": 3}}},
            {"functionResponse": {"name": "get_time", "response": {"result": "12:00"}}},
        ],
    }
    assert thanks == {"role": "user", "parts": [{"text": "Thanks"}]}


@pytest.mark.parametrize(
    ("base", "url"),
    [
        ("http://h", "http://h/v1beta/models/m:streamGenerateContent?alt=sse"),
        ("http://h/v1beta", "http://h/v1beta/models/m:streamGenerateContent?alt=sse"),
        ("http://h/v1/", "http://h/v1/models/m:streamGenerateContent?alt=sse"),
    ],
)
def test_build_request_url(base: str, url: str) -> None:
    assert build_request(rq.build(model="m", messages="hi"), base_url=base).url == url


def test_build_request_minimal_and_registry() -> None:
    vr = vendor_request(VENDOR, rq.build(model="m", messages="hi"), base_url="http://127.0.0.1:1")
    assert json.loads(vr.body) == {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    assert "x-goog-api-key" not in vr.headers


def test_extensions_are_deep_merged_in_order() -> None:
    req = full_request(
        **{
            "vendor:google": {"generationConfig": {"topK": 3, "temperature": 1.0}, "a": 1},
            "vendor:gemini": {
                "generationConfig": {"thinkingConfig": {"includeThoughts": True}},
                "a": 2,
                "safetySettings": [],
            },
            "vendor:other": {"a": 9},
        }
    )
    body = json.loads(build_request(req, base_url="http://x").body)
    assert body["generationConfig"] == {
        "maxOutputTokens": 100, "temperature": 1.0, "topP": 0.9, "stopSequences": ["END"],
        "topK": 3, "thinkingConfig": {"includeThoughts": True},
    }  # fmt: skip
    assert body["a"] == 2 and body["safetySettings"] == []


@pytest.mark.parametrize(
    ("messages", "path"),
    [
        ([{"role": "tool", "tool_call_id": "nope", "content": "x"}], "messages[0].tool_call_id"),
        (
            [
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": "c", "name": "f", "arguments": "[1]"}],
                }
            ],
            "messages[0].tool_calls[0].arguments",
        ),
        (
            [
                {
                    "role": "system",
                    "content": [{"type": "image", "media_type": "image/png", "data": PNG}],
                }
            ],
            "messages[0].content",
        ),
    ],
)
def test_build_request_names_the_path(messages: list[dict[str, Any]], path: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        build_request(rq.build(model="m", messages=messages), base_url="http://x")
    assert info.value.path == path


def test_extension_must_be_an_object() -> None:
    req = rq.build(model="m", messages="hi", extensions={"vendor:gemini": [1]})
    with pytest.raises(InvalidRequest) as info:
        build_request(req, base_url="http://x")
    assert info.value.path == 'extensions["vendor:gemini"]'


# --- The fake upstream's rendering ---------------------------------------------------------

NO_REQUEST = RecordedRequest(
    method="POST", path="/v1beta/models/m:streamGenerateContent?alt=sse", headers={}, body=b"{}"
)


def test_render_is_crlf_framed_with_running_usage() -> None:
    script = Script(
        text="One two three", tool_calls=[ScriptedToolCall("f", {"a": 1})], output_tokens=9
    )
    frames = fake_gemini.render(script, model="gemini-x", request=NO_REQUEST)
    assert all(f.startswith(b"data: {") and f.endswith(b"}\r\n\r\n") for f in frames)
    assert all(b"\n" not in f[:-4].replace(b"\r\n", b"") for f in frames)
    chunks = [json.loads(f[len(b"data: ") :]) for f in frames]
    assert b'"candidates": [' in frames[0]  # Gemini's own ": " spacing
    running = [c["usageMetadata"]["candidatesTokenCount"] for c in chunks]
    assert running == sorted(running) and running[-1] == 9  # a running total, not increments
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP"
    calls = [
        p["functionCall"]
        for c in chunks
        for p in c["candidates"][0].get("content", {}).get("parts", [])
        if "functionCall" in p
    ]
    assert calls == [{"name": "f", "args": {"a": 1}}]  # whole, no id


@pytest.mark.parametrize(("stop", "reason"), sorted(fake_gemini.FINISH_REASONS.items()))
def test_render_stop_reasons_round_trip(stop: str, reason: str) -> None:
    script = Script(
        text="Hi",
        stop_reason=stop,
        tool_calls=[ScriptedToolCall("f", {})] if stop == "tool_use" else [],
    )
    body = b"".join(fake_gemini.render(script, model="m", request=NO_REQUEST))
    assert f'"finishReason": "{reason}"'.encode() in body
    out = translate_pieces(VENDOR, [body])
    assert_conformant(out)
    assert summarize(out).stops[0] == stop


@pytest.mark.parametrize(
    "code", ["rate_limited", "overloaded", "context_length_exceeded", "internal_error"]
)
def test_render_errors_round_trip(code: str) -> None:
    body = b"".join(fake_gemini.render(Script(error=(code, "boom")), model="m", request=NO_REQUEST))
    out = translate_pieces(VENDOR, [body])
    assert_conformant(out)
    assert summarize(out).errors == [code]


def test_render_content_filtered_is_a_prompt_block_read_as_a_refusal() -> None:
    script = Script(error=("content_filtered", "boom"))
    body = b"".join(fake_gemini.render(script, model="m", request=NO_REQUEST))
    out = translate_pieces(VENDOR, [body])
    assert_conformant(out)
    s = summarize(out)
    assert (s.errors, s.stops) == ([], {0: "content_filter"})


def test_check_request_and_error_body() -> None:
    good = RecordedRequest(
        method="POST",
        path="/v1beta/models/m:streamGenerateContent?alt=sse",
        headers={},
        body=b'{"contents":[{"parts":[{"text":"hi"}]}]}',
    )
    assert fake_gemini.check_request(good) is None
    for path, body in [
        ("/v1beta/models/m:streamGenerateContent", b"{}"),
        ("/v1beta/models/m:generateContent?alt=sse", b"{}"),
        ("/v1beta/models/m:streamGenerateContent?alt=sse", b"nope"),
        ("/v1beta/models/m:streamGenerateContent?alt=sse", b"[]"),
        ("/v1beta/models/m:streamGenerateContent?alt=sse", b'{"contents": []}'),
    ]:
        bad = RecordedRequest(method="POST", path=path, headers={}, body=body)
        assert fake_gemini.check_request(bad) is not None
    err = json.loads(fake_gemini.error_body(429))
    assert err == {
        "error": {"code": 429, "message": err["error"]["message"], "status": "RESOURCE_EXHAUSTED"}
    }
    assert b"\n  " in fake_gemini.error_body(500)  # pretty-printed, as Google sends it


# --- Fidelity: the real google-genai SDK against the fake; our translator agrees -------------

SCRIPTS = {
    "text": Script(text="Hello from the fake Gemini upstream, über ✓", input_tokens=11),
    "parallel-tools": Script(
        text="",
        tool_calls=[
            ScriptedToolCall("get_weather", {"city": "Vienna", "days": [1, 2], "metric": True}),
            ScriptedToolCall("get_time", {}),
        ],
        input_tokens=30,
        output_tokens=17,
    ),
    "text-then-tool": Script(
        text="Let me look that up.",
        tool_calls=[ScriptedToolCall("search", {"q": 'a "quoted" term\n'}, id="fc_7")],
    ),
}


def sdk_read(url: str) -> tuple[str, list[tuple[str, dict[str, Any]]], tuple[int, int], str]:
    from google import genai
    from google.genai import types

    client = genai.Client(api_key="x", http_options=types.HttpOptions(base_url=url))
    text = ""
    calls: list[tuple[str, dict[str, Any]]] = []
    usage = (0, 0)
    finish = ""
    for response in client.models.generate_content_stream(model="gemini-test", contents="hi"):
        for candidate in response.candidates or ():
            for part in (candidate.content.parts if candidate.content else None) or ():
                text += part.text or ""
                if part.function_call is not None:
                    calls.append(
                        (part.function_call.name or "", dict(part.function_call.args or {}))
                    )
            if candidate.finish_reason is not None:
                finish = str(candidate.finish_reason.value)
        if response.usage_metadata is not None:
            meta = response.usage_metadata
            usage = (meta.prompt_token_count or 0, meta.candidates_token_count or 0)
    client.close()
    return text, calls, usage, finish


@pytest.mark.parametrize("name", list(SCRIPTS))
def test_sdk_and_translator_agree_on_the_fake(name: str) -> None:
    script = SCRIPTS[name]
    with FakeUpstream("gemini", script) as fake:
        text, calls, usage, finish = sdk_read(fake.url)
        req = rq.build(model="gemini-test", messages="hi")
        vr = build_request(req, base_url=fake.url, api_key="x")
        raw = httpx.post(vr.url, headers=vr.headers, content=vr.body).content
        assert fake.errors == []
        # At whichever API version the SDK calls by default.
        method = "/models/gemini-test:streamGenerateContent?alt=sse"
        assert fake.requests[0].path in {f"/{v}{method}" for v in ("v1", "v1beta", "v1alpha")}
        assert fake.requests[0].headers["x-goog-api-key"] == "x"
    # The SDK sees exactly what the script intended...
    assert text == script.text
    assert calls == [(c.name, c.arguments) for c in script.tool_calls]
    assert usage == (script.input_tokens, script.usage_output_tokens)
    assert finish == "STOP"
    # ...and so does the translator, on the same bytes.
    out = translate_pieces(VENDOR, [raw])
    assert_conformant(out)
    s = summarize(out)
    assert "".join(s.text.values()) == script.text
    assert [(c[2], c[3]) for c in s.tool_calls] == calls
    assert [c[1] for c in s.tool_calls] == [
        c.id or f"call_req-1_{n}" for n, c in enumerate(script.tool_calls)
    ]
    assert s.usage == [usage]
    assert s.errors == []
    assert set(s.stops.values()) == {script.final_stop_reason}


def test_fake_in_stream_error_reaches_sdk_and_translator() -> None:
    from google import genai
    from google.genai import errors, types

    script = Script(text="Partial answer", error=("rate_limited", "slow down"))
    with FakeUpstream("gemini", script) as fake:
        client = genai.Client(api_key="x", http_options=types.HttpOptions(base_url=fake.url))
        with pytest.raises(errors.APIError, match="slow down"):
            for _ in client.models.generate_content_stream(model="m", contents="hi"):
                pass
        client.close()
        vr = build_request(rq.build(model="m", messages="hi"), base_url=fake.url)
        raw = httpx.post(vr.url, headers=vr.headers, content=vr.body).content
    s = summarize(translate_pieces(VENDOR, [raw]))
    assert s.text == {0: "Partial answer"} and s.errors == ["rate_limited"]


def test_fake_cut_and_status_faults_reach_the_translator() -> None:
    req = rq.build(model="m", messages="hi")
    with FakeUpstream(
        "gemini", Script(text="a b c d"), fault=Fault(kind="cut", after_events=2, graceful=True)
    ) as fake:
        vr = build_request(req, base_url=fake.url)
        raw = httpx.post(vr.url, headers=vr.headers, content=vr.body).content
    out = translate_pieces(VENDOR, [raw])
    assert_conformant(out)
    s = summarize(out)
    assert s.text == {0: "a b"} and s.errors == ["internal_error"]
    with FakeUpstream("gemini", fault=Fault(kind="status", status=429)) as fake:
        vr = build_request(req, base_url=fake.url)
        answer = httpx.post(vr.url, headers=vr.headers, content=vr.body)
    assert answer.status_code == 429
    assert http_error(429, answer.content)[0] == "rate_limited"
