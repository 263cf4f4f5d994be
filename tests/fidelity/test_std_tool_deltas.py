"""Issue 18 item 3: tool-call argument deltas are opt-in, per request.

``"tokenwire:tool_deltas": true`` turns on ``StreamTranslator.tool_deltas`` for the
stream's translator (``gateway/providers/__init__.py``); ``_tool_delta`` then sends
``tokenwire.tool_delta`` events, which add up to the ``tool.call`` that follows.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from tokenwire import events as ev
from tokenwire import translate, validate
from tokenwire.gateway.providers import HTTPProvider
from tokenwire.request import build

FRAGMENTS = ["", '{"ci', 'ty": "Pa', 'ris"}']
BODY = b"".join(
    b"event: %s\ndata: %s\n\n" % (e["type"].encode(), json.dumps(e).encode())
    for e in [
        {
            "type": "message_start",
            "message": {"id": "m", "model": "c", "usage": {"input_tokens": 3}},
        },
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {
                "type": "tool_use",
                "id": "toolu_1",
                "name": "get_weather",
                "input": {},
            },
        },
        *(
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": f},
            }
            for f in FRAGMENTS
        ),
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use"},
            "usage": {"output_tokens": 9},
        },
        {"type": "message_stop"},
    ]
)
WEATHER: Any = {
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}


def _stream(extensions: dict[str, Any] | None) -> list[ev.Event]:
    fmt = translate.get("anthropic")  # its translator sends tool deltas when asked
    transport = httpx.MockTransport(
        lambda request: httpx.Response(
            200, stream=httpx.ByteStream(BODY), headers={"content-type": "text/event-stream"}
        )
    )
    request = build(model="m", messages="weather?", tools=[WEATHER], extensions=extensions)

    async def run() -> list[ev.Event]:
        async with httpx.AsyncClient(transport=transport) as client:
            provider = HTTPProvider(fmt, client=client, base_url="http://upstream.test")
            return [event async for event in provider.generate(request)]

    return asyncio.run(run())


def _deltas(out: list[ev.Event]) -> list[dict[str, Any]]:
    return [json.loads(e.data) for e in out if e.type == "tokenwire.tool_delta"]


@pytest.mark.parametrize("extensions", [None, {"tokenwire:tool_deltas": False}])
def test_no_deltas_unless_asked(extensions: dict[str, Any] | None) -> None:
    out = _stream(extensions)
    assert _deltas(out) == []
    assert [e.arguments for e in out if isinstance(e, ev.ToolCall)] == ['{"city": "Paris"}']


def test_asked_for_deltas_add_up_to_the_call() -> None:
    out = _stream({"tokenwire:tool_deltas": True})
    deltas = _deltas(out)
    assert [(d["type"], d["index"], d["id"], d.get("name"), d["delta"]) for d in deltas] == [
        ("tokenwire.tool_delta", 0, "toolu_1", "get_weather", '{"ci'),  # the empty one: no-op
        ("tokenwire.tool_delta", 0, "toolu_1", None, 'ty": "Pa'),
        ("tokenwire.tool_delta", 0, "toolu_1", None, 'ris"}'),
    ]
    (call,) = [e for e in out if isinstance(e, ev.ToolCall)]
    assert (call.index, call.id) == (0, "toolu_1")
    assert "".join(d["delta"] for d in deltas) == call.arguments
    report = validate(b"".join(map(ev.dump, out)))
    assert report.violations == [], report.violations
