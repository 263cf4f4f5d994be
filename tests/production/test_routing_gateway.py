"""Fallbacks and load balancing through a real ``tokenwire serve`` in front of fake upstreams
that fail in each way: connection refused, 429, 503, and a cut after the first token."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.gateway.gateway_http import body, events_of, post, text_of
from tests.gateway.gateway_procs import Gateway, free_port
from tests.production.conftest import start, table

from tokenwire import events as ev
from tokenwire.testing import wait_until
from tokenwire.testing.upstream import FakeUpstream, Fault, Script


@pytest.fixture(scope="module")
def fakes() -> Iterator[dict[str, FakeUpstream]]:
    made = {
        "good": FakeUpstream("openai", Script(text="served by good")),
        "other": FakeUpstream("openai", Script(text="served by other")),
        "backup": FakeUpstream("openai", Script(text="served by backup")),
        "429": FakeUpstream("openai", fault=Fault(kind="status", status=429)),
        "503": FakeUpstream("openai", fault=Fault(kind="status", status=503)),
        "401": FakeUpstream("openai", fault=Fault(kind="status", status=401)),
        "cut": FakeUpstream(
            "openai",
            Script(text="one two three four five"),
            fault=Fault(kind="cut", after_events=2),
        ),
    }
    for fake in made.values():
        fake.start()
    try:
        yield made
    finally:
        for fake in made.values():
            fake.stop()


def _model(name: str, base_url: str, **routing: object) -> str:
    fields = {"name": name, "provider": "openai", "base_url": base_url, "upstream_model": "gpt-x"}
    return table("models", {**fields, **routing}, array=True)


@pytest.fixture(scope="module")
def gateway(
    fakes: dict[str, FakeUpstream], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gateway]:
    url = {name: fake.url + "/v1" for name, fake in fakes.items()}
    refused = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    config = "\n".join(
        [
            _model("backup", url["backup"]),
            # Every failure kind but the last deployment: 4 attempts reach "good".
            _model(
                "flaky",
                url["good"],
                retries=3,
                retry_backoff_s=0.0,
                deployments=[
                    {"base_url": refused, "weight": 100},
                    {"base_url": url["429"], "weight": 100},
                    {"base_url": url["503"], "weight": 100},
                    {"base_url": url["good"], "weight": 1},
                ],
            ),
            _model("primary", url["503"], retries=1, retry_backoff_s=0.0, fallbacks=["backup"]),
            _model("refused", refused, retries=0, fallbacks=["backup"]),
            _model("alone", refused, retries=0),
            _model("badkey", url["401"], retries=2, retry_backoff_s=0.0),
            _model("cutting", url["cut"], retries=2, retry_backoff_s=0.0, fallbacks=["backup"]),
            _model(
                "balanced",
                url["good"],
                deployments=[{"base_url": url["good"], "weight": 1}, {"base_url": url["other"]}],
            ),
        ]
    )
    gw = start(tmp_path_factory.mktemp("routing"), config)
    try:
        yield gw
    finally:
        gw.stop()


def _stream(gw: Gateway, model: str) -> list[ev.Event]:
    with gw.client(timeout=20.0) as client:
        response = post(client, body(model, "hi"))
        assert response.status_code == 200
        return events_of(response.content)


def _lines(gw: Gateway, model: str) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in gw.stderr().splitlines() if line.startswith("{")]
    return [line for line in lines if line.get("model") == model and "attempts" in line]


def _stream_logged(gw: Gateway, model: str) -> tuple[list[ev.Event], dict[str, Any]]:
    """The stream's events and its request log line (written just after the stream ends)."""
    before = len(_lines(gw, model))
    events = _stream(gw, model)
    wait_until(lambda: len(_lines(gw, model)) > before, timeout=10.0, what="a request log line")
    return events, _lines(gw, model)[-1]


def test_connect_errors_429_and_503_are_retried_on_other_deployments(
    gateway: Gateway, fakes: dict[str, FakeUpstream]
) -> None:
    before = {name: len(fakes[name].requests) for name in ("429", "503", "good")}
    events, line = _stream_logged(gateway, "flaky")
    assert text_of(events) == "served by good"
    assert not [e for e in events if isinstance(e, ev.ErrorEvent)]
    assert len(fakes["429"].requests) == before["429"] + 1
    assert len(fakes["503"].requests) == before["503"] + 1
    assert len(fakes["good"].requests) == before["good"] + 1
    attempts = line["attempts"]
    assert isinstance(attempts, list) and len(attempts) == 4
    assert sorted(a["code"] for a in attempts if a["outcome"] == "retry") == [
        "internal_error",
        "overloaded",
        "rate_limited",
    ]
    assert attempts[-1] == {"deployment": "flaky#3", "outcome": "ok"}
    with gateway.client(timeout=10.0) as client:
        metrics = client.get("/metrics").text
    assert (
        'tokenwire_upstream_attempts_total{deployment="flaky#3",model="flaky",outcome="ok"}'
        in metrics
    )


def test_fallbacks_serve_when_the_model_fails(
    gateway: Gateway, fakes: dict[str, FakeUpstream]
) -> None:
    before = len(fakes["503"].requests)
    assert text_of(_stream(gateway, "primary")) == "served by backup"
    assert len(fakes["503"].requests) == before + 2  # the first try and one retry
    events, line = _stream_logged(gateway, "refused")
    assert text_of(events) == "served by backup"
    assert line["attempts"] == [
        {"deployment": "refused", "outcome": "retry", "code": "internal_error"},
        {"deployment": "backup", "model": "backup", "outcome": "ok"},
    ]


def test_a_cut_after_the_first_token_is_an_error_not_a_switch(
    gateway: Gateway, fakes: dict[str, FakeUpstream]
) -> None:
    before_cut, before_backup = len(fakes["cut"].requests), len(fakes["backup"].requests)
    events, line = _stream_logged(gateway, "cutting")
    text = text_of(events)
    assert text and "backup" not in text and "one two three four five".startswith(text)
    errors = [e for e in events if isinstance(e, ev.ErrorEvent)]
    assert len(errors) == 1
    assert isinstance(events[-1], ev.StreamEnd)
    assert len(fakes["cut"].requests) == before_cut + 1
    assert len(fakes["backup"].requests) == before_backup
    assert [a["outcome"] for a in line["attempts"]] == ["ok", "failed"]


def test_load_is_balanced_across_deployments(
    gateway: Gateway, fakes: dict[str, FakeUpstream]
) -> None:
    texts = [text_of(_stream(gateway, "balanced")) for _ in range(40)]
    assert set(texts) == {"served by good", "served by other"}


def test_a_deployment_needs_a_valid_model_entry(tmp_path: Path) -> None:
    from tokenwire.gateway import config

    with pytest.raises(config.ConfigError, match=r"deployments\[0\].*base_url"):
        config.parse(
            {"models": [{"name": "x", "provider": "demo", "deployments": [{"provider": "openai"}]}]}
        )
    with pytest.raises(config.ConfigError, match=r"models\[0\]\.fallbacks\[0\]"):
        config.parse({"models": [{"name": "x", "provider": "demo", "fallbacks": ["nope"]}]})


def test_a_single_failed_attempt_is_an_error_not_a_retry(gateway: Gateway) -> None:
    events, line = _stream_logged(gateway, "alone")
    assert isinstance(events[-2], ev.ErrorEvent)
    expected = {"deployment": "alone", "outcome": "error", "code": "internal_error"}
    assert line["attempts"] == [expected]


def test_an_upstream_401_is_refused_by_its_status_on_the_error_event(
    gateway: Gateway, fakes: dict[str, FakeUpstream]
) -> None:
    before = len(fakes["401"].requests)
    events, line = _stream_logged(gateway, "badkey")
    assert len(fakes["401"].requests) == before + 1  # never retried
    errors = [e for e in events if isinstance(e, ev.ErrorEvent)]
    assert len(errors) == 1 and errors[0].upstream_status == 401
    assert [a["outcome"] for a in line["attempts"]] == ["refused"]
