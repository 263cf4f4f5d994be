"""Issue 18, OpenAI Chat Completions and Responses: what survives the gateway.

- the fidelity vectors (``fid-*.json``): the standard output, extension events
  included, asserted field by field;
- the request side: reasoning items (Responses) and ``reasoning_content``
  (Chat) sent back on the next turn, other vendors' signatures dropped;
- round trips: a vendor stream -> the standard -> the same vendor format (the
  ingress encoders) -> the real ``openai`` SDK, whose final message equals the
  one it builds from the original stream.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai.lib.streaming.chat import ChatCompletionStreamState
from tests.translate.conftest import assert_conformant, translate_pieces
from tests.translate.frame_vectors import check_vector as check_frame_vector
from tests.translate.frame_vectors import vector_body as frame_body
from tests.translate.frame_vectors import vector_options
from tests.translate.test_openai import check_vector as check_chat_vector
from tests.translate.test_openai import vector_body as chat_body

from tokenwire import events as ev
from tokenwire import request as rq
from tokenwire.testing import openai_responses as fake_responses
from tokenwire.testing.upstream import RecordedRequest, Script, ScriptedToolCall
from tokenwire.translate import _extensions as x
from tokenwire.translate import translator
from tokenwire.translate.openai import ChunkEncoder
from tokenwire.translate.openai import build_request as chat_request
from tokenwire.translate.openai_responses import ResponsesEncoder, request_from_vendor
from tokenwire.translate.openai_responses import build_request as responses_request

VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "translate"


def load(folder: str) -> list[dict[str, Any]]:
    paths = sorted((VECTORS / folder).glob("fid-*.json"))
    return [json.loads(p.read_text(encoding="utf-8")) for p in paths]


RESPONSES_VECTORS = load("openai-responses")
CHAT_VECTORS = load("openai")


def extension_events(out: list[ev.Event]) -> list[list[Any]]:
    """``[type, fields]`` of each tokenwire extension event, without the envelope."""
    found = []
    for event in out:
        body = x.fields(event)
        if body is not None:
            found.append(
                [event.type, {k: v for k, v in body.items() if k not in ("type", "v", "seq")}]
            )
    return found


def test_there_is_a_vector_for_each_feature() -> None:
    assert len(RESPONSES_VECTORS) >= 9 and len(CHAT_VECTORS) >= 8


@pytest.mark.parametrize("vector", RESPONSES_VECTORS, ids=[v["name"] for v in RESPONSES_VECTORS])
def test_responses_fidelity_vector(vector: dict[str, Any]) -> None:
    check_frame_vector("openai-responses", vector)  # types, text, reasoning, calls, stops...
    t = translator("openai-responses", model="test-model", created=0, **vector_options(vector))
    out = t.feed(frame_body(vector)) + t.close()
    expect = vector["expect"]
    assert extension_events(out) == expect["extensions"], vector["description"]
    blocks: dict[str, str] = {}
    for e in out:
        if isinstance(e, ev.ContentDelta):
            blocks[str(e.index)] = blocks.get(str(e.index), "") + e.text
        elif isinstance(e, ev.ToolCall):
            blocks[str(e.index)] = f"tool.call {e.name}"
    assert blocks == expect["blocks"], vector["description"]
    assert dict(t.unknown_types) == expect.get("unknown_types", {})  # type: ignore[attr-defined]
    # A refusal block never carries answer text: each marked block is apart.
    refusals = {b[1]["index"] for b in expect["extensions"] if b[1].get(x.REFUSAL)}
    answer = {e.index for e in out if isinstance(e, ev.ContentDelta) and e.index not in refusals}
    assert not refusals & answer


@pytest.mark.parametrize("vector", CHAT_VECTORS, ids=[v["name"] for v in CHAT_VECTORS])
def test_chat_fidelity_vector(vector: dict[str, Any]) -> None:
    check_chat_vector("openai", vector)  # text/reasoning per block, calls, stops, usage, error
    t = translator("openai", model="test-model", created=0, **vector.get("options", {}))
    out = t.feed(chat_body(vector)) + t.close()
    expect = vector["expect"]
    assert [e.type for e in out] == expect["types"], vector["description"]
    assert extension_events(out) == expect["extensions"], vector["description"]
    assert dict(t.unknown_types) == expect.get("unknown_types", {})  # type: ignore[attr-defined]


def test_encrypted_reasoning_is_kept_from_the_recording(vendor_fixtures: Path) -> None:
    path = (
        vendor_fixtures / "openai-responses" / "vercel-openai-reasoning-encrypted-content.1.jsonl"
    )
    lines = [
        json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
    ]
    body = "".join(f"event: {o['type']}\ndata: {json.dumps(o)}\n\n" for o in lines).encode()
    out = translate_pieces("openai-responses", [body], reasoning=True)
    assert_conformant(out)
    added = next(o for o in lines if o["type"] == "response.output_item.added")["item"]
    sealed = [b for kind, b in extension_events(out) if kind == x.BLOCK and x.REDACTED in b]
    assert sealed[0] == {
        "index": 0,
        x.REASONING: True,
        x.ITEM_ID: added["id"],
        x.REDACTED: added["encrypted_content"],
        x.VENDOR: "openai-responses",
    }
    summary = "".join(
        o["delta"]
        for o in lines[: lines.index(next(o for o in lines if o["type"] == "response.completed"))]
        if o["type"] == "response.reasoning_summary_text.delta" and o["output_index"] == 0
    )
    assert (
        "".join(e.text for e in out if isinstance(e, ev.ContentDelta) and e.index == 0) == summary
    )


# --- the request side: the next turn --------------------------------------------------


def reasoning_part(vendor: str, **fields: Any) -> dict[str, Any]:
    return {"type": x.REASONING, x.VENDOR: vendor, **fields}


def history_request(parts: list[dict[str, Any]]) -> rq.Request:
    return rq.build(
        model="m",
        messages=[
            {"role": "user", "content": "weather?"},
            {
                "role": "assistant",
                "content": "Let me check.",
                "tool_calls": [
                    {"id": "call_1", "name": "get_weather", "arguments": '{"city":"Paris"}'}
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "18C"},
        ],
        extensions={x.REASONING_HISTORY: [{"message": 1, "parts": parts}]},
    )


def test_responses_builder_sends_reasoning_items_before_their_calls() -> None:
    parts = [
        reasoning_part(
            "openai-responses", text="Plan.", **{x.ITEM_ID: "rs_1", x.REDACTED: "gAAA1"}
        ),
        reasoning_part("anthropic", text="thinking", **{x.SIGNATURE: "EqQB"}),  # another vendor's
    ]
    body = json.loads(responses_request(history_request(parts), base_url="http://up").body)
    assert body["input"] == [
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "weather?"}],
        },
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "Plan."}],
            "encrypted_content": "gAAA1",
        },
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Let me check.", "annotations": []}],
        },
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "get_weather",
            "arguments": '{"city":"Paris"}',
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "18C"},
    ]


def test_responses_builder_rejects_a_malformed_history() -> None:
    req = rq.build(
        model="m",
        messages=[{"role": "user", "content": "hi"}],
        extensions={x.REASONING_HISTORY: [{"message": 0, "parts": []}]},
    )
    with pytest.raises(rq.InvalidRequest) as raised:
        responses_request(req, base_url="http://up")
    assert raised.value.path == f'extensions["{x.REASONING_HISTORY}"][0].message'


def test_chat_builder_sends_reasoning_content_only_when_asked() -> None:
    parts = [
        reasoning_part("openai", text="Think"),
        {"type": x.REASONING, "text": "ing."},  # unbound (DeepSeek's reasoning_content)
        reasoning_part(
            "openai-responses", text="summary", **{x.ITEM_ID: "rs_1", x.REDACTED: "gAAA"}
        ),
    ]
    req = history_request(parts)
    plain = json.loads(chat_request(req, base_url="http://up/v1").body)
    assert "reasoning_content" not in plain["messages"][1]  # default: api.openai.com takes none
    sent = json.loads(chat_request(req, base_url="http://up/v1", send_reasoning=True).body)
    assert sent["messages"][1]["reasoning_content"] == "Thinking."
    assert sent["messages"][1]["tool_calls"][0]["id"] == "call_1"


def test_send_reasoning_is_a_model_key_the_provider_passes_to_the_builder() -> None:
    from tokenwire.gateway import config
    from tokenwire.gateway.providers import UpstreamClients, build_provider

    entry = {"name": "local", "provider": "openai", "base_url": "http://up/v1"}
    on = config.parse({"models": [{**entry, "send_reasoning": True}]}).models[0]
    off = config.parse({"models": [entry]}).models[0]
    req = history_request([{"type": x.REASONING, "text": "Thinking."}])
    clients = UpstreamClients()
    for model, sent in ((on, True), (off, False)):
        provider = build_provider(model, clients)
        options = provider._options()  # type: ignore[attr-defined]
        body = json.loads(chat_request(req, **options).body)
        assert ("reasoning_content" in body["messages"][1]) is sent
    with pytest.raises(config.ConfigError, match="send_reasoning"):
        config.parse({"models": [{**entry, "provider": "anthropic", "send_reasoning": True}]})


def test_responses_ingress_keeps_reasoning_items_for_the_next_turn() -> None:
    body = {
        "model": "m",
        "stream": True,
        "include": ["reasoning.encrypted_content"],
        "input": [
            {"role": "user", "content": "weather?"},
            {
                "type": "reasoning",
                "id": "rs_1",
                "summary": [{"type": "summary_text", "text": "Plan."}],
                "encrypted_content": "gAAA1",
            },
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_1",
                "name": "get_weather",
                "arguments": "{}",
            },
            {"type": "function_call_output", "call_id": "call_1", "output": "18C"},
        ],
    }
    req = request_from_vendor(body)
    assert [m.role for m in req.messages] == ["user", "assistant", "tool"]
    assert req.extension(x.REASONING) is True
    # What has no standard home travels on to a Responses upstream.
    assert req.extension("vendor:openai-responses") == {"include": ["reasoning.encrypted_content"]}
    assert req.extension(x.REASONING_HISTORY) == [
        {
            "message": 1,
            "parts": [
                {
                    "type": x.REASONING,
                    x.VENDOR: "openai-responses",
                    x.ITEM_ID: "rs_1",
                    "text": "Plan.",
                    x.REDACTED: "gAAA1",
                }
            ],
        }
    ]
    # ... and the Responses builder sends it back where it was.
    sent = json.loads(responses_request(req, base_url="http://up").body)
    assert [i["type"] for i in sent["input"]] == [
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
    ]
    assert sent["input"][1]["encrypted_content"] == "gAAA1"
    assert sent["include"] == ["reasoning.encrypted_content"]


def test_responses_ingress_names_the_bad_field() -> None:
    with pytest.raises(rq.InvalidRequest) as raised:
        request_from_vendor({"model": "m", "input": [{"type": "reasoning", "summary": []}]})
    assert raised.value.path == "input[0].id"


# --- round trips through the real openai SDK ----------------------------------------


def sdk_client(body: bytes) -> openai.OpenAI:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    http = httpx.Client(transport=httpx.MockTransport(answer))
    return openai.OpenAI(
        base_url="http://vendor.test/v1", api_key="x", http_client=http, max_retries=0
    )


def re_encode(vendor: str, body: bytes, encode: Callable[[ev.Event], bytes]) -> bytes:
    """``body`` -> standard events (reasoning carried) -> the vendor's bytes again."""
    t = translator(vendor, model="gpt-test", reasoning=True)
    events = t.feed(body) + t.close()
    assert_conformant(events)
    return b"".join(encode(e) for e in events)


def chat_final(body: bytes) -> dict[str, Any]:
    # create(stream=True), accumulated by the SDK's own stream state (its
    # snapshot: get_final_completion refuses a finish_reason of length).
    state = ChatCompletionStreamState()
    for chunk in sdk_client(body).chat.completions.create(
        model="gpt-test", messages=[], stream=True
    ):
        state.handle_chunk(chunk)
    final = state.current_completion_snapshot.model_dump()
    # The ids, timestamps and model name are the gateway's own (it answers with
    # the caller's model name); audio and prediction token counts are not
    # carried (docs/translation.md), cached and reasoning tokens are.
    for key in ("id", "created", "system_fingerprint", "service_tier", "model"):
        final.pop(key, None)
    usage = final.get("usage") or {}
    for key, keep in (
        ("prompt_tokens_details", "cached_tokens"),
        ("completion_tokens_details", "reasoning_tokens"),
    ):
        if usage.get(key) is not None:
            usage[key] = {keep: usage[key].get(keep)}
    return final


CHAT_ROUND_TRIPS = [
    "fid-refusal-marked",
    "fid-text-then-refusal",
    "fid-annotations-url-citation",
    "fid-usage-details",
    "fid-raw-finish-length",
    "reasoning-carried",
    "text-then-tool-call",
    "parallel-tool-calls-interleaved",
]


@pytest.mark.parametrize("name", CHAT_ROUND_TRIPS)
def test_chat_round_trip_through_the_sdk(name: str) -> None:
    vector = json.loads((VECTORS / "openai" / f"{name}.json").read_text(encoding="utf-8"))
    original = chat_body(vector)
    encoder = ChunkEncoder(model="gpt-test", include_usage=True)
    again = re_encode("openai", original, encoder.encode)
    assert chat_final(again) == chat_final(original)


def completed_with_output(body: bytes) -> bytes:
    """``body`` with the items of its ``output_item.done`` events in its terminal event."""
    out, items = [], []
    for block in body.decode().split("\n\n"):
        if not block.strip():
            continue
        lines = block.split("\n")
        data = json.loads(lines[-1].removeprefix("data: "))
        if data["type"] == "response.output_item.done":
            items.append(data["item"])
        if data["type"] in ("response.completed", "response.incomplete"):
            data["response"]["output"] = items
        out.append("\n".join([*lines[:-1], "data: " + json.dumps(data)]) + "\n\n")
    return "".join(out).encode()


def responses_final(body: bytes) -> dict[str, Any]:
    # create(stream=True): the SDK's typed events; the final response is the
    # one the terminal event carries (the stream helper takes only completed).
    final: Any = None
    stream = sdk_client(body).responses.create(model="gpt-test", input="hi", stream=True)
    for event in stream:
        if event.type in ("response.completed", "response.incomplete", "response.failed"):
            final = event.response
    assert final is not None
    projected: dict[str, Any] = {"status": final.status, "output": []}
    if final.usage is not None:
        projected["usage"] = final.usage.model_dump()
    if final.incomplete_details is not None:
        projected["incomplete"] = final.incomplete_details.reason
    for item in final.output:
        dumped = item.model_dump(exclude_none=True)
        if item.type != "reasoning":
            dumped.pop("id", None)  # message and call item ids are the vendor's, not carried
        for part in dumped.get("content", ()):
            part.pop("logprobs", None)
            part.pop("parsed", None)
        dumped.pop("parsed_arguments", None)
        projected["output"].append(dumped)
    return projected


def fake_body(script: Script, include: bool) -> bytes:
    sent = {"model": "m", "input": "hi", "stream": True}
    if include:
        sent["include"] = ["reasoning.encrypted_content"]
    request = RecordedRequest(
        method="POST", path="/v1/responses", headers={}, body=json.dumps(sent).encode()
    )
    return b"".join(fake_responses.render(script, model="gpt-test", request=request))


RESPONSES_ROUND_TRIPS: dict[str, Callable[[], bytes]] = {
    "fake-reasoning-encrypted-tool-call": lambda: fake_body(
        Script(
            text="Checking.",
            thinking="I will call the tool.",
            tool_calls=[ScriptedToolCall("get_weather", {"city": "Paris"})],
        ),
        include=True,
    ),
    "fake-text": lambda: fake_body(Script(text="Hello there."), include=False),
    "fake-max-tokens": lambda: fake_body(
        Script(text="Cut", stop_reason="max_tokens"), include=False
    ),
    **{
        name: (
            lambda name=name: completed_with_output(
                frame_body(
                    json.loads(
                        (VECTORS / "openai-responses" / f"{name}.json").read_text(encoding="utf-8")
                    )
                )
            )
        )
        # (fid-reasoning-encrypted-kept has two summary parts, which come back
        # as one, and fid-refusal-own-block one item of two parts, which comes
        # back as two items: docs/translation.md.)
        for name in (
            "fid-reasoning-encrypted-without-flag",
            "fid-server-tools-and-citation",
            "fid-refusal-only",
            "fid-usage-details",
            "fid-incomplete-raw-reason",
        )
    },
}


@pytest.mark.parametrize("name", list(RESPONSES_ROUND_TRIPS))
def test_responses_round_trip_through_the_sdk(name: str) -> None:
    original = RESPONSES_ROUND_TRIPS[name]()
    encoder = ResponsesEncoder(model="gpt-test")
    again = re_encode("openai-responses", original, encoder.encode)
    assert responses_final(again) == responses_final(original)


def test_responses_ingress_passes_hosted_tools_to_a_responses_upstream_only() -> None:
    function = {"type": "function", "name": "f", "parameters": {"type": "object"}, "strict": True}
    hosted = {"type": "web_search"}
    req = request_from_vendor({"model": "m", "input": "hi", "tools": [function, hosted]})
    assert [t.name for t in req.tools or []] == ["f"]
    sent = json.loads(responses_request(req, base_url="http://up").body)
    assert sent["tools"] == [function, hosted]  # the caller's list, unchanged
    chat = json.loads(chat_request(req, base_url="http://up/v1").body)
    assert [t["function"]["name"] for t in chat["tools"]] == ["f"]
    assert "web_search" not in json.dumps(chat)
