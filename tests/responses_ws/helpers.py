"""Shared parts of the Responses WebSocket tests: the tool loop, its fakes, reading a socket."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
from tests.fidelity.test_openai_responses_loop import TOOLS as RESPONSES_LOOP_TOOLS

from tokenwire.testing.upstream import RecordedRequest, Script, ScriptedToolCall

#: get_weather, as the Responses tool-loop test declares it.
TOOLS = RESPONSES_LOOP_TOOLS
CITIES = ("Paris", "Oslo")
FINAL = "Paris is sunny, Oslo is cold."
#: Every vendor whose upstream the gateway translates the loop to (or passes it through).
VENDORS = ("openai-responses", "openai", "anthropic", "gemini")


def answered(request: RecordedRequest) -> int:
    """How many tool results the upstream request carries, in any vendor's shape."""
    text = request.body.decode()
    return sum(
        text.count(marker)
        for marker in (
            '"function_call_output"',
            '"role":"tool"',
            '"tool_result"',
            '"functionResponse"',
        )
    )


def loop_script(request: RecordedRequest) -> Script:
    """The model asks for one city's weather per turn, then answers."""
    done = answered(request)
    if done < len(CITIES):
        city = CITIES[done]
        return Script(
            text=f"Checking {city}.",
            tool_calls=[ScriptedToolCall("get_weather", {"city": city})],
        )
    return Script(text=FINAL)


def client(url: str, key: str = "unused") -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0)


def until_done(conn: Any, lanes: int = 1) -> Iterator[Any]:
    """The socket's events until ``lanes`` responses ended (completed, failed, error...)."""
    ended = 0
    while ended < lanes:
        event = conn.recv()
        yield event
        # An ``error`` inside a response's stream (it has a sequence_number) is
        # followed by response.failed; the mode's own refusals have none.
        refusal = event.type == "error" and event.sequence_number is None
        if refusal or event.type in (
            "response.completed",
            "response.failed",
            "response.incomplete",
        ):
            ended += 1


def turn(conn: Any, **create: Any) -> tuple[list[Any], Any]:
    """Send one ``response.create``; its events and the last one (completed or error)."""
    conn.response.create(**create)
    events = list(until_done(conn))
    return events, events[-1]


def tool_loop(conn: Any, model: str, turns: int = 3) -> list[Any]:
    """The agent loop: answer each call, continue with ``previous_response_id`` only."""
    responses: list[Any] = []
    items: list[Any] = [{"role": "user", "content": "Weather in Paris and Oslo?"}]
    previous = None
    for _ in range(turns):
        extra = {"previous_response_id": previous} if previous else {}
        _, last = turn(conn, model=model, input=items, tools=TOOLS, store=False, **extra)
        assert last.type == "response.completed", last
        responses.append(last.response)
        previous = last.response.id
        calls = [o for o in last.response.output if o.type == "function_call"]
        items = [
            {"type": "function_call_output", "call_id": c.call_id, "output": f"weather {i}"}
            for i, c in enumerate(calls)
        ]
    return responses
