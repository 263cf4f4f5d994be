"""The Redis store's health table, per node (redis_health.py), on a fake clock: a failure
marks only its node, calls to it fail fast for ``retry_s``, and the two log lines
come in pairs per node, the second from the node itself or the one serving its
slots now."""

from __future__ import annotations

import json
import logging

import pytest

from tokenwire.gateway.resume.redis_health import Health
from tokenwire.gateway.resume.store import StoreUnavailable
from tokenwire.gateway.telemetry.logs import LOGGER_NAME


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _lines(caplog: pytest.LogCaptureFixture) -> list[dict[str, object]]:
    return [json.loads(record.getMessage()) for record in caplog.records]


def _log(caplog: pytest.LogCaptureFixture) -> list[tuple[object, ...]]:
    return [(line["msg"], line["node"], line.get("served_by")) for line in _lines(caplog)]


def test_a_failure_marks_only_its_node_and_fails_fast_for_retry_s(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER_NAME)
    clock = Clock()
    health = Health("redis://seed:7000/0", retry_s=1.0, clock=clock)
    error = health.failed("a:7000", ConnectionError("refused"), [5])
    assert isinstance(error, StoreUnavailable) and "a:7000" in str(error)
    with pytest.raises(StoreUnavailable):
        health.check("a:7000")
    health.check("b:7001")  # another node: untouched
    clock.now += 1.0
    health.check("a:7000")  # its pause is over: the next call may try it
    # It failed again: still one line, and a new pause.
    health.failed("a:7000", ConnectionError("refused"), [6])
    with pytest.raises(StoreUnavailable):
        health.check("a:7000")
    assert _log(caplog) == [("resume_store_unavailable", "a:7000", None)]


def test_back_when_the_node_or_the_one_serving_its_slots_answers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER_NAME)
    clock = Clock()
    health = Health("redis://seed:7000/0", clock=clock)
    health.failed("a:7000", ConnectionError("refused"), [5, 9])
    health.failed("c:7002", ConnectionError("refused"), [12000])
    health.ok("b:7001", [100])  # a slot neither had: nothing changes
    assert set(health.down) == {"a:7000", "c:7002"}
    clock.now += 2.5
    health.ok("d:7003", [9])  # a's replica, promoted, answers for one of a's slots
    health.ok("c:7002")  # c itself is back
    assert health.available
    assert _log(caplog) == [
        ("resume_store_unavailable", "a:7000", None),
        ("resume_store_unavailable", "c:7002", None),
        ("resume_store_available", "a:7000", "d:7003"),
        ("resume_store_available", "c:7002", None),
    ]
    assert [line.get("down_s") for line in _lines(caplog)][2:] == [2.5, 2.5]
