"""Broken upstreams behind a real gateway: every stream still ends well (§5.3.6).

Stalls fire the upstream timeout (``overloaded``) while the gateway keeps
serving others; cuts, garbled JSON and a 64 MiB event end in ``error`` +
``stream.end`` with what came before intact; the gateway lets go of the
upstream each time, and buffers none of the oversized event.
"""

from __future__ import annotations

import threading

import pytest
from tests.faults.conftest import Faults, probe, stream

import tokenwire
from tokenwire import events as ev
from tokenwire.testing import processes


def _check_failed_stream(raw: bytes, events: list[ev.Event], codes: set[str]) -> ev.ErrorEvent:
    """A conformant stream ending in ``error`` + ``stream.end``; returns the error."""
    report = tokenwire.validate([raw])
    assert report.ok, [str(v) for v in report.violations]
    assert isinstance(events[0], ev.StreamStart)
    assert isinstance(events[-1], ev.StreamEnd)
    errors = [e for e in events if isinstance(e, ev.ErrorEvent)]
    text = _text(events)
    if not text:
        # Nothing was generated: no usage is invented (docs/extensions.md).
        assert len(errors) == 1 and errors[0] is events[-2]
    else:
        # Usage on every exit path (docs/extensions.md): the upstream was cut
        # before it reported any, so the gateway estimates it and marks it, one
        # token per 4 characters of the prompt ("Hello") and of the text sent.
        assert len(errors) == 1 and errors[0] is events[-3]
        usage = events[-2]
        assert isinstance(usage, ev.Usage) and usage.estimated, usage
        assert (usage.input_tokens, usage.output_tokens) == (2, -(-len(text) // 4))
    assert errors[0].code in codes, errors[0]
    return errors[0]


def _text(events: list[ev.Event]) -> str:
    return "".join(e.delta.text for e in events if isinstance(e, ev.ContentDelta))


@pytest.mark.parametrize("model", ["stall-before", "stall-after"])
def test_a_stalled_upstream_times_out_and_the_gateway_stays_responsive(
    gateway: processes.ServedProcess, faults: Faults, model: str
) -> None:
    # The stalled stream runs in the background; meanwhile other requests are
    # served to the end, so the stall blocks nothing but its own stream.
    result: dict[str, tuple[bytes, list[ev.Event]]] = {}
    stalled = threading.Thread(target=lambda: result.update(s=stream(gateway, model)))
    fake = faults.fakes[model]
    seen = len(fake.requests)
    stalled.start()
    try:
        assert fake.wait_for(lambda f: len(f.requests) > seen, timeout=30)
        # The upstream has the request and is stalling: others still get answers.
        if stalled.is_alive():
            _raw, demo = stream(gateway, "demo", parameters={"max_tokens": 5})
            assert isinstance(demo[-1], ev.StreamEnd)
            assert probe(gateway)["tasks"] > 0
    finally:
        stalled.join(timeout=60)
    assert not stalled.is_alive()
    raw, events = result["s"]
    error = _check_failed_stream(raw, events, {"overloaded"})
    assert "timeout" in error.message
    # The one event before the stall is OpenAI's role chunk: no text of its own.
    assert _text(events) == ""
    # The gateway hung up on the stalled upstream.
    assert fake.wait_for(lambda f: len(f.disconnects) >= 1, timeout=30)


@pytest.mark.parametrize(
    ("model", "before"),
    [
        ("cut", "word0 word1 word2 word3"),  # 5 events: role chunk + 4 words
        ("cut-eof", "word0 word1 word2 word3"),
        ("bad-json", "word0 word1"),  # the 4th event (index 3) is garbled
        ("mid-event-drop", "Hi"),
        ("mid-event-eof", "Hi"),
    ],
)
def test_a_broken_stream_ends_in_an_error_after_what_came_through(
    gateway: processes.ServedProcess, model: str, before: str
) -> None:
    raw, events = stream(gateway, model)
    _check_failed_stream(raw, events, {"internal_error"})
    assert _text(events) == before


def test_a_64_mib_event_trips_the_size_limit_without_being_buffered(
    gateway: processes.ServedProcess, faults: Faults
) -> None:
    fake = faults.fakes["huge"]
    worker = gateway.worker()
    rss_before = processes.rss_kib(worker)
    peak = [rss_before]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.005):
            peak[0] = max(peak[0], processes.rss_kib(worker))

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        raw, events = stream(gateway, "huge")
    finally:
        done.set()
        sampler.join()
    error = _check_failed_stream(raw, events, {"internal_error"})
    assert "max_event_bytes" in error.message, error.message
    assert _text(events) == ""  # the huge event comes right after the role chunk
    # The gateway stopped reading and hung up: the fake never finished sending.
    assert fake.wait_for(lambda f: len(f.disconnects) >= 1, timeout=30)
    assert fake.completed == 0
    # At most the translator's event limit (8 MiB) plus socket reads are ever
    # held, far from the 64 MiB the upstream tried to send.
    grown_mib = (peak[0] - rss_before) / 1024
    print(f"worker RSS {rss_before / 1024:.1f} MiB before; peak grew by {grown_mib:.1f} MiB")
    assert grown_mib < 32
