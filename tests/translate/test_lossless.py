"""Issue 24, tokenwire extensions 1.1: what the standard now carries, both ways.

- the recordings (``tests/vectors/translate/{openai-responses,anthropic}/``, the
  issue-24 files): each frame is a valid event of the vendor's published SDK
  types (so the recordings say what the vendors send); their standard output
  is asserted field by field by ``test_openai_fidelity`` / ``test_anthropic``;
- round trips: the vendor stream -> the standard -> the same vendor's stream
  (the ingress encoders) -> the real SDK, whose accumulated message equals the
  one it builds from the original;
- the request side: a vendor request -> the standard (ingress) -> the vendor
  request again (builder), the 1.1 items in place and byte-identical, and
  malformed 1.1 extensions named by path.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import pydantic
import pytest
from anthropic.types.beta import BetaRawMessageStreamEvent
from openai.types.responses import ResponseStreamEvent
from tests.translate.frame_vectors import vector_body as frame_body
from tests.translate.test_anthropic import vector_body as anthropic_body
from tests.translate.test_openai_fidelity import completed_with_output, re_encode, responses_final

from tokenwire import events as ev
from tokenwire import request as rq
from tokenwire.translate import _extensions as x
from tokenwire.translate import _lossless, translator
from tokenwire.translate import anthropic as tr_anthropic
from tokenwire.translate.openai_responses import ResponsesEncoder, request_from_vendor
from tokenwire.translate.openai_responses import build_request as responses_request

VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "translate"
RESPONSES = [
    "fid-custom-tool-call",
    "fid-apply-patch-call",
    "fid-mcp-approval-request",
    "fid-mcp-list-tools-and-call",
    "fid-compaction-item",
    "fid-image-generation-closed",
]
ANTHROPIC = ["compaction-block", "mcp-tool-use-and-result", "pause-turn-container"]


def vector(folder: str, name: str) -> dict[str, Any]:
    return json.loads((VECTORS / folder / f"{name}.json").read_text(encoding="utf-8"))


# --- the recordings are what the SDKs define ------------------------------------------


@pytest.mark.parametrize("name", RESPONSES)
def test_responses_recording_frames_are_sdk_events(name: str) -> None:
    adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(ResponseStreamEvent)
    for frame in vector("openai-responses", name)["frames"]:
        event = adapter.validate_python(frame["data"])
        assert event.type == frame["event"]


@pytest.mark.parametrize("name", ANTHROPIC)
def test_anthropic_recording_events_are_sdk_events(name: str) -> None:
    adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(BetaRawMessageStreamEvent)
    for obj in vector("anthropic", name)["events"]:
        assert adapter.validate_python(obj).type == obj["type"]


# --- round trips through the real SDKs --------------------------------------------------


@pytest.mark.parametrize("name", RESPONSES)
def test_responses_round_trip_through_the_sdk(name: str) -> None:
    original = completed_with_output(frame_body(vector("openai-responses", name)))
    again = re_encode("openai-responses", original, ResponsesEncoder(model="gpt-test").encode)
    first, second = responses_final(original), responses_final(again)
    for final in (first, second):
        # cache_write_tokens is not carried (docs/translation.md): not part of this issue.
        final["usage"]["input_tokens_details"].pop("cache_write_tokens")
    assert second == first
    assert len(first["output"]) == 1 + ("list-tools" in name)


def beta_message(body: bytes) -> Any:
    """What the ``anthropic`` SDK's beta stream accumulates from ``body`` (no network)."""
    transport = httpx2.MockTransport(
        lambda request: httpx2.Response(
            200, headers={"content-type": "text/event-stream"}, content=body
        )
    )
    client = anthropic.Anthropic(
        base_url="http://anthropic.test",
        api_key="x",
        max_retries=0,
        http_client=httpx2.Client(transport=transport),
    )
    with client.beta.messages.stream(
        model="claude-test-1", max_tokens=1024, messages=[{"role": "user", "content": "hi"}]
    ) as stream:
        return stream.get_final_message()


@pytest.mark.parametrize("name", ANTHROPIC)
def test_anthropic_round_trip_through_the_sdk(name: str) -> None:
    original = anthropic_body(vector("anthropic", name))
    t = translator("anthropic", model="claude-test-1", reasoning=True)
    events = t.feed(original) + t.close()
    encoder = tr_anthropic.EventEncoder(model="claude-test-1")
    again = b"".join(encoder.encode(e) for e in events)
    first, second = beta_message(original), beta_message(again)
    assert [b.model_dump() for b in second.content] == [b.model_dump() for b in first.content]
    assert second.stop_reason == first.stop_reason
    assert second.container == first.container
    assert second.usage.output_tokens == first.usage.output_tokens


# --- the request side: vendor -> standard -> vendor ------------------------------------

PATCH = {"type": "create_file", "path": "a.txt", "diff": "+hello\n"}
APPROVAL = {
    "type": "mcp_approval_request",
    "id": "mcpr_1",
    "server_label": "deepwiki",
    "name": "ask_question",
    "arguments": '{"question":"?"}',
}
RESPONSES_BODY: dict[str, Any] = {
    "model": "gpt-test",
    "stream": True,
    "tools": [
        {
            "type": "custom",
            "name": "exec_sql",
            "description": "Run SQL.",
            "format": {"type": "text"},
        },
        {"type": "apply_patch"},
        {"type": "mcp", "server_label": "deepwiki", "server_url": "https://mcp.example"},
    ],
    "input": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Go."}]},
        {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAAcmp"},
        APPROVAL,
        {
            "type": "custom_tool_call",
            "id": "ctc_1",
            "call_id": "call_1",
            "name": "exec_sql",
            "input": "SELECT 1;",
        },
        {
            "type": "apply_patch_call",
            "id": "apc_1",
            "call_id": "call_2",
            "operation": PATCH,
            "status": "completed",
        },
        {"type": "custom_tool_call_output", "call_id": "call_1", "output": "1"},
        {
            "type": "apply_patch_call_output",
            "call_id": "call_2",
            "output": "done",
            "status": "completed",
        },
        {"type": "mcp_approval_response", "approval_request_id": "mcpr_1", "approve": False},
    ],
}


def test_responses_ingress_keeps_the_11_items_and_the_builder_sends_them_back() -> None:
    req = request_from_vendor(RESPONSES_BODY)
    assert [m.role for m in req.messages] == ["user", "assistant", "tool", "tool"]
    calls = req.messages[1].tool_calls or []
    assert [(c.id, c.name, json.loads(c.arguments)) for c in calls] == [
        ("call_1", "exec_sql", {"input": "SELECT 1;"}),
        ("call_2", "apply_patch", PATCH),
    ]
    # §8.2: the calls validate against the tools as the standard declares them.
    assert req.tool("exec_sql") is not None
    assert req.tool("exec_sql").parameters == _lossless.CUSTOM_PARAMETERS  # type: ignore[union-attr]
    assert req.extension(x.TOOLS) == {
        "exec_sql": {"kind": "custom", "format": {"type": "text"}},
        "apply_patch": {"kind": "apply_patch"},
    }
    assert req.extension(x.APPROVALS) == [{"id": "mcpr_1", "approve": False}]
    [entry] = req.extension(x.BLOCK_HISTORY)
    assert entry["message"] == 1
    assert [p["type"] for p in entry["parts"]] == [
        x.COMPACTION,
        x.APPROVAL,
        x.TOOL_KIND,
        x.TOOL_KIND,
    ]
    sent = json.loads(responses_request(req, base_url="http://up").body)
    # The items come back where they were, byte-identical (JSON-equal).
    assert sent["input"] == RESPONSES_BODY["input"]
    # The hosted MCP tool travels in vendor:openai-responses: the caller's list whole.
    assert sent["tools"] == RESPONSES_BODY["tools"]


def test_responses_builder_declares_custom_and_apply_patch_tools() -> None:
    req = rq.build(
        model="m",
        messages="hi",
        tools=[
            {
                "name": "exec_sql",
                "description": "Run SQL.",
                "parameters": _lossless.CUSTOM_PARAMETERS,
            },
            {
                "name": "apply_patch",
                "description": "",
                "parameters": _lossless.APPLY_PATCH_PARAMETERS,
            },
            {"name": "f", "description": "", "parameters": {"type": "object"}},
        ],
        extensions={
            x.TOOLS: {
                "exec_sql": {"kind": "custom", "format": {"type": "grammar", "syntax": "lark"}},
                "apply_patch": {"kind": "apply_patch"},
            }
        },
    )
    sent = json.loads(responses_request(req, base_url="http://up").body)
    assert sent["tools"] == [
        {
            "type": "custom",
            "name": "exec_sql",
            "description": "Run SQL.",
            "format": {"type": "grammar", "syntax": "lark"},
        },
        {"type": "apply_patch"},
        {
            "type": "function",
            "name": "f",
            "description": "",
            "parameters": {"type": "object"},
            "strict": False,
        },
    ]


ANTHROPIC_BODY: dict[str, Any] = {
    "model": "claude-test-1",
    "max_tokens": 512,
    "container": "container_1",
    "messages": [
        {"role": "user", "content": "Search."},
        {
            "role": "assistant",
            "content": [
                {"type": "compaction", "content": "Summary.", "encrypted_content": "EqQcmp"},
                {
                    "type": "server_tool_use",
                    "id": "srvtoolu_1",
                    "name": "web_search",
                    "input": {"query": "x"},
                },
                {
                    "type": "mcp_tool_use",
                    "id": "mcptoolu_1",
                    "name": "ask",
                    "server_name": "deepwiki",
                    "input": {"q": "?"},
                },
                {
                    "type": "mcp_tool_result",
                    "tool_use_id": "mcptoolu_1",
                    "is_error": False,
                    "content": [{"type": "text", "text": "A."}],
                },
                {"type": "text", "text": "Found it."},
            ],
        },
        {"role": "user", "content": "Thanks."},
    ],
}


def test_anthropic_ingress_keeps_the_11_blocks_and_the_builder_sends_them_back() -> None:
    req = tr_anthropic.request_from_vendor(ANTHROPIC_BODY)
    assert req.extension(x.CONTAINER) == {"id": "container_1"}
    assert "container" not in (req.extension("vendor:anthropic") or {})
    [entry] = req.extension(x.BLOCK_HISTORY)
    assert [p["type"] for p in entry["parts"]] == [x.COMPACTION, x.SERVER_TOOL, x.MCP, x.MCP]
    assert entry["parts"][2][x.MCP] == {
        "kind": "call",
        "id": "mcptoolu_1",
        "name": "ask",
        "server_label": "deepwiki",
        "arguments": '{"q":"?"}',
    }
    assert entry["parts"][3][x.MCP] == {"kind": "result", "call_id": "mcptoolu_1"}
    sent = json.loads(tr_anthropic.build_request(req, base_url="http://up").body)
    assert sent["messages"] == ANTHROPIC_BODY["messages"]
    assert sent["container"] == "container_1"


def test_blocks_of_another_vendor_are_dropped_cleanly() -> None:
    req = request_from_vendor(RESPONSES_BODY)
    sent = json.loads(tr_anthropic.build_request(req, base_url="http://up").body)
    # The Responses compaction and the approval request have no Anthropic form.
    assistant = sent["messages"][1]["content"]
    assert [b["type"] for b in assistant] == ["tool_use", "tool_use"]
    anthropic_req = tr_anthropic.request_from_vendor(ANTHROPIC_BODY)
    items = json.loads(responses_request(anthropic_req, base_url="http://up").body)["input"]
    assert [i["type"] for i in items] == ["message", "message", "message"]


@pytest.mark.parametrize(
    ("extensions", "path"),
    [
        ({x.TOOLS: {"nope": {"kind": "custom"}}}, f"extensions[\"{x.TOOLS}\"]['nope']"),
        ({x.TOOLS: {"f": {"kind": "binary"}}}, f"extensions[\"{x.TOOLS}\"]['f']"),
        ({x.APPROVALS: [{"id": "a", "approve": "yes"}]}, f'extensions["{x.APPROVALS}"][0].approve'),
        ({x.APPROVALS: [{"approve": True}]}, f'extensions["{x.APPROVALS}"][0].id'),
        (
            {x.BLOCK_HISTORY: [{"message": 0, "parts": []}]},
            f'extensions["{x.BLOCK_HISTORY}"][0].message',
        ),
        (
            {x.BLOCK_HISTORY: [{"message": 1, "parts": [{"type": "tokenwire:other"}]}]},
            f'extensions["{x.BLOCK_HISTORY}"][0].parts[0]',
        ),
        ({x.CONTAINER: 12}, f'extensions["{x.CONTAINER}"]'),
    ],
)
def test_a_malformed_11_extension_names_the_value(extensions: dict[str, Any], path: str) -> None:
    key = next(iter(extensions))
    builders = {
        x.TOOLS: [responses_request],
        x.APPROVALS: [responses_request],
        x.CONTAINER: [tr_anthropic.build_request],
    }.get(key, [responses_request, tr_anthropic.build_request])
    req = rq.build(
        model="m",
        messages=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}],
        tools=[{"name": "f", "description": "", "parameters": {"type": "object"}}],
        extensions=extensions,
    )
    for build in builders:
        with pytest.raises(rq.InvalidRequest) as raised:
            build(req, base_url="http://up")
        assert raised.value.path == path


def test_history_is_bounded() -> None:
    parts = [{"type": x.AUDIO, x.AUDIO: {"id": "a"}}] * (_lossless.MAX_PARTS + 1)
    req = rq.build(
        model="m",
        messages=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}],
        extensions={x.BLOCK_HISTORY: [{"message": 1, "parts": parts}]},
    )
    with pytest.raises(rq.InvalidRequest, match=f"at most {_lossless.MAX_PARTS}"):
        responses_request(req, base_url="http://up")


def test_block_parts_are_what_follow_up_sends_back() -> None:
    t = translator("openai-responses", model="m")
    body = frame_body(vector("openai-responses", "fid-mcp-approval-request"))
    events: list[ev.Event] = t.feed(body) + t.close()
    assert _lossless.block_parts(events) == [
        {
            "type": x.APPROVAL,
            x.APPROVAL: {
                "id": "mcpr_1",
                "name": "ask_question",
                "arguments": '{"repoName":"openai/codex","question":"What is apply_patch?"}',
                "server_label": "deepwiki",
            },
        }
    ]


# --- OpenAI Chat: logprobs and audio output ---------------------------------------------

CHAT = ["fid-logprobs-on-text", "fid-audio-output"]


@pytest.mark.parametrize("name", CHAT)
def test_chat_recording_chunks_are_sdk_chunks(name: str) -> None:
    from openai.types.chat import ChatCompletionChunk

    for data in vector("openai", name)["data"]:
        ChatCompletionChunk.model_validate(data)


@pytest.mark.parametrize("name", CHAT)
def test_chat_round_trip_through_the_sdk(name: str) -> None:
    from tests.translate.test_openai import vector_body as chat_body
    from tests.translate.test_openai_fidelity import chat_final

    from tokenwire.translate.openai import ChunkEncoder

    original = chat_body(vector("openai", name))
    again = re_encode("openai", original, ChunkEncoder(model="gpt-test", include_usage=True).encode)
    first = chat_final(original)
    assert chat_final(again) == first
    choice = first["choices"][0]
    if "logprobs" in name:
        assert [t["token"] for t in choice["logprobs"]["content"]] == ["Hello", "!"]
    else:
        assert choice["message"]["audio"]["id"] == "audio_abc123"
        assert choice["message"]["audio"]["transcript"] == "Hello there."


def test_chat_audio_id_goes_back_and_comes_in() -> None:
    from tokenwire.translate.openai import build_request as chat_request
    from tokenwire.translate.openai import request_from_vendor as chat_ingress

    body = {
        "model": "gpt-audio",
        "messages": [
            {"role": "user", "content": "Say hi."},
            {"role": "assistant", "content": None, "audio": {"id": "audio_abc123"}},
            {"role": "user", "content": "Again."},
        ],
    }
    req = chat_ingress(body)
    assert req.extension(x.BLOCK_HISTORY) == [
        {"message": 1, "parts": [{"type": x.AUDIO, x.AUDIO: {"id": "audio_abc123"}}]}
    ]
    sent = json.loads(chat_request(req, base_url="http://up/v1").body)
    assert sent["messages"][1] == {
        "role": "assistant",
        "content": "",
        "audio": {"id": "audio_abc123"},
    }


# --- the 1.1 schema ------------------------------------------------------------------


def test_the_11_schema_checks_the_new_fields() -> None:
    from tokenwire import schemas

    assert schemas.EXTENSIONS_SCHEMA == "tokenwire-extensions-1.1.schema.json"
    base = {"v": "1.0", "seq": 3, "type": x.BLOCK, "index": 0}
    good = [
        {x.TOOL_KIND: "custom", x.TOOL_CALL_ID: "call_1"},
        {x.APPROVAL: {"id": "mcpr_1", "name": "ask", "arguments": "{}"}},
        {x.MCP: {"kind": "result", "call_id": "m1", "output": "A."}},
        {x.COMPACTION: {"content": "S."}, x.VENDOR: "anthropic"},
        {x.AUDIO: {"id": "audio_1", "data": "UklG"}},
        {x.URL_CONTEXT: [{"url": "https://a", "status": "URL_RETRIEVAL_STATUS_SUCCESS"}]},
    ]
    for fields in good:
        assert schemas.extension_error(x.BLOCK, {**base, **fields}) is None, fields
    bad = [
        ({x.TOOL_KIND: "shell"}, "tokenwire:tool_kind"),
        ({x.APPROVAL: {"name": "ask"}}, "tokenwire:approval"),
        ({x.MCP: {"kind": "ran"}}, "tokenwire:mcp"),
        ({x.COMPACTION: {"content": "S."}}, "tokenwire:vendor"),
        ({x.AUDIO: {"expires_at": "soon"}}, "tokenwire:audio"),
    ]
    for fields, where in bad:
        error = schemas.extension_error(x.BLOCK, {**base, **fields})
        assert error is not None and where in error, (fields, error)
    stop = {"v": "1.0", "seq": 4, "type": x.STOP, x.RAW_STOP_REASON: "pause_turn"}
    assert schemas.extension_error(x.STOP, {**stop, x.CONTAINER: {"id": "c1"}}) is None
    assert schemas.extension_error(x.STOP, {**stop, x.CONTAINER: {}}) is not None
    assert schemas.request_extensions_error({x.APPROVALS: [{"id": "a", "approve": True}]}) is None
    assert schemas.request_extensions_error({x.APPROVALS: [{"id": "a"}]}) is not None
    assert schemas.request_extensions_error({x.TOOLS: {"f": {"kind": "binary"}}}) is not None


# --- Gemini URL context; code execution across Gemini and Responses ---------------------


def gemini_body(name: str) -> bytes:
    return frame_body(vector("gemini", name))


def test_gemini_url_context_round_trip_through_the_sdk() -> None:
    from google.genai import types as gtypes
    from tests.translate.test_gemini_fidelity import _sdk_chunks, reencode

    for frame in vector("gemini", "url-context-metadata")["frames"]:
        gtypes.GenerateContentResponse.model_validate(frame["data"])

    def urls(body: bytes) -> list[Any]:
        found = []
        for response in _sdk_chunks(body):
            for candidate in response.candidates or ():
                if candidate.url_context_metadata is not None:
                    found.append(candidate.url_context_metadata.model_dump(mode="json"))
        return found

    original = gemini_body("url-context-metadata")
    assert urls(reencode(original)) == urls(original) != []


def test_gemini_code_execution_reaches_a_responses_client_as_code_interpreter() -> None:
    again = re_encode(
        "gemini", gemini_body("code-execution-parts"), ResponsesEncoder(model="gpt-test").encode
    )
    final = responses_final(again)
    [item] = [i for i in final["output"] if i["type"] == "code_interpreter_call"]
    assert item["code"] == "print(2**10)"
    assert item["outputs"] == [{"type": "logs", "logs": "1024\n"}]
    assert item["status"] == "completed"


def test_responses_code_interpreter_reaches_a_gemini_client_as_code_execution() -> None:
    from tests.translate.test_gemini_fidelity import accumulate

    from tokenwire.translate.gemini import EventEncoder as GeminiEncoder

    body = completed_with_output(
        frame_body(vector("openai-responses", "fid-server-tools-and-citation"))
    )
    t = translator("openai-responses", model="m")
    events = t.feed(body) + t.close()
    encoder = GeminiEncoder(model="m")
    parts = accumulate(b"".join(encoder.encode(e) for e in events))["parts"]
    code = [p for p in parts if "executable_code" in p or "code_execution_result" in p]
    assert code == [
        {"executable_code": {"code": "print(1+1)", "language": "PYTHON"}},
        {"code_execution_result": {"outcome": "OUTCOME_OK", "output": "2\n"}},
    ]


def test_follow_up_sends_back_the_audio_id_only() -> None:
    from tests.translate.test_openai import vector_body as chat_body

    t = translator("openai", model="m")
    events = t.feed(chat_body(vector("openai", "fid-audio-output"))) + t.close()
    # The audio data and transcript stay out of the next request: the id names them.
    assert _lossless.block_parts(events) == [{"type": x.AUDIO, x.AUDIO: {"id": "audio_abc123"}}]


def test_follow_up_leaves_out_what_no_builder_sends_back() -> None:
    t = translator("openai-responses", model="m")
    body = frame_body(vector("openai-responses", "fid-image-generation-closed"))
    events = t.feed(body) + t.close()
    assert _lossless.block_parts(events) == []  # the image's base64 stays out
    t = translator("anthropic", model="claude-test-1")
    events = t.feed(anthropic_body(vector("anthropic", "pause-turn-container"))) + t.close()
    assert [p[x.SERVER_TOOL]["type"] for p in _lossless.block_parts(events)] == ["server_tool_use"]


def sdk_logprobs(body: bytes) -> list[Any]:
    from tests.translate.test_gemini_fidelity import _sdk_chunks

    found = []
    for response in _sdk_chunks(body):
        for candidate in response.candidates or ():
            if candidate.logprobs_result is not None:
                result = candidate.logprobs_result
                for i, chosen in enumerate(result.chosen_candidates or ()):
                    top = (result.top_candidates or [])[i].candidates or []
                    alternatives = [(a.token, a.log_probability) for a in top]
                    found.append((chosen.token, chosen.log_probability, alternatives))
    return found


def test_gemini_logprobs_round_trip_through_the_sdk() -> None:
    from google.genai import types as gtypes
    from tests.translate.test_gemini_fidelity import reencode

    for frame in vector("gemini", "logprobs-result")["frames"]:
        gtypes.GenerateContentResponse.model_validate(frame["data"])
    original = gemini_body("logprobs-result")
    assert sdk_logprobs(reencode(original)) == sdk_logprobs(original) != []


def test_chat_logprobs_reach_a_gemini_client() -> None:
    from tests.translate.test_openai import vector_body as chat_body

    from tokenwire.translate.gemini import EventEncoder as GeminiEncoder

    t = translator("openai", model="m")
    events = t.feed(chat_body(vector("openai", "fid-logprobs-on-text"))) + t.close()
    encoder = GeminiEncoder(model="m")
    assert sdk_logprobs(b"".join(encoder.encode(e) for e in events)) == [
        ("Hello", -0.01, [("Hello", -0.01), ("Hi", -4.6)]),
        ("!", -0.3, [("!", -0.3), (".", -1.4)]),
    ]


@pytest.mark.parametrize(
    ("vendor", "folder", "name"),
    [
        ("anthropic", "anthropic", "refusal-no-content"),
        ("anthropic", "anthropic", "refusal-after-text"),
        ("openai", "openai", "fid-refusal-marked"),
        ("openai-responses", "openai-responses", "fid-refusal-only"),
        ("gemini", "gemini", "safety-refusal"),
        ("gemini", "gemini", "prompt-blocked"),
    ],
)
def test_one_refusal_carrier_for_every_vendor(vendor: str, folder: str, name: str) -> None:
    from tests.translate.test_openai import vector_body as chat_body

    data = vector(folder, name)
    body = {"anthropic": anthropic_body, "openai": chat_body}.get(vendor, frame_body)(data)
    t = translator(vendor, model="m")
    events = t.feed(body) + t.close()
    marked = [b["index"] for e in events if (b := x.fields(e, x.BLOCK)) and b.get(x.REFUSAL)]
    stops = [b for e in events if (b := x.fields(e, x.STOP))]
    assert len(marked) == 1 and not any(x.REFUSAL in b for b in stops)
    # The marked block ends with content_filter.
    assert [
        e.stop_reason for e in events if isinstance(e, ev.ContentStop) and e.index == marked[0]
    ] == ["content_filter"]
