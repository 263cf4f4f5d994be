"""The client against a real gateway process (``tokenwire serve``) and its demo model.

The gateway runs as a subprocess on a free 127.0.0.1 port for the session.
A second gateway serves a ``python`` plugin model (``rogue``, from
``client_apps.py``) that calls a tool the request never declared (§8.2).
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from tests.client.client_servers import CuttingProxy, ServerProcess

from tokenwire import errors
from tokenwire import events as ev
from tokenwire.client import AsyncClient, Client, Response, Timeouts
from tokenwire.request import build

WEATHER: dict[str, Any] = {
    "name": "get_weather",
    "description": "Get current weather for a city.",
    "parameters": {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "units": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        },
        "required": ["city"],
    },
}
QUESTION = "What is the weather in Vienna?"


def test_sync_streaming(gateway: ServerProcess) -> None:
    with Client(gateway.url, strict=True) as client:
        with client.stream(
            model="demo", messages="Hello there", parameters={"max_tokens": 12}
        ) as s:
            kinds = []
            texts = []
            for event in s:
                kinds.append(event.type)
                if isinstance(event, ev.ContentDelta):
                    texts.append(event.text)
            response = s.final()
    assert kinds[0] == "stream.start" and kinds[-1] == "stream.end"
    assert len(texts) == 12  # one token per content.delta
    assert response.text == "".join(texts)
    assert response.model == "demo"
    assert response.request_id == s.request_id  # §4.6: echoed
    assert response.stop_reason == "max_tokens"
    assert response.usage is not None and response.usage.output_tokens == 12
    assert response.violations == []
    assert [e.seq for e in response.events] == list(range(len(response.events)))


def test_text_stream_and_create(gateway: ServerProcess) -> None:
    with Client(gateway.url) as client:
        with client.stream(model="demo", messages="Hello there") as s:
            pieces = list(s.text_stream)
        again = client.create(model="demo", messages="Hello there")
    assert len(pieces) > 1
    assert "".join(pieces) == again.text  # the demo model is deterministic
    assert "Hello there" in again.text


def test_async_streaming(gateway: ServerProcess) -> None:
    async def run() -> tuple[list[str], Response]:
        async with AsyncClient(gateway.url, strict=True) as client:
            async with client.stream(model="demo", messages="Hello there") as s:
                pieces = [t async for t in s.text_stream]
                return pieces, await s.final()

    pieces, response = asyncio.run(run())
    assert len(pieces) > 1
    assert response.text == "".join(pieces)
    assert response.stop_reason == "end_turn"
    assert response.violations == []


def test_full_tool_loop(gateway: ServerProcess) -> None:
    request = build(model="demo", messages=QUESTION, tools=[WEATHER])
    with Client(gateway.url, strict=True) as client:
        first = client.create(request)
        [call] = first.tool_calls
        assert (call.name, call.arguments) == ("get_weather", {"city": "Vienna"})
        assert first.stop_reason == "tool_use"
        follow_up = first.follow_up(request, {call.id: "Vienna: 24C, sunny"})
        second = client.create(follow_up)
    # §4.8 step 4: history, the assistant's call (content null), the tool result.
    user, assistant, tool = follow_up.messages
    assert (user.role, assistant.role, tool.role) == ("user", "assistant", "tool")
    assert assistant.content is None and assistant.tool_calls is not None
    assert assistant.tool_calls[0].arguments == call.raw
    assert tool.tool_call_id == call.id
    assert follow_up.request_id is None  # a new request gets a new id when sent
    # §4.8 step 5: the model read the result.
    assert "Vienna: 24C, sunny" in second.text
    assert second.tool_calls == [] and second.stop_reason == "end_turn"


def test_async_tool_loop(gateway: ServerProcess) -> None:
    request = build(model="demo", messages=QUESTION, tools=[WEATHER])

    async def run() -> Response:
        async with AsyncClient(gateway.url) as client:
            first = await client.create(request)
            results = {c.id: {"temp_c": 24} for c in first.tool_calls}
            return await client.create(first.follow_up(request, results))

    assert '{"temp_c":24}' in asyncio.run(run()).text  # a JSON result is sent as JSON text


def test_idle_timeout(gateway: ServerProcess) -> None:
    pace = {"tokenwire:demo": {"delay_ms": 2000}}
    with Client(gateway.url, timeout=Timeouts(first_event=10, idle=0.3)) as client:
        with pytest.raises(errors.TimeoutError) as info:
            client.create(model="demo", messages="hi", extensions=pace)
    assert info.value.phase == "idle"

    async def run() -> None:
        async with AsyncClient(gateway.url, timeout=Timeouts(first_event=10, idle=0.3)) as client:
            await client.create(model="demo", messages="hi", extensions=pace)

    with pytest.raises(errors.TimeoutError) as info:
        asyncio.run(run())
    assert info.value.phase == "idle"


def test_http2(gateway: ServerProcess) -> None:
    # HTTP/2 with prior knowledge (§3: SHOULD prefer HTTP/2), and a timeout on it:
    # the watchdog ends the shared connection, and the pool recovers.
    transport = httpx.HTTPTransport(http1=False, http2=True)
    with Client(gateway.url, transport=transport, timeout=Timeouts(idle=1)) as client:
        with client.stream(model="demo", messages="Hello there") as s:
            next(iter(s))
            assert s.response is not None and s.response.http_version == "HTTP/2"
            response = s.final()
        assert "Hello there" in response.text
        with pytest.raises(errors.TimeoutError):
            pace = {"tokenwire:demo": {"delay_ms": 3000}}
            client.create(model="demo", messages="hi", extensions=pace)
        assert client.create(model="demo", messages="Hello there").text == response.text


def test_paced_stream_within_the_clocks(gateway: ServerProcess) -> None:
    pace = {"tokenwire:demo": {"delay_ms": 50}}
    with Client(gateway.url, timeout=Timeouts(first_event=10, idle=5)) as client:
        response = client.create(
            model="demo", messages="hi", parameters={"max_tokens": 5}, extensions=pace
        )
    assert response.stop_reason == "max_tokens"


def test_dropped_connection_is_never_a_silent_success(gateway: ServerProcess) -> None:
    # A proxy cuts the gateway's answer after 1500 bytes. The client then tries
    # the resume route (DESIGN.md); it either gets the rest (once the gateway
    # keeps resumable streams) or reports the truncation, never a short answer.
    request = build(model="demo", messages="Hello there", parameters={"max_tokens": 40})
    with Client(gateway.url) as client:
        whole = client.create(request)
    with CuttingProxy(gateway.port, cut_after=1500) as proxy:
        with Client(proxy.url, resume=True) as client:
            with client.stream(request) as s:
                seqs: list[int | None] = []
                try:
                    for event in s:
                        seqs.append(event.seq)
                    resumed = s.final()
                except errors.StreamTruncated as exc:
                    assert exc.last_seq == seqs[-1]
                    assert 0 < len(seqs) < len(whole.events)
                else:
                    assert resumed.text == whole.text
                    assert seqs == list(range(len(whole.events)))
        assert proxy.connections == 2  # the POST, then GET /v1/streams/{request_id}


def test_unknown_model_is_an_http_error(gateway: ServerProcess) -> None:
    with Client(gateway.url) as client:
        with pytest.raises(errors.HTTPStatusError) as info:
            client.create(model="no-such-model", messages="hi")
    assert info.value.status_code == 404
    assert "no-such-model" in str(info.value)


def test_undeclared_tool_from_a_gateway_provider(rogue_gateway: ServerProcess) -> None:
    with Client(rogue_gateway.url) as client:
        with client.stream(model="rogue", messages=QUESTION, tools=[WEATHER]) as s:
            delivered = list(s)
            response = s.final()
    assert not any(isinstance(e, ev.ToolCall) for e in delivered)
    assert response.tool_calls == []
    [rejected] = response.rejected_tool_calls
    assert (rejected.name, rejected.rule) == ("delete_all_files", "undeclared-tool")
    assert [v.rule for v in response.violations] == ["undeclared-tool"]

    with Client(rogue_gateway.url, strict=True) as client:
        with pytest.raises(errors.RemoteProtocolError, match="undeclared-tool"):
            client.create(model="rogue", messages=QUESTION, tools=[WEATHER])
