"""The pure parts of the client: Response, the §4.8 follow-up, request preparation."""

from __future__ import annotations

import pytest

import tokenwire
from tokenwire import errors
from tokenwire import events as ev
from tokenwire.client import (
    DEFAULT_TIMEOUTS,
    Client,
    ParsedToolCall,
    Response,
    Timeouts,
    tool_results_request,
)
from tokenwire.client._common import prepare_request
from tokenwire.client._response import ResponseBuilder
from tokenwire.request import Message, ToolCallRef, build, dumps, parse

WEATHER = {
    "name": "get_weather",
    "description": "Get current weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}


def response_with(
    text: str = "", calls: list[ParsedToolCall] | None = None, error: ev.ErrorEvent | None = None
) -> Response:
    builder = ResponseBuilder()
    builder.add(ev.StreamStart(v="1.0", seq=0, model="m", created=1, request_id="r"))
    if text:
        builder.add(
            ev.ContentDelta(v="1.0", seq=1, index=0, role="assistant", delta=ev.Delta(text=text))
        )
    for call in calls or []:
        raw = ev.ToolCall(
            v="1.0", seq=2, index=call.index, id=call.id, name=call.name, arguments=call.raw
        )
        builder.add(raw, call)
    if error is not None:
        builder.add(error)
    return builder.build([])


CALL_REF = ToolCallRef(id="call_1", name="get_weather", arguments='{"city":"Vienna"}')
CALL = ParsedToolCall(
    id="call_1", name="get_weather", arguments={"city": "Vienna"}, raw='{"city":"Vienna"}', index=1
)


def test_follow_up_is_the_draft_example() -> None:
    # §4.8, Request 2.
    request = build(
        model="m",
        messages="What is the weather in Vienna?",
        tools=[WEATHER],
        metadata={"request_id": "r1", "user_id": "u"},
    )
    follow = response_with(calls=[CALL]).follow_up(request, {"call_1": "Vienna: 24C, sunny"})
    assert follow.messages == [
        Message(role="user", content="What is the weather in Vienna?"),
        Message(role="assistant", content=None, tool_calls=[CALL_REF]),
        Message(role="tool", tool_call_id="call_1", content="Vienna: 24C, sunny"),
    ]
    assert follow.tools == request.tools
    assert follow.metadata == {"user_id": "u"}  # a new request gets a new request_id
    assert parse(dumps(follow)) == follow  # a valid envelope


def test_follow_up_keeps_text_and_writes_json_results() -> None:
    request = build(model="m", messages="hi", tools=[WEATHER])
    response = response_with("Let me look.", [CALL])
    follow = tool_results_request(request, response, {"call_1": {"temp_c": 24}})
    assistant, tool = follow.messages[1:]
    assert assistant.content == "Let me look." and assistant.tool_calls == [CALL_REF]
    assert tool.content == '{"temp_c":24}'


def test_follow_up_refuses_missing_and_unknown_results() -> None:
    request = build(model="m", messages="hi", tools=[WEATHER])
    response = response_with(calls=[CALL])
    with pytest.raises(ValueError, match="no result"):
        response.follow_up(request, {})
    with pytest.raises(ValueError, match="not accepted"):
        response.follow_up(request, {"call_1": "x", "call_rejected": "y"})


def test_error_is_data_until_asked() -> None:
    error = ev.ErrorEvent(v="1.0", seq=2, code="overloaded", message="busy")
    response = response_with("partial", error=error)
    assert response.error == error
    with pytest.raises(errors.StreamError) as info:
        response.raise_for_error()
    assert (info.value.code, info.value.message) == ("overloaded", "busy")
    clean = response_with("fine")
    assert clean.raise_for_error() is clean


def test_to_message() -> None:
    assert response_with("Hi!").to_message() == Message(role="assistant", content="Hi!")


def test_prepare_request_adds_a_request_id_once() -> None:
    prepared = prepare_request(None, {"model": "m", "messages": "hi"})
    assert prepared.request_id is not None and len(prepared.request_id) == 36
    again = prepare_request(prepared, {})
    assert again.request_id == prepared.request_id
    with pytest.raises(TypeError):
        prepare_request(prepared, {"model": "m"})
    with pytest.raises(TypeError):
        prepare_request(None, {})


def test_bad_requests_fail_before_sending() -> None:
    with Client("http://127.0.0.1:9") as client:
        with pytest.raises(errors.InvalidRequest) as info:
            client.stream(model="m", messages=[{"role": "robot", "content": "x"}])
        assert info.value.path == "messages[0].role"
        with pytest.raises(errors.InvalidRequest, match="side_effects"):
            client.stream(model="m", messages="x", extensions={"tokenwire:side_effects": "all"})


def test_timeouts() -> None:
    assert Timeouts.of(DEFAULT_TIMEOUTS) is DEFAULT_TIMEOUTS
    assert DEFAULT_TIMEOUTS == Timeouts(connect=5, first_event=60, idle=60)
    assert Timeouts.of(2) == Timeouts(connect=2, first_event=2, idle=2)
    assert Timeouts.of(None) == Timeouts(connect=None, first_event=None, idle=None)


def test_lazy_exports() -> None:
    assert tokenwire.Client is Client
    assert tokenwire.AsyncClient.__name__ == "AsyncClient"
