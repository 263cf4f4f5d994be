"""A span per turn: each ``response.create`` of a Responses WebSocket is exported as a request's
span, and the turns of one socket share one trace (the handshake's ``traceparent``, or one
the gateway makes for the socket)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.production.conftest import start, table
from tests.production.test_otel import CLIENT_SPAN, CLIENT_TRACE, Receiver
from tests.production.test_otel import receiver as receiver  # the OTLP receiver fixture
from tests.responses_ws.helpers import client, turn

from tokenwire.testing import wait_until
from tokenwire.testing.upstream import FakeUpstream, Script


@pytest.fixture
def traced(
    receiver: Receiver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[str, Receiver]]:
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
    with FakeUpstream("openai", Script(text="traced answer")) as fake:
        model = {"name": "traced", "provider": "openai", "base_url": fake.url + "/v1"}
        config = (
            table(
                "telemetry", {"enabled": True, "endpoint": receiver.url, "export_interval_s": 0.2}
            )
            + "\n"
            + table("models", model, array=True)
        )
        gateway = start(tmp_path, config)
        try:
            yield gateway.url, receiver
        finally:
            gateway.stop()


def _two_turns(conn: Any) -> None:
    _, first = turn(conn, model="traced", input="hi")
    _, second = turn(conn, model="traced", input="more", previous_response_id=first.response.id)
    assert second.type == "response.completed"


def test_each_turn_is_a_span_in_the_socket_trace(traced: tuple[str, Receiver]) -> None:
    url, receiver = traced
    traceparent = f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"
    with client(url).responses.connect(extra_headers={"traceparent": traceparent}) as conn:
        _two_turns(conn)
    with client(url).responses.connect() as conn:
        _two_turns(conn)

    def spans() -> list[Any]:
        with receiver.lock:
            found = [s for s in receiver.spans if s.name == "chat traced"]
        return found if len(found) >= 4 else []

    by_trace: dict[str, list[Any]] = {}
    for span in wait_until(spans, what="a span for each of the four turns"):
        by_trace.setdefault(span.trace_id.hex(), []).append(span)
    assert sorted(len(group) for group in by_trace.values()) == [2, 2]
    # The first socket's turns continue the client's own trace, under its span.
    assert [s.parent_span_id.hex() for s in by_trace[CLIENT_TRACE]] == [CLIENT_SPAN] * 2
