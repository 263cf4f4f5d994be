"""The Connect binding of the standard, served by the gateway, read by a real Connect client.

``POST /tokenwire.llmstream.v1.LLMStreamService/Stream`` (docs/bindings.md): the
generated connectrpc client (PyPI ``connectrpc``) calls it with
``application/connect+proto``, ``application/connect+json`` and gRPC-web, and
gets the same events as the SSE stream, in the same order; a refusal of the
stream route is a ``ConnectError`` with the code of its status; a tool call
arrives as its message.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from tests.client.client_servers import ServerProcess, free_port, gateway_argv

from tokenwire import events as ev
from tokenwire import iter_events, validate
from tokenwire.translate import connect

QUESTION = "What is the weather in Vienna?"
WEATHER = {
    "name": "get_weather",
    "description": "Get current weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}


@pytest.fixture(scope="module")
def gateway(connectrpc_peer: None) -> Iterator[ServerProcess]:
    port = free_port()
    server = ServerProcess(gateway_argv(port), port).start()
    try:
        yield server
    finally:
        server.stop()


def client(url: str, kind: str) -> Any:
    from connectrpc.codec import proto_json_codec
    from connectrpc.protocol import ProtocolType
    from tests.peers.connect_gen.llm_stream_connect import LLMStreamServiceClientSync

    options: dict[str, Any] = {}
    if kind == "json":
        options["codec"] = proto_json_codec()
    elif kind == "grpc-web":
        options["protocol"] = ProtocolType.GRPC_WEB
    return LLMStreamServiceClientSync(url, **options)


def call(url: str, kind: str, **fields: Any) -> list[ev.Event]:
    """Call the RPC with the §4 envelope of ``fields``; the standard's events it answered."""
    from tests.peers.connect_gen.llm_stream_pb import StreamRequest

    body = {"version": "1.0", "stream": True, "model": "demo", **fields}
    messages = client(url, kind).stream(StreamRequest(request=json.dumps(body)))
    out = [connect.decode_event(message.to_binary(), "proto") for message in messages]
    return [e for e in out if e is not None]


@pytest.mark.parametrize("kind", ["proto", "json", "grpc-web"])
def test_a_connect_client_gets_the_standard_stream(gateway: ServerProcess, kind: str) -> None:
    fields: dict[str, Any] = {
        "messages": [{"role": "user", "content": "Hello there"}],
        "parameters": {"max_tokens": 12},
    }
    got = call(gateway.url, kind, **fields)
    sse = httpx.post(
        gateway.url + "/v1/stream",
        json={"version": "1.0", "stream": True, "model": "demo", **fields},
        headers={"content-type": "application/llm-request+json"},
        timeout=60,
    )
    want = list(iter_events(sse.content))
    assert [e.type for e in got] == [e.type for e in want]
    assert [e.seq for e in got] == list(range(len(got)))
    text = "".join(e.delta.text for e in got if isinstance(e, ev.ContentDelta))
    assert text == "".join(e.delta.text for e in want if isinstance(e, ev.ContentDelta))
    report = validate(b"".join(ev.dump(e) for e in got))
    assert report.ok, report.violations


def test_a_tool_call_is_its_message(gateway: ServerProcess) -> None:
    got = call(
        gateway.url, "proto", messages=[{"role": "user", "content": QUESTION}], tools=[WEATHER]
    )
    [tool_call] = [e for e in got if isinstance(e, ev.ToolCall)]
    assert tool_call.name == "get_weather" and json.loads(tool_call.arguments) == {"city": "Vienna"}


@pytest.mark.parametrize("kind", ["proto", "grpc-web"])
def test_a_refusal_is_a_connect_error_with_its_code(gateway: ServerProcess, kind: str) -> None:
    from connectrpc.code import Code
    from connectrpc.errors import ConnectError

    with pytest.raises(ConnectError) as info:
        call(gateway.url, kind, model="nobody", messages=[{"role": "user", "content": "hi"}])
    assert info.value.code == Code.NOT_FOUND
    assert "unknown model" in str(info.value)
    with pytest.raises(ConnectError) as bad:
        call(gateway.url, kind, messages=[])  # §4: messages must not be empty
    assert bad.value.code == Code.INVALID_ARGUMENT


def test_another_content_type_gets_415(gateway: ServerProcess) -> None:
    answer = httpx.post(
        gateway.url + connect.SERVICE_PATHS["standard"],
        content=b"{}",
        headers={"content-type": "application/json"},
        timeout=30,
    )
    assert answer.status_code == 415
    assert "application/connect+proto" in answer.headers["accept-post"]
