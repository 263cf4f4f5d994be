"""The JSON Schemas of LLM-Stream 1.0 and tokenwire extensions 1.0 (src/tokenwire/schemas).

They ship in the package, are valid draft 2020-12, describe every event the
Writer can produce, and are what the lifecycle validator checks extension
events against (docs/conformance.md ruling 19).
"""

from __future__ import annotations

import json
import subprocess
import sys
from fnmatch import fnmatch
from importlib import resources
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from tests.strategies import data_texts

from tokenwire import events, schemas, validate
from tokenwire.errors import LocalProtocolError
from tokenwire.translate import _extensions as x
from tokenwire.translate.anthropic import Translator as AnthropicTranslator
from tokenwire.writer import Writer

ROOT = Path(__file__).resolve().parents[1]


def test_both_documents_ship_in_the_package_and_are_valid_2020_12() -> None:
    for name in (schemas.STANDARD_SCHEMA, schemas.EXTENSIONS_SCHEMA):
        assert resources.files("tokenwire.schemas").joinpath(name).is_file()
        document = schemas.load(name)
        assert document["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        Draft202012Validator.check_schema(document)
    # Every registered event type and every 1.0 extension event has a definition.
    assert set(events.EVENT_TYPES) <= set(schemas.load(schemas.STANDARD_SCHEMA)["$defs"])
    assert schemas.EXTENSION_EVENTS <= set(schemas.load(schemas.EXTENSIONS_SCHEMA)["$defs"])
    # Nothing keeps them out of the wheel: hatch packages the whole src/tokenwire
    # folder, less what .gitignore ignores.
    assert 'packages = ["src/tokenwire"]' in (ROOT / "pyproject.toml").read_text()
    ignore = (ROOT / ".gitignore").read_text().splitlines()
    for name in (schemas.STANDARD_SCHEMA, schemas.EXTENSIONS_SCHEMA):
        path = f"src/tokenwire/schemas/{name}"
        assert not [p for p in ignore if p and (fnmatch(name, p) or fnmatch(path, p))]


def _check(event: events.Event) -> None:
    """``event`` matches the shipped schema of its type."""
    if isinstance(event, events.UnknownEvent):
        obj = msgspec.json.decode(event.data)
        assert event.type in schemas.EXTENSION_EVENTS, event.type
        assert schemas.extension_error(event.type, obj) is None, (event, obj)
    else:
        obj = msgspec.json.decode(events.to_json(event))
        assert schemas.event_error(obj) is None, obj


_index = st.integers(0, 3)
plans = st.lists(
    st.one_of(
        st.tuples(st.just("text"), _index, data_texts),
        st.tuples(st.just("reasoning"), _index, data_texts),
        st.tuples(st.just("tool"), _index, data_texts),
        st.tuples(st.just("delta"), _index, data_texts),
        st.tuples(st.just("stop"), _index, st.sampled_from(sorted(events.STOP_REASONS))),
        st.tuples(st.just("usage"), st.integers(0, 10**6), st.booleans()),
        st.tuples(st.just("note"), st.integers(0, 10**6), st.booleans()),
        st.tuples(st.just("block"), _index, data_texts),
        st.tuples(st.just("error"), st.just(0), st.sampled_from(["overloaded", "cancelled"])),
        st.tuples(st.just("end"), st.just(0), st.just("")),
    ),
    max_size=30,
)


def _run(w: Writer, n: int, kind: str, a: Any, b: Any) -> list[events.Event]:
    if kind == "text":
        return w.text(b, a)
    if kind == "reasoning":
        return w.text(b, a, reasoning=True)
    if kind == "tool":
        return w.tool_call(id=f"c{a}", name="f", arguments=json.dumps({"q": b}), index=a)
    if kind == "delta":
        return w.tool_delta(a, f"c{a}", "f", b)
    if kind == "stop":
        return w.stop(a, b)
    if kind == "usage":
        return w.usage(a, a // 2, estimated=b)
    if kind == "note":
        w.note_usage(input_tokens=a, estimated=b)
        return []
    if kind == "block":
        body = {"index": a, x.REASONING: True, x.SIGNATURE: b, x.VENDOR: "anthropic"}
        return w.add(x.extension(x.BLOCK, body))
    if kind == "error":
        return w.error(b, "failed")
    return w.end()


@settings(max_examples=150, deadline=None)
@given(plans, st.booleans())
def test_every_event_the_writer_produces_matches_the_schemas(
    plan: list[tuple[str, Any, Any]], estimate: bool
) -> None:
    w = Writer(model="m", request_id="r1", estimate_usage=estimate)
    out: list[events.Event] = []
    for n, (kind, a, b) in enumerate(plan):
        try:
            out += _run(w, n, kind, a, b)
        except LocalProtocolError:
            pass  # refused: the stream stays valid
    out += w.fail("internal_error", "done") if not w.ended else []
    for event in out:
        _check(event)
    report = validate(b"".join(map(events.dump, out)))
    assert report.ok, report.violations
    extension_rules = {"bad-extension", "tool-delta-after-call", "tool-delta-mismatch"}
    assert not [v for v in report.violations if v.rule in extension_rules], report.violations


def _anthropic_vectors() -> list[Path]:
    folder = ROOT / "tests/vectors/translate/anthropic"
    return [p for p in sorted(folder.glob("*.json")) if "events" in json.loads(p.read_text())]


@pytest.mark.parametrize("path", _anthropic_vectors(), ids=lambda p: p.stem)
def test_what_the_anthropic_translator_emits_matches_the_schemas(path: Path) -> None:
    # The first vendor on the 1.0 conventions: its extension events are checked
    # here, as the validator checks them on every stream.
    vector = json.loads(path.read_text())
    body = b"".join(
        e.encode()
        if isinstance(e, str)
        else b"event: %s\ndata: %s\n\n" % (str(e.get("type")).encode(), json.dumps(e).encode())
        for e in vector["events"]
    )
    translator = AnthropicTranslator(model="m", reasoning=True)
    out = translator.feed(body) + translator.close()
    for event in out:
        _check(event)


def test_the_reasoning_history_the_builders_read_matches_the_request_schema() -> None:
    extensions = {
        x.REASONING: True,
        x.TOOL_DELTAS: True,
        x.REASONING_HISTORY: [
            {
                "message": 1,
                "parts": [
                    {"type": x.REASONING, "text": "t", x.SIGNATURE: "s", x.VENDOR: "anthropic"},
                    {"type": x.REASONING, x.REDACTED: "r", x.VENDOR: "anthropic"},
                ],
            }
        ],
    }
    assert schemas.request_extensions_error(extensions) is None
    bad = {x.REASONING_HISTORY: [{"message": -1, "parts": []}]}
    assert "message" in (schemas.request_extensions_error(bad) or "")
    assert "tool_deltas" in (schemas.request_extensions_error({x.TOOL_DELTAS: "yes"}) or "")


def test_a_text_stream_is_validated_without_importing_jsonschema() -> None:
    # The validator's hot path never touches a schema: jsonschema stays unimported
    # until an extension event comes.
    code = (
        "import sys\n"
        "from tokenwire import events, lifecycle\n"
        "from tokenwire.writer import Writer\n"
        "w = Writer(model='m')\n"
        "out = w.text('hi') + w.text(' there') + w.usage(1, 2) + w.end()\n"
        "assert lifecycle.validate(b''.join(map(events.dump, out))).ok\n"
        "print('jsonschema' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.strip() == "False"


def test_a_bad_extension_event_is_reported_with_where_and_why() -> None:
    w = Writer(model="m")
    out = w.text("x", 0, reasoning=True)
    out += w.add(x.extension(x.BLOCK, {"index": 0, x.SIGNATURE: 5, x.VENDOR: "anthropic"}))
    out += w.usage(1, 1) + w.end()
    report = validate(b"".join(map(events.dump, out)))
    (v,) = report.violations
    assert (v.rule, v.level, v.seq) == ("bad-extension", "should", 2)
    assert "tokenwire:signature" in v.message and "string" in v.message
    assert report.ok  # the draft's verdict: a parser ignores extension events (§5.2)


_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.sampled_from([1.0, 2.5, -1.0]),
    st.text(max_size=3),
    st.sampled_from(["1.0", "tokenwire.block", "tokenwire.usage", "tokenwire.stop"]),
    st.sampled_from(["tokenwire.tool_delta", ""]),
    st.just({}),
    st.just([]),
)


def _keys(kind: str) -> list[str]:
    props = schemas.load(schemas.EXTENSIONS_SCHEMA)["$defs"][kind]["properties"]
    return sorted({"v", "seq", "type", "other", *props})


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(sorted(schemas.EXTENSION_EVENTS)), st.data())
def test_the_fast_check_agrees_with_jsonschema(kind: str, data: st.DataObject) -> None:
    # extension_error answers valid events without jsonschema: it must never
    # accept what the schema rejects, nor reject what it accepts.
    keys = data.draw(st.lists(st.sampled_from(_keys(kind)), unique=True))
    obj = {k: data.draw(_values) for k in keys}
    if data.draw(st.booleans()):
        obj.update(v="1.0", seq=data.draw(st.integers(0, 5)), type=kind)
    fast = schemas._fast_check(schemas.EXTENSIONS_SCHEMA, kind)
    assert fast is not None
    full = schemas._validator(schemas.EXTENSIONS_SCHEMA, kind).is_valid(obj)
    assert fast(obj) is full, obj
