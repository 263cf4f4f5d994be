"""The binary binding over HTTP (docs/binary.md section 6.1), end to end.

``tokenwire serve`` answers in frames when ``Accept`` prefers
``application/llm-stream-frames``; ``Client(binding="binary")`` asks for them
and reads them. The demo model, a translated vendor upstream (``slow``: a
fake OpenAI upstream), a tool loop, a hang-up, and a resume after a cut.
"""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from tests.client.client_servers import CuttingProxy, ServerProcess
from tests.client.test_client_cancel import hang_up_latency
from tests.client.test_client_gateway import QUESTION, WEATHER

from tokenwire import binary, iter_events, validate
from tokenwire import events as ev
from tokenwire.client import AsyncClient, Client, Response
from tokenwire.request import MEDIA_TYPE, build, dumps
from tokenwire.testing.upstream import FakeUpstream

FRAMES = "application/llm-stream-frames"


def post(url: str, accept: str, **fields: object) -> httpx.Response:
    request = build(model="demo", messages="Hello there", **fields)  # type: ignore[arg-type]
    return httpx.post(
        f"{url}/v1/stream",
        content=dumps(request),
        headers={"content-type": MEDIA_TYPE, "accept": accept},
        timeout=30,
    )


@pytest.mark.parametrize("payload", binary.PAYLOADS)
def test_the_gateway_answers_in_frames_when_asked(gateway: ServerProcess, payload: str) -> None:
    framed = post(gateway.url, f"{FRAMES}; payload={payload}", parameters={"max_tokens": 8})
    assert framed.status_code == 200
    assert framed.headers["content-type"] == f"{FRAMES}; payload={payload}; version=1.0"
    report = validate(framed.content, framing="binary", payload=payload)  # type: ignore[arg-type]
    assert report.ok and report.violations == [], report.violations
    got = list(binary.iter_events(framed.content, payload=payload))  # type: ignore[arg-type]
    sse = post(gateway.url, "text/event-stream", parameters={"max_tokens": 8})
    assert sse.headers["content-type"] == "text/event-stream"
    want = list(iter_events(sse.content))
    # The same stream but for stream.start's created time.
    assert [e.type for e in got] == [e.type for e in want]
    assert [getattr(e, "text", None) for e in got] == [getattr(e, "text", None) for e in want]


@pytest.mark.parametrize(
    ("accept", "framed"),
    [
        ("text/event-stream", False),
        (f"{FRAMES}, text/event-stream;q=0.5", True),
        (f"text/event-stream, {FRAMES};q=0.5", False),
        (f"{FRAMES};q=0", False),
        (f"{FRAMES}, text/event-stream", False),  # section 7: equal q-values keep SSE
        (f"{FRAMES.upper()}", True),  # media types are case-insensitive
        ("*/*", False),
        (f"*/*;q=0.1, {FRAMES}", True),
    ],
)
def test_sse_stays_the_default(gateway: ServerProcess, accept: str, framed: bool) -> None:
    answer = post(gateway.url, accept, parameters={"max_tokens": 2})
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith(FRAMES if framed else "text/event-stream")


@pytest.mark.parametrize("accept", [f"{FRAMES}; version=2.0", f"{FRAMES}; payload=cbor"])
def test_frames_not_served_as_the_only_type_get_406(gateway: ServerProcess, accept: str) -> None:
    """docs/binary.md section 3: "a server that does not speak the version asked for
    answers 406"."""
    answer = post(gateway.url, accept, parameters={"max_tokens": 2})
    assert answer.status_code == 406
    assert answer.json()["error"]["code"] == "not_acceptable"
    assert "version=1.0" in answer.json()["error"]["message"]


def test_sync_client_on_frames(gateway: ServerProcess) -> None:
    fields = {"model": "demo", "messages": "Hello there", "parameters": {"max_tokens": 12}}
    with Client(gateway.url, strict=True, binding="binary") as client:
        with client.stream(**fields) as s:
            events = [next(iter(s))]
            assert s.response is not None
            assert s.response.headers["content-type"].startswith(FRAMES)
            events += list(s)
            response = s.final()
    with Client(gateway.url) as client:
        over_sse = client.create(**fields)
    assert events[0].type == "stream.start" and events[-1].type == "stream.end"
    assert response.text == over_sse.text and len(response.text) > 0
    assert response.stop_reason == "max_tokens" and response.violations == []


def test_tool_loop_on_frames(gateway: ServerProcess) -> None:
    request = build(model="demo", messages=QUESTION, tools=[WEATHER])

    async def run() -> Response:
        async with AsyncClient(gateway.url, strict=True, binding="binary") as client:
            first = await client.create(request)
            [call] = first.tool_calls
            assert (call.name, call.arguments) == ("get_weather", {"city": "Vienna"})
            return await client.create(first.follow_up(request, {call.id: "Vienna: 24C"}))

    second = asyncio.run(run())
    assert "Vienna: 24C" in second.text and second.stop_reason == "end_turn"


def test_a_translated_upstream_in_frames_and_a_hang_up_cancels_it(
    slow_gateway: ServerProcess, slow_upstream: FakeUpstream
) -> None:
    before = len(slow_upstream.disconnects)
    with Client(slow_gateway.url, binding="binary") as client:
        with client.stream(model="slow", messages="talk") as s:
            words = 0
            for event in s:
                if isinstance(event, ev.ContentDelta):
                    words += 1
                    if words == 3:
                        break
            assert s.response is not None
            assert s.response.headers["content-type"].startswith(FRAMES)
        left = time.monotonic()
    hang_up_latency(slow_upstream, before, left)  # waits (bounded) for the upstream to be cut


def test_a_cut_stream_resumes_in_frames(gateway: ServerProcess) -> None:
    # A proxy cuts the first answer after 1500 bytes; the client resumes on
    # GET /v1/streams/{id}, asking for frames again, and gets every seq once.
    request = build(model="demo", messages="Hello there", parameters={"max_tokens": 40})
    with Client(gateway.url) as client:
        whole = client.create(request)
    with CuttingProxy(gateway.port, cut_after=1500) as proxy:
        with Client(proxy.url, resume=True, binding="binary") as client:
            with client.stream(request) as s:
                seqs = [event.seq for event in s]
                response = s.final()
        assert proxy.connections == 2  # the POST, then the resume
    assert seqs == list(range(len(whole.events)))
    assert response.text == whole.text and response.violations == []


def test_the_resume_route_replays_in_frames(gateway: ServerProcess) -> None:
    answer = post(
        gateway.url, FRAMES, parameters={"max_tokens": 6}, extensions={"tokenwire:resumable": True}
    )
    token = answer.headers["tokenwire-resume-token"]
    first = list(binary.iter_events(answer.content))
    request_id = first[0].request_id  # type: ignore[union-attr]
    replay = httpx.get(
        f"{gateway.url}/v1/streams/{request_id}?after=2",
        headers={"accept": FRAMES, "tokenwire-resume-token": token},
        timeout=30,
    )
    assert replay.status_code == 200
    assert replay.headers["content-type"].startswith(FRAMES)
    again = list(binary.iter_events(replay.content))
    assert again == first[3:]
    # docs/binary.md section 3: frames in a version not served, as the only type: 406.
    refused = httpx.get(
        f"{gateway.url}/v1/streams/{request_id}?after=2",
        headers={"accept": f"{FRAMES}; version=2.0", "tokenwire-resume-token": token},
        timeout=30,
    )
    assert refused.status_code == 406
    assert refused.json()["error"]["code"] == "not_acceptable"
