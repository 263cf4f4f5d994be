"""OpenAI Responses same-vendor passthrough with the real ``openai`` SDK (issue 23 item 4).

The agent loops the standard does not model (MCP approval, custom tools,
apply_patch) run turn after turn with the SDK at its defaults but for
``base_url``: each request must reach the strict fake behind the gateway byte
for byte as the SDK sends it to an identical fake directly, and the SDK must
get back the same response, every item of it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import msgspec
import openai
import pytest
from tests.passthrough.conftest import UPSTREAM_MODEL, Fakes

from tokenwire.testing.processes import ServedProcess

MCP_TOOL: dict[str, Any] = {
    "type": "mcp",
    "server_label": "deepwiki",
    "server_url": "https://mcp.deepwiki.com/mcp",
    "require_approval": "always",
}
CUSTOM_TOOL: dict[str, Any] = {
    "type": "custom",
    "name": "run_python",
    "description": "Runs Python source",
    "format": {"type": "text"},
}
APPLY_PATCH: dict[str, Any] = {"type": "apply_patch"}
CODE_INTERPRETER: dict[str, Any] = {"type": "code_interpreter", "container": {"type": "auto"}}


#: The SDK clients of this module, made once (closed by ``_close_clients``).
_CLIENTS: dict[str, openai.OpenAI] = {}


def _client(base_url: str) -> openai.OpenAI:
    if base_url not in _CLIENTS:
        _CLIENTS[base_url] = openai.OpenAI(base_url=base_url, api_key="k")
    return _CLIENTS[base_url]


@pytest.fixture(scope="module", autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    for client in _CLIENTS.values():
        client.close()
    _CLIENTS.clear()


def _clients(gateway: ServedProcess, fakes: Fakes) -> list[tuple[openai.OpenAI, str]]:
    return [
        (_client(fakes.direct["openai-responses"].url + "/v1"), UPSTREAM_MODEL),
        (_client(gateway.url + "/v1"), "responses-pt"),
    ]


def _turn(gateway: ServedProcess, fakes: Fakes, **params: Any) -> Any:
    """One streamed turn, direct and through the gateway: the same bytes up, the same
    response back. Returns the response (through the gateway)."""
    out = []
    for client, model in _clients(gateway, fakes):
        with client.responses.stream(model=model, **params) as stream:
            out.append(stream.get_final_response())
    direct, passed = fakes.last("openai-responses")
    assert passed.body == direct.body  # byte for byte
    assert out[1].model_dump() == out[0].model_dump()
    return out[1]


def _items(response: Any) -> list[dict[str, Any]]:
    """The response's output as the next turn's input items (what the SDK docs do)."""
    return [item.model_dump(exclude_none=True) for item in response.output]


def test_mcp_approval_loop(gateway: ServedProcess, fakes: Fakes) -> None:
    ask = [{"role": "user", "content": "What does the wiki say about tokenwire?"}]
    first = _turn(gateway, fakes, input=ask, tools=[MCP_TOOL])
    assert [item.type for item in first.output] == [
        "mcp_list_tools",
        "mcp_approval_request",
        "message",
    ]
    request = first.output[1]
    assert request.server_label == "deepwiki" and request.name == "echo"
    approval = {"type": "mcp_approval_response", "approval_request_id": request.id, "approve": True}
    second = _turn(gateway, fakes, input=[*ask, *_items(first), approval], tools=[MCP_TOOL])
    assert [item.type for item in second.output] == ["mcp_call", "message"]
    call = second.output[0]
    assert call.output == "hello" and call.approval_request_id == request.id
    sent = msgspec.json.decode(fakes.upstream["openai-responses"].requests[-1].body)
    assert [i.get("type", "message") for i in sent["input"]] == [
        "message",
        "mcp_list_tools",
        "mcp_approval_request",
        "message",
        "mcp_approval_response",
    ]


def test_custom_tool_loop(gateway: ServedProcess, fakes: Fakes) -> None:
    ask = [{"role": "user", "content": "Print hello with Python"}]
    first = _turn(gateway, fakes, input=ask, tools=[CUSTOM_TOOL])
    assert [item.type for item in first.output] == ["custom_tool_call", "message"]
    call = first.output[0]
    assert call.name == "run_python" and call.input == "print('hello')"
    result = {"type": "custom_tool_call_output", "call_id": call.call_id, "output": "hello\n"}
    second = _turn(gateway, fakes, input=[*ask, *_items(first), result], tools=[CUSTOM_TOOL])
    assert [item.type for item in second.output] == ["message"]
    assert second.output_text == "Done, as asked."


def test_apply_patch_loop(gateway: ServedProcess, fakes: Fakes) -> None:
    ask = [{"role": "user", "content": "Fix the README"}]
    first = _turn(gateway, fakes, input=ask, tools=[APPLY_PATCH])
    assert [item.type for item in first.output] == ["apply_patch_call", "message"]
    patch = first.output[0]
    assert patch.operation.type == "update_file" and patch.operation.path == "README.md"
    done = {
        "type": "apply_patch_call_output",
        "call_id": patch.call_id,
        "status": "completed",
        "output": "Patched README.md",
    }
    second = _turn(gateway, fakes, input=[*ask, *_items(first), done], tools=[APPLY_PATCH])
    assert [item.type for item in second.output] == ["message"]


def test_malformed_items_are_refused_by_the_upstream_as_it_words_it(
    gateway: ServedProcess, fakes: Fakes
) -> None:
    # An answer to a call that was never made: OpenAI refuses it; so does the
    # fake, and the gateway hands that refusal over untouched.
    orphan = {"type": "custom_tool_call_output", "call_id": "call_nowhere", "output": "x"}
    raised = []
    for client, model in _clients(gateway, fakes):
        with pytest.raises(openai.BadRequestError) as caught:
            with client.responses.stream(
                model=model, input=[{"role": "user", "content": "hi"}, orphan]
            ) as stream:
                stream.get_final_response()
        raised.append(caught.value)
    direct, passed = raised
    assert passed.status_code == direct.status_code == 400
    assert passed.body == direct.body
    assert "call_nowhere" in passed.message


def test_stream_bytes_reach_the_client_unchanged(gateway: ServedProcess, fakes: Fakes) -> None:
    body = {
        "model": UPSTREAM_MODEL,
        "stream": True,
        "tools": [MCP_TOOL, CUSTOM_TOOL, APPLY_PATCH],
        "input": "Do it all",
    }
    direct = httpx.post(fakes.direct["openai-responses"].url + "/v1/responses", json=body)
    passed = httpx.post(gateway.url + "/v1/responses", json={**body, "model": "responses-pt"})
    assert passed.status_code == direct.status_code == 200
    assert passed.content == direct.content


def test_a_cut_mid_stream_ends_in_the_responses_error_event(gateway: ServedProcess) -> None:
    raw = httpx.post(
        gateway.url + "/v1/responses",
        json={"model": "responses-cut", "stream": True, "input": "hi"},
    )
    frames = [f for f in raw.text.split("\n\n") if f]
    assert frames[0].startswith("event: response.created")
    last = frames[-1]
    assert last.startswith("event: error\ndata: ")
    error = msgspec.json.decode(last.split("data: ", 1)[1])
    assert error["type"] == "error" and "upstream connection failed" in error["message"]
    assert error["sequence_number"] == len(frames) - 1


@pytest.mark.parametrize(
    ("extra", "path"),
    [
        ({"tools": [MCP_TOOL]}, "tools[0]"),
        (
            {"tools": [{"type": "function", "name": "f", "parameters": {}}, CODE_INTERPRETER]},
            "tools[1]",
        ),
        ({"previous_response_id": "resp_123"}, "previous_response_id"),
        (
            {
                "input": [
                    {"role": "user", "content": "hi"},
                    {"type": "apply_patch_call_output", "call_id": "c", "status": "completed"},
                ]
            },
            # carried since extensions 1.1 (issue 24): what is refused is its missing output
            "input[1].output",
        ),
    ],
)
def test_across_vendors_what_cannot_be_carried_is_refused_by_name(
    gateway: ServedProcess, fakes: Fakes, extra: dict[str, Any], path: str
) -> None:
    before = len(fakes.upstream["openai"].requests)
    body = {"model": "cross", "stream": True, "input": "hi", **extra}
    response = httpx.post(gateway.url + "/v1/responses", json=body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]  # OpenAI's error shape (issue 23): the path is param
    assert (error["param"], error["type"]) == (path, "invalid_request_error")
    assert len(fakes.upstream["openai"].requests) == before
