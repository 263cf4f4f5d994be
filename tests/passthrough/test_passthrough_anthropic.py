"""Anthropic same-vendor passthrough with the real ``anthropic`` SDK (issue 23 item 4).

Every call is made twice with the SDK at its defaults but for ``base_url``:
once to a strict fake directly (what the SDK sends, what the vendor streams)
and once through the gateway to an identical fake. The fake behind the gateway
must receive the very bytes the SDK sent the direct one (the gateway's model
name renamed to the upstream's, which the direct call uses already), and the
SDK must get back the same message, server-tool blocks and all.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import msgspec
import pytest
from tests.passthrough.conftest import UPSTREAM_MODEL, Fakes

from tokenwire import events as ev
from tokenwire.testing.anthropic import compaction_block
from tokenwire.testing.processes import ServedProcess

SERVER_TOOLS: list[dict[str, Any]] = [
    {"type": "web_search_20250305", "name": "web_search", "max_uses": 3},
    {"type": "web_fetch_20250910", "name": "web_fetch", "max_uses": 2},
    {"type": "code_execution_20250825", "name": "code_execution"},
    {"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"},
    {
        "name": "get_weather",
        "description": "The weather in a city",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
]


#: The SDK clients of this module, made once (closed by ``_close_clients``).
_CLIENTS: dict[tuple[str, int], anthropic.Anthropic] = {}


def _client(base_url: str, max_retries: int = 2) -> anthropic.Anthropic:
    key = (base_url, max_retries)
    if key not in _CLIENTS:
        _CLIENTS[key] = anthropic.Anthropic(base_url=base_url, api_key="k", max_retries=max_retries)
    return _CLIENTS[key]


@pytest.fixture(scope="module", autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    for client in _CLIENTS.values():
        client.close()
    _CLIENTS.clear()


def _clients(gateway: ServedProcess, fakes: Fakes) -> list[tuple[anthropic.Anthropic, str]]:
    return [
        (_client(fakes.direct["anthropic"].url), UPSTREAM_MODEL),
        (_client(gateway.url), "anthropic-pt"),
    ]


def _both(gateway: ServedProcess, fakes: Fakes, **params: Any) -> list[Any]:
    """The final message of the same streamed call, direct and through the gateway."""
    out = []
    for client, model in _clients(gateway, fakes):
        with client.messages.stream(model=model, **params) as stream:
            out.append(stream.get_final_message())
    _same_request(fakes)
    return out


def _same_request(fakes: Fakes) -> None:
    direct, passed = fakes.last("anthropic")
    assert passed.body == direct.body  # byte for byte: nothing re-encoded, nothing dropped
    for name in ("anthropic-version", "anthropic-beta"):
        assert passed.headers.get(name) == direct.headers.get(name), name


def test_server_tools_reach_the_upstream_and_their_blocks_come_back(
    gateway: ServedProcess, fakes: Fakes
) -> None:
    direct, passed = _both(
        gateway,
        fakes,
        max_tokens=1024,
        tools=SERVER_TOOLS,
        container="container_abc123",
        messages=[{"role": "user", "content": "What is new in Rust 2.0?"}],
    )
    assert passed.model_dump() == direct.model_dump()
    kinds = [block.type for block in passed.content]
    assert kinds == [
        "server_tool_use",
        "web_search_tool_result",
        "server_tool_use",
        "web_fetch_tool_result",
        "server_tool_use",
        "code_execution_tool_result",
        "server_tool_use",
        "tool_search_tool_result",
        "text",
    ]
    assert passed.content[0].input == {"query": "What is new in Rust 2.0?"}
    assert passed.content[1].content[0].url == "https://example.com/answer"
    assert passed.content[5].content.stdout == "42\n"
    assert passed.usage.server_tool_use is not None
    assert passed.usage.server_tool_use.web_search_requests == 1
    assert passed.usage.server_tool_use.web_fetch_requests == 1
    assert passed.container is not None and passed.container.id == "container_fake0001"


def test_a_follow_up_turn_carries_the_server_blocks_back(
    gateway: ServedProcess, fakes: Fakes
) -> None:
    client = _client(gateway.url)
    question = {"role": "user", "content": "Search, fetch and compute."}
    with client.messages.stream(
        model="anthropic-pt", max_tokens=512, tools=SERVER_TOOLS, messages=[question]
    ) as stream:
        first = stream.get_final_message()
    # The SDK's own next turn: the assistant's blocks as they came, then the user.
    history = [
        question,
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
        {"role": "user", "content": "Thanks. And the weather in Paris?"},
    ]
    direct, passed = _both(gateway, fakes, max_tokens=512, tools=SERVER_TOOLS, messages=history)
    assert passed.model_dump() == direct.model_dump()
    sent = msgspec.json.decode(fakes.upstream["anthropic"].requests[-1].body)
    carried = [b["type"] for b in sent["messages"][1]["content"]]
    assert carried == [b.type for b in first.content]
    assert "server_tool_use" in carried and "web_fetch_tool_result" in carried


def test_mcp_servers_context_management_and_compaction_pass_with_beta_headers(
    gateway: ServedProcess, fakes: Fakes
) -> None:
    betas = ["mcp-client-2025-04-04", "context-management-2025-06-27", "compact-2026-01-12"]
    params: dict[str, Any] = {
        "max_tokens": 256,
        "betas": betas,
        "mcp_servers": [{"type": "url", "url": "https://mcp.example.com/sse", "name": "echoer"}],
        "context_management": {"edits": [{"type": "clear_tool_uses_20250919"}]},
        "messages": [
            {"role": "user", "content": "Earlier question"},
            {
                "role": "assistant",
                "content": [
                    # One this upstream made (the fake, like Anthropic, refuses another).
                    compaction_block("Summary of the earlier turns."),
                    {
                        "type": "mcp_tool_use",
                        "id": "mcptoolu_01abc",
                        "name": "echo",
                        "server_name": "echoer",
                        "input": {"text": "x"},
                    },
                    {
                        "type": "mcp_tool_result",
                        "tool_use_id": "mcptoolu_01abc",
                        "is_error": False,
                        "content": [{"type": "text", "text": "x"}],
                    },
                    {"type": "text", "text": "Echoed."},
                ],
            },
            {"role": "user", "content": "Echo hello"},
        ],
    }
    out = []
    for client, model in _clients(gateway, fakes):
        with client.beta.messages.stream(model=model, **params) as stream:
            out.append(stream.get_final_message())
    _same_request(fakes)
    direct, passed = out
    assert passed.model_dump() == direct.model_dump()
    assert [b.type for b in passed.content] == ["mcp_tool_use", "mcp_tool_result", "text"]
    assert passed.content[1].content[0].text == "Echo hello"
    assert fakes.upstream["anthropic"].requests[-1].headers["anthropic-beta"] == ",".join(betas)


def test_stream_bytes_reach_the_client_unchanged(gateway: ServedProcess, fakes: Fakes) -> None:
    body = {
        "model": UPSTREAM_MODEL,
        "max_tokens": 64,
        "stream": True,
        "tools": SERVER_TOOLS,
        "messages": [{"role": "user", "content": "Look it up"}],
    }
    headers = {"anthropic-version": "2023-06-01", "x-api-key": "k"}
    direct = httpx.post(fakes.direct["anthropic"].url + "/v1/messages", json=body, headers=headers)
    passed = httpx.post(
        gateway.url + "/v1/messages", json={**body, "model": "anthropic-pt"}, headers=headers
    )
    assert passed.status_code == direct.status_code == 200
    assert passed.content == direct.content
    assert passed.headers["content-type"].startswith("text/event-stream")


def test_upstream_errors_reach_the_sdk_as_the_upstream_sent_them(
    gateway: ServedProcess, fakes: Fakes
) -> None:
    # A block type the vendor does not know (from the future, or a typo): the
    # gateway does not judge it, the upstream does, and its refusal comes back.
    params: dict[str, Any] = {
        "max_tokens": 64,
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "hologram_20270101", "data": "..."}]},
            {"role": "user", "content": "again"},
        ],
    }
    raised = []
    for client, model in _clients(gateway, fakes):
        with pytest.raises(anthropic.BadRequestError) as caught:
            with client.messages.stream(model=model, **params) as stream:
                stream.get_final_message()
        raised.append(caught.value)
    _same_request(fakes)
    direct, passed = raised
    assert passed.status_code == direct.status_code == 400
    assert passed.body == direct.body
    assert "hologram_20270101" in str(passed.body)


def test_a_client_that_asks_for_the_standard_gets_the_parallel_parse(
    gateway: ServedProcess, fakes: Fakes
) -> None:
    body = {
        "model": "anthropic-pt",
        "max_tokens": 64,
        "stream": True,
        "tools": SERVER_TOOLS[:1],
        "messages": [{"role": "user", "content": "Search it"}],
    }
    accept = 'text/event-stream; profile="llm-stream-1.0"'
    response = httpx.post(
        gateway.url + "/v1/messages",
        json=body,
        headers={"accept": accept, "anthropic-version": "2023-06-01"},
    )
    assert response.status_code == 200
    events = [ev.parse(name, data) for name, data in _frames(response.text)]
    types = [e.type for e in events]
    assert types[0] == "stream.start" and types[-1] == "stream.end"
    usage = [e for e in events if isinstance(e, ev.Usage)]
    assert usage and usage[-1].input_tokens == 21
    text = "".join(e.delta.text for e in events if isinstance(e, ev.ContentDelta))
    assert text == "Done, as asked."
    # The request still went up whole: the server tool was not dropped.
    sent = msgspec.json.decode(fakes.upstream["anthropic"].requests[-1].body)
    assert sent["tools"] == SERVER_TOOLS[:1] and sent["model"] == UPSTREAM_MODEL


def _frames(text: str) -> list[tuple[str, str]]:
    """``(event name, data)`` of each SSE frame of ``text``."""
    out = []
    for frame in text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in frame.splitlines() if ": " in line)
        if "event" in fields:
            out.append((fields["event"], fields.get("data", "")))
    return out


@pytest.mark.parametrize(
    ("extra", "path"),
    [
        ({"tools": SERVER_TOOLS[2:3]}, "tools[0]"),
        ({"container": "container_abc123"}, "container"),
        (
            {"mcp_servers": [{"type": "url", "url": "https://m.example", "name": "m"}]},
            "mcp_servers",
        ),
    ],
)
def test_across_vendors_what_cannot_be_carried_is_refused_by_name(
    gateway: ServedProcess, fakes: Fakes, extra: dict[str, Any], path: str
) -> None:
    before = len(fakes.upstream["openai"].requests)
    body = {
        "model": "cross",
        "max_tokens": 64,
        "stream": True,
        "messages": [{"role": "user", "content": "hi"}],
        **extra,
    }
    response = httpx.post(gateway.url + "/v1/messages", json=body)
    assert response.status_code == 400
    answer = response.json()  # Anthropic's error shape (issue 23): the path leads the message
    error = answer["error"]
    assert answer["type"] == "error" and error["type"] == "invalid_request_error"
    assert error["message"].startswith(f"{path}: ")
    assert "would change the answer" in error["message"]
    assert len(fakes.upstream["openai"].requests) == before  # nothing was sent on


def test_across_vendors_hints_are_dropped_and_said_so(gateway: ServedProcess, fakes: Fakes) -> None:
    body = {
        "model": "cross",
        "max_tokens": 64,
        "stream": True,
        "messages": [{"role": "user", "content": "hi"}],
        "context_management": {"edits": [{"type": "clear_thinking_20251015"}]},
        "tools": SERVER_TOOLS[:1],
    }
    response = httpx.post(gateway.url + "/v1/messages", json=body)
    assert response.status_code == 200
    assert response.headers["tokenwire-adapted"] == "context_management=drop, tools[0]=drop"
    sent = fakes.upstream["openai"].requests[-1].json()
    assert "context_management" not in sent and "tools" not in sent


def test_a_cut_mid_stream_ends_in_anthropics_own_error_event(
    gateway: ServedProcess, fakes: Fakes
) -> None:
    client = _client(gateway.url, max_retries=0)
    with pytest.raises(anthropic.APIStatusError) as caught:
        with client.messages.stream(
            model="anthropic-cut", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
        ) as stream:
            for _ in stream:
                pass
    assert "upstream connection failed" in str(caught.value)
    raw = httpx.post(
        gateway.url + "/v1/messages",
        json={
            "model": "anthropic-cut",
            "max_tokens": 64,
            "stream": True,
            "messages": [{"role": "user", "content": "hi"}],
        },
    )
    frames = raw.text.split("\n\n")
    assert frames[0].startswith("event: message_start")
    assert frames[-2].startswith("event: error\ndata: ")
    assert msgspec.json.decode(frames[-2].split("data: ", 1)[1])["error"]["type"] == "api_error"
    assert raw.text.endswith("\n\n")  # whole events only: the half-received one is not sent


def test_an_upstream_error_status_reaches_the_client_as_sent(
    gateway: ServedProcess, fakes: Fakes
) -> None:
    body = {
        "model": "anthropic-529",
        "max_tokens": 16,
        "stream": True,
        "messages": [{"role": "user", "content": "hi"}],
    }
    headers = {"anthropic-version": "2023-06-01"}
    passed = httpx.post(gateway.url + "/v1/messages", json=body, headers=headers)
    direct = httpx.post(
        fakes.down["anthropic"].url + "/v1/messages",
        json={**body, "model": UPSTREAM_MODEL},
        headers=headers,
    )
    assert passed.status_code == direct.status_code == 529
    assert passed.content == direct.content
    assert passed.headers["content-type"] == "application/json"
    client = _client(gateway.url, max_retries=0)
    with pytest.raises(anthropic.APIStatusError) as caught:
        with client.messages.stream(
            model="anthropic-529", max_tokens=16, messages=[{"role": "user", "content": "hi"}]
        ) as stream:
            stream.get_final_message()
    assert caught.value.status_code == 529
    assert caught.value.body == msgspec.json.decode(direct.content)


def test_a_retried_attempt_starts_clean(gateway: ServedProcess, fakes: Fakes) -> None:
    # The first upstream answers 529; the fallback (same vendor) streams. The
    # client gets the fallback's stream alone, and it got the SDK's body too.
    client = _client(gateway.url, max_retries=0)
    params: dict[str, Any] = {
        "max_tokens": 64,
        "tools": SERVER_TOOLS[:1],
        "messages": [{"role": "user", "content": "Search"}],
    }
    with client.messages.stream(model="anthropic-down", **params) as stream:
        message = stream.get_final_message()
    with _client(fakes.direct["anthropic"].url).messages.stream(
        model=UPSTREAM_MODEL, **params
    ) as stream:
        direct = stream.get_final_message()
    assert message.model_dump() == direct.model_dump()
    assert fakes.down["anthropic"].requests[-1].body == fakes.direct["anthropic"].requests[-1].body
    _same_request(fakes)
