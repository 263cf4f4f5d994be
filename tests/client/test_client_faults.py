"""The client against real servers that misbehave: stalls, drops, resumes, 415s.

Every server here is real and on 127.0.0.1: the scripted raw HTTP/1.1 server
for exact faults, and plain Starlette apps under granian for the endpoints
that do not speak the standard. Clocks are set short so that a timeout test
is quick; nothing asserts how long anything took.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any

import httpx
import pytest
from tests.client.client_servers import (
    Drop,
    Head,
    Received,
    ScriptedServer,
    Send,
    ServerProcess,
    Sleep,
    Step,
    json_answer,
    sse_answer,
)

from tokenwire import Writer, errors
from tokenwire import events as ev
from tokenwire.client import (
    AsyncClient,
    Client,
    ParsedToolCall,
    Response,
    Timeouts,
)
from tokenwire.request import Request, build
from tokenwire.translate import vendor_request

WEATHER = {
    "name": "get_weather",
    "description": "Get current weather for a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}


def frames(request_id: str, text: list[str]) -> list[bytes]:
    """A conformant stream for ``request_id``: one delta per text piece."""
    w = Writer(model="m", request_id=request_id, created=1)
    out: list[ev.Event] = []
    for piece in text:
        out += w.text(piece)
    out += w.usage(1, len(text)) + w.end()
    return [ev.dump(e) for e in out]


def rid_of(received: Received) -> str:
    metadata = json.loads(received.body)["metadata"]
    assert isinstance(metadata["request_id"], str)
    return str(metadata["request_id"])


# --- timeouts ----------------------------------------------------------------------------


@pytest.fixture
def blackhole() -> Iterator[str]:
    """A port whose accept queue is full: connecting to it hangs (connect timeout)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        filler = socket.create_connection(listener.getsockname())
        try:
            yield f"http://127.0.0.1:{listener.getsockname()[1]}"
        finally:
            filler.close()


def stall_after_start(seconds: float) -> list[Step]:
    start = frames("r", ["a"])[0]
    return [Head(), Send(start), Sleep(seconds)]


KEEPALIVES: list[Step] = [Sleep(0.05), Send(b": keep-alive\n\n")] * 60

SCRIPTS: dict[str, tuple[list[Step], Timeouts, str]] = {
    "no-headers": ([Sleep(5), Head()], Timeouts(first_event=0.3), "first_event"),
    "headers-no-event": ([Head(), Sleep(5)], Timeouts(first_event=0.3), "first_event"),
    "stall-after-start": (stall_after_start(5), Timeouts(idle=0.3), "idle"),
    "keepalive-comments-only": (
        [Head(), Send(frames("r", ["a"])[0]), *KEEPALIVES],
        Timeouts(idle=0.5),
        "idle",
    ),
}


@pytest.mark.parametrize("name", list(SCRIPTS))
def test_sync_timeouts(name: str, scripted: ScriptedServer) -> None:
    steps, timeouts, phase = SCRIPTS[name]
    scripted.answer("POST", "/v1/stream", steps)
    with Client(scripted.url, timeout=timeouts) as client:
        with pytest.raises(errors.TimeoutError) as info:
            client.create(model="m", messages="hi")
    assert info.value.phase == phase


@pytest.mark.parametrize("name", list(SCRIPTS))
def test_async_timeouts(name: str, scripted: ScriptedServer) -> None:
    steps, timeouts, phase = SCRIPTS[name]
    scripted.answer("POST", "/v1/stream", steps)

    async def run() -> None:
        async with AsyncClient(scripted.url, timeout=timeouts) as client:
            await client.create(model="m", messages="hi")

    with pytest.raises(errors.TimeoutError) as info:
        asyncio.run(run())
    assert info.value.phase == phase


def test_connect_timeout(blackhole: str) -> None:
    with Client(blackhole, timeout=Timeouts(connect=0.3)) as client:
        with pytest.raises(errors.TimeoutError) as info:
            client.create(model="m", messages="hi")
    assert info.value.phase == "connect"

    async def run() -> None:
        async with AsyncClient(blackhole, timeout=Timeouts(connect=0.3)) as client:
            await client.create(model="m", messages="hi")

    with pytest.raises(errors.TimeoutError) as info:
        asyncio.run(run())
    assert info.value.phase == "connect"


def test_idle_clock_ignores_time_spent_by_the_caller(scripted: ScriptedServer) -> None:
    # The server sends everything at once; the caller is slower than the idle
    # clock between events. Only time spent waiting for the server counts.
    scripted.route("POST", "/v1/stream", lambda r: sse_answer(*frames(rid_of(r), ["a", "b"])))
    with Client(scripted.url, timeout=Timeouts(idle=0.3)) as client:
        with client.stream(model="m", messages="hi") as stream:
            for event in stream:
                if event.seq in (0, 1):
                    time.sleep(0.6)  # the slow caller is the behaviour under test
            assert stream.final().text == "ab"


def test_stops_reading_at_stream_end(scripted: ScriptedServer) -> None:
    # The server keeps the connection open after stream.end; the client does
    # not wait for more (§5.3.7), so its idle clock never runs out.
    scripted.route(
        "POST", "/v1/stream", lambda r: [*sse_answer(*frames(rid_of(r), ["a"])), Sleep(30)]
    )
    with Client(scripted.url, timeout=Timeouts(idle=1)) as client:
        assert client.create(model="m", messages="hi").text == "a"


def test_unreachable_endpoint_is_a_transport_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with Client(f"http://127.0.0.1:{port}") as client:
        with pytest.raises(errors.TransportError):
            client.create(model="m", messages="hi")


# --- resume ----------------------------------------------------------------------------


def resumable(server: ScriptedServer, *, cut_after: int, replay_from: int) -> None:
    """POST sends events up to seq ``cut_after`` then drops (mid-event);
    the resume answers from seq ``replay_from`` (an overlap) to the end."""

    def first(req: Received) -> list[Step]:
        wire = frames(rid_of(req), ["one ", "two ", "three ", "four"])
        return [
            Head(),
            *[Send(f) for f in wire[: cut_after + 1]],
            Send(wire[cut_after + 1][:20]),
            Drop(),
        ]

    def resume(req: Received) -> list[Step]:
        rid = req.path.rsplit("/", 1)[1]
        wire = frames(rid, ["one ", "two ", "three ", "four"])
        return sse_answer(*wire[replay_from:])

    server.route("POST", "/v1/stream", first)
    server.route("GET", "/v1/streams/*", resume)


def test_resume_continues_without_duplicates(scripted: ScriptedServer) -> None:
    resumable(scripted, cut_after=3, replay_from=2)
    with Client(scripted.url, resume=True) as client:
        with client.stream(model="m", messages="hi") as stream:
            seqs = [e.seq for e in stream]
            response = stream.final()
    assert seqs == list(range(len(seqs)))  # every seq once, in order
    assert response.text == "one two three four"
    assert response.violations == []
    post, get = scripted.requests
    assert get.method == "GET"
    assert get.path == f"/v1/streams/{stream.request_id}"
    assert get.headers["last-event-id"] == "3"


def test_async_resume_continues_without_duplicates(scripted: ScriptedServer) -> None:
    resumable(scripted, cut_after=2, replay_from=0)

    async def run() -> tuple[list[int | None], Response]:
        async with AsyncClient(scripted.url, resume=True) as client:
            async with client.stream(model="m", messages="hi") as stream:
                seqs = [e.seq async for e in stream]
                return seqs, await stream.final()

    seqs, response = asyncio.run(run())
    assert seqs == list(range(len(seqs)))
    assert response.text == "one two three four"
    assert scripted.requests[1].headers["last-event-id"] == "2"


def drop_after_two(req: Received) -> list[Step]:
    wire = frames(rid_of(req), ["a", "b", "c"])
    return [Head(), Send(wire[0]), Send(wire[1]), Drop()]


@pytest.mark.parametrize("status", [404, 405, 501, 503])
def test_drop_without_resume_support_is_truncation(scripted: ScriptedServer, status: int) -> None:
    scripted.route("POST", "/v1/stream", drop_after_two)
    scripted.answer("GET", "/v1/streams/*", json_answer(status, b'{"error":"no"}'))
    with Client(scripted.url, resume=True) as client:
        stream = client.stream(model="m", messages="hi")
        seen = []
        with pytest.raises(errors.StreamTruncated) as info:
            for event in stream:
                seen.append(event.type)
    assert seen == ["stream.start", "content.delta"]
    assert info.value.last_seq == 1
    assert str(status) in str(info.value)
    with pytest.raises(errors.StreamTruncated):
        stream.final()  # never a success afterwards either


def test_resume_off_reports_truncation_without_reconnecting(scripted: ScriptedServer) -> None:
    scripted.route("POST", "/v1/stream", drop_after_two)
    with Client(scripted.url, resume=False) as client:
        with pytest.raises(errors.StreamTruncated, match="resume is off"):
            client.create(model="m", messages="hi")
    assert [r.method for r in scripted.requests] == ["POST"]


def test_resume_gives_up_when_nothing_new_comes(scripted: ScriptedServer) -> None:
    scripted.route("POST", "/v1/stream", drop_after_two)
    scripted.answer("GET", "/v1/streams/*", [Head(), Drop()])
    with Client(scripted.url, resume=True) as client:
        with pytest.raises(errors.StreamTruncated, match="resume attempts"):
            client.create(model="m", messages="hi")
    assert [r.method for r in scripted.requests] == ["POST", "GET", "GET", "GET"]


def test_async_truncation(scripted: ScriptedServer) -> None:
    scripted.route("POST", "/v1/stream", drop_after_two)

    async def run() -> None:
        async with AsyncClient(scripted.url, resume=True) as client:
            await client.create(model="m", messages="hi")

    with pytest.raises(errors.StreamTruncated, match="does not support resume"):
        asyncio.run(run())


def test_closing_early_is_not_a_success(scripted: ScriptedServer) -> None:
    scripted.route("POST", "/v1/stream", lambda r: sse_answer(*frames(rid_of(r), ["a", "b"])))
    with Client(scripted.url) as client:
        with client.stream(model="m", messages="hi") as stream:
            next(iter(stream))
        with pytest.raises(errors.StreamTruncated):
            stream.final()


def test_a_request_id_is_generated_and_kept(scripted: ScriptedServer) -> None:
    scripted.route("POST", "/v1/stream", lambda r: sse_answer(*frames(rid_of(r), ["a"])))
    with Client(scripted.url) as client:
        response = client.create(model="m", messages="hi", metadata={"user_id": "u1"})
        given = client.create(model="m", messages="hi", metadata={"request_id": "mine"})
    first = json.loads(scripted.requests[0].body)["metadata"]
    assert first["user_id"] == "u1" and len(first["request_id"]) == 36
    assert response.request_id == first["request_id"]
    assert given.request_id == "mine"


# --- HTTP answers -------------------------------------------------------------------------


def test_http_error_carries_the_json_body(scripted: ScriptedServer) -> None:
    body = b'{"error":{"code":"invalid_request","message":"required","path":"messages"}}'
    scripted.answer("POST", "/v1/stream", json_answer(400, body))
    with Client(scripted.url) as client:
        with pytest.raises(errors.HTTPStatusError) as info:
            client.create(model="m", messages="hi")
    assert info.value.status_code == 400
    assert info.value.body == body
    assert "messages: required" in str(info.value)
    assert not isinstance(info.value, errors.UnsupportedMediaType)


def test_not_an_event_stream(scripted: ScriptedServer) -> None:
    scripted.answer("POST", "/v1/stream", json_answer(200, b'{"choices":[]}'))
    with Client(scripted.url) as client:
        with pytest.raises(errors.RemoteProtocolError, match="text/event-stream"):
            client.create(model="m", messages="hi")


def test_415_from_a_plain_starlette_endpoint(starlette_apps: ServerProcess) -> None:
    with Client(starlette_apps.url) as client:
        with pytest.raises(errors.UnsupportedMediaType) as info:
            client.create(model="m", messages="hi")
    assert info.value.status_code == 415
    assert b"application/json" in info.value.body

    async def run() -> None:
        async with AsyncClient(starlette_apps.url) as client:
            await client.create(model="m", messages="hi")

    with pytest.raises(errors.UnsupportedMediaType):
        asyncio.run(run())


def openai_fallback(base_url: str) -> Any:
    """A §7.2 fallback: the same request as an OpenAI body, the vendor's stream back."""

    def fallback(request: Request) -> tuple[str, Iterable[bytes]]:
        vendor = vendor_request("openai", request, base_url=base_url + "/v1")

        def body() -> Iterator[bytes]:
            with httpx.stream("POST", vendor.url, content=vendor.body, headers=vendor.headers) as r:
                r.raise_for_status()
                yield from r.iter_bytes()

        return "openai", body()

    return fallback


def test_fallback_after_415(starlette_apps: ServerProcess) -> None:
    url = starlette_apps.url
    with Client(url, fallback=openai_fallback(url)) as client:
        with client.stream(model="m", messages="Say hello") as stream:
            texts = list(stream.text_stream)
            response = stream.final()
    assert "".join(texts) == response.text == "Hello from a vendor."
    assert response.usage is not None and response.usage.output_tokens == 3
    assert response.request_id == stream.request_id


def test_fallback_tool_calls_are_checked_too(starlette_apps: ServerProcess) -> None:
    url = starlette_apps.url
    with Client(url, fallback=openai_fallback(url)) as client:
        declared = client.create(model="m", messages="use a tool", tools=[WEATHER])
        undeclared = client.create(model="m", messages="use a tool")
    assert [(c.name, c.arguments) for c in declared.tool_calls] == [
        ("get_weather", {"city": "Vienna"})
    ]
    assert undeclared.tool_calls == []
    assert [r.rule for r in undeclared.rejected_tool_calls] == ["undeclared-tool"]


class LinesTranslator:
    """A toy vendor: each line of its body is one text token."""

    def __init__(self, request: Request) -> None:
        self.writer = Writer(model=request.model, request_id=request.request_id)
        self.buffer = b""

    def feed(self, data: bytes) -> list[ev.Event]:
        self.buffer += data
        *lines, self.buffer = self.buffer.split(b"\n")
        out: list[ev.Event] = []
        for line in lines:
            out += self.writer.text(line.decode())
        return out

    def close(self) -> list[ev.Event]:
        return self.writer.usage(0, 0) + self.writer.end()


def test_fallback_with_a_translator_object_and_async(scripted: ScriptedServer) -> None:
    scripted.answer("POST", "/v1/stream", json_answer(415, b"{}"))
    closed: list[bool] = []

    async def fallback(request: Request) -> tuple[LinesTranslator, AsyncIterator[bytes]]:
        async def body() -> AsyncIterator[bytes]:
            try:
                for piece in (b"al", b"pha\nbe", b"ta\n"):
                    yield piece
            finally:
                closed.append(True)

        return LinesTranslator(request), body()

    async def run() -> Response:
        async with AsyncClient(scripted.url, fallback=fallback) as client:
            return await client.create(model="m", messages="hi")

    response = asyncio.run(run())
    assert response.text == "alphabeta"
    assert closed == [True]


# --- §8.2 against a real server -------------------------------------------------------------


def test_undeclared_tool_from_a_real_endpoint(starlette_apps: ServerProcess) -> None:
    with Client(starlette_apps.url + "/rogue") as client:
        with client.stream(model="rogue", messages="hello", tools=[WEATHER]) as stream:
            delivered = list(stream)
            response = stream.final()
    assert not any(isinstance(e, ev.ToolCall) for e in delivered)
    assert response.tool_calls == []
    [rejected] = response.rejected_tool_calls
    assert (rejected.name, rejected.rule) == ("delete_all_files", "undeclared-tool")
    assert response.text == "Sure."


def test_confirm_callback_sees_the_parsed_call(scripted: ScriptedServer) -> None:
    def answer(req: Received) -> list[Step]:
        w = Writer(model="m", request_id=rid_of(req))
        out = w.tool_call(id="c1", name="send_email", arguments={"to": "x"}, index=0)
        out += w.tool_call(id="c2", name="get_weather", arguments={"city": "Graz"}, index=1)
        out += w.stop(0, "tool_use") + w.stop(1, "tool_use") + w.usage(1, 1) + w.end()
        return sse_answer(*map(ev.dump, out))

    scripted.route("POST", "/v1/stream", answer)
    email = {**WEATHER, "name": "send_email", "parameters": {"type": "object"}}
    request = build(
        model="m",
        messages="mail Graz weather",
        tools=[WEATHER, email],
        extensions={"tokenwire:side_effects": ["send_email"]},
    )
    asked: list[ParsedToolCall] = []

    def confirm(call: ParsedToolCall) -> bool:
        asked.append(call)
        return True

    with Client(scripted.url, confirm=confirm) as client:
        response = client.create(request)
    assert [(c.id, c.arguments) for c in asked] == [("c1", {"to": "x"})]  # side effects only
    assert [c.id for c in response.tool_calls] == ["c1", "c2"]

    async def refuse(call: ParsedToolCall) -> bool:
        return False

    async def run() -> Response:
        async with AsyncClient(scripted.url, confirm=refuse) as client:
            return await client.create(request)

    refused = asyncio.run(run())
    assert [c.id for c in refused.tool_calls] == ["c2"]
    assert [(r.id, r.rule) for r in refused.rejected_tool_calls] == [("c1", "not-confirmed")]


def test_idle_clock_ignores_time_spent_confirming(scripted: ScriptedServer) -> None:
    # A user thinking at a confirmation prompt is not the server being slow.
    def answer(req: Received) -> list[Step]:
        w = Writer(model="m", request_id=rid_of(req), created=1)
        events = w.start() + w.text("ok")
        events += w.tool_call(id="c1", name="send_email", arguments={"to": "ann"}, index=1)
        rest = w.usage(1, 1) + w.end()
        # The rest comes a moment later: the client reads again after confirming.
        return [Head(), *[Send(ev.dump(e)) for e in events], Sleep(0.05)] + [
            Send(ev.dump(e)) for e in rest
        ]

    def confirm(call: ParsedToolCall) -> bool:
        time.sleep(0.6)  # a user thinking, longer than both clocks: the behaviour under test
        return True

    scripted.route("POST", "/v1/stream", answer)
    email = {"name": "send_email", "description": "Send mail.", "parameters": {"type": "object"}}
    with Client(scripted.url, timeout=Timeouts(first_event=0.3, idle=0.3), confirm=confirm) as c:
        response = c.create(
            model="m",
            messages="mail ann",
            tools=[email],
            extensions={"tokenwire:side_effects": ["send_email"]},
        )
    assert [call.name for call in response.tool_calls] == ["send_email"]

    async def run() -> Response:
        timeout = Timeouts(first_event=0.3, idle=0.3)
        async with AsyncClient(scripted.url, timeout=timeout, confirm=confirm) as c:
            return await c.create(
                model="m",
                messages="mail ann",
                tools=[email],
                extensions={"tokenwire:side_effects": ["send_email"]},
            )

    assert [call.name for call in asyncio.run(run()).tool_calls] == ["send_email"]
