"""Anthropic fidelity (issue 18): signed and redacted thinking, the next turn, the strict fake.

* the stream side (signatures, redacted blocks, server tools, citations, cache
  counts, raw stop reason) is asserted field by field by the vectors in
  ``tests/vectors/translate/anthropic/`` (``test_anthropic.test_vector``); here
  they are checked once more through the real SDK: a vendor stream goes to the
  standard and back (``EventEncoder``), and the SDK builds the same message;
* the request side: an Anthropic body's thinking blocks come back, first and
  byte-identical, in the body ``build_request`` sends upstream;
* the fake refuses, as Anthropic does, a next turn whose reasoning was dropped,
  reordered or altered.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import anthropic
import httpx
import httpx2
import msgspec
import pytest

from tokenwire import events as ev
from tokenwire import request as rq
from tokenwire.errors import InvalidRequest
from tokenwire.gateway.providers import HTTPProvider, new_client
from tokenwire.testing import anthropic as fake_anthropic
from tokenwire.testing.upstream import FakeUpstream, RecordedRequest, Script, ScriptedToolCall
from tokenwire.translate import _extensions as x
from tokenwire.translate import anthropic as tr
from tokenwire.translate import get, translator

THINKING = Script(
    text="Let me look that up.",
    thinking="The user wants the weather; I should call the tool.",
    redacted_thinking=True,
    tool_calls=[ScriptedToolCall("get_weather", {"city": "Paris"})],
)
TOOLS = [
    {
        "name": "get_weather",
        "description": "The weather in a city.",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
]
THINKING_CONFIG = {"type": "enabled", "budget_tokens": 1024}
QUESTION = {"role": "user", "content": "Weather in Paris?"}
MESSAGE = {"id": "msg_1", "type": "message", "role": "assistant", "model": "c", "content": []}


def rendered(script: Script) -> bytes:
    request = RecordedRequest(method="POST", path="/v1/messages", headers={}, body=b"{}")
    return b"".join(fake_anthropic.render(script, model="claude-fake", request=request))


def sdk_message(body: bytes) -> Any:
    """What the real ``anthropic`` SDK accumulates from an SSE ``body`` (no network)."""
    # The SDK speaks httpx2; a mock transport serves the body without a socket.
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
    with client.messages.stream(
        model="claude-fake", max_tokens=2048, messages=[QUESTION], thinking=THINKING_CONFIG
    ) as stream:
        return stream.get_final_message()


def round_trip(body: bytes) -> bytes:
    """Vendor body -> standard events (reasoning on) -> Anthropic SSE again."""
    t = translator("anthropic", model="claude-fake", reasoning=True)
    events = t.feed(body) + t.close()
    encoder = tr.EventEncoder(model="claude-fake")
    return b"".join(encoder.encode(e) for e in events)


# --- the SDK reads the round trip as it reads the original ---------------------------


@pytest.mark.parametrize(
    "script",
    [
        THINKING,
        Script(text="Plain answer.", thinking="Short thought."),
        Script(text="", redacted_thinking=True, tool_calls=[ScriptedToolCall("noop", {})]),
    ],
    ids=["thinking-redacted-tool", "thinking-text", "redacted-tool"],
)
def test_sdk_builds_the_same_message_from_the_round_trip(script: Script) -> None:
    original = sdk_message(rendered(script))
    again = sdk_message(round_trip(rendered(script)))
    assert [b.model_dump() for b in again.content] == [b.model_dump() for b in original.content]
    assert again.stop_reason == original.stop_reason
    assert again.usage.output_tokens == original.usage.output_tokens
    # The blocks the next turn needs are really there, signatures included.
    kinds = [b.type for b in again.content]
    assert kinds[0] in ("thinking", "redacted_thinking")
    for block in again.content:
        if block.type == "thinking":
            assert block.signature == fake_anthropic.signature(block.thinking)


def test_round_trip_carries_server_tools_citations_cache_and_raw_stop() -> None:
    def frame(obj: dict[str, Any]) -> bytes:
        return b"event: %s\ndata: %s\n\n" % (obj["type"].encode(), json.dumps(obj).encode())

    usage = {"input_tokens": 5, "cache_read_input_tokens": 40, "cache_creation_input_tokens": 2}
    search = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}
    result = {
        "type": "web_search_tool_result",
        "tool_use_id": "srvtoolu_1",
        "content": [{"type": "web_search_result", "url": "https://e.com", "title": "E"}],
    }
    citation = {"type": "char_location", "cited_text": "E", "document_index": 0}
    citation.update({"document_title": None, "start_char_index": 0, "end_char_index": 1})
    events = [
        {"type": "message_start", "message": {**MESSAGE, "usage": usage}},
        {"type": "content_block_start", "index": 0, "content_block": search},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": '{"query":"e"}'},
        },
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": result},
        {"type": "content_block_stop", "index": 1},
        {
            "type": "content_block_start",
            "index": 2,
            "content_block": {"type": "text", "text": "", "citations": []},
        },
        {
            "type": "content_block_delta",
            "index": 2,
            "delta": {"type": "citations_delta", "citation": citation},
        },
        {
            "type": "content_block_delta",
            "index": 2,
            "delta": {"type": "text_delta", "text": "E says so."},
        },
        {"type": "content_block_stop", "index": 2},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "pause_turn"},
            "usage": {"output_tokens": 9},
        },
        {"type": "message_stop"},
    ]
    body = b"".join(map(frame, events))
    message = sdk_message(round_trip(body))
    assert [b.type for b in message.content] == [
        "server_tool_use",
        "web_search_tool_result",
        "text",
    ]
    assert message.content[0].input == {"query": "e"}
    assert message.content[1].model_dump()["content"][0]["url"] == "https://e.com"
    assert message.content[2].text == "E says so."
    assert [c.cited_text for c in message.content[2].citations or []] == ["E"]
    # Block for block what the SDK builds from the original stream.
    original = sdk_message(body)
    assert [b.model_dump() for b in message.content] == [b.model_dump() for b in original.content]
    assert message.stop_reason == "pause_turn"  # the raw value, not the mapped end_turn
    assert message.usage.input_tokens == 5
    assert message.usage.cache_read_input_tokens == 40
    assert message.usage.cache_creation_input_tokens == 2


def test_a_signature_bound_to_another_vendor_is_not_sent_as_anthropic() -> None:
    encoder = tr.EventEncoder(model="m")
    start = ev.StreamStart(v=ev.VERSION, seq=0, model="m", created=0)
    foreign = x.extension(x.BLOCK, {"index": 0, x.SIGNATURE: "gem-sig", x.VENDOR: "gemini"})
    assert b"signature_delta" not in encoder.encode(start) + encoder.encode(foreign)


# --- the next turn: the request side --------------------------------------------------


def next_turn_body(first: Any, *, tool_result: str = "18°C, sunny") -> dict[str, Any]:
    """The second request of a tool loop, as the SDK user writes it."""
    call = next(b for b in first["content"] if b["type"] == "tool_use")
    return {
        "model": "claude-fake",
        "max_tokens": 2048,
        "stream": True,
        "thinking": THINKING_CONFIG,
        "tools": TOOLS,
        "messages": [
            QUESTION,
            {"role": "assistant", "content": first["content"]},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": call["id"], "content": tool_result}
                ],
            },
        ],
    }


def first_turn_content() -> dict[str, Any]:
    blocks = fake_anthropic.reasoning_blocks(THINKING)
    digest = fake_anthropic.turn_digest(blocks)
    call = {
        "type": "tool_use",
        "id": f"toolu_fake0000_{digest}",
        "name": "get_weather",
        "input": {"city": "Paris"},
    }
    return {"content": [*blocks, {"type": "text", "text": "Let me look that up."}, call]}


def test_ingress_keeps_the_reasoning_and_the_builder_sends_it_first_byte_identical() -> None:
    body = next_turn_body(first_turn_content())
    req = tr.request_from_vendor(body)
    history = req.extension(x.REASONING_HISTORY)
    assert history == [
        {
            "message": 1,
            "parts": [
                {
                    "type": "tokenwire:reasoning",
                    "text": THINKING.thinking,
                    x.SIGNATURE: fake_anthropic.signature(THINKING.thinking),
                    x.VENDOR: "anthropic",
                },
                {
                    "type": "tokenwire:reasoning",
                    x.REDACTED: fake_anthropic.redacted_data(THINKING.thinking),
                    x.VENDOR: "anthropic",
                },
            ],
        }
    ]
    # The request survives the standard's own encoding (as it travels to /v1/stream).
    req = rq.parse(rq.dumps(req))
    sent = msgspec.json.decode(tr.build_request(req, base_url="http://h").body)
    assert sent["messages"][1]["content"] == body["messages"][1]["content"]
    assert sent["thinking"] == THINKING_CONFIG
    # Byte-identical and first: the assistant content opens with the very bytes
    # of the original thinking and redacted blocks.
    thinking, redacted = map(msgspec.json.encode, body["messages"][1]["content"][:2])
    opening = b'{"role":"assistant","content":[' + thinking + b"," + redacted + b","
    assert opening in tr.build_request(req, base_url="http://h").body


def test_reasoning_of_another_vendor_is_dropped_cleanly() -> None:
    req = rq.build(
        model="m",
        messages=[
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"},
            {"role": "user", "content": "again"},
        ],
        extensions={
            x.REASONING_HISTORY: [
                {
                    "message": 1,
                    "parts": [{"type": x.REASONING, "text": "t", x.SIGNATURE: "s", x.VENDOR: "x"}],
                }
            ]
        },
    )
    sent = msgspec.json.decode(tr.build_request(req, base_url="http://h").body)
    assert sent["messages"][1] == {"role": "assistant", "content": "hello"}


@pytest.mark.parametrize(
    ("history", "path"),
    [
        ("nope", 'extensions["tokenwire:reasoning_history"]'),
        ([{"message": 0, "parts": []}], 'extensions["tokenwire:reasoning_history"][0].message'),
        ([{"message": 1, "parts": [{"type": "text"}]}], "[0].parts[0]"),
    ],
)
def test_a_malformed_reasoning_history_names_the_value(history: Any, path: str) -> None:
    req = rq.build(
        model="m",
        messages=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "a"}],
        extensions={x.REASONING_HISTORY: history},
    )
    with pytest.raises(InvalidRequest) as info:
        tr.build_request(req, base_url="http://h")
    assert path in info.value.path


# --- the strict fake --------------------------------------------------------------------


def post(fake: FakeUpstream, body: dict[str, Any]) -> httpx.Response:
    headers = {"anthropic-version": "2023-06-01", "x-api-key": "x"}
    return httpx.post(fake.url + "/v1/messages", json=body, headers=headers, timeout=10)


def altered(body: dict[str, Any], change: str) -> dict[str, Any]:
    body = json.loads(json.dumps(body))
    content = body["messages"][1]["content"]
    if change == "dropped":
        del content[:2]
    elif change == "thinking-dropped":
        del content[0]
    elif change == "reordered":
        content[0], content[1] = content[1], content[0]
    elif change == "text-altered":
        content[0]["thinking"] += " "
    elif change == "signature-altered":
        content[0]["signature"] = content[0]["signature"][:-4] + "AAAA"
    elif change == "redacted-altered":
        content[1]["data"] = "EmwK" + content[1]["data"][4:][::-1]
    return body


def test_the_fake_takes_the_intact_next_turn() -> None:
    with FakeUpstream("anthropic", Script(text="It is sunny.")) as fake:
        response = post(fake, next_turn_body(first_turn_content()))
        assert response.status_code == 200, response.text
        assert fake.errors == []


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("dropped", "Expected `thinking` or `redacted_thinking`, but found `text`"),
        ("thinking-dropped", "cannot be modified"),
        ("reordered", "cannot be modified"),
        ("text-altered", "Invalid `signature` in `thinking` block"),
        ("signature-altered", "Invalid `signature` in `thinking` block"),
        ("redacted-altered", "cannot be modified"),
    ],
)
def test_the_fake_refuses_a_turn_whose_reasoning_changed(change: str, message: str) -> None:
    with FakeUpstream("anthropic", Script(text="It is sunny.")) as fake:
        response = post(fake, altered(next_turn_body(first_turn_content()), change))
        assert response.status_code == 400
        error = response.json()
        assert error["type"] == "error"
        assert error["error"]["type"] == "invalid_request_error"
        assert message in error["error"]["message"]
        assert fake.wait_for(lambda f: bool(f.errors))
        assert fake.errors[0].startswith("rejected: ")


def test_the_sdk_sees_the_refusal_as_anthropic_sends_it() -> None:
    with FakeUpstream("anthropic", Script(text="x")) as fake:
        client = anthropic.Anthropic(base_url=fake.url, api_key="x", max_retries=0)
        body = altered(next_turn_body(first_turn_content()), "dropped")
        with (
            pytest.raises(anthropic.BadRequestError, match="Expected `thinking`"),
            client.messages.stream(
                model=body["model"],
                max_tokens=body["max_tokens"],
                messages=body["messages"],
                thinking=THINKING_CONFIG,
                tools=TOOLS,
            ),
        ):
            pass
        client.close()


def test_a_turn_without_signed_reasoning_is_not_checked() -> None:
    # Tool ids the fake did not sign (another model, no thinking): nothing to check.
    body = next_turn_body(first_turn_content())
    content = body["messages"][1]["content"]
    del content[:2]
    content[-1]["id"] = "toolu_plain"
    body["messages"][2]["content"][0]["tool_use_id"] = "toolu_plain"
    with FakeUpstream("anthropic", Script(text="ok")) as fake:
        assert post(fake, body).status_code == 200


# --- no extra flag: a thinking config is enough -------------------------------------


def test_a_thinking_config_alone_makes_the_provider_carry_the_reasoning() -> None:

    fmt = get("anthropic")
    plain = rq.build(model="m", messages=[QUESTION])
    thinking = rq.build(
        model="m",
        messages=[QUESTION],
        extensions={"vendor:anthropic": {"thinking": THINKING_CONFIG}},
    )
    assert not fmt.wants_reasoning(plain)
    assert fmt.wants_reasoning(thinking)
    assert not get("openai").wants_reasoning(thinking)  # another vendor's fields

    async def run(fake: FakeUpstream, request: rq.Request) -> list[ev.Event]:
        async with new_client() as client:
            provider = HTTPProvider(fmt, client=client, base_url=fake.url)
            return [e async for e in provider.generate(request)]

    with FakeUpstream("anthropic", THINKING) as fake:
        carried = asyncio.run(run(fake, thinking))
        dropped = asyncio.run(run(fake, plain))
    signatures = [
        b[x.SIGNATURE] for e in carried if (b := x.fields(e, x.BLOCK)) and x.SIGNATURE in b
    ]
    assert signatures == [fake_anthropic.signature(THINKING.thinking)]
    assert any(isinstance(e, ev.ContentDelta) and e.reasoning for e in carried)
    assert not any(x.fields(e, x.BLOCK) for e in dropped if x.SIGNATURE in (x.fields(e) or {}))
    assert not any(isinstance(e, ev.ContentDelta) and e.reasoning for e in dropped)
