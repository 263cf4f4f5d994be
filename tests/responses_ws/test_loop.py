"""The Responses API's WebSocket mode against ``tokenwire serve``, with the openai SDK's
``responses.connect()`` unchanged but for ``base_url``: the tool loop on every upstream,
lanes, steering, a cut socket continued on a new one.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from tests.gateway.gateway_procs import Gateway
from tests.responses_ws.helpers import (
    CITIES,
    FINAL,
    TOOLS,
    VENDORS,
    client,
    loop_script,
    tool_loop,
    turn,
    until_done,
)
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect
from websockets.typing import Origin

from tokenwire.testing.processes import words
from tokenwire.testing.upstream import FakeUpstream, RecordedRequest, Script, ScriptedToolCall
from tokenwire.testing.waiting import wait_until

SLOW = Script(text=words(400), delay_s=0.1)  # ~40 s: cut or outrun long before it ends


def steer_script(request: RecordedRequest) -> Script:
    text = request.body.decode()
    if "function_call_output" in text or '"role":"tool"' in text:
        return Script(text="Done, in French.")
    return Script(
        text=words(40),
        delay_s=0.05,
        tool_calls=[ScriptedToolCall("get_weather", {"city": "Paris"})],
    )


def lane_script(request: RecordedRequest) -> Script:
    return SLOW if "slow" in request.body.decode() else Script(text="quick answer")


class Upstreams:
    def __init__(self) -> None:
        self.fakes = {vendor: FakeUpstream(vendor, loop_script) for vendor in VENDORS}
        self.fakes["lanes"] = FakeUpstream("openai-responses", lane_script)
        self.fakes["steer"] = FakeUpstream("openai", steer_script)

    def config(self) -> str:
        provider = {"lanes": "openai-responses", "steer": "openai"}
        return "\n".join(
            f'[[models]]\nname = "{name}"\nprovider = "{provider.get(name, name)}"\n'
            f'base_url = "{fake.url}"\nupstream_model = "up-{name}"\n'
            for name, fake in self.fakes.items()
        )


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Gateway, Upstreams]]:
    upstreams = Upstreams()
    for fake in upstreams.fakes.values():
        fake.start()
    try:
        workdir: Path = tmp_path_factory.mktemp("responses-ws")
        with Gateway(workdir, config=upstreams.config()) as gateway:
            yield gateway, upstreams
    finally:
        for fake in upstreams.fakes.values():
            fake.stop()


@pytest.mark.parametrize("vendor", VENDORS)
def test_three_turn_tool_loop_with_previous_response_id(
    served: tuple[Gateway, Upstreams], vendor: str
) -> None:
    gateway, upstreams = served
    fake = upstreams.fakes[vendor]
    before = len(fake.requests)
    with client(gateway.url).responses.connect() as conn:
        responses = tool_loop(conn, vendor)
    assert [r.status for r in responses] == ["completed"] * 3
    calls = [[o.arguments for o in r.output if o.type == "function_call"] for r in responses]
    assert [[msgspec.json.decode(a)["city"] for a in c] for c in calls] == [["Paris"], ["Oslo"], []]
    assert responses[-1].output_text == FINAL
    assert len({r.id for r in responses}) == 3
    assert fake.errors == []
    # The client sent only each turn's new items; the stateless upstream got the
    # whole history every turn (it answers by counting the tool results in it).
    sent = [r.body.decode() for r in fake.requests[before:]]
    assert len(sent) == 3
    assert all("previous_response_id" not in body for body in sent)
    assert all("Weather in Paris and Oslo?" in body for body in sent)
    for city in CITIES:
        assert city in sent[-1]


def _log_lines(gateway: Gateway, msg: str) -> list[dict[str, Any]]:
    lines = [msgspec.json.decode(x) for x in gateway.stderr().splitlines() if x.startswith("{")]
    return [line for line in lines if line.get("msg") == msg]


def test_every_turn_is_logged_and_counted_as_a_request(served: tuple[Gateway, Upstreams]) -> None:
    gateway, _ = served

    def turns_logged() -> list[dict[str, Any]]:
        lines = _log_lines(gateway, "request")
        return [x for x in lines if (x["route"], x["model"]) == ("/v1/responses", "openai")]

    def started() -> float:
        with gateway.client(timeout=10.0) as http:
            metrics = http.get("/metrics").text
        line = 'tokenwire_streams_started_total{model="openai"} '
        return sum(float(x.split()[-1]) for x in metrics.splitlines() if x.startswith(line))

    before, streams = len(turns_logged()), started()
    closed = len(_log_lines(gateway, "responses_websocket_closed"))
    with client(gateway.url).responses.connect() as conn:
        tool_loop(conn, "openai")
    logged = wait_until(
        lambda: turns_logged()[before:] if len(turns_logged()) >= before + 3 else None,
        what="a request log line per turn",
    )
    assert [x["status"] for x in logged] == [200] * 3
    assert started() == streams + 3  # and a stream in the metrics per turn
    socket_line = wait_until(
        lambda: _log_lines(gateway, "responses_websocket_closed")[closed:],
        what="the socket's closing log line",
    )[-1]
    assert (socket_line["turns"], socket_line["reason"]) == (3, "client_left")
    assert socket_line["chain_bytes"] > 0


def test_an_unknown_previous_response_is_an_error_event(served: tuple[Gateway, Upstreams]) -> None:
    gateway, upstreams = served
    before = len(upstreams.fakes["openai"].requests)
    with client(gateway.url).responses.connect() as conn:
        _, last = turn(conn, model="openai", input="hi", previous_response_id="resp_elsewhere")
        assert last.type == "error"
        assert (last.error.code, last.error.param) == (
            "previous_response_not_found",
            "previous_response_id",
        )
        assert last.status == 400
        # The socket goes on: a turn with the whole input works.
        _, ok = turn(
            conn, model="openai", input=[{"role": "user", "content": "Weather?"}], tools=TOOLS
        )
        assert ok.type == "response.completed"
    assert len(upstreams.fakes["openai"].requests) == before + 1  # nothing guessed upstream


def test_two_responses_multiplexed_on_one_socket(served: tuple[Gateway, Upstreams]) -> None:
    gateway, upstreams = served
    fake = upstreams.fakes["lanes"]
    with client(gateway.url).responses.connect() as conn:
        conn.response.create(model="lanes", input="slow please", stream_id="a")
        conn.response.create(model="lanes", input="fast please", stream_id="b")
        seen: dict[str, list[str]] = {"a": [], "b": []}
        while (
            "response.completed" not in seen["b"] or "response.output_text.delta" not in seen["a"]
        ):
            event = conn.recv()
            seen[event.stream_id].append(event.type)
        # Lane b started and ended while lane a was streaming: two responses at once.
        assert seen["b"][0] == "response.created" and seen["b"][-1] == "response.completed"
        assert "response.completed" not in seen["a"]
        disconnects = len(fake.disconnects)
    # The socket closed mid-response: lane a's upstream request is cancelled.
    wait_until(lambda: len(fake.disconnects) > disconnects, what="the slow lane's hang-up")


def test_a_socket_cut_mid_response_continues_on_a_new_one(
    served: tuple[Gateway, Upstreams],
) -> None:
    gateway, upstreams = served
    fake = upstreams.fakes["lanes"]
    history: list[Any] = [{"role": "user", "content": "fast first"}]
    with client(gateway.url).responses.connect() as conn:
        _, first = turn(conn, model="lanes", input=history)
        assert first.type == "response.completed"
        history += [o.model_dump(exclude_none=True) for o in first.response.output]
        conn.response.create(
            model="lanes", input="slow now", previous_response_id=first.response.id
        )
        for event in until_done(conn):
            if event.type == "response.output_text.delta":
                break
        disconnects = len(fake.disconnects)
    wait_until(lambda: len(fake.disconnects) > disconnects, what="the cut response's hang-up")
    with client(gateway.url).responses.connect() as conn:
        # The chain was the old socket's: its id is unknown here, said, not guessed.
        _, lost = turn(conn, model="lanes", input="again", previous_response_id=first.response.id)
        assert lost.type == "error" and lost.error.code == "previous_response_not_found"
        # The client sends what it has, then chains on the new socket.
        _, resent = turn(
            conn, model="lanes", input=[*history, {"role": "user", "content": "fast again"}]
        )
        assert resent.type == "response.completed"
        _, chained = turn(
            conn, model="lanes", input="fast more", previous_response_id=resent.response.id
        )
        assert chained.type == "response.completed"
    last = fake.requests[-1].json()["input"]
    assert [i.get("content") for i in last if i.get("role") == "user"] == [
        "fast first",
        "fast again",
        "fast more",
    ]


def test_steering_waits_for_the_continuing_turn(served: tuple[Gateway, Upstreams]) -> None:
    gateway, upstreams = served
    fake = upstreams.fakes["steer"]
    with client(gateway.url).responses.connect() as conn:
        conn.response.create(model="steer", input="Weather in Paris?", tools=TOOLS)
        created = conn.recv()
        assert created.type == "response.created"
        target = created.response.id
        conn.response.steer(input="Answer in French.", previous_response_id=target)
        kinds: dict[str, Any] = {}
        completed = None
        while "response.steer.pending" not in kinds:
            event = conn.recv()
            kinds[event.type] = event
            if event.type == "response.completed":
                completed = event.response
        accepted, pending = kinds["response.steer.accepted"], kinds["response.steer.pending"]
        assert accepted.steer.previous_response_id == target
        assert pending.steer.id == accepted.steer.id
        assert pending.reason == "waiting_for_required_input"
        assert completed is not None
        (call,) = [o for o in completed.output if o.type == "function_call"]
        assert [(r.type, r.call_id) for r in pending.required_input] == [
            ("function_call_output", call.call_id)
        ]
        output = {"type": "function_call_output", "call_id": call.call_id, "output": "18C"}
        _, last = turn(
            conn, model="steer", input=[output], tools=TOOLS, previous_response_id=target
        )
        assert last.type == "response.completed"
        # Steering a completed response is refused, with the input handed back.
        conn.response.steer(input="too late", previous_response_id=target)
        failed = conn.recv()
        assert failed.type == "response.steer.failed"
        assert (failed.error.code, failed.steer.input) == ("response_already_completed", "too late")
    messages = fake.requests[-1].json()["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "user"]
    assert messages[-1]["content"] == "Answer in French."
    assert fake.errors == []


def test_a_turn_without_generation_prepares_the_chain(served: tuple[Gateway, Upstreams]) -> None:
    gateway, upstreams = served
    fake = upstreams.fakes["openai"]
    before = len(fake.requests)
    context = [{"role": "user", "content": "You help with the weather."}]
    with client(gateway.url).responses.connect() as conn:
        _, prepared = turn(conn, model="openai", input=context, tools=TOOLS, generate=False)
        assert prepared.type == "response.completed"
        assert prepared.response.output == []
        assert prepared.response.usage is not None and prepared.response.usage.input_tokens > 0
        assert len(fake.requests) == before  # no model output was asked for
        question = [{"role": "user", "content": "Weather in Paris and Oslo?"}]
        _, answered = turn(
            conn,
            model="openai",
            input=question,
            tools=TOOLS,
            previous_response_id=prepared.response.id,
        )
        assert answered.type == "response.completed"
    messages = fake.requests[-1].json()["messages"]
    assert [m["content"] for m in messages] == [
        "You help with the weather.",
        "Weather in Paris and Oslo?",
    ]


def test_a_page_of_another_origin_may_not_open_the_socket(
    served: tuple[Gateway, Upstreams],
) -> None:
    gateway, _ = served
    url = f"ws://127.0.0.1:{gateway.port}/v1/responses"
    with pytest.raises(InvalidStatus) as refused:
        connect(url, origin=Origin("http://evil.example"), open_timeout=30).close()
    assert refused.value.response.status_code == 403
    with connect(url, origin=Origin(f"http://127.0.0.1:{gateway.port}"), open_timeout=30) as conn:
        conn.send(
            msgspec.json.encode(
                {"type": "response.create", "model": "openai", "input": "hi"}
            ).decode()
        )
        assert msgspec.json.decode(conn.recv(timeout=30))["type"] == "response.created"
