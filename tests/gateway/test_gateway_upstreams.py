"""The gateway in front of vendor upstreams: ``HTTPProvider`` plumbing end to end.

The translators are tested by their own authors; here every vendor goes
through the gateway once (``FakeUpstream``), the faults that matter to a
gateway are injected, a client hang-up must reach the upstream, and exact
vendor bodies (our vectors, and the shared recordings when present) must come
out as conformant standard streams.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.gateway.conftest import VENDORS, Upstreams, fixture_files, load_vectors, unavailable
from tests.gateway.gateway_http import (
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

UPSTREAM_VECTORS = load_vectors("upstream-")


@pytest.mark.parametrize("vendor", VENDORS)
def test_every_vendor_through_the_gateway(
    http: httpx.Client, upstreams: Upstreams, vendor: str
) -> None:
    fake = upstreams.fakes[f"fake-{vendor}"]
    seen = len(fake.requests)
    payload = body(f"fake-{vendor}", "Say hello", metadata={"request_id": f"v-{vendor}"})
    response = post(http, payload)
    assert response.status_code == 200
    report = tokenwire.validate(response.content, request_of(payload))
    assert report.ok, report.violations
    events = events_of(response.content)
    assert text_of(events) == "Hello from the fake upstream."
    assert of_type(events, ev.Usage), "usage must reach the client"
    assert events[0].model == f"fake-{vendor}"  # type: ignore[union-attr]
    assert len(fake.requests) == seen + 1
    sent = fake.requests[-1]
    assert "up-model" in sent.path + sent.body.decode()  # upstream_model was sent


@pytest.mark.parametrize(
    ("model", "code"),
    [
        ("fake-openai-429", "rate_limited"),
        ("fake-anthropic-529", "overloaded"),
        ("fake-openai-cut", "internal_error"),
        ("fake-openai-stall", "overloaded"),
    ],
)
def test_upstream_faults_become_error_events(http: httpx.Client, model: str, code: str) -> None:
    response = post(http, body(model, "hi"))
    assert response.status_code == 200
    report = tokenwire.validate(response.content)
    assert report.ok, report.violations
    events = events_of(response.content)
    (error,) = of_type(events, ev.ErrorEvent)
    assert error.code == code
    assert isinstance(events[-1], ev.StreamEnd)
    assert b"127.0.0.1" not in response.content  # no upstream URL leaks
    assert http.get("/healthz").status_code == 200


def test_client_hangup_reaches_the_upstream(
    gateway: Gateway, http: httpx.Client, upstreams: Upstreams
) -> None:
    fake = upstreams.fakes["fake-openai-slow"]
    before = len(fake.disconnects)
    sock = raw_request(gateway.port, body("fake-openai-slow", "talk slowly"))
    read_until(sock, 3, b"event: content.delta")
    hung_up = time.monotonic()
    sock.close()
    assert fake.wait_for(lambda f: len(f.disconnects) > before, timeout=5.0)
    # FakeUpstream stamps disconnects with time.monotonic() in this process.
    print(f"client hang-up -> upstream hang-up: {(fake.disconnects[-1] - hung_up) * 1000:.1f} ms")
    assert fake.disconnects[-1] >= hung_up
    assert post(http, body("demo", "still serving?")).status_code == 200


def _check_expectations(events: list[ev.Event], expect: dict[str, Any], raw: bytes) -> None:
    assert text_of(events) == expect["text"]
    errors = of_type(events, ev.ErrorEvent)
    assert [e.code for e in errors] == ([expect["error_code"]] if expect["error_code"] else [])
    stops = [e.stop_reason for e in of_type(events, ev.ContentStop)]
    if expect["stop_reason"] is None:
        assert not errors or not stops or stops[-1] != "end_turn"
    else:
        assert stops and stops[-1] == expect["stop_reason"]
    if "usage" in expect:
        (usage,) = of_type(events, ev.Usage)
        assert [usage.input_tokens, usage.output_tokens] == expect["usage"]
    if "tool_calls" in expect:
        calls = of_type(events, ev.ToolCall)
        got = [{"name": c.name, "arguments": json.loads(c.arguments)} for c in calls]
        assert got == expect["tool_calls"]
    if "absent" in expect:
        assert expect["absent"].encode() not in raw


@pytest.mark.parametrize("vector", UPSTREAM_VECTORS, ids=[v["name"] for v in UPSTREAM_VECTORS])
def test_upstream_vectors(http: httpx.Client, vector: dict[str, Any]) -> None:
    payload = body(f"replay-{vector['vendor']}", f"replay:{vector['name']}", tools=[WEATHER_TOOL])
    response = post(http, payload)
    assert response.status_code == 200
    report = tokenwire.validate(response.content, request_of(payload))
    assert report.ok, report.violations
    _check_expectations(events_of(response.content), vector["expect"], response.content)


@pytest.mark.fixtures
@pytest.mark.parametrize(
    ("vendor", "path"),
    fixture_files() or [pytest.param(None, None, id="no-fixtures")],
    ids=lambda p: p.stem if isinstance(p, Path) else None,
)
def test_recorded_vendor_bodies_through_the_gateway(
    http: httpx.Client, vendor: str | None, path: Path | None
) -> None:
    if vendor is None or path is None:
        unavailable("../shared/vendor-fixtures is missing")
        return
    response = post(http, body(f"replay-{vendor}", f"replay:fixture-{vendor}-{path.stem}"))
    assert response.status_code == 200
    report = tokenwire.validate(response.content)
    assert report.ok, (path.name, report.violations)
    assert isinstance(events_of(response.content)[-1], ev.StreamEnd)
