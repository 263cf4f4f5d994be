"""Hostile requests to the always-served demo model (issue 16): a clear refusal, no hang,
bounded memory, and an event loop that keeps turning.

Driven through a real ``StreamEndpoint`` with scripted ASGI ``receive``/``send``,
and on the provider directly.
"""

from __future__ import annotations

import asyncio
import json
import tracemalloc
from typing import Any

import msgspec
import pytest

from tokenwire import request as rq
from tokenwire.errors import InvalidRequest
from tokenwire.gateway.providers import demo
from tokenwire.gateway.providers.demo import DemoModel
from tokenwire.server import StreamEndpoint
from tokenwire.sse import Decoder

HANG_GUARD_S = 120  # only against a hang: never reached by a working demo


class _Client:
    """A scripted ASGI client that keeps only what a test needs (decoding the body as it comes)."""

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.sent = False
        self.status: int | None = None
        self.decoder = Decoder()
        self.events: list[tuple[str, str]] = []
        self.content_deltas = 0
        self.json_body = b""
        self.done = asyncio.Event()

    async def receive(self) -> dict[str, Any]:
        if not self.sent:
            self.sent = True
            return {"type": "http.request", "body": self.body, "more_body": False}
        await self.done.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            return
        chunk = message.get("body", b"")
        if self.status == 200:
            for m in self.decoder.feed(chunk):
                if m.event == "content.delta":
                    self.content_deltas += 1  # counted, not kept: 32,768 of them
                else:
                    self.events.append((m.event, m.data))
        else:
            self.json_body += chunk
        if not message.get("more_body", False):
            self.done.set()


async def _serve(payload: dict[str, Any] | bytes) -> _Client:
    body = payload if isinstance(payload, bytes) else msgspec.json.encode(payload)
    client = _Client(body)
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "path": "/v1/stream",
        "headers": [
            (b"content-type", rq.MEDIA_TYPE.encode()),
            (b"content-length", str(len(body)).encode()),
        ],
    }
    await asyncio.wait_for(
        StreamEndpoint(DemoModel())(scope, client.receive, client.send), HANG_GUARD_S
    )
    return client


def _payload(**fields: Any) -> dict[str, Any]:
    return {
        "version": "1.0",
        "stream": True,
        "model": "demo",
        "messages": [{"role": "user", "content": "Hello"}],
        **fields,
    }


def _traced(coro: Any) -> tuple[Any, int]:
    tracemalloc.start()
    try:
        result = asyncio.run(coro)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return result, peak


def _refused_for_max_tokens(client: _Client) -> None:
    """A 400 naming parameters.max_tokens, before any stream starts (the demo's
    ``check_request``, which ``StreamEndpoint`` asks first)."""
    assert client.status == 400, client.events
    error = json.loads(client.json_body)["error"]
    assert error["path"] == "parameters.max_tokens"
    assert client.content_deltas == 0 and not client.events


def test_max_tokens_1e30_as_a_float_is_a_400() -> None:
    raw = msgspec.json.encode(_payload()).replace(
        b'"model"', b'"parameters":{"max_tokens":1e30},"model"'
    )
    client, peak = _traced(_serve(raw))
    assert client.status == 400
    error = json.loads(client.json_body)["error"]
    assert error["path"] == "parameters.max_tokens"
    assert peak < 16 << 20


@pytest.mark.parametrize("max_tokens", [10**30, 2**63, demo.MAX_TOKENS + 1])
def test_an_absurd_integer_max_tokens_is_refused_at_once(max_tokens: int) -> None:
    client, peak = _traced(_serve(_payload(parameters={"max_tokens": max_tokens})))
    _refused_for_max_tokens(client)
    assert peak < 16 << 20  # before issue 16: about 2 GB, and a blocked loop


def test_the_provider_refuses_before_any_work() -> None:
    request = rq.build(model="demo", messages="Hello", parameters={"max_tokens": 10**30})
    with pytest.raises(InvalidRequest) as info:
        DemoModel().check_request(request)
    assert info.value.path == "parameters.max_tokens"

    async def run() -> int:
        count = 0
        with pytest.raises(InvalidRequest):
            async for _event in DemoModel().generate(request):
                count += 1
        return count

    count, peak = _traced(run())
    assert count == 0 and peak < 1 << 20


def test_an_sdk_default_max_tokens_gives_a_natural_reply() -> None:
    client = asyncio.run(_serve(_payload(parameters={"max_tokens": 1024})))
    assert client.status == 200
    assert 0 < client.content_deltas <= 2 * demo.DEFAULT_TOKENS
    stop = [json.loads(d) for name, d in client.events if name == "content.stop"]
    assert [s["stop_reason"] for s in stop] == ["end_turn"]


def test_the_longest_reply_keeps_the_loop_turning_and_memory_bounded() -> None:
    async def run() -> tuple[_Client, int]:
        ticks = 0
        stop = asyncio.Event()

        async def ticker() -> None:
            nonlocal ticks
            while not stop.is_set():
                ticks += 1
                await asyncio.sleep(0)  # one loop turn per tick: the turns are what is counted

        task = asyncio.create_task(ticker())
        payload = _payload(extensions={demo.EXTENSION: {"tokens": demo.MAX_TOKENS}})
        client = await _serve(payload)
        stop.set()
        await task
        return client, ticks

    (client, ticks), peak = _traced(run())
    assert client.status == 200
    assert client.content_deltas == demo.MAX_TOKENS
    assert [name for name, _ in client.events][-1] == "stream.end"
    # The demo hands the loop back every 64 tokens: other work ran all along.
    assert ticks >= demo.MAX_TOKENS // 64
    assert peak < 64 << 20


def test_an_amplifying_schema_cannot_make_the_demo_build_megabytes() -> None:
    # A schema that bypassed request.parse, handed to the provider directly.
    schema = {
        "type": "object",
        "properties": {
            "xs": {
                "type": "array",
                "minItems": 10**9,
                "items": {
                    "type": "array",
                    "minItems": 10**9,
                    "items": {"type": "string", "minLength": 10**9},
                },
            }
        },
        "required": ["xs"],
    }
    raw = _payload(
        messages=[{"role": "user", "content": "Fill the xs list"}],
        tools=[{"name": "fill_xs", "description": "Fill the xs list.", "parameters": schema}],
    )
    request = msgspec.convert(raw, rq.Request)

    async def run() -> list[Any]:
        return [event async for event in DemoModel().generate(request)]

    events, peak = _traced(run())
    (call,) = [e for e in events if e.type == "tool.call"]
    assert len(call.arguments) < 64 << 10
    assert peak < 8 << 20
