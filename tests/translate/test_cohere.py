"""Cohere v2 chat streaming <-> the standard: recordings, vectors, splits, the request
side, the fake upstream and the real cohere SDK against it (when it is installed)."""

from __future__ import annotations

import json
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
from tokenwire.testing import cohere as fake_cohere
from tokenwire.testing.upstream import (
    FakeUpstream,
    Fault,
    RecordedRequest,
    Script,
    ScriptedToolCall,
)
from tokenwire.translate import translator, vendor_request
from tokenwire.translate.cohere import (
    FINISH_ERRORS,
    FINISH_REASONS,
    Translator,
    build_request,
    error_code,
    http_error,
)

VENDOR = "cohere"
RECORDINGS_FOLDER = "cohere"
VECTORS_DIR = Path(__file__).resolve().parents[1] / "vectors" / "translate" / "cohere"


# --- Vectors ----------------------------------------------------------------------------


VECTORS = load_vectors(VECTORS_DIR)


def test_vectors_are_there() -> None:
    assert len(VECTORS) >= 20


@pytest.mark.parametrize("vector", VECTORS, ids=[v["name"] for v in VECTORS])
def test_vector(vector: dict[str, Any]) -> None:
    check_vector(VENDOR, vector)


# --- Recordings -------------------------------------------------------------------------

# file -> (answer text by block, tool calls (index, id, name, arguments), stops, usage
# (usage.tokens, not billed_units), errors).
Row = tuple[dict[int, str], list[tuple[int, str, str, Any]], dict[int, str], list[Any], list[str]]
SF = "San Francisco"
EXPECTED: dict[str, Row] = {
    "vercel-cohere-empty-tool-call.jsonl": (
        {}, [(0, "currentTime_y46ar19t5gvw", "currentTime", {})], {0: "tool_use"},
        [(1445, 43)], [],
    ),
    # The thinking block is dropped, so the answer takes block 0.
    "vercel-cohere-reasoning.jsonl": (
        {0: "The answer to 2 + 2 is 4."}, [], {0: "end_turn"}, [(1394, 54)], [],
    ),
    "vercel-cohere-text.jsonl": (
        {0: "The capital of France is Paris."}, [], {0: "end_turn"}, [(507, 10)], [],
    ),
    "vercel-cohere-tool-call.jsonl": (
        {},
        [(0, "weather_e8p4pn45zt0t", "weather", {"location": SF}),
         (1, "cityAttractions_pyxssbwnq9fq", "cityAttractions", {"city": SF})],
        {0: "tool_use", 1: "tool_use"}, [(1549, 95)], [],
    ),
}  # fmt: skip


def body_of(capture_body: CaptureBody, path: Path) -> bytes:
    # Cohere frames carry ``event: <type>`` lines (vendor-formats.md section 6).
    return capture_body(path, event_key="type")


@pytest.mark.fixtures
def test_recording(recording: Path, capture_body: CaptureBody) -> None:
    assert recording.name in EXPECTED, f"add a row for the new recording {recording.name}"
    text, calls, stops, usage, errors = EXPECTED[recording.name]
    out = translate_pieces(VENDOR, [body_of(capture_body, recording)])
    assert_conformant(out)
    s = summarize(out)
    assert s.text == text
    assert s.reasoning == {}
    assert s.tool_calls == calls
    assert s.stops == stops
    assert s.usage == usage
    assert s.errors == errors


@pytest.mark.fixtures
def test_recording_reasoning_carried_on_request(vendor_fixtures: Path) -> None:
    path = vendor_fixtures / "cohere" / "vercel-cohere-reasoning.jsonl"
    framed = "".join(f"data: {line}\n\n" for line in path.read_text().splitlines() if line)
    out = translate_pieces(VENDOR, [framed.encode()], reasoning=True)
    assert_conformant(out)
    s = summarize(out)
    assert s.reasoning == {
        0: "The user is asking for the sum of 2 and 2. Since this is a straightforward "
        "arithmetic problem, I don't need to use any tools. I can calculate the answer directly."
    }
    assert s.text == {1: "The answer to 2 + 2 is 4."}
    assert s.stops == {0: "end_turn", 1: "end_turn"}


@pytest.mark.fixtures
def test_recording_tool_plan_carried_on_request(vendor_fixtures: Path) -> None:
    path = vendor_fixtures / "cohere" / "vercel-cohere-tool-call.jsonl"
    framed = "".join(f"data: {line}\n\n" for line in path.read_text().splitlines() if line)
    s = summarize(translate_pieces(VENDOR, [framed.encode()], reasoning=True))
    assert s.reasoning == {
        0: "I will use the weather tool to find the weather in San Francisco and the "
        "cityAttractions tool to find attractions in San Francisco."
    }
    assert [c[0] for c in s.tool_calls] == [1, 2] and s.text == {}


@pytest.mark.fixtures
def test_recordings_pass_the_validator_with_reasoning(
    recording: Path, capture_body: CaptureBody
) -> None:
    out = translate_pieces(VENDOR, [body_of(capture_body, recording)], reasoning=True)
    assert_conformant(out)
    s = summarize(out)
    assert not set(s.text) & set(s.reasoning)


# --- Any split gives the same events; a truncated body is an error ------------------------


def clean_or_error(out: list[ev.Event], whole: list[ev.Event]) -> bool:
    """A cut body is the whole stream (cut after message-end) or an error."""
    return out == whole or bool(summarize(out).errors)


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
    body = body_of(capture_body, recording)
    whole = translate_pieces(VENDOR, [body], reasoning=True)
    cuts = data.draw(st.lists(st.integers(0, len(body)), max_size=30))
    assert translate_pieces(VENDOR, split(body, cuts), reasoning=True) == whole


@pytest.mark.fixtures
def test_byte_by_byte_recording_gives_the_same_events(
    recording: Path, capture_body: CaptureBody
) -> None:
    body = body_of(capture_body, recording)
    bytewise = (body[i : i + 1] for i in range(len(body)))
    assert translate_pieces(VENDOR, bytewise) == translate_pieces(VENDOR, [body])


@pytest.mark.fixtures
@SPLIT_SETTINGS
@given(data=st.data())
def test_any_prefix_of_a_recording_is_the_whole_or_an_error(
    recording: Path, capture_body: CaptureBody, data: st.DataObject
) -> None:
    body = body_of(capture_body, recording)
    whole = translate_pieces(VENDOR, [body])
    cut = data.draw(st.integers(0, len(body) - 1))
    out = translate_pieces(VENDOR, [body[:cut]])
    assert_conformant(out)
    assert clean_or_error(out, whole), f"cut at byte {cut} looked like a clean finish"


@given(st.binary(max_size=300))
@settings(max_examples=200, deadline=None)
def test_arbitrary_bytes_give_a_conformant_stream(body: bytes) -> None:
    assert_conformant(translate_pieces(VENDOR, [b"data: " + body + b"\n\n", body]))


# --- Stream side details -----------------------------------------------------------------


def frame(obj: dict[str, Any]) -> bytes:
    return b"event: %s\ndata: %s\n\n" % (obj["type"].encode(), json.dumps(obj).encode())


def message_end(reason: str, error: str | None = None) -> bytes:
    delta: dict[str, Any] = {"finish_reason": reason}
    if error is not None:
        delta["error"] = error
    return frame({"type": "message-end", "delta": delta})


TEXT = frame(
    {"type": "content-delta", "index": 0, "delta": {"message": {"content": {"text": "x"}}}}
)


@pytest.mark.parametrize(("reason", "stop"), sorted(FINISH_REASONS.items()))
def test_finish_reasons(reason: str, stop: str) -> None:
    s = summarize(translate_pieces(VENDOR, [TEXT + message_end(reason)]))
    assert s.stops == {0: stop} and s.errors == [] and s.usage == []


@pytest.mark.parametrize(("reason", "code"), sorted(FINISH_ERRORS.items()))
def test_finish_errors(reason: str, code: str) -> None:
    out = translate_pieces(VENDOR, [TEXT + message_end(reason)])
    assert_conformant(out)
    err = next(e for e in out if isinstance(e, ev.ErrorEvent))
    assert err.code == code and reason in err.message


def test_unknown_and_missing_finish_reason_are_end_turn() -> None:
    assert summarize(translate_pieces(VENDOR, [TEXT + message_end("NEW")])).stops == {0: "end_turn"}
    bare = frame({"type": "message-end"})
    assert summarize(translate_pieces(VENDOR, [TEXT + bare])).stops == {0: "end_turn"}


@pytest.mark.parametrize(
    ("reason", "text", "expected"),
    [
        ("ERROR", "Too many requests: rate limit", "rate_limited"),
        ("ERROR", "the model is overloaded", "overloaded"),
        ("ERROR", "prompt is too long for the context", "context_length_exceeded"),
        ("ERROR", "unsafe content", "content_filtered"),
        ("ERROR", "boom", "internal_error"),
        ("ERROR", None, "internal_error"),
        ("ERROR_TOXIC", "rate limit", "content_filtered"),
        ("TIMEOUT", "the model is overloaded", "overloaded"),
    ],
)
def test_error_code(reason: str, text: str | None, expected: str) -> None:
    assert error_code(reason, text) == expected


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (429, fake_cohere.error_body(429), "rate_limited"),
        (503, fake_cohere.error_body(503), "overloaded"),
        (529, b"", "overloaded"),
        (400, b'{"message": "too many tokens: the prompt is too long"}', "context_length_exceeded"),
        (400, fake_cohere.error_body(400), "internal_error"),
        (500, b"not json", "internal_error"),
        (404, b"{}", "internal_error"),
    ],
)
def test_http_error(status: int, body: bytes, expected: str) -> None:
    code, message = http_error(status, body)
    assert code == expected and message.startswith(f"upstream answered HTTP {status}")


def test_tool_delta_for_an_unknown_index_is_an_error() -> None:
    delta = {"message": {"tool_calls": {"function": {"arguments": "{}"}}}}
    body = frame({"type": "tool-call-delta", "index": 3, "delta": delta})
    out = translate_pieces(VENDOR, [body + message_end("TOOL_CALL")])
    assert_conformant(out)
    assert summarize(out).errors == ["internal_error"]


@pytest.mark.parametrize(
    "start",
    [
        {"type": "tool-call-start", "index": 0, "delta": {"message": {}}},
        {"type": "tool-call-start", "index": 0, "delta": {"message": {"tool_calls": {"id": "a"}}}},
    ],
)
def test_tool_start_without_a_call_or_name_is_an_error(start: dict[str, Any]) -> None:
    out = translate_pieces(VENDOR, [frame(start) + message_end("TOOL_CALL")])
    assert summarize(out).errors == ["internal_error"]


def test_tool_call_without_an_id_gets_one() -> None:
    fn = {"name": "f", "arguments": '{"a": 1}'}
    start = frame(
        {
            "type": "tool-call-start",
            "index": 2,
            "delta": {"message": {"tool_calls": {"function": fn}}},
        }
    )
    body = start + frame({"type": "tool-call-end", "index": 2}) + message_end("TOOL_CALL")
    assert summarize(translate_pieces(VENDOR, [body])).tool_calls == [(0, "call_2", "f", {"a": 1})]


def test_truncation_error_names_the_problem() -> None:
    out = translate_pieces(VENDOR, [TEXT])
    err = next(e for e in out if isinstance(e, ev.ErrorEvent))
    assert err.code == "internal_error" and "truncated" in err.message


def test_feed_after_end_and_double_close_are_harmless() -> None:
    t = translator(VENDOR, model="m", created=0)
    out = t.feed(message_end("COMPLETE"))
    assert t.done and isinstance(out[-1], ev.StreamEnd)
    assert t.feed(TEXT) == [] and t.close() == []


def test_translator_registry_and_name() -> None:
    t = translator(VENDOR, model="m", request_id="r9", reasoning=True)
    assert isinstance(t, Translator) and t.name == "cohere" and t.reasoning


# --- Request side --------------------------------------------------------------------------

PNG = "iVBORw0KGgo="


def full_request(**extensions: Any) -> rq.Request:
    return rq.build(
        model="command-a",
        messages=[
            {"role": "system", "content": "Be brief."},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is in this?"},
                    {"type": "image", "media_type": "image/png", "data": PNG},
                ],
            },
            {
                "role": "assistant",
                "content": "Checking.",
                "tool_calls": [
                    {"id": "call_1", "name": "get_weather", "arguments": '{"city":"Oslo"}'}
                ],
            },
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_2", "name": "get_time", "arguments": "{}"}]},
            {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": 3}'},
            {"role": "tool", "tool_call_id": "call_2",
             "content": [{"type": "text", "text": "12:00"}]},
            {"role": "user", "content": [{"type": "text", "text": "Thanks"}]},
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
    )  # fmt: skip


def test_build_request_maps_everything() -> None:
    vr = build_request(
        full_request(), base_url="https://api.cohere.com/", api_key="co-key",
        upstream_model="command-r-plus", headers={"X-Trace": "t1"},
    )  # fmt: skip
    assert vr.method == "POST"
    assert vr.url == "https://api.cohere.com/v2/chat"
    assert vr.headers["authorization"] == "Bearer co-key"
    assert vr.headers["content-type"] == "application/json"
    assert vr.headers["accept"] == "text/event-stream"
    assert vr.headers["x-trace"] == "t1"
    body = json.loads(vr.body)
    assert body["model"] == "command-r-plus" and body["stream"] is True
    assert (body["max_tokens"], body["temperature"], body["p"]) == (100, 0.5, 0.9)
    assert body["stop_sequences"] == ["END"]
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
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is in this?"},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
            ],
        },
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'},
                }
            ],
        },
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "call_2", "type": "function",
                 "function": {"name": "get_time", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": 3}'},
        {"role": "tool", "tool_call_id": "call_2", "content": "12:00"},
        {"role": "user", "content": "Thanks"},
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("base", "url"),
    [("http://h", "http://h/v2/chat"), ("http://h/v2/", "http://h/v2/chat")],
)
def test_build_request_url(base: str, url: str) -> None:
    assert build_request(rq.build(model="m", messages="hi"), base_url=base).url == url


def test_build_request_minimal_and_registry() -> None:
    vr = vendor_request(VENDOR, rq.build(model="m", messages="hi"), base_url="http://127.0.0.1:1")
    assert json.loads(vr.body) == {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
    }
    assert "authorization" not in vr.headers


def test_extension_is_deep_merged_but_cannot_stop_streaming() -> None:
    req = full_request(
        **{
            "vendor:cohere": {
                "stream": False,
                "thinking": {"type": "enabled", "token_budget": 100},
                "temperature": 1.0,
            },
            "vendor:other": {"seed": 9},
        }
    )
    body = json.loads(build_request(req, base_url="http://x").body)
    assert body["stream"] is True and "seed" not in body
    assert body["thinking"] == {"type": "enabled", "token_budget": 100}
    assert body["temperature"] == 1.0


def test_extension_must_be_an_object() -> None:
    req = rq.build(model="m", messages="hi", extensions={"vendor:cohere": "x"})
    with pytest.raises(InvalidRequest) as info:
        build_request(req, base_url="http://x")
    assert info.value.path == 'extensions["vendor:cohere"]'


@pytest.mark.parametrize(
    ("part", "role"),
    [
        ({"type": "audio", "media_type": "audio/wav", "data": "AA=="}, "user"),
        ({"type": "document", "media_type": "application/pdf", "data": "AA=="}, "user"),
        ({"type": "image", "media_type": "image/png", "data": PNG}, "system"),
    ],
)
def test_build_request_refuses_parts_cohere_cannot_take(part: dict[str, Any], role: str) -> None:
    req = rq.build(model="m", messages=[{"role": role, "content": [part]}])
    with pytest.raises(InvalidRequest) as info:
        build_request(req, base_url="http://x")
    assert info.value.path == "messages[0].content[0]"


# --- The fake upstream's rendering ---------------------------------------------------------

NO_REQUEST = RecordedRequest(method="POST", path="/v2/chat", headers={}, body=b"{}")


def test_render_frames_and_fragments() -> None:
    args = {"location": "San Francisco", "n": [1, 2]}
    script = Script(
        text="One two", tool_calls=[ScriptedToolCall("f", args), ScriptedToolCall("g", {})]
    )
    frames = fake_cohere.render(script, model="command-a", request=NO_REQUEST)
    kinds = [json.loads(f.split(b"data: ", 1)[1])["type"] for f in frames]
    assert all(f.startswith(f"event: {k}\n".encode()) for f, k in zip(frames, kinds, strict=True))
    assert kinds[:5] == [
        "message-start",
        "content-start",
        "content-delta",
        "content-delta",
        "content-end",
    ]
    assert kinds[-1] == "message-end"
    # The no-argument call has a start and an end but no delta, as Cohere sends it.
    assert kinds[-3:-1] == ["tool-call-start", "tool-call-end"]
    assert fake_cohere.argument_fragments(args)[:4] == ['{"', "location", '":', ' "']
    assert "".join(fake_cohere.argument_fragments(args)) == json.dumps(args)
    assert fake_cohere.argument_fragments({}) == []


@pytest.mark.parametrize(("stop", "reason"), sorted(fake_cohere.FINISH_REASONS.items()))
def test_render_stop_reasons(stop: str, reason: str) -> None:
    script = Script(text="Hi", stop_reason=stop)
    body = b"".join(fake_cohere.render(script, model="m", request=NO_REQUEST))
    assert f'"finish_reason":"{reason}"'.encode() in body
    out = translate_pieces(VENDOR, [body])
    assert_conformant(out)
    s = summarize(out)
    # content_filter has no Cohere stop reason: ERROR_TOXIC reads back as an error.
    assert (s.stops, s.errors) == (
        ({}, ["content_filtered"]) if stop == "content_filter" else ({0: stop}, [])
    )


@pytest.mark.parametrize(
    "code",
    ["rate_limited", "overloaded", "context_length_exceeded", "content_filtered", "internal_error"],
)
def test_render_errors_round_trip(code: str) -> None:
    body = b"".join(fake_cohere.render(Script(error=(code, "boom")), model="m", request=NO_REQUEST))
    out = translate_pieces(VENDOR, [body])
    assert_conformant(out)
    assert summarize(out).errors == [code]


def test_check_request_and_error_body() -> None:
    good = b'{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}'
    assert fake_cohere.check_request(RecordedRequest("POST", "/v2/chat", {}, good)) is None
    for path, body in [
        ("/v1/chat", good),
        ("/v2/chat", b"nope"),
        ("/v2/chat", b"[]"),
        ("/v2/chat", b'{"messages":[{"role":"user","content":"hi"}],"stream":true}'),
        ("/v2/chat", b'{"model":"m","messages":[],"stream":true}'),
        ("/v2/chat", b'{"model":"m","messages":[{"role":"user","content":"hi"}]}'),
    ]:
        assert fake_cohere.check_request(RecordedRequest("POST", path, {}, body)) is not None
    assert set(json.loads(fake_cohere.error_body(429))) == {"id", "message"}


# --- Fidelity: the real cohere SDK against the fake; our translator agrees -----------------

SCRIPTS = {
    "text": Script(text="Hello from the fake Cohere upstream, über ✓", input_tokens=11),
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
        tool_calls=[ScriptedToolCall("search", {"q": 'a "quoted" term\n'}, id="search_7")],
    ),
}


def fetch_raw(url: str) -> bytes:
    vr = build_request(rq.build(model="command-a", messages="hi"), base_url=url, api_key="x")
    return httpx.post(vr.url, headers=vr.headers, content=vr.body).content


@pytest.mark.parametrize("name", list(SCRIPTS))
def test_sdk_and_translator_agree_on_the_fake(name: str) -> None:
    cohere = pytest.importorskip("cohere", reason="the cohere SDK is not installed")
    script = SCRIPTS[name]
    with FakeUpstream("cohere", script) as fake:
        http = httpx.Client()
        client = cohere.ClientV2(api_key="x", base_url=fake.url, httpx_client=http)
        text = ""
        calls: dict[int, list[str]] = {}
        usage = (0, 0)
        finish = ""
        for event in client.chat_stream(
            model="command-a", messages=[{"role": "user", "content": "hi"}]
        ):
            if event.type == "content-delta":
                text += event.delta.message.content.text
            elif event.type == "tool-call-start":
                call = event.delta.message.tool_calls
                calls[event.index] = [call.id, call.function.name, call.function.arguments or ""]
            elif event.type == "tool-call-delta":
                calls[event.index][2] += event.delta.message.tool_calls.function.arguments
            elif event.type == "message-end":
                tokens = event.delta.usage.tokens
                usage = (int(tokens.input_tokens), int(tokens.output_tokens))
                finish = event.delta.finish_reason
        http.close()
        raw = fetch_raw(fake.url)
        assert fake.errors == []
        assert fake.requests[0].path == "/v2/chat"
    parsed = [(i, n, json.loads(a or "{}")) for i, n, a in (calls[k] for k in sorted(calls))]
    # The SDK sees exactly what the script intended...
    assert text == script.text
    assert [(n, a) for _, n, a in parsed] == [(c.name, c.arguments) for c in script.tool_calls]
    assert usage == (script.input_tokens, script.usage_output_tokens)
    assert finish == ("TOOL_CALL" if script.tool_calls else "COMPLETE")
    # ...and so does the translator, on the same bytes.
    out = translate_pieces(VENDOR, [raw])
    assert_conformant(out)
    s = summarize(out)
    assert "".join(s.text.values()) == script.text
    assert [(c[1], c[2], c[3]) for c in s.tool_calls] == parsed
    assert s.usage == [usage]
    assert s.errors == []


def test_fake_in_stream_error_reaches_the_translator() -> None:
    script = Script(text="Partial answer", error=("overloaded", "busy"))
    with FakeUpstream("cohere", script) as fake:
        raw = fetch_raw(fake.url)
    s = summarize(translate_pieces(VENDOR, [raw]))
    assert s.text == {0: "Partial answer"} and s.errors == ["overloaded"]


def test_fake_cut_and_status_faults_reach_the_translator() -> None:
    fault = Fault(kind="cut", after_events=4, graceful=True)
    with FakeUpstream("cohere", Script(text="a b c d"), fault=fault) as fake:
        raw = fetch_raw(fake.url)
    out = translate_pieces(VENDOR, [raw])
    assert_conformant(out)
    s = summarize(out)
    assert s.text == {0: "a b"} and s.errors == ["internal_error"]
    with FakeUpstream("cohere", fault=Fault(kind="status", status=429)) as fake:
        vr = build_request(rq.build(model="m", messages="hi"), base_url=fake.url)
        answer = httpx.post(vr.url, headers=vr.headers, content=vr.body)
    assert answer.status_code == 429
    assert http_error(429, answer.content)[0] == "rate_limited"


def test_a_citation_is_attached_to_the_text_block_it_cites() -> None:
    from tests.translate.conftest import translate_pieces
    from tests.translate.frame_vectors import vector_body, vector_options

    from tokenwire.translate import _extensions as x

    vector = next(v for v in VECTORS if v["name"] == "citations-attached")
    out = translate_pieces("cohere", [vector_body(vector)], **vector_options(vector))
    text_blocks = {e.index for e in out if isinstance(e, ev.ContentDelta)}
    cited = [b for b in (x.fields(e, x.BLOCK) for e in out) if b is not None]
    assert [b[x.CITATION] for b in cited] == [
        {"start": 0, "end": 5, "text": "Paris", "sources": []}
    ]
    assert {b["index"] for b in cited} <= text_blocks
    raw = [x.fields(e, x.STOP) for e in out if x.fields(e, x.STOP) is not None]
    assert [r[x.RAW_STOP_REASON] for r in raw] == ["COMPLETE"]


@pytest.mark.parametrize("reason", ["COMPLETE", "ERROR"])
def test_cached_tokens_are_the_cache_read_breakdown_on_every_exit(reason: str) -> None:
    from tokenwire.translate import _extensions as x

    end = {
        "type": "message-end",
        "delta": {
            "finish_reason": reason,
            "usage": {"tokens": {"input_tokens": 120, "output_tokens": 3}, "cached_tokens": 100},
        },
    }
    body = (
        b'event: content-delta\ndata: {"type":"content-delta","index":0,'
        b'"delta":{"message":{"content":{"text":"Hi"}}}}\n\n'
        b"event: message-end\ndata: " + json.dumps(end).encode() + b"\n\n"
    )
    out = translate_pieces("cohere", [body])
    assert_conformant(out)
    details = [x.fields(e, x.USAGE) for e in out if x.fields(e, x.USAGE) is not None]
    assert [d[x.CACHE_READ] for d in details] == [100]
    usage = [e for e in out if isinstance(e, ev.Usage)]
    assert [(u.input_tokens, u.output_tokens) for u in usage] == [(120, 3)]
    kinds = [e.type for e in out]
    first_end = min(i for i, k in enumerate(kinds) if k in ("error", "content.stop", "usage"))
    assert kinds.index(x.USAGE) < first_end  # before the stops or the error
