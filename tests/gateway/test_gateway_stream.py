"""``POST /v1/stream`` on a real ``tokenwire serve`` process on 127.0.0.1."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import jsonschema
from tests.gateway.gateway_http import (
    MEDIA,
    WEATHER_TOOL,
    body,
    events_of,
    of_type,
    post,
    raw_request,
    read_until,
    request_of,
    text_of,
)
from tests.gateway.gateway_procs import Gateway

import tokenwire
from tokenwire import events as ev
from tokenwire.gateway.providers.demo import plan_reply
from tokenwire.testing import wait_for_file


def _metric(client: httpx.Client, name: str, **labels: str) -> float:
    """One sample of ``name`` with exactly ``labels`` from /metrics (0 when absent)."""
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in client.get("/metrics").text.splitlines():
        if line.startswith("#"):
            continue
        key, _, value = line.rpartition(" ")
        metric, _, rest = key.partition("{")
        got = ",".join(sorted(rest.rstrip("}").split(","))) if rest else ""
        if metric == name and got == want:
            return float(value)
    return 0.0


def test_demo_stream_is_conformant(http: httpx.Client) -> None:
    payload = body("demo", "What is the weather in Vienna?", metadata={"request_id": "r-1"})
    response = post(http, payload)
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream"
    assert response.headers["cache-control"] == "no-cache"
    assert response.headers["x-accel-buffering"] == "no"
    report = tokenwire.validate(response.content, request_of(payload))
    assert report.ok, report.violations
    assert not report.warnings, report.warnings
    events = events_of(response.content)
    assert isinstance(events[0], ev.StreamStart) and events[0].request_id == "r-1"
    assert isinstance(events[-1], ev.StreamEnd) and events[-1].request_id == "r-1"
    assert text_of(events) == plan_reply(request_of(payload)).text
    # seq doubles as the SSE id (DESIGN: resume with Last-Event-ID).
    assert b"id: 0\n" in response.content


def test_events_arrive_incrementally(gateway: Gateway, http: httpx.Client) -> None:
    # 8 tokens, 100 ms apart. The first content.delta reaches the client while
    # the gateway still counts the stream as active: it was flushed, not buffered.
    payload = body("demo-slow", "Tell me about streams", parameters={"max_tokens": 8})
    seen: list[ev.Event] = []
    active_at_first_delta = None
    reads = 0
    with gateway.client(timeout=20.0) as client:
        with client.stream(
            "POST", "/v1/stream", json=payload, headers={"content-type": MEDIA}
        ) as response:
            assert response.status_code == 200
            decoder = tokenwire.sse.Decoder()
            for chunk in response.iter_raw():
                reads += 1
                for msg in decoder.feed(chunk):
                    event = ev.parse(msg.event, msg.data)
                    seen.append(event)
                    if isinstance(event, ev.ContentDelta) and active_at_first_delta is None:
                        active_at_first_delta = _metric(
                            http, "tokenwire_streams_active", model="demo-slow"
                        )
    assert active_at_first_delta == 1.0
    assert reads >= 8  # one network read per paced token, at least
    assert len(of_type(seen, ev.ContentDelta)) == 8
    assert isinstance(seen[-1], ev.StreamEnd)


def _wait_record(record_dir: Path, request_id: str, timeout: float = 5.0) -> dict[str, Any]:
    path = record_dir / f"{request_id}.json"
    what = "the provider's record of its end"
    record: dict[str, Any] = wait_for_file(path, json.loads, timeout=timeout, what=what)
    return record


def test_hangup_cancels_generation_within_100ms(
    gateway: Gateway, http: httpx.Client, record_dir: Path
) -> None:
    request_id = f"hangup-{uuid.uuid4().hex}"
    before = _metric(
        http, "tokenwire_streams_completed_total", model="recorder", outcome="disconnected"
    )
    sock = raw_request(gateway.port, body("recorder", "go", metadata={"request_id": request_id}))
    read_until(sock, 4, b"event: content.delta")
    hung_up_at = time.time()
    sock.close()
    record = _wait_record(record_dir, request_id)
    assert "cancelled_at" in record, record
    latency = record["cancelled_at"] - hung_up_at
    print(f"hang-up -> cancelled: {latency * 1000:.2f} ms")
    assert latency < 0.1, f"cancelled {latency * 1000:.1f} ms after the hang-up"
    # The gateway keeps serving, and counted the stream as disconnected.
    assert http.get("/healthz").status_code == 200
    assert post(http, body("demo", "still there?")).status_code == 200
    after = _metric(
        http, "tokenwire_streams_completed_total", model="recorder", outcome="disconnected"
    )
    assert after == before + 1


def test_idle_stream_gets_keepalive_comments(http: httpx.Client) -> None:
    # "quiet" sleeps 1.6 s before its one token; the config's keepalive is 0.5 s.
    payload = body("quiet", "anyone?", metadata={"request_id": f"quiet-{uuid.uuid4().hex}"})
    response = post(http, payload)
    assert response.status_code == 200
    head, _, _ = response.content.partition(b"event: content.delta")
    assert head.count(b": keep-alive\n\n") >= 2
    assert tokenwire.validate(response.content).ok


def test_tool_loop_with_the_demo_model(http: httpx.Client) -> None:
    # §4.8, steps 1-5, over HTTP.
    question = "What is the weather in Vienna?"
    first = body("demo", question, tools=[WEATHER_TOOL])
    response = post(http, first)
    assert response.status_code == 200
    report = tokenwire.validate(response.content, request_of(first))
    assert report.ok, report.violations
    events = events_of(response.content)
    (call,) = of_type(events, ev.ToolCall)
    assert call.name == "get_weather"
    arguments = json.loads(call.arguments)
    assert arguments == {"city": "Vienna"}
    jsonschema.validate(arguments, WEATHER_TOOL["parameters"])
    (stop,) = of_type(events, ev.ContentStop)
    assert stop.stop_reason == "tool_use" and stop.index == call.index

    second = body(
        "demo",
        [
            {"role": "user", "content": question},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": call.id, "name": call.name, "arguments": call.arguments}],
            },
            {"role": "tool", "tool_call_id": call.id, "content": "Vienna: 24C, sunny"},
        ],
        tools=[WEATHER_TOOL],
    )
    response = post(http, second)
    assert response.status_code == 200
    assert tokenwire.validate(response.content, request_of(second)).ok
    events = events_of(response.content)
    assert not of_type(events, ev.ToolCall)
    assert '"Vienna: 24C, sunny"' in text_of(events)
    assert of_type(events, ev.ContentStop)[0].stop_reason == "end_turn"


def test_provider_failures_become_error_events(http: httpx.Client) -> None:
    cases = {
        "failing": ("internal_error", "internal error"),
        "failing-timeout": ("overloaded", None),
        "failing-protocol": ("context_length_exceeded", None),
    }
    for model, (code, message) in cases.items():
        payload = body(model, "SECRET-PROMPT-7731")
        response = post(http, payload)
        assert response.status_code == 200
        assert tokenwire.validate(response.content).ok
        events = events_of(response.content)
        (error,) = of_type(events, ev.ErrorEvent)
        assert error.code == code
        if message is not None:
            assert error.message == message
        assert text_of(events) == "partial"
        assert isinstance(events[-1], ev.StreamEnd)
        # No traceback, exception text or prompt echo on the wire.
        assert b"SECRET-PROMPT" not in response.content
        assert b"Traceback" not in response.content


def test_concurrent_streams_are_independent(gateway: Gateway) -> None:
    import concurrent.futures

    def one(i: int) -> bytes:
        with gateway.client(timeout=20.0) as client:
            payload = body("demo", f"Question number {i}?", parameters={"max_tokens": 30})
            response = post(client, payload)
            assert response.status_code == 200
            return response.content

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        bodies = list(pool.map(one, range(16)))
    for i, data in enumerate(bodies):
        assert tokenwire.validate(data).ok
        payload = body("demo", f"Question number {i}?", parameters={"max_tokens": 30})
        assert text_of(events_of(data)) == plan_reply(request_of(payload)).text


def test_models_and_health(http: httpx.Client) -> None:
    assert http.get("/healthz").json() == {"status": "ok"}
    listing = http.get("/v1/models").json()
    assert listing["object"] == "list"
    ids = [m["id"] for m in listing["data"]]
    assert "demo" in ids and "recorder" in ids and "fake-openai" in ids


def test_metrics_exposition(http: httpx.Client) -> None:
    post(http, body("demo", "count me"))
    response = http.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    text = response.text
    for name in (
        "tokenwire_streams_started_total",
        "tokenwire_streams_active",
        "tokenwire_streams_completed_total",
        "tokenwire_events_total",
        "tokenwire_stream_errors_total",
        "tokenwire_requests_rejected_total",
        "tokenwire_time_to_first_event_seconds_bucket",
        "tokenwire_stream_duration_seconds_bucket",
    ):
        assert name in text, name
    assert _metric(http, "tokenwire_streams_started_total", model="demo") >= 1
    assert _metric(http, "tokenwire_events_total", model="demo") >= 3
