"""The pure parts of the Responses WebSocket mode: client events, the chain, the bounds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from tokenwire.gateway.config import ConfigError, parse
from tokenwire.gateway.responses_ws import steering
from tokenwire.gateway.responses_ws.chain import Chain, UnknownResponse
from tokenwire.gateway.responses_ws.protocol import (
    ClientEventError,
    Create,
    Steer,
    error_event,
    parse_client_event,
    steer_problem,
    tagged,
)

VECTORS = Path(__file__).parents[1] / "vectors" / "responses_ws"
REFUSED = json.loads((VECTORS / "refused_client_events.json").read_text())


@pytest.mark.parametrize("case", REFUSED, ids=[c["why"] for c in REFUSED])
def test_refused_client_events_name_the_field(case: dict[str, Any]) -> None:
    text = case.get("text") or json.dumps(case["event"])
    with pytest.raises(ClientEventError) as caught:
        parse_client_event(text)
    assert caught.value.param == case["param"]


def test_response_create_becomes_the_http_body() -> None:
    event = {
        "type": "response.create",
        "model": "m",
        "input": "hi",
        "stream": True,
        "stream_id": "a",
        "previous_response_id": "resp_1",
        "tools": [],
    }
    parsed = parse_client_event(json.dumps(event))
    assert parsed == Create(
        body={"model": "m", "input": "hi", "tools": []},
        stream_id="a",
        previous_response_id="resp_1",
    )
    steer = parse_client_event('{"type":"response.steer","input":"x","previous_response_id":"r"}')
    assert steer == Steer(input="x", previous_response_id="r")


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("in French", True),
        ([{"role": "user", "content": "x"}], True),
        (
            [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "x"}]}],
            True,
        ),
        ("", False),
        ([], False),
        ([{"role": "assistant", "content": "x"}], False),
        ([{"type": "function_call_output", "call_id": "c", "output": "x"}], False),
        ([{"role": "user", "content": "x", "id": "msg_1"}], False),
    ],
)
def test_steering_takes_user_messages_only(value: Any, ok: bool) -> None:
    assert (steer_problem(value) is None) is ok


@pytest.mark.parametrize("data", ['{"type":"a","n":1}', '{ "type": "a" }', "{}"])
def test_tagged_events_stay_json_objects(data: str) -> None:
    assert msgspec.json.decode(tagged(data, "lane-1")) == {
        **msgspec.json.decode(data),
        "stream_id": "lane-1",
    }
    assert tagged(data, None) == data


def test_error_event_is_the_sdk_shape() -> None:
    event = msgspec.json.decode(error_event("c", "m", status=400, param="p", stream_id="s"))
    assert event == {
        "type": "error",
        "status": 400,
        "stream_id": "s",
        "error": {"type": "invalid_request_error", "code": "c", "message": "m", "param": "p"},
    }


def test_chain_history_walks_parents_oldest_first() -> None:
    chain = Chain(max_bytes=1 << 20, ttl_s=10.0)
    chain.record("r1", None, ["in1"], ["out1"], now=0.0)
    chain.record("r2", "r1", ["in2"], ["out2"], now=1.0)
    chain.record("r3", "r1", ["fork"], ["out3"], now=2.0)  # a second branch from r1
    assert chain.history("r2", now=3.0) == ["in1", "out1", "in2", "out2"]
    assert chain.history("r3", now=3.0) == ["in1", "out1", "fork", "out3"]
    with pytest.raises(UnknownResponse, match="not on this socket"):
        chain.history("r9", now=3.0)


def test_chain_expires_but_keeps_what_a_live_response_needs() -> None:
    chain = Chain(max_bytes=1 << 20, ttl_s=10.0)
    chain.record("old", None, ["a"], ["b"], now=0.0)
    chain.record("child", "old", ["c"], ["d"], now=9.0)
    chain.record("other", None, ["e"], ["f"], now=12.0)  # "old" expired, "child" still needs it
    with pytest.raises(UnknownResponse, match="expired"):
        chain.history("old", now=12.0)
    assert chain.history("child", now=12.0) == ["a", "b", "c", "d"]
    chain.record("later", None, [], [], now=30.0)  # now both are gone, and their bytes
    assert set(chain.nodes) == {"later"}
    assert chain.size == len(msgspec.json.encode([]))


def test_chain_room_counts_bytes() -> None:
    chain = Chain(max_bytes=100, ttl_s=10.0)
    chain.record("r1", None, ["x" * 40], [], now=0.0)
    assert chain.size == len(msgspec.json.encode(["x" * 40]))
    assert chain.has_room(100 - chain.size)
    assert not chain.has_room(100 - chain.size + 1)


@pytest.mark.parametrize(
    ("key", "value"),
    [("max_turns", 0), ("max_in_flight", -1), ("idle_timeout_s", 0), ("chain_ttl_s", float("inf"))],
)
def test_config_refuses_a_bad_bound_by_name(key: str, value: Any) -> None:
    with pytest.raises(ConfigError, match=f"responses_websocket.{key}"):
        parse({"responses_websocket": {key: value}})


def test_config_suggests_the_bound_meant() -> None:
    with pytest.raises(ConfigError, match="max_turns"):
        parse({"responses_websocket": {"max_turn": 3}})


CALL = {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{}"}
MESSAGE = {"type": "message", "role": "assistant", "content": []}


@pytest.mark.parametrize(
    ("state", "code"),
    [
        ({"in_progress": True, "completed": False, "queued": 0}, None),
        ({"in_progress": True, "completed": False, "queued": 2}, "too_many_pending_steers"),
        ({"in_progress": False, "completed": True, "queued": 0}, "response_already_completed"),
        ({"in_progress": False, "completed": False, "queued": 0}, "response_not_found"),
    ],
)
def test_steering_is_queued_only_for_a_response_in_progress(
    state: dict[str, Any], code: str | None
) -> None:
    refused = steering.refusal("resp_1", limit=2, **state)
    assert (refused[0] if refused else None) == code


def test_steering_waits_for_owed_tool_results_else_goes_back() -> None:
    custom = {"type": "custom_tool_call", "call_id": "c2", "name": "patch", "input": "x"}
    assert steering.settle([MESSAGE, CALL, custom], completed=True) == (
        "pending",
        [
            {"type": "function_call_output", "call_id": "c1", "name": "get_weather"},
            {"type": "custom_tool_call_output", "call_id": "c2"},
        ],
    )
    assert steering.settle([MESSAGE], completed=True)[1][0] == "successor_creation_failed"
    assert steering.settle([MESSAGE, CALL], completed=False)[1][0] == "response_not_active"


def test_steering_goes_after_the_tool_results() -> None:
    result = {"type": "function_call_output", "call_id": "c1", "output": "18C"}
    note = {"role": "user", "content": "and the week?"}
    steer = {"role": "user", "content": "in French"}
    assert steering.with_steering([result, note], [steer]) == [result, steer, note]
    assert steering.with_steering([note], [steer]) == [steer, note]
    assert steering.with_steering([result], []) == [result]
