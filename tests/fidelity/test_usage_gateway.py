"""Issue 18 items 7 and 9 end to end: a real gateway in front of the Anthropic fake.

- An event type Anthropic has not defined (yet) is skipped, never silently: it
  is counted in ``/metrics`` (``tokenwire_unknown_vendor_events_total``) and
  logged once per stream (docs/extensions.md, "Unknown vendor event types").
- An upstream cut before ``message_delta`` still ends with a ``usage`` event:
  Anthropic's input count, the output estimated from what was sent, marked
  ``tokenwire:estimated`` (docs/extensions.md, "Usage on every exit path").
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from tests.gateway.gateway_procs import Gateway

import tokenwire
from tokenwire import events as ev
from tokenwire.request import build, dumps
from tokenwire.testing import eventually
from tokenwire.testing.upstream import FakeUpstream, Fault, RecordedRequest, Script

MEDIA = "application/llm-request+json"
SCRIPT = Script(text="Hello from the fake upstream.", input_tokens=21)
#: What the fake sends that Anthropic has not defined: skipped and counted by type.
FUTURE = b'event: future_event\ndata: {"type":"future_event","secret":"never logged"}\n\n'


class _WithFutureEvents:
    """The fake's Anthropic renderer, plus two ``future_event`` events per stream:
    one after ``message_start``, one before ``message_stop``. (``FakeUpstream.renderer``
    is the fake's plug-in point; everything else is the fake's own.)"""

    def __init__(self, base: Any) -> None:
        self._base = base

    def __getattr__(self, name: str) -> Any:
        return getattr(self._base, name)

    def render(self, script: Script, *, model: str, request: RecordedRequest) -> list[bytes]:
        out = list(self._base.render(script, model=model, request=request))
        return [out[0], FUTURE, *out[1:-1], FUTURE, out[-1]]


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    with (
        FakeUpstream("anthropic", SCRIPT) as future,
        # A clean EOF without message_stop: the translator sees the cut (a reset
        # instead ends in the provider, which has no usage of its own to report).
        FakeUpstream(
            "anthropic", SCRIPT, fault=Fault(kind="cut", after_events=5, graceful=True)
        ) as cut,
    ):
        future.renderer = _WithFutureEvents(future.renderer)
        config = "".join(
            f'[[models]]\nname = "{name}"\nprovider = "anthropic"\n'
            f'base_url = "{fake.url}"\nupstream_model = "claude-up"\n'
            for name, fake in (("claude-future", future), ("claude-cut", cut))
        )
        with Gateway(tmp_path_factory.mktemp("usage-gateway"), config=config) as gw:
            yield gw


def _stream(gw: Gateway, model: str, request_id: str) -> tuple[bytes, list[ev.Event]]:
    request = build(model=model, messages="Say hello.", metadata={"request_id": request_id})
    with gw.client(timeout=60.0) as client:
        response = client.post(
            "/v1/stream",
            content=dumps(request),
            headers={"content-type": MEDIA},
        )
    assert response.status_code == 200, response.text
    return response.content, list(tokenwire.iter_events(response.content))


def _unknown_count(client: httpx.Client, type_name: str) -> float:
    """``tokenwire_unknown_vendor_events_total{vendor="anthropic",type=...}`` (0 when absent)."""
    want = f'tokenwire_unknown_vendor_events_total{{type="{type_name}",vendor="anthropic"}}'
    for line in client.get("/metrics").text.splitlines():
        key, _, value = line.rpartition(" ")
        if key == want:
            return float(value)
    return 0.0


def _unknown_log_lines(gw: Gateway, request_id: str) -> list[dict[str, Any]]:
    lines = []
    for line in gw.stderr().splitlines():
        if "unknown vendor events" in line and request_id in line:
            lines.append(json.loads(line))
    return lines


def _wait_for(predicate: Any, deadline_s: float = 20.0) -> bool:
    return eventually(predicate, timeout=deadline_s)


def test_unknown_vendor_events_are_counted_in_metrics_and_logged_once_per_stream(
    gateway: Gateway,
) -> None:
    with gateway.client(timeout=30.0) as client:
        before = _unknown_count(client, "future_event")
    ids = [f"future-{uuid.uuid4().hex[:8]}" for _ in range(2)]
    for request_id in ids:
        raw, events = _stream(gateway, "claude-future", request_id)
        # What the stream carries is untouched by the skipped events.
        assert "".join(e.text for e in events if isinstance(e, ev.ContentDelta)) == SCRIPT.text
        assert tokenwire.validate([raw]).ok
    with gateway.client(timeout=30.0) as client:
        # Two per stream, two streams. The log line is written at the stream's
        # end, which may come just after the client read stream.end.
        assert _wait_for(lambda: _unknown_count(client, "future_event") == before + 4), (
            _unknown_count(client, "future_event"),
            before,
        )
    for request_id in ids:
        assert _wait_for(lambda rid=request_id: bool(_unknown_log_lines(gateway, rid)))
        (line,) = _unknown_log_lines(gateway, request_id)  # once per stream
        assert line["msg"] == "unknown vendor events"
        assert line["vendor"] == "anthropic"
        assert line["types"] == {"future_event": 2}
    assert "never logged" not in gateway.stderr()  # the type, never the content (§8.1)


def test_a_cut_anthropic_upstream_still_reports_usage_marked_estimated(gateway: Gateway) -> None:
    raw, events = _stream(gateway, "claude-cut", f"cut-{uuid.uuid4().hex[:8]}")
    report = tokenwire.validate([raw])
    assert report.ok, report.violations
    text = "".join(e.text for e in events if isinstance(e, ev.ContentDelta))
    assert text and SCRIPT.text.startswith(text) and text != SCRIPT.text  # cut mid-answer
    kinds = [e.type for e in events]
    assert kinds[-3:] == ["error", "usage", "stream.end"]
    assert kinds.count("usage") == 1  # the translator's, not a second one from the gateway
    usage = events[-2]
    assert isinstance(usage, ev.Usage)
    # Anthropic's own input count (message_start), the output estimated from the
    # text sent (1 token per 4 characters) instead of message_start's placeholder 1.
    assert (usage.input_tokens, usage.output_tokens) == (21, -(-len(text) // 4))
    assert usage.estimated
    assert b'"tokenwire:estimated":true' in raw
