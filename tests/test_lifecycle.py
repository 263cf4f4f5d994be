"""The lifecycle validator against the shared vectors: each rule fires alone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from tokenwire import events, lifecycle, request, sse
from tokenwire.lifecycle import RULES, TRANSITIONS, State, Validator, validate

VECTORS = [
    case
    for name in ("cases.json", "extensions.json")
    for case in json.loads((Path(__file__).parent / "vectors/lifecycle" / name).read_text())[
        "cases"
    ]
]


def wire(case: dict[str, Any]) -> bytes:
    """Render a vector's events as an SSE body."""
    out = []
    for item in case["events"]:
        data = item["raw"] if "raw" in item else json.dumps(item["data"], separators=(",", ":"))
        out.append(sse.encode(data=data, event=item["event"]))
    return b"".join(out)


def req(case: dict[str, Any]) -> request.Request | None:
    body = case.get("request")
    return None if body is None else request.parse(json.dumps(body).encode())


@pytest.mark.parametrize("case", VECTORS, ids=[c["name"] for c in VECTORS])
def test_vector(case: dict[str, Any]) -> None:
    report = validate(wire(case), req(case))
    assert [v.rule for v in report.violations] == case["rules"]
    assert report.ok is case["ok"]


@pytest.mark.parametrize("case", VECTORS, ids=[c["name"] for c in VECTORS])
def test_vector_byte_by_byte(case: dict[str, Any]) -> None:
    body = wire(case)
    report = validate((body[i : i + 1] for i in range(len(body))), req(case))
    assert [v.rule for v in report.violations] == case["rules"]


def test_every_rule_has_a_vector_that_triggers_it_alone() -> None:
    alone = {c["rules"][0] for c in VECTORS if len(set(c["rules"])) == 1}
    # framing: test_framing_violation; seq-exhausted: a stream cannot reach
    # 2^53 without a gap in a vector, see test_seq_exhausted_alone.
    untested = set(RULES) - alone - {"framing", "seq-exhausted"}
    assert not untested, f"rules without a single-rule vector: {sorted(untested)}"


def test_seq_exhausted_alone() -> None:
    val = Validator()
    val.feed(events.StreamStart(v="1.0", seq=0, model="m", created=1))
    val._expected_seq = 2**53  # as if 2^53 - 1 events went by
    past = events.Usage(v="1.0", seq=2**53, input_tokens=1, output_tokens=1)
    assert [(v.rule, v.level, v.section) for v in val.feed(past)] == [
        ("seq-exhausted", "should", "8.4")
    ]


def test_framing_violation() -> None:
    body = b"event: stream.start\ndata: " + b"x" * 5000
    report = validate(body, max_event_bytes=1024)
    assert [v.rule for v in report.violations] == ["framing"]
    assert "byte" in report.violations[0].message


def test_violation_carries_seq_section_and_sentence() -> None:
    case = next(c for c in VECTORS if c["name"] == "seq-gap")
    (v,) = validate(wire(case)).violations
    assert (v.rule, v.seq, v.section, v.level) == ("seq-gap", 5, "5.2.1", "must")
    assert "expected seq 3" in v.message
    assert str(v).startswith("seq 5: seq-gap (§5.2.1, MUST)")


def test_validator_reports_per_event() -> None:
    val = Validator()
    start = events.StreamStart(v="1.0", seq=0, model="m", created=1)
    assert val.feed(start) == []
    bad = events.ContentDelta(
        v="1.0", seq=3, index=0, role="assistant", delta=events.Delta(text="")
    )
    assert [v.rule for v in val.feed(bad)] == ["seq-gap"]
    assert [v.rule for v in val.close()] == ["missing-end"]
    assert not val.ok


def test_transition_table_is_the_whole_lifecycle() -> None:
    # §5.4: from IDLE only stream.start; CLOSED is terminal.
    assert {k for (s, k) in TRANSITIONS if s is State.IDLE} == {"stream.start"}
    assert not [k for (s, k) in TRANSITIONS if s is State.CLOSED]
    assert "stateDiagram-v2" in lifecycle.diagram()


def test_conformance_doc_lists_every_rule_and_the_generated_diagram() -> None:
    doc = (Path(__file__).parents[1] / "docs/conformance.md").read_text()
    for code in RULES:
        assert f"`{code}`" in doc, code
    assert lifecycle.diagram() in doc


def test_report_is_json_serialisable() -> None:
    case = next(c for c in VECTORS if c["name"] == "missing-usage")
    report = validate(wire(case))
    data = msgspec.json.decode(msgspec.json.encode(report))
    assert data["ok"] is True
    assert data["violations"][0]["rule"] == "missing-usage"
