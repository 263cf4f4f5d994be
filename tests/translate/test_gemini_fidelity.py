"""Issue 18 for Gemini: nothing a Gemini stream carries is lost, in either direction.

- the fidelity vectors (tests/vectors/translate/gemini/*.json with ``extensions``):
  every tokenwire extension event asserted field by field;
- the request side: each ``thoughtSignature`` goes back on the part it came with;
- the ingress: a google-genai request body -> the standard, and standard events ->
  Gemini's SSE (``EventEncoder``), read back by the real google-genai SDK: the
  content it accumulates from the re-encoded stream equals the one from the original.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.translate.conftest import FIXTURES_DIR, assert_conformant
from tests.translate.frame_vectors import check_vector, load_vectors, vector_body, vector_options

from tokenwire import events as ev
from tokenwire import request as rq
from tokenwire.errors import InvalidRequest
from tokenwire.translate import _extensions as x
from tokenwire.translate import translator
from tokenwire.translate.gemini import (
    EventEncoder,
    build_request,
    parse_ingress,
    request_body,
    request_from_vendor,
)

VECTORS_DIR = Path(__file__).resolve().parents[1] / "vectors" / "translate" / "gemini"
ALL = load_vectors(VECTORS_DIR)
FIDELITY = [v for v in ALL if "extensions" in v["expect"]]


def _extension_bodies(out: list[ev.Event]) -> list[dict[str, Any]]:
    bodies = []
    for event in out:
        if isinstance(event, ev.UnknownEvent):
            body = json.loads(event.data)
            body.pop("v")
            body.pop("seq")
            bodies.append(body)
    return bodies


def test_every_feature_has_a_vector() -> None:
    names = {v["name"] for v in FIDELITY}
    assert {
        "signature-on-final-empty-text-part",
        "thought-part-signed",
        "function-call-signature",
        "streamed-call-signature",
        "signatures-kept-when-cut",
        "code-execution-parts",
        "grounding-metadata",
        "citation-metadata",
        "usage-details",
        "usage-details-before-error",
        "safety-refusal",
        "prompt-blocked",
        "malformed-call-raw-reason",
        "unknown-part-type-kept",
    } <= names


@pytest.mark.parametrize("vector", FIDELITY, ids=[v["name"] for v in FIDELITY])
def test_fidelity_vector(vector: dict[str, Any]) -> None:
    check_vector("gemini", vector)  # types, text, reasoning, calls, stops, usage, error
    t = translator("gemini", model="test-model", **vector_options(vector))
    out = t.feed(vector_body(vector)) + t.close()
    assert _extension_bodies(out) == vector["expect"]["extensions"], vector["description"]
    assert dict(t.unknown_types) == vector["expect"].get("unknown_types", {})


def test_known_fields_are_not_counted_as_unknown() -> None:
    # A recording-like chunk with every field Gemini sends today counts nothing.
    chunk = {
        "candidates": [
            {
                "content": {"parts": [{"text": "hi"}], "role": "model"},
                "finishReason": "STOP",
                "index": 0,
                "safetyRatings": [],
                "avgLogprobs": -0.1,
            }
        ],
        "usageMetadata": {
            "promptTokenCount": 1,
            "candidatesTokenCount": 1,
            "totalTokenCount": 2,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 1}],
            "serviceTier": "standard",
            "trafficType": "ON_DEMAND",
        },
        "modelVersion": "gemini-3",
        "responseId": "r",
        "createTime": "2026-01-01T00:00:00Z",
    }
    t = translator("gemini", model="m")
    out = t.feed(b"data: " + json.dumps(chunk).encode() + b"\r\n\r\n") + t.close()
    assert_conformant(out)
    assert t.unknown_types == {}


# --- The next turn: signatures back on their parts ---------------------------------------


def _history_request(parts: list[dict[str, Any]], **extensions: Any) -> rq.Request:
    return rq.build(
        model="g",
        messages=[
            {"role": "user", "content": "weather?"},
            {
                "role": "assistant",
                "content": "Checking.",
                "tool_calls": [
                    {"id": "call_1", "name": "weather", "arguments": '{"city": "Paris"}'},
                    {"id": "call_2", "name": "time", "arguments": "{}"},
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "18C"},
            {"role": "tool", "tool_call_id": "call_2", "content": "noon"},
        ],
        extensions={x.REASONING_HISTORY: [{"message": 1, "parts": parts}], **extensions},
    )


def test_signatures_go_back_on_the_parts_they_came_with() -> None:
    parts = [
        {"type": x.REASONING, "text": "plan", x.SIGNATURE: "sigT", x.VENDOR: "gemini"},
        {"type": x.REASONING, x.SIGNATURE: "sigA", x.VENDOR: "gemini"},
        {"type": x.REASONING, x.SIGNATURE: "sig1", x.VENDOR: "gemini", x.TOOL_CALL_ID: "call_1"},
        # Bound to Anthropic: Gemini cannot check it, so it is dropped cleanly.
        {"type": x.REASONING, "text": "other", x.SIGNATURE: "anthropic-sig", x.VENDOR: "anthropic"},
    ]
    body = request_body(_history_request(parts))
    model = body["contents"][1]
    assert model == {
        "role": "model",
        "parts": [
            {"text": "plan", "thought": True, "thoughtSignature": "sigT"},
            {"text": "Checking.", "thoughtSignature": "sigA"},
            {
                "functionCall": {"name": "weather", "args": {"city": "Paris"}},
                "thoughtSignature": "sig1",
            },
            {"functionCall": {"name": "time", "args": {}}},
        ],
    }
    assert "anthropic-sig" not in json.dumps(body)
    # Parallel results share one user turn.
    assert [list(p) for p in body["contents"][2]["parts"]] == [["functionResponse"]] * 2


def test_server_tool_steps_go_back_in_the_model_turn() -> None:
    code = {
        "executableCode": {"language": "PYTHON", "code": "print(1)"},
        "thoughtSignature": "c2ln",
    }
    result = {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "1"}}
    grounding = {"groundingMetadata": {"webSearchQueries": ["q"]}}
    parts = [
        {"type": x.REASONING, x.SERVER_TOOL: code, x.VENDOR: "gemini"},
        {"type": x.REASONING, x.RAW: result, x.VENDOR: "gemini"},
        {"type": x.REASONING, x.SERVER_TOOL: grounding, x.VENDOR: "gemini"},
    ]
    req = rq.build(
        model="g",
        messages=[{"role": "user", "content": "q"}, {"role": "assistant", "content": "1"}],
        extensions={x.REASONING_HISTORY: [{"message": 1, "parts": parts}]},
    )
    assert request_body(req)["contents"][1]["parts"] == [{"text": "1"}, code, result]
    # ...and the ingress reads them back the same way.
    body = {
        "model": "g",
        "contents": [
            {"role": "user", "parts": [{"text": "q"}]},
            {"role": "model", "parts": [code, result, {"text": "1"}]},
        ],
    }
    again = request_from_vendor(body)
    assert request_body(again)["contents"][1]["parts"] == [{"text": "1"}, code, result]


def test_an_answer_signature_without_text_rides_an_empty_text_part() -> None:
    req = rq.build(
        model="g",
        messages=[{"role": "user", "content": "q"}, {"role": "assistant", "content": ""}],
        extensions={
            x.REASONING_HISTORY: [
                {
                    "message": 1,
                    "parts": [{"type": x.REASONING, x.SIGNATURE: "s", x.VENDOR: "gemini"}],
                }
            ]
        },
    )
    assert request_body(req)["contents"][1]["parts"] == [{"text": "", "thoughtSignature": "s"}]


@pytest.mark.parametrize(
    ("history", "path"),
    [
        ("nope", 'extensions["tokenwire:reasoning_history"]'),
        ([{"message": 0, "parts": []}], 'extensions["tokenwire:reasoning_history"][0].message'),
        (
            [{"message": 1, "parts": [{"type": "text"}]}],
            'extensions["tokenwire:reasoning_history"][0].parts[0]',
        ),
    ],
)
def test_a_malformed_reasoning_history_names_the_value(history: Any, path: str) -> None:
    req = rq.build(
        model="g",
        messages=[{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}],
        extensions={x.REASONING_HISTORY: history},
    )
    with pytest.raises(InvalidRequest) as bad:
        build_request(req, base_url="http://g")
    assert bad.value.path == path


# --- The ingress: a google-genai body -> the standard ------------------------------------


def test_ingress_reads_a_chat_history_with_signatures() -> None:
    body = {
        "model": "models/demo",
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
        "contents": [
            {"role": "user", "parts": [{"text": "weather in Paris?"}]},
            # The SDK's chat history: one model content per streamed chunk.
            {"role": "model", "parts": [{"text": "hmm", "thought": True}]},
            {"role": "model", "parts": [{"text": "Checking."}]},
            {
                "role": "model",
                "parts": [
                    {
                        "functionCall": {"name": "weather", "args": {"city": "Paris"}},
                        "thoughtSignature": "sig1",
                    }
                ],
            },
            {
                "role": "user",
                "parts": [{"functionResponse": {"name": "weather", "response": {"t": 18}}}],
            },
        ],
        "tools": [
            {"functionDeclarations": [{"name": "weather", "parameters": {"type": "object"}}]}
        ],
        "generationConfig": {
            "maxOutputTokens": 100,
            "thinkingConfig": {"includeThoughts": True, "thinkingBudget": 512},
        },
        "safetySettings": [],
    }
    req = request_from_vendor(body)
    assert req.model == "demo"
    assert [m.role for m in req.messages] == ["system", "user", "assistant", "tool"]
    assistant = req.messages[2]
    assert assistant.content == "Checking."
    assert [(c.id, c.name, json.loads(c.arguments)) for c in assistant.tool_calls or ()] == [
        ("call_0", "weather", {"city": "Paris"})
    ]
    assert req.messages[3].tool_call_id == "call_0"
    assert req.parameters is not None and req.parameters.max_tokens == 100
    assert req.extension("tokenwire:reasoning") is True
    assert req.extension("vendor:gemini") == {
        "generationConfig": {"thinkingConfig": {"includeThoughts": True, "thinkingBudget": 512}},
        "safetySettings": [],
    }
    assert req.extension(x.REASONING_HISTORY) == [
        {
            "message": 2,
            "parts": [
                {"type": x.REASONING, "text": "hmm", x.VENDOR: "gemini"},
                {
                    "type": x.REASONING,
                    x.SIGNATURE: "sig1",
                    x.VENDOR: "gemini",
                    x.TOOL_CALL_ID: "call_0",
                },
            ],
        }
    ]
    # ...and the Gemini request built from it puts the signature back on the call.
    rebuilt = request_body(req)
    assert rebuilt["contents"][1]["parts"][-1]["thoughtSignature"] == "sig1"
    assert rebuilt["generationConfig"]["thinkingConfig"]["includeThoughts"] is True


@pytest.mark.parametrize(
    ("body", "path"),
    [
        ({"contents": [{"parts": [{"text": "x"}]}]}, "model"),
        ({"model": "m", "contents": []}, "contents"),
        ({"model": "m", "contents": [{"role": "robot", "parts": []}]}, "contents[0].role"),
        ({"model": "m", "contents": [{"parts": [{"fileData": {}}]}]}, "contents[0].parts[0]"),
        (
            {"model": "m", "contents": [{"parts": [{"functionResponse": {"name": "f"}}]}]},
            "contents[0].parts[0].functionResponse",
        ),
        (
            {
                "model": "m",
                "contents": [{"parts": [{"text": "x"}]}],
                "generationConfig": {"temperature": "hot"},
            },
            "generationConfig.temperature",
        ),
    ],
)
def test_ingress_errors_name_the_gemini_field(body: dict[str, Any], path: str) -> None:
    with pytest.raises(InvalidRequest) as bad:
        parse_ingress(body)
    assert bad.value.path == path


# --- standard -> Gemini SSE -> the real google-genai SDK ---------------------------------


def _sdk_chunks(body: bytes) -> Iterator[Any]:
    """The SDK's ``generate_content_stream`` over ``body`` (served by a mock transport)."""
    from google import genai
    from google.genai import types

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    http = httpx.Client(transport=httpx.MockTransport(answer))
    client = genai.Client(
        api_key="x",
        http_options=types.HttpOptions(base_url="http://gemini.test", httpx_client=http),
    )
    yield from client.models.generate_content_stream(model="m", contents="hi")
    http.close()


def accumulate(body: bytes) -> dict[str, Any]:
    """What a google-genai user builds from the chunks: the model's parts (consecutive
    text of one kind merged, each signature on the part it ends; a call without ``args``
    has ``{}``, as ``fc.args or {}`` reads it), finish, usage and metadata."""
    parts: list[dict[str, Any]] = []
    final: dict[str, Any] = {}
    for response in _sdk_chunks(body):
        if response.prompt_feedback is not None:
            final["prompt_feedback"] = response.prompt_feedback.model_dump(exclude_none=True)
        if response.usage_metadata is not None:
            usage = response.usage_metadata.model_dump(exclude_none=True, mode="json")
            keep = ("prompt_token_count", "candidates_token_count", "total_token_count")
            keep += ("thoughts_token_count", "cached_content_token_count")
            keep += ("tool_use_prompt_token_count",)
            final["usage"] = {k: v for k, v in usage.items() if k in keep}
        for candidate in response.candidates or ():
            dump = candidate.model_dump(exclude_none=True, mode="json")
            for key in (
                "finish_reason",
                "finish_message",
                "grounding_metadata",
                "citation_metadata",
            ):
                if key in dump:
                    final[key] = dump[key]
            for part in (dump.get("content") or {}).get("parts") or ():
                kind = set(part) - {"thought_signature"}
                prev = parts[-1] if parts else None
                if (
                    kind <= {"text", "thought"}
                    and not part.get("text")
                    and "thought_signature" not in part
                ):
                    continue  # an empty text part carries nothing
                if (
                    kind <= {"text", "thought"}
                    and prev is not None
                    and set(prev) - {"thought_signature"} <= {"text", "thought"}
                    and prev.get("thought") == part.get("thought")
                    and "thought_signature" not in prev
                ):
                    prev["text"] = prev.get("text", "") + part.get("text", "")
                    if "thought_signature" in part:
                        prev["thought_signature"] = part["thought_signature"]
                    continue
                if "function_call" in part:
                    part["function_call"].setdefault("args", {})  # absent args are no args
                parts.append(dict(part))
    return {"parts": parts, **final}


def reencode(body: bytes, *, reasoning: bool = True) -> bytes:
    """Gemini bytes -> the standard (the translator) -> Gemini bytes (``EventEncoder``)."""
    t = translator("gemini", model="m", request_id="r1", reasoning=reasoning)
    events = t.feed(body) + t.close()
    assert_conformant(events)
    encode = EventEncoder(model="m").encode
    return b"".join(encode(e) for e in events)


SDK_VECTORS = [
    v
    for v in ALL
    if v["expect"]["error"] is None
    # The SDK cannot read SSE comments or LF-only framing itself (raw frames).
    and not any("raw" in f for f in v["frames"])
    # The SDK warns (an error under pytest) on an undocumented finishReason, even
    # in the original stream.
    and "finishReason.BRAND_NEW_REASON" not in v["expect"].get("unknown_types", {})
    # Without reasoning the thoughts are dropped on purpose: nothing to compare.
    and (v["options"]["reasoning"] or '"thought": true' not in json.dumps(v["frames"]))
    and not any(
        "partialArgs" in json.dumps(f) or "willContinue" in json.dumps(f) for f in v["frames"]
    )
]


@pytest.mark.parametrize("vector", SDK_VECTORS, ids=[v["name"] for v in SDK_VECTORS])
def test_round_trip_through_the_sdk_vectors(vector: dict[str, Any]) -> None:
    original = vector_body(vector)
    again = reencode(original, reasoning=vector["options"]["reasoning"])
    assert accumulate(again) == accumulate(original), vector["description"]


# Vertex's streamed partialArgs are not assembled by the SDK (it hands over the
# fragments), so those recordings have no accumulated call to compare.
SDK_RECORDINGS = [
    "raw-sse-gemini-2.5-flash-thought-max-tokens.sse",
    "raw-sse-vertex-gemini-1.5-flash-tail-with-safety.sse",
    "raw-sse-gemini-2.5-flash-malformed-function-call.sse",
    "vercel-google-reasoning.jsonl",
    "vercel-google-text.jsonl",
    "vercel-google-tool-call-gemini3.jsonl",
    "vercel-google-tool-call.jsonl",
    "vercel-issue-19758-prompt-block.jsonl",
]


@pytest.mark.fixtures
@pytest.mark.parametrize("name", SDK_RECORDINGS)
def test_round_trip_through_the_sdk_recordings(name: str, vendor_fixtures: Path) -> None:
    path = vendor_fixtures / "gemini" / name
    raw = path.read_bytes()
    if path.suffix == ".jsonl":
        raw = b"".join(b"data: " + line + b"\r\n\r\n" for line in raw.splitlines() if line.strip())
    original = accumulate(raw)
    assert original["parts"] or "prompt_feedback" in original or "finish_reason" in original
    assert accumulate(reencode(raw)) == original


def test_round_trip_keeps_the_function_call_signature_on_its_part() -> None:
    (vector,) = [v for v in ALL if v["name"] == "function-call-signature"]
    (signature,) = [e[x.SIGNATURE] for e in vector["expect"]["extensions"] if x.SIGNATURE in e]
    parts = accumulate(reencode(vector_body(vector)))["parts"]
    assert parts == [
        {
            "function_call": {"name": "weather", "args": {"location": "San Francisco"}},
            "thought_signature": signature,  # base64, as the SDK dumps its bytes in JSON mode
        }
    ]


def test_encoder_answers_an_upstream_4xx_as_that_client_error() -> None:
    encode = EventEncoder(model="m").encode
    out = encode(ev.StreamStart(v=ev.VERSION, seq=0, model="m", created=0))
    err = ev.ErrorEvent(
        v=ev.VERSION,
        seq=1,
        code="internal_error",
        message="upstream answered HTTP 400 INVALID_ARGUMENT: missing thought_signature",
    )
    out += encode(err)
    chunk = json.loads(out.decode().removeprefix("data: "))
    assert chunk == {
        "error": {
            "code": 400,
            "message": "upstream answered HTTP 400 INVALID_ARGUMENT: missing thought_signature",
            "status": "INVALID_ARGUMENT",
        }
    }


def test_fixtures_dir_is_the_shared_one() -> None:
    assert FIXTURES_DIR.name == "vendor-fixtures"
