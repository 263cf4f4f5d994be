"""Issue 18 item 9: unknown vendor event types are never silently dropped.

A translator counts what it skipped (``StreamTranslator.note_unknown``, bounded);
the provider that owns it adds the counts to ``/metrics``
(``tokenwire_unknown_vendor_events_total{vendor,type}``, bounded per vendor) and
logs one line per stream.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
from typing import Any

import httpx

from tokenwire import events as ev
from tokenwire import translate
from tokenwire.gateway.providers import HTTPProvider
from tokenwire.gateway.telemetry.logs import log_unknown_events
from tokenwire.gateway.telemetry.metrics import MAX_TYPES_PER_VENDOR, Metrics, UnknownEventTally
from tokenwire.request import build
from tokenwire.translate._base import MAX_UNKNOWN_TYPES, StreamTranslator


class _Fake(StreamTranslator):
    name = "fake"


def test_note_unknown_counts_and_is_bounded() -> None:
    t = _Fake(model="m")
    assert t.unknown_types == {}
    t.note_unknown("response.future_event")
    t.note_unknown("response.future_event")
    t.note_unknown("x" * 500)
    assert t.unknown_types["response.future_event"] == 2
    assert t.unknown_types["x" * 64] == 1  # names are cut
    for n in range(200):
        t.note_unknown(f"type-{n}")
    assert len(t.unknown_types) == MAX_UNKNOWN_TYPES + 1  # ... and "other"
    assert t.unknown_types["other"] == 200 - (MAX_UNKNOWN_TYPES - 2)


def test_the_metric_has_bounded_labels() -> None:
    tally = UnknownEventTally()
    metrics = Metrics(["demo"], unknown_events=tally)
    tally.add("anthropic", {"content_block_future": 3})
    tally.add("anthropic", {"content_block_future": 1})
    for n in range(MAX_TYPES_PER_VENDOR + 20):
        tally.add("gemini", {f"t{n}": 1})
    text = metrics.render().decode()
    assert (
        'tokenwire_unknown_vendor_events_total{type="content_block_future",vendor="anthropic"} 4.0'
        in text
    )
    gemini = [line for line in text.splitlines() if 'vendor="gemini"' in line]
    assert len(gemini) == MAX_TYPES_PER_VENDOR + 1
    assert 'tokenwire_unknown_vendor_events_total{type="other",vendor="gemini"} 20.0' in text


def test_one_log_line_names_the_types_never_the_content() -> None:
    out = io.StringIO()
    logger = logging.getLogger("tests.unknown-events")
    logger.addHandler(logging.StreamHandler(out))
    logger.propagate = False
    logger.setLevel(logging.INFO)
    log_unknown_events("openai", "r1", {"b.type": 1, "a.type": 2}, logger)
    log_unknown_events("openai", "r2", {}, logger)  # nothing skipped: no line
    (line,) = out.getvalue().splitlines()
    obj = json.loads(line)
    assert {k: obj[k] for k in ("msg", "vendor", "request_id", "types")} == {
        "msg": "unknown vendor events",
        "vendor": "openai",
        "request_id": "r1",
        "types": {"a.type": 2, "b.type": 1},
    }


BODY = b"".join(
    b"event: %s\ndata: %s\n\n" % (e["type"].encode(), json.dumps(e).encode())
    for e in [
        {
            "type": "message_start",
            "message": {"id": "m", "model": "c", "usage": {"input_tokens": 3}},
        },
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "future_event", "anything": 1},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}},
        {"type": "future_event", "anything": 2},
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 1},
        },
        {"type": "message_stop"},
    ]
)


def test_the_provider_counts_and_logs_what_its_translator_skipped(caplog: Any) -> None:
    from tokenwire.gateway.telemetry import metrics

    fmt = translate.get("anthropic")  # its translator counts the event types it skips
    transport = httpx.MockTransport(
        lambda request: httpx.Response(
            200, stream=httpx.ByteStream(BODY), headers={"content-type": "text/event-stream"}
        )
    )
    before = metrics.UNKNOWN_EVENTS.get("anthropic", "future_event")

    async def run() -> list[ev.Event]:
        async with httpx.AsyncClient(transport=transport) as client:
            provider = HTTPProvider(fmt, client=client, base_url="http://upstream.test")
            request = build(model="m", messages="hi", metadata={"request_id": "req-7"})
            return [event async for event in provider.generate(request)]

    with caplog.at_level(logging.WARNING, logger="tokenwire.gateway"):
        out = asyncio.run(run())
    assert "".join(e.text for e in out if isinstance(e, ev.ContentDelta)) == "Hi"
    assert metrics.UNKNOWN_EVENTS.get("anthropic", "future_event") == before + 2
    lines = [
        json.loads(r.getMessage()) for r in caplog.records if "unknown vendor" in r.getMessage()
    ]
    assert len(lines) == 1  # once per stream
    assert lines[0]["types"] == {"future_event": 2} and lines[0]["request_id"] == "req-7"
