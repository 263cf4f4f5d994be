"""The pure parts of passthrough: the model rename, the byte release, the standard view."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from tokenwire import events as ev
from tokenwire import translate
from tokenwire.errors import InvalidRequest
from tokenwire.gateway.providers.passthrough import (
    TRANSITIONS,
    Encoder,
    Offer,
    OfferState,
    lenient,
    rename_model,
)
from tokenwire.translate.anthropic import error_frame as anthropic_error_frame

VECTORS = Path(__file__).resolve().parents[2] / "vectors" / "passthrough"


def _cases(name: str) -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = json.loads((VECTORS / name).read_text())["cases"]
    return cases


@pytest.mark.parametrize("case", _cases("rename_model.json"), ids=lambda c: c["name"])
def test_rename_model(case: dict[str, Any]) -> None:
    raw = case["body"].encode()
    out = rename_model(raw, msgspec.json.decode(raw), case["to"])
    assert out == case["expected"].encode()


@pytest.mark.parametrize("case", _cases("take.json"), ids=lambda c: c["name"])
def test_only_complete_events_leave(case: dict[str, Any]) -> None:
    offer = Offer("anthropic", b"{}", {}, {})
    offer.step("engage")  # the client reads the vendor stream
    offer.attempt()
    for step in case["steps"]:
        offer.push(step["push"].encode())
        assert offer.take() == step["out"].encode()


def _anthropic_parse(body: dict[str, Any]) -> Any:
    ingress = translate.get("anthropic").ingress
    assert ingress is not None
    return ingress.parse(body)


AGENT_BODY: dict[str, Any] = {
    "model": "m",
    "max_tokens": 10,
    "stream": True,
    "tools": [
        {"type": "web_search_20250305", "name": "web_search"},
        {"name": "f", "input_schema": {"type": "object"}},
    ],
    "messages": [
        {"role": "user", "content": "q"},
        {
            "role": "assistant",
            "content": [
                {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}},
                {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
                {"type": "future_block_2030", "x": 1},
                {"type": "text", "text": "answer"},
            ],
        },
        {"role": "user", "content": "more"},
    ],
}


def test_the_standard_view_leaves_out_what_it_cannot_model_and_keeps_the_rest() -> None:
    raw = msgspec.json.encode(AGENT_BODY)
    with pytest.raises(InvalidRequest):
        _anthropic_parse(msgspec.json.decode(raw))  # what translating does
    obj = msgspec.json.decode(raw)
    request, _encode = lenient("anthropic", raw, obj, _anthropic_parse)
    assert [t.name for t in request.tools] == ["f"]
    assert [m.text for m in request.messages] == ["q", "answer", "more"]
    assert obj == AGENT_BODY  # the client's body (what goes upstream) is untouched


def test_a_top_level_refusal_is_still_raised() -> None:
    body = {**AGENT_BODY, "model": 5}
    raw = msgspec.json.encode(body)
    with pytest.raises(InvalidRequest) as caught:
        lenient("anthropic", raw, msgspec.json.decode(raw), _anthropic_parse)
    assert caught.value.path == "model"


_START = ev.StreamStart(v=ev.VERSION, seq=0, model="m", created="2026-01-01T00:00:00Z")


def _error(code: str = "internal_error") -> ev.ErrorEvent:
    return ev.ErrorEvent(v=ev.VERSION, seq=3, code=code, message="upstream connection failed")


def test_an_error_the_gateway_adds_is_in_the_vendors_shape_after_whole_events() -> None:
    offer = Offer("anthropic", b"{}", {}, {})
    encode = Encoder(offer, lambda event: b"VENDOR")
    assert encode(_START) == b""  # held: passthrough or not is not known yet
    offer.attempt()  # the provider takes the offer
    offer.push(b'event: ping\ndata: {}\n\nevent: content_block_delta\ndata: {"ty')
    out = encode(_error())
    assert out.startswith(b"event: ping\ndata: {}\n\nevent: error\ndata: ")
    assert msgspec.json.decode(out.split(b"data: ")[-1])["error"]["type"] == "api_error"
    assert encode(ev.StreamEnd(v=ev.VERSION, seq=4)) == b""  # the half event never leaves


def test_an_upstream_error_in_its_bytes_is_not_doubled() -> None:
    offer = Offer("anthropic", b"{}", {}, {})
    encode = Encoder(offer, lambda event: b"VENDOR")
    encode(_START)
    offer.attempt()
    frame = anthropic_error_frame("overloaded", "upstream connection failed")
    offer.push(frame)
    offer.reading()  # parsed from the upstream's bytes
    assert encode(_error("overloaded")) == frame


def test_without_a_taker_the_vendor_encoder_answers_as_before() -> None:
    offer = Offer("anthropic", b"{}", {}, {})
    seen: list[str] = []

    def vendor(event: ev.Event) -> bytes:
        seen.append(event.type)
        return event.type.encode()

    encode = Encoder(offer, vendor)
    assert encode(_START) == b""
    assert encode(_error()) == b"stream.starterror"
    assert seen == ["stream.start", "error"]


def test_responses_errors_carry_the_next_sequence_number() -> None:
    offer = Offer("openai-responses", b"{}", {}, {})
    encode = Encoder(offer, lambda event: b"")
    encode(_START)
    offer.attempt()
    offer.push(b"event: a\ndata: {}\n\nevent: b\ndata: {}\n\n")
    out = encode(
        ev.ContentDelta(v=ev.VERSION, seq=1, index=0, role="assistant", delta=ev.Delta(text="x"))
    )
    assert out.count(b"\n\n") == 2
    frame = encode(_error())
    assert msgspec.json.decode(frame.split(b"data: ")[1])["sequence_number"] == 2


# --- the offer's state table -------------------------------------------------------------

INPUTS = sorted({event for _state, event in TRANSITIONS})


@pytest.mark.parametrize("state", list(OfferState), ids=lambda s: s.name)
@pytest.mark.parametrize("event", INPUTS)
def test_an_input_the_table_lacks_is_refused_and_changes_nothing(
    state: OfferState, event: str
) -> None:
    offer = Offer("anthropic", b"{}", {}, {})
    offer.state = state
    if (state, event) in TRANSITIONS:
        offer.step(event)
        assert offer.state is TRANSITIONS[state, event]
        return
    with pytest.raises(RuntimeError, match=f"{event!r} in state {state.name}"):
        offer.step(event)
    assert offer.state is state


def test_a_client_that_asked_for_the_standard_keeps_no_upstream_bytes() -> None:
    offer = Offer("anthropic", b"{}", {}, {})
    offer.attempt()  # the encoder never ran: the client reads the standard
    offer.reading()
    offer.push(b"event: ping\ndata: {}\n\n")
    assert not offer.taken and offer.take() == b""


def test_a_retry_forgets_the_failed_attempts_status_and_bytes() -> None:
    offer = Offer("anthropic", b"{}", {}, {})
    Encoder(offer, lambda event: b"")(_START)  # the client reads the vendor stream
    offer.attempt()
    offer.answer(529, b'{"type":"error"}', {"retry-after": "1"}.get)
    assert offer.head is not None and offer.closed and offer.whole
    offer.attempt()  # routing tries the next deployment
    assert offer.state is OfferState.TAKEN and offer.head is None
    assert not offer.closed and not offer.whole and offer.take() == b""
