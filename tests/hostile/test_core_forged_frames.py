"""Hostile names and ids: nothing an upstream or a caller controls can add an SSE frame.

docs/conformance.md ruling 13: event type names are one token (``events.TYPE_NAME``);
``sse.encode`` refuses CR, LF and NUL in ``event:`` and ``id:``.
"""

from __future__ import annotations

import json

import pytest

from tokenwire import events, lifecycle, sse
from tokenwire.errors import EventDecodeError, LocalProtocolError, ProtocolError
from tokenwire.translate import _protowire as pw
from tokenwire.translate import connect
from tokenwire.writer import Writer

# Each would, written raw after "event: ", end the line and start forged fields or frames.
FORGERIES = [
    "x.note\n\nevent: stream.end\ndata: {}",
    "x.note\r\rdata: forged",
    "x.note\r\nid: 999",
    "x.note\0",
    "x.note\nretry: 1",
]


def frames(wire: bytes) -> list[sse.Message]:
    decoder = sse.Decoder()
    return decoder.feed(wire) + decoder.close()


@pytest.mark.parametrize("name", FORGERIES)
def test_sse_encode_refuses_a_forging_event_or_id(name: str) -> None:
    with pytest.raises(LocalProtocolError):
        sse.encode(data="{}", event=name)
    with pytest.raises(LocalProtocolError):
        sse.encode(data="{}", id=name)


@pytest.mark.parametrize("name", FORGERIES)
def test_an_upstream_connect_event_name_cannot_forge_a_frame(name: str) -> None:
    # The Connect translator builds an UnknownEvent from the upstream's
    # "unregistered" message: its type is upstream-controlled.
    body = pw.field_string(1, name) + pw.field_string(2, json.dumps({"type": name}))
    message = pw.field_string(1, "1.0") + pw.field_varint(2, 3) + pw.field_bytes(30, body)
    with pytest.raises(ProtocolError):
        connect.decode_event(message)
    as_json = {"v": "1.0", "seq": 3, "unregistered": {"type": name, "data": "{}"}}
    with pytest.raises(ProtocolError):
        connect.decode_event(json.dumps(as_json).encode(), "json")


@pytest.mark.parametrize("name", FORGERIES)
def test_a_provider_cannot_pass_a_forging_unknown_event_to_the_writer(name: str) -> None:
    writer = Writer(model="demo")
    with pytest.raises(LocalProtocolError):
        writer.add(events.UnknownEvent(type=name, data="{}"))
    # The stream the writer did emit is still one frame per event.
    wire = b"".join(map(events.dump, writer.text("ok") + writer.end()))
    assert [m.event for m in frames(wire)] == [
        "stream.start",
        "content.delta",
        "content.stop",
        "stream.end",
    ]


def test_a_colon_name_from_the_wire_is_a_violation_not_a_crash() -> None:
    # A decoder keeps "vendor:x" whole (fact 16); the event layer refuses it.
    start = {"v": "1.0", "seq": 0, "type": "stream.start", "model": "m", "created": 1}
    end = {"v": "1.0", "seq": 2, "type": "stream.end"}
    usage = {"v": "1.0", "seq": 1, "type": "usage", "input_tokens": 1, "output_tokens": 1}
    wire = (
        b"".join(sse.encode(event=e["type"], data=json.dumps(e)) for e in (start, usage, end))
        .replace(b"event: usage", b"event: vendor:x")
        .replace(b'"type": "usage"', b'"type": "vendor:x"')
    )
    (message,) = [m for m in frames(wire) if m.event == "vendor:x"]
    with pytest.raises(EventDecodeError) as info:
        events.parse(message.event, message.data)
    assert info.value.rule == "bad-type-name"
    report = lifecycle.validate(wire)
    assert [v.rule for v in report.violations] == ["bad-type-name", "missing-usage"]
    assert not report.ok
