"""OpenAI Responses API streaming <-> the standard: recordings, vectors, splits, the
request side, the fake upstream and the real openai SDK against it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.translate.conftest import (
    assert_conformant,
    assert_tool_deltas_only_add_deltas,
    summarize,
    translate_pieces,
)
from tests.translate.frame_vectors import check_vector, load_vectors, vector_body, vector_options

from tokenwire import events as ev
from tokenwire import request as rq
from tokenwire.errors import InvalidRequest
from tokenwire.testing import openai_responses as fake_responses
from tokenwire.testing.upstream import (
    FakeUpstream,
    Fault,
    RecordedRequest,
    Script,
    ScriptedToolCall,
)
from tokenwire.translate import translator, vendor_request
from tokenwire.translate.openai_responses import (
    ERROR_CODES,
    INCOMPLETE_REASONS,
    Translator,
    build_request,
    error_code,
    http_error,
)

VENDOR = "openai-responses"
RECORDINGS_FOLDER = "openai-responses"
VECTORS_DIR = Path(__file__).resolve().parents[1] / "vectors" / "translate" / "openai-responses"


# --- Vectors ----------------------------------------------------------------------------


VECTORS = load_vectors(VECTORS_DIR)


def test_vectors_are_there() -> None:
    assert len(VECTORS) >= 20


@pytest.mark.parametrize("vector", VECTORS, ids=[v["name"] for v in VECTORS])
def test_vector(vector: dict[str, Any]) -> None:
    check_vector(VENDOR, vector)


# --- Recordings -------------------------------------------------------------------------


def body_of(path: Path) -> bytes:
    """The raw body: Responses frames are ``event: <type>`` + ``data: <json>``.

    The vercel chunk files lost the framing (SOURCES.md); the ``event:`` line
    is rebuilt from the JSON ``type``, and left out for a line that is not JSON
    (the parallel-wrapper recording has two such lines, kept as they are).
    """
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            out.append(f"event: {json.loads(line)['type']}\n")
        except json.JSONDecodeError:
            pass
        out.append(f"data: {line}\n\n")
    return "".join(out).encode()


COPILOT_TEXT = (
    "There are **3** letter **“r”**s in **“strawberry.”**\n\nBreakdown: **s t r a w b e r r y**"
)

# file -> (answer text by block (a prefix for long texts), tool calls (index, id, name,
# arguments), stops, usage, errors).
Row = tuple[dict[int, str], list[tuple[int, str, str, Any]], dict[int, str], list[Any], list[str]]
EXPECTED: dict[str, Row] = {
    "vercel-azure-text.1.jsonl": ({0: "Hello"}, [], {0: "end_turn"}, [(11, 11)], []),
    "vercel-azure-tool-call.1.jsonl": (
        {}, [(0, "call_H5DxLSFnsGhiROnUiDHmgyc8", "weather", {"location": "San Francisco"})],
        {0: "tool_use"}, [(45, 24)], [],
    ),
    # Item ids rotate on every event; the text still joins up (keyed by output_index).
    "vercel-github-copilot-id-rotation.1.jsonl": (
        {0: COPILOT_TEXT}, [], {0: "end_turn"}, [(19, 105)], [],
    ),
    "vercel-openai-error-null-code.1.jsonl": ({}, [], {}, [], ["internal_error"]),
    "vercel-openai-error.1.jsonl": ({}, [], {}, [], ["rate_limited"]),  # insufficient_quota
    # Four responses back to back: the first response.completed ends the stream.
    # Block 0 is the reasoning item: its encrypted content is kept (issue 18).
    "vercel-openai-reasoning-encrypted-content.1.jsonl": (
        {}, [(1, "call_AB6AaRZ1FYZB2RwS6A5vbdqn", "calculator", {"a": 12, "b": 7, "op": "add"})],
        {1: "tool_use"}, [(134, 28)], [],
    ),
    "vercel-openai-response-failed-only.1.jsonl": ({}, [], {}, [], ["rate_limited"]),
    # Its first and last frames are not valid JSON (missing a closing brace).
    "vercel-parallel-tool-call-wrapper.1.jsonl": ({}, [], {}, [], ["internal_error"]),
}  # fmt: skip


@pytest.mark.fixtures
def test_recording(recording: Path) -> None:
    assert recording.name in EXPECTED, f"add a row for the new recording {recording.name}"
    prefixes, calls, stops, usage, errors = EXPECTED[recording.name]
    out = translate_pieces(VENDOR, [body_of(recording)])
    assert_conformant(out)
    s = summarize(out)
    assert s.text.keys() == prefixes.keys()
    for index, prefix in prefixes.items():
        assert s.text[index].startswith(prefix)
    assert s.reasoning == {}
    assert s.tool_calls == calls
    assert s.stops == stops
    assert s.usage == usage
    assert s.errors == errors


@pytest.mark.fixtures
def test_recording_reasoning_carried_on_request(vendor_fixtures: Path) -> None:
    folder = vendor_fixtures / "openai-responses"
    out = translate_pieces(
        VENDOR, [body_of(folder / "vercel-github-copilot-id-rotation.1.jsonl")], reasoning=True
    )
    assert_conformant(out)
    s = summarize(out)
    assert s.reasoning == {0: "**Counting character occurrences**"}
    assert s.text[1].startswith(COPILOT_TEXT) and s.stops == {0: "end_turn", 1: "end_turn"}
    out = translate_pieces(
        VENDOR,
        [body_of(folder / "vercel-openai-reasoning-encrypted-content.1.jsonl")],
        reasoning=True,
    )
    s = summarize(out)
    assert s.reasoning[0].startswith("**Calculating step-by-step using calculator**")
    assert [c[0] for c in s.tool_calls] == [1]


@pytest.mark.fixtures
def test_recordings_pass_the_validator_with_reasoning(recording: Path) -> None:
    out = translate_pieces(VENDOR, [body_of(recording)], reasoning=True)
    assert_conformant(out)
    s = summarize(out)
    assert not set(s.text) & set(s.reasoning)


# --- Any split gives the same events; a truncated body is an error ------------------------


def clean_or_error(out: list[ev.Event], whole: list[ev.Event]) -> bool:
    """A cut body is the whole stream (cut after the terminal event) or an error."""
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
    recording: Path, data: st.DataObject
) -> None:
    body = body_of(recording)
    whole = translate_pieces(VENDOR, [body], reasoning=True)
    cuts = data.draw(st.lists(st.integers(0, len(body)), max_size=30))
    assert translate_pieces(VENDOR, split(body, cuts), reasoning=True) == whole


@pytest.mark.fixtures
def test_byte_by_byte_recording_gives_the_same_events(recording: Path) -> None:
    body = body_of(recording)
    bytewise = (body[i : i + 1] for i in range(len(body)))
    assert translate_pieces(VENDOR, bytewise) == translate_pieces(VENDOR, [body])


@pytest.mark.fixtures
@SPLIT_SETTINGS
@given(data=st.data())
def test_any_prefix_of_a_recording_is_the_whole_or_an_error(
    recording: Path, data: st.DataObject
) -> None:
    body = body_of(recording)
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


def frame(kind: str, **fields: Any) -> bytes:
    data = json.dumps({"type": kind, **fields})
    return f"event: {kind}\ndata: {data}\n\n".encode()


TEXT = frame("response.output_text.delta", output_index=0, content_index=0, delta="x")


@pytest.mark.parametrize(("reason", "stop"), sorted(INCOMPLETE_REASONS.items()))
def test_incomplete_reasons(reason: str, stop: str) -> None:
    end = frame("response.incomplete", response={"incomplete_details": {"reason": reason}})
    s = summarize(translate_pieces(VENDOR, [TEXT + end]))
    assert s.stops == {0: stop} and s.errors == [] and s.usage == []


def test_incomplete_without_a_known_reason_is_max_tokens() -> None:
    end = frame("response.incomplete", response={"incomplete_details": None})
    assert summarize(translate_pieces(VENDOR, [TEXT + end])).stops == {0: "max_tokens"}


@pytest.mark.parametrize(("code", "expected"), sorted(ERROR_CODES.items()))
def test_error_codes(code: str, expected: str) -> None:
    assert error_code(code) == expected
    assert error_code(None, code) == expected  # a null code falls back on the type
    out = translate_pieces(VENDOR, [TEXT + frame("error", code=code, message="m", param=None)])
    assert_conformant(out)
    assert summarize(out).errors == [expected]


def test_unknown_and_null_error_codes_are_internal_error() -> None:
    assert error_code(None) == error_code("weird") == error_code(None, "weird") == "internal_error"
    out = translate_pieces(VENDOR, [frame("response.failed", response={"error": None})])
    err = next(e for e in out if isinstance(e, ev.ErrorEvent))
    assert err.code == "internal_error" and "response failed" in err.message


def test_failed_carries_usage_when_given() -> None:
    failed = {"usage": {"input_tokens": 3, "output_tokens": 1}, "error": {"code": "server_error"}}
    s = summarize(translate_pieces(VENDOR, [TEXT + frame("response.failed", response=failed)]))
    assert s.usage == [(3, 1)] and s.errors == ["internal_error"]


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (429, fake_responses.error_body(429), "rate_limited"),
        (503, fake_responses.error_body(503), "overloaded"),
        (400, b'{"error": {"message": "too long", "type": "invalid_request_error", '
              b'"code": "context_length_exceeded"}}', "context_length_exceeded"),
        (429, b'{"error": {"message": "quota", "type": "insufficient_quota", "code": null}}',
         "rate_limited"),
        (401, fake_responses.error_body(401), "internal_error"),
        (529, b"busy", "overloaded"),
        (500, b"{}", "internal_error"),
    ],
)  # fmt: skip
def test_http_error(status: int, body: bytes, expected: str) -> None:
    code, message = http_error(status, body)
    assert code == expected and message.startswith(f"upstream answered HTTP {status}")


def test_call_without_a_name_is_an_error() -> None:
    body = frame("response.function_call_arguments.done", output_index=0, arguments="{}")
    out = translate_pieces(VENDOR, [body])
    assert_conformant(out)
    assert summarize(out).errors == ["internal_error"]


def test_call_arguments_that_are_not_an_object_are_an_error() -> None:
    item = {"type": "function_call", "call_id": "c", "name": "f", "arguments": ""}
    body = frame("response.output_item.added", output_index=0, item=item)
    body += frame("response.function_call_arguments.done", output_index=0, arguments="[1]")
    out = translate_pieces(VENDOR, [body + frame("response.completed", response={})])
    assert_conformant(out)
    assert summarize(out).errors == ["internal_error"] and summarize(out).tool_calls == []


def test_call_emitted_once_and_named_from_the_done_event() -> None:
    body = frame("response.function_call_arguments.delta", output_index=0, delta='{"a":1}')
    body += frame(
        "response.function_call_arguments.done", output_index=0, name="f", arguments='{"a":1}'
    )
    item = {"type": "function_call", "call_id": "c9", "name": "f", "arguments": '{"a":1}'}
    body += frame("response.output_item.done", output_index=0, item=item)
    s = summarize(translate_pieces(VENDOR, [body + frame("response.completed", response={})]))
    assert s.tool_calls == [(0, "call_0", "f", {"a": 1})] and s.stops == {0: "tool_use"}


def test_truncation_error_names_the_problem() -> None:
    out = translate_pieces(VENDOR, [TEXT])
    err = next(e for e in out if isinstance(e, ev.ErrorEvent))
    assert err.code == "internal_error" and "truncated" in err.message


def test_feed_after_end_and_double_close_are_harmless() -> None:
    t = translator(VENDOR, model="m", created=0)
    out = t.feed(frame("response.completed", response={}))
    assert t.done and isinstance(out[-1], ev.StreamEnd)
    assert t.feed(TEXT) == [] and t.close() == []


def test_translator_registry_and_name() -> None:
    t = translator(VENDOR, model="m", request_id="r9", reasoning=True)
    assert isinstance(t, Translator) and t.name == "openai-responses" and t.reasoning


# --- Request side --------------------------------------------------------------------------

PNG, PDF = "iVBORw0KGgo=", "JVBERi0="


def full_request(**extensions: Any) -> rq.Request:
    return rq.build(
        model="gpt-5",
        messages=[
            {"role": "system", "content": "Be brief."},
            {"role": "system", "content": [{"type": "text", "text": "Use metric."}]},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is in these?"},
                    {"type": "image", "media_type": "image/png", "data": PNG},
                    {"type": "document", "media_type": "application/pdf", "data": PDF},
                ],
            },
            {
                "role": "assistant",
                "content": "Checking.",
                "tool_calls": [
                    {"id": "call_1", "name": "get_weather", "arguments": '{"city":"Oslo"}'},
                    {"id": "call_2", "name": "get_time", "arguments": "{}"},
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
        full_request(), base_url="https://api.openai.com/v1/", api_key="sk-test",
        upstream_model="gpt-5-mini", headers={"X-Trace": "t1"},
    )  # fmt: skip
    assert vr.method == "POST"
    assert vr.url == "https://api.openai.com/v1/responses"
    assert vr.headers["authorization"] == "Bearer sk-test"
    assert vr.headers["content-type"] == "application/json"
    assert vr.headers["accept"] == "text/event-stream"
    assert vr.headers["x-trace"] == "t1"
    body = json.loads(vr.body)
    assert body["model"] == "gpt-5-mini" and body["stream"] is True
    assert body["instructions"] == "Be brief.\n\nUse metric."
    assert (body["max_output_tokens"], body["temperature"], body["top_p"]) == (100, 0.5, 0.9)
    assert "stop" not in body and "stop_sequences" not in body  # no such Responses parameter
    assert body["tools"] == [
        {
            "type": "function",
            "name": "get_weather",
            "description": "Weather for a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            "strict": False,
        }
    ]
    assert body["input"] == [
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "What is in these?"},
                {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}",
                 "detail": "auto"},
                {
                    "type": "input_file",
                    "filename": "document-2.pdf",
                    "file_data": f"data:application/pdf;base64,{PDF}",
                },
            ],
        },
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Checking.", "annotations": []}],
        },
        {"type": "function_call", "call_id": "call_1", "name": "get_weather",
         "arguments": '{"city":"Oslo"}'},
        {"type": "function_call", "call_id": "call_2", "name": "get_time", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": '{"temp": 3}'},
        {"type": "function_call_output", "call_id": "call_2", "output": "12:00"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Thanks"}]},
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("base", "url"),
    [("http://h", "http://h/v1/responses"), ("http://h/v1", "http://h/v1/responses")],
)
def test_build_request_url(base: str, url: str) -> None:
    assert build_request(rq.build(model="m", messages="hi"), base_url=base).url == url


def test_build_request_minimal_and_registry() -> None:
    vr = vendor_request(VENDOR, rq.build(model="m", messages="hi"), base_url="http://127.0.0.1:1")
    assert json.loads(vr.body) == {
        "model": "m",
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
        ],
        "stream": True,
    }  # fmt: skip
    assert "authorization" not in vr.headers


def test_extension_is_deep_merged_but_cannot_stop_streaming() -> None:
    req = full_request(
        **{
            "vendor:openai": {
                "stream": False,
                "reasoning": {"effort": "low", "summary": "auto"},
                "store": False,
                "temperature": 1.0,
            },
            "vendor:other": {"n": 9},
        }
    )
    body = json.loads(build_request(req, base_url="http://x").body)
    assert body["stream"] is True and "n" not in body
    assert body["reasoning"] == {"effort": "low", "summary": "auto"}
    assert body["store"] is False and body["temperature"] == 1.0


def test_extension_must_be_an_object() -> None:
    req = rq.build(model="m", messages="hi", extensions={"vendor:openai": 1})
    with pytest.raises(InvalidRequest) as info:
        build_request(req, base_url="http://x")
    assert info.value.path == 'extensions["vendor:openai"]'


@pytest.mark.parametrize(
    ("role", "part", "path"),
    [
        ("user", {"type": "audio", "media_type": "audio/wav", "data": "AA=="},
         "messages[0].content[0]"),
        ("system", {"type": "image", "media_type": "image/png", "data": PNG},
         "messages[0].content"),
        ("assistant", {"type": "image", "media_type": "image/png", "data": PNG},
         "messages[0].content"),
    ],
)  # fmt: skip
def test_build_request_refuses_parts_it_cannot_send(
    role: str, part: dict[str, Any], path: str
) -> None:
    req = rq.build(model="m", messages=[{"role": role, "content": [part]}])
    with pytest.raises(InvalidRequest) as info:
        build_request(req, base_url="http://x")
    assert info.value.path == path


# --- The fake upstream's rendering ---------------------------------------------------------

NO_REQUEST = RecordedRequest(method="POST", path="/v1/responses", headers={}, body=b"{}")


def test_render_frames_sequence_numbers_and_fragments() -> None:
    args = {"location": "San Francisco", "n": [1, 2]}
    script = Script(text="One two", tool_calls=[ScriptedToolCall("f", args)])
    frames = fake_responses.render(script, model="gpt-x", request=NO_REQUEST)
    payloads = [json.loads(f.split(b"data: ", 1)[1]) for f in frames]
    assert [p["sequence_number"] for p in payloads] == list(range(len(frames)))
    for f, p in zip(frames, payloads, strict=True):
        assert f.startswith(f"event: {p['type']}\n".encode())
    kinds = [p["type"] for p in payloads]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    assert payloads[-1]["response"]["usage"]["output_tokens"] == 2
    fragments = fake_responses.argument_fragments(args)
    assert len(fragments) > 3 and "".join(fragments) == json.dumps(args, separators=(",", ":"))
    assert fake_responses.argument_fragments({}) == []


@pytest.mark.parametrize("stop", ["end_turn", "tool_use", "max_tokens", "content_filter"])
def test_render_stop_reasons_round_trip(stop: str) -> None:
    calls = [ScriptedToolCall("f", {})] if stop == "tool_use" else []
    script = Script(text="Hi", stop_reason=stop, tool_calls=calls)
    body = b"".join(fake_responses.render(script, model="m", request=NO_REQUEST))
    out = translate_pieces(VENDOR, [body])
    assert_conformant(out)
    assert set(summarize(out).stops.values()) == {stop}


@pytest.mark.parametrize(
    "code",
    ["rate_limited", "overloaded", "context_length_exceeded", "content_filtered", "internal_error"],
)  # fmt: skip
def test_render_errors_round_trip(code: str) -> None:
    body = b"".join(
        fake_responses.render(Script(error=(code, "boom")), model="m", request=NO_REQUEST)
    )
    out = translate_pieces(VENDOR, [body])
    assert_conformant(out)
    assert summarize(out).errors == [code]


def test_check_request_and_error_body() -> None:
    good = b'{"model":"m","input":"hi","stream":true}'
    assert fake_responses.check_request(RecordedRequest("POST", "/v1/responses", {}, good)) is None
    for path, body in [
        ("/v1/chat/completions", good),
        ("/v1/responses", b"nope"),
        ("/v1/responses", b"[]"),
        ("/v1/responses", b'{"input":"hi","stream":true}'),
        ("/v1/responses", b'{"model":"m","input":[],"stream":true}'),
        ("/v1/responses", b'{"model":"m","input":"hi"}'),
    ]:
        assert fake_responses.check_request(RecordedRequest("POST", path, {}, body)) is not None
    assert json.loads(fake_responses.error_body(429))["error"]["code"] == "rate_limit_exceeded"


# --- Fidelity: the real openai SDK against the fake; our translator agrees -----------------

SCRIPTS = {
    "text": Script(text="Hello from the fake Responses upstream, über ✓", input_tokens=11),
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
        tool_calls=[ScriptedToolCall("search", {"q": 'a "quoted" term\n'}, id="call_7")],
    ),
}


def fetch_raw(url: str) -> bytes:
    vr = build_request(rq.build(model="gpt-test", messages="hi"), base_url=url + "/v1", api_key="x")
    return httpx.post(vr.url, headers=vr.headers, content=vr.body).content


@pytest.mark.parametrize("name", list(SCRIPTS))
def test_sdk_and_translator_agree_on_the_fake(name: str) -> None:
    script = SCRIPTS[name]
    with FakeUpstream("openai-responses", script) as fake:
        client = openai.OpenAI(base_url=fake.url + "/v1", api_key="x", max_retries=0)
        text = ""
        calls: list[tuple[str, str, Any]] = []
        usage = (0, 0)
        for event in client.responses.create(model="gpt-test", input="hi", stream=True):
            if event.type == "response.output_text.delta":
                text += event.delta
            elif event.type == "response.output_item.done" and event.item.type == "function_call":
                item = event.item
                calls.append((item.call_id, item.name, json.loads(item.arguments)))
            elif event.type == "response.completed":
                assert event.response.usage is not None
                usage = (event.response.usage.input_tokens, event.response.usage.output_tokens)
        # The SDK's own accumulator agrees with its event stream.
        with client.responses.stream(model="gpt-test", input="hi") as stream:
            final = stream.get_final_response()
        client.close()
        raw = fetch_raw(fake.url)
        assert fake.errors == []
        assert fake.requests[0].path == "/v1/responses"
    # The SDK sees exactly what the script intended...
    assert text == script.text == final.output_text
    assert [(n, a) for _, n, a in calls] == [(c.name, c.arguments) for c in script.tool_calls]
    assert usage == (script.input_tokens, script.usage_output_tokens)
    # ...and so does the translator, on the same bytes.
    out = translate_pieces(VENDOR, [raw])
    assert_conformant(out)
    s = summarize(out)
    assert "".join(s.text.values()) == script.text
    assert [(c[1], c[2], c[3]) for c in s.tool_calls] == calls
    assert s.usage == [usage]
    assert s.errors == []


def test_fake_in_stream_error_reaches_sdk_and_translator() -> None:
    script = Script(text="Partial answer", error=("rate_limited", "slow down"))
    with FakeUpstream("openai-responses", script) as fake:
        client = openai.OpenAI(base_url=fake.url + "/v1", api_key="x", max_retries=0)
        with pytest.raises(openai.APIError, match="slow down"):
            for _ in client.responses.create(model="m", input="hi", stream=True):
                pass
        client.close()
        raw = fetch_raw(fake.url)
    s = summarize(translate_pieces(VENDOR, [raw]))
    assert s.text == {0: "Partial answer"} and s.errors == ["rate_limited"]


def test_fake_cut_and_status_faults_reach_the_translator() -> None:
    fault = Fault(kind="cut", after_events=6, graceful=True)
    with FakeUpstream("openai-responses", Script(text="a b c d"), fault=fault) as fake:
        raw = fetch_raw(fake.url)
    out = translate_pieces(VENDOR, [raw])
    assert_conformant(out)
    s = summarize(out)
    assert s.text == {0: "a b"} and s.errors == ["internal_error"]
    with FakeUpstream("openai-responses", fault=Fault(kind="status", status=429)) as fake:
        vr = build_request(rq.build(model="m", messages="hi"), base_url=fake.url + "/v1")
        answer = httpx.post(vr.url, headers=vr.headers, content=vr.body)
    assert answer.status_code == 429
    assert http_error(429, answer.content)[0] == "rate_limited"


@pytest.mark.parametrize("vector", VECTORS, ids=[v["name"] for v in VECTORS])
def test_tool_deltas_only_add_deltas(vector: dict[str, Any]) -> None:
    body, options = vector_body(vector), vector_options(vector)
    sent = assert_tool_deltas_only_add_deltas("openai-responses", body, options)
    if vector["name"] == "parallel-calls-interleaved":
        assert len(sent) >= 2  # streamed arguments: deltas, one id per call
