"""What an agent needs on its next turn crosses vendors whole: namespace tools named
back, reasoning seals the gateway mints and opens, Gemini results in their calls'
order, cache reads at an Anthropic client."""

from __future__ import annotations

import base64
import json
from typing import Any

import msgspec
import pytest

from tokenwire import events as ev
from tokenwire import request as rq
from tokenwire.errors import InvalidRequest
from tokenwire.translate import _extensions as x
from tokenwire.translate import get
from tokenwire.translate.adapt import signatures
from tokenwire.translate.anthropic.ingress import EventEncoder
from tokenwire.translate.gemini.request import request_body
from tokenwire.translate.openai_responses.ingress import parse_ingress
from tokenwire.translate.openai_responses.items import flat_name

KEY = b"k" * 32
USER = {"role": "user", "content": "q"}
START = ev.StreamStart(v=ev.VERSION, seq=0, model="m", created=1)
END = ev.StreamEnd(v=ev.VERSION, seq=99)


def _frames(data: bytes) -> list[dict[str, Any]]:
    lines = data.decode().splitlines()
    return [json.loads(line[6:]) for line in lines if line.startswith("data: {")]


def _codex_body(**extra: Any) -> dict[str, Any]:
    namespace = {
        "type": "namespace",
        "name": "mcp__files__",
        "description": "files",
        "tools": [{"type": "function", "name": "read", "parameters": {"type": "object"}}],
    }
    long = {
        "type": "namespace",
        "name": "n" * 60,
        "tools": [{"type": "function", "name": "tool", "parameters": {"type": "object"}}],
    }
    return {"model": "m", "input": "read it", "tools": [namespace, long], **extra}


def test_namespace_tools_are_flat_upstream_and_named_back_to_the_client() -> None:
    request, encode = parse_ingress(_codex_body())
    names = [t.name for t in request.tools or ()]
    assert names[0] == "mcp__files__read"
    assert len(names[1]) == 64 and names[1] == flat_name("n" * 60, "tool")
    call = ev.ToolCall(v=ev.VERSION, seq=1, index=0, id="call_1", name=names[0], arguments="{}")
    out = encode(START) + encode(call)
    done = [f for f in _frames(out) if f["type"] == "response.output_item.done"]
    assert done[0]["item"]["name"] == "read" and done[0]["item"]["namespace"] == "mcp__files__"
    # Next turn, the call comes back under its namespace: the upstream sees the flat name.
    history = [
        {"type": "function_call", "call_id": "call_1", "name": "read", "namespace": "mcp__files__",
         "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "text"},
    ]  # fmt: skip
    again, _ = parse_ingress(_codex_body(input=history))
    calls = again.messages[0].tool_calls or []
    assert calls[0].name == "mcp__files__read"


def test_a_namespace_of_hosted_tools_is_refused_with_its_path() -> None:
    body = {"model": "m", "input": "x", "tools": [
        {"type": "namespace", "name": "ns", "tools": [{"type": "web_search"}]}
    ]}  # fmt: skip
    with pytest.raises(InvalidRequest) as caught:
        parse_ingress(body)
    assert caught.value.path == "tools[0].tools[0].type"


# --- reasoning seals ------------------------------------------------------------------


def _thought(seq: int, text: str) -> ev.ContentDelta:
    return ev.ContentDelta(
        v=ev.VERSION, seq=seq, index=1, role="assistant", delta=ev.Delta(text=text), reasoning=True
    )


def _thinking_then_call(vendor_seal: dict[str, Any] | None) -> list[ev.Event]:
    events: list[ev.Event] = [START, _thought(1, "Let me "), _thought(2, "look.")]
    if vendor_seal is not None:
        events.append(x.extension(x.BLOCK, {"index": 1, **vendor_seal}))
    events += [
        ev.ContentStop(v=ev.VERSION, seq=4, index=1, stop_reason="end_turn"),
        ev.ToolCall(v=ev.VERSION, seq=5, index=0, id="toolu_1", name="Read", arguments="{}"),
        x.extension(x.BLOCK, {"index": 0, x.TOOL_CALL_ID: "toolu_1", x.SIGNATURE: "gsig",
                              x.VENDOR: "gemini"}),
        ev.ContentStop(v=ev.VERSION, seq=7, index=0, stop_reason="tool_use"),
        END,
    ]  # fmt: skip
    return events


def _anthropic_answer(events: list[ev.Event]) -> list[dict[str, Any]]:
    """The content blocks an Anthropic client builds from the encoded stream."""
    minter = signatures.Minter("anthropic", KEY)
    encoder = EventEncoder(model="m")
    data = b"".join(encoder.encode(e) for event in events for e in minter.feed(event))
    blocks: dict[int, dict[str, Any]] = {}
    for frame in _frames(data):
        if frame["type"] == "content_block_start":
            blocks[frame["index"]] = dict(frame["content_block"])
        elif frame["type"] == "content_block_delta":
            delta, block = frame["delta"], blocks[frame["index"]]
            if delta["type"] == "thinking_delta":
                block["thinking"] += delta["thinking"]
            elif delta["type"] == "signature_delta":
                block["signature"] = delta["signature"]
    return [blocks[i] for i in sorted(blocks)]


def _next_turn(content: list[dict[str, Any]]) -> rq.Request:
    body = {
        "model": "m",
        "max_tokens": 100,
        "messages": [
            {"role": "user", "content": "read a.txt"},
            {"role": "assistant", "content": content},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "A"}],
            },
        ],  # fmt: skip
    }
    ingress = get("anthropic").ingress
    assert ingress is not None
    return signatures.rebind(ingress.parse(body)[0], "anthropic", KEY)


def test_an_anthropic_client_gets_signed_thinking_from_another_vendor_and_it_comes_back() -> None:
    content = _anthropic_answer(_thinking_then_call(None))
    thinking = [b for b in content if b["type"] == "thinking"]
    assert thinking[0]["thinking"] == "Let me look."
    assert all(b["signature"].startswith(signatures.PREFIX) for b in thinking)
    request = _next_turn(content)
    (entry,) = request.extension(x.REASONING_HISTORY)
    parts = entry["parts"]
    # Unsealed reasoning (an OpenAI-compatible server's) is text again, bound to no
    # vendor, so reasoning_content can carry it back; Gemini's call signature is Gemini's.
    assert {"type": x.REASONING, "text": "Let me look."} in parts
    assert {"type": x.REASONING, x.SIGNATURE: "gsig", x.TOOL_CALL_ID: "toolu_1",
            x.VENDOR: "gemini"} in parts  # fmt: skip
    chat = json.loads(get("openai").build_request(request, base_url="http://x",
                                                  send_reasoning=True).body)  # fmt: skip
    assert chat["messages"][1]["reasoning_content"] == "Let me look."
    gemini = request_body(request)
    assert gemini["contents"][1]["parts"][-1]["thoughtSignature"] == "gsig"


def test_an_altered_thinking_block_is_refused() -> None:
    content = _anthropic_answer(_thinking_then_call(None))
    content[0]["thinking"] = "Let me not look."
    with pytest.raises(InvalidRequest) as caught:
        _next_turn(content)
    assert "does not match" in caught.value.reason


def test_a_responses_client_gets_encrypted_reasoning_from_anthropic_and_it_comes_back() -> None:
    seal = {x.SIGNATURE: "anthropic-sig", x.VENDOR: "anthropic"}
    minter = signatures.Minter("openai-responses", KEY)
    _request, encode = parse_ingress(
        {"model": "m", "input": "x", "include": ["reasoning.encrypted_content"]}
    )
    data = b"".join(encode(e) for event in _thinking_then_call(seal) for e in minter.feed(event))
    done = [f["item"] for f in _frames(data) if f["type"] == "response.output_item.done"]
    reasoning = [i for i in done if i["type"] == "reasoning"]
    assert reasoning[0]["encrypted_content"].startswith(signatures.PREFIX)
    back = {"model": "m", "input": [
        {"role": "user", "content": "x"},
        {k: reasoning[0][k] for k in ("type", "id", "summary", "encrypted_content")},
        {"type": "function_call", "call_id": "toolu_1", "name": "Read", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "toolu_1", "output": "A"},
    ]}  # fmt: skip
    request = signatures.rebind(parse_ingress(back)[0], "openai-responses", KEY)
    built = json.loads(get("anthropic").build_request(request, base_url="http://x").body)
    first = built["messages"][1]["content"][0]
    assert first == {"type": "thinking", "thinking": "Let me look.", "signature": "anthropic-sig"}


def test_tokens_are_standard_base64_and_of_this_key_only() -> None:
    token = signatures.mint(KEY, "anthropic", [{"a": 1}], "text")
    assert base64.b64encode(base64.b64decode(token, validate=True)).decode() == token
    assert signatures.is_token(token) and not signatures.is_token("EqQBCkYIBxgCKkB")


def test_tokens_of_another_key_are_refused() -> None:
    token = signatures.mint(b"other" * 8, "gemini", [], "")
    with pytest.raises(ValueError):
        signatures.open_token(KEY, "gemini", token, "")
    ours = signatures.mint(KEY, "gemini", [{"a": 1}], "")
    # A Gemini client's token does not cover the text (it comes back on another part).
    assert signatures.open_token(KEY, "gemini", ours, "any text") == [{"a": 1}]
    with pytest.raises(ValueError):
        signatures.open_token(KEY, "gemini", ours[:-8] + "AAAAAAA=", "")


# --- Gemini pairs results by order; cache reads at an Anthropic client ----------------


def test_gemini_gets_results_in_the_order_of_their_calls() -> None:
    calls = [
        {"id": "paris", "name": "weather", "arguments": '{"city": "Paris"}'},
        {"id": "vienna", "name": "weather", "arguments": '{"city": "Vienna"}'},
    ]
    request = rq.build(model="g", messages=[
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": None, "tool_calls": calls},
        {"role": "tool", "tool_call_id": "vienna", "content": "Vienna: 20"},
        {"role": "tool", "tool_call_id": "paris", "content": "Paris: 10"},
    ])  # fmt: skip
    parts = request_body(request)["contents"][-1]["parts"]
    assert [p["functionResponse"]["response"]["result"] for p in parts] == [
        "Paris: 10",
        "Vienna: 20",
    ]


def test_cache_reads_reach_an_anthropic_client_without_cache_writes() -> None:
    encoder = EventEncoder(model="m")
    usage = ev.Usage(v=ev.VERSION, seq=2, input_tokens=100, output_tokens=5)
    cached = x.extension(x.USAGE, {x.CACHE_READ: 80})
    data = b"".join(encoder.encode(e) for e in (START, usage, cached, END))
    delta = next(f for f in _frames(data) if f["type"] == "message_delta")
    assert delta["usage"]["cache_read_input_tokens"] == 80
    assert delta["usage"]["input_tokens"] == 20
    assert delta["usage"]["cache_creation_input_tokens"] == 0


def test_minting_is_off_for_a_chat_client() -> None:
    minter = signatures.Minter("openai", KEY)
    events = _thinking_then_call({x.SIGNATURE: "s", x.VENDOR: "anthropic"})
    assert [e for event in events for e in minter.feed(event)] == events
    assert msgspec.json.encode(events[0])


# --- a cut Gemini answer never looks complete, at any ingress -------------------------


def _gemini_other() -> list[ev.Event]:
    from tokenwire.translate import translator

    chunk = {
        "candidates": [
            {
                "content": {"role": "model", "parts": [{"text": "Half an ans"}]},
                "finishReason": "OTHER",
            }
        ],
        "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 2},
    }
    t = translator("gemini", model="g", request_id="r1")
    return t.feed(b"data: " + msgspec.json.encode(chunk) + b"\r\n\r\n") + t.close()


@pytest.mark.parametrize(
    ("client", "field", "expected"),
    [
        ("anthropic", "stop_reason", "refusal"),
        ("openai", "finish_reason", "content_filter"),
        ("openai-responses", "status", "incomplete"),
        ("gemini", "finishReason", "OTHER"),
    ],
)
def test_gemini_other_is_no_clean_stop_at_any_ingress(
    client: str, field: str, expected: str
) -> None:
    body: dict[str, Any] = {
        "model": "m",
        "max_tokens": 5,
        "messages": [{"role": "user", "content": "q"}],
    }
    if client == "openai-responses":
        body = {"model": "m", "input": "q"}
    elif client == "gemini":
        body = {"model": "m", "contents": [{"role": "user", "parts": [{"text": "q"}]}]}
    ingress = get(client).ingress
    assert ingress is not None
    _request, encode = ingress.parse(body)
    data = b"".join(encode(e) for e in _gemini_other()).decode()
    found = [value for frame in _frames(data.encode()) for value in _values(frame, field)]
    assert expected in found, found


def _values(obj: Any, field: str) -> list[Any]:
    if isinstance(obj, dict):
        return [v for k, v in obj.items() if k == field] + [
            x for v in obj.values() for x in _values(v, field)
        ]
    if isinstance(obj, list):
        return [x for v in obj for x in _values(v, field)]
    return []


@pytest.mark.parametrize(
    ("vendor", "finish"), [("openai", "abort"), ("anthropic", "paused_forever")]
)
def test_an_unknown_stop_is_never_clean(vendor: str, finish: str) -> None:
    from tokenwire.translate import translator

    if vendor == "openai":
        chunk = {
            "id": "c",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "m",
            "choices": [{"index": 0, "delta": {"content": "Hal"}, "finish_reason": finish}],
        }
        body = b"data: " + msgspec.json.encode(chunk) + b"\n\ndata: [DONE]\n\n"
    else:
        frames = [
            (
                "message_start",
                {
                    "type": "message_start",
                    "message": {
                        "id": "m",
                        "type": "message",
                        "role": "assistant",
                        "model": "m",
                        "content": [],
                        "usage": {"input_tokens": 1, "output_tokens": 1},
                    },
                },
            ),
            (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "text", "text": ""},
                },
            ),
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": "Hal"},
                },
            ),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": finish},
                    "usage": {"output_tokens": 1},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
        body = b"".join(
            b"event: %s\ndata: %s\n\n" % (n.encode(), msgspec.json.encode(d)) for n, d in frames
        )
    t = translator(vendor, model="m", request_id="r")
    events = t.feed(body) + t.close()
    stops = [e.stop_reason for e in events if isinstance(e, ev.ContentStop)]
    assert stops == ["content_filter"]
    raw = [x.fields(e) for e in events if e.type == x.STOP]
    assert raw and raw[0] is not None and raw[0][x.RAW_STOP_REASON] == finish
