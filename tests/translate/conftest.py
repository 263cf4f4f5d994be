"""Shared helpers for the translator tests: the vendor recordings and their framing.

The recordings live outside the repository, in ``../shared/vendor-fixtures``
(read in place, never copied). When the folder is missing, tests that need it
skip with a reason, except under ``CI=true``, where they fail.

- ``vendor_fixtures``: the folder (a ``Path``), or skip/fail.
- ``recording``: a test that takes it runs once per file of the folder its
  module names in ``RECORDINGS_FOLDER`` (``"openai-chat"``, ``"anthropic"``...);
  the value is the file's ``Path``.
- ``capture_body``: ``capture_body(path, done=..., event_key=...)`` -> the raw
  response body. ``.sse`` files are exact bodies; ``.jsonl`` files hold one SSE
  data payload per line with the framing stripped (SOURCES.md), so it is rebuilt:
  ``data: <line>\\n\\n`` per line, ``event: <payload[event_key]>`` first when
  ``event_key`` is given (Anthropic-style vendors), and ``data: [DONE]\\n\\n`` at
  the end when ``done`` (the OpenAI family's end marker).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from tokenwire import events as ev
from tokenwire import validate
from tokenwire.translate import translator

#: tests/translate/conftest.py -> the checkout -> its sibling ``shared`` folder.
FIXTURES_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "vendor-fixtures"

CaptureBody = Callable[..., bytes]


def _missing(what: Path) -> None:
    reason = f"vendor recordings not found at {what}"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: the recordings are required)")
    pytest.skip(reason)


def require_fixtures() -> Path:
    """The shared recordings folder; skips (fails under CI=true) when it is missing."""
    if not FIXTURES_DIR.is_dir():
        _missing(FIXTURES_DIR)
    return FIXTURES_DIR


@pytest.fixture
def vendor_fixtures() -> Path:
    """The shared recordings folder; skips (fails under CI=true) when it is missing."""
    return require_fixtures()


def recordings(folder: str) -> list[Path]:
    """The ``.sse`` and ``.jsonl`` files of one vendor folder, sorted; [] when absent."""
    where = FIXTURES_DIR / folder
    if not where.is_dir():
        return []
    return sorted(p for p in where.iterdir() if p.suffix in (".sse", ".jsonl"))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "recording" not in metafunc.fixturenames:
        return
    folder = getattr(metafunc.module, "RECORDINGS_FOLDER", None)
    if folder is None:
        raise pytest.UsageError(
            f"{metafunc.module.__name__} uses `recording` without RECORDINGS_FOLDER"
        )
    files = recordings(folder)
    params: list[object] = [pytest.param(p, id=p.name) for p in files]
    if not params:  # the fixture decides: skip, or fail under CI
        params = [pytest.param(FIXTURES_DIR / folder, id="missing")]
    metafunc.parametrize("recording", params, indirect=True)


@pytest.fixture
def recording(request: pytest.FixtureRequest) -> Path:
    path: Path = request.param
    if not path.is_file():
        _missing(path)
    return path


def rebuild_sse(text: str, *, done: bool = False, event_key: str | None = None) -> bytes:
    """SSE framing for a ``.jsonl`` capture (see the module docstring)."""
    out = []
    for line in text.splitlines():
        if not line.strip():
            continue
        if event_key is not None:
            out.append(f"event: {json.loads(line)[event_key]}\n")
        out.append(f"data: {line}\n\n")
    if done:
        out.append("data: [DONE]\n\n")
    return "".join(out).encode()


@pytest.fixture
def capture_body() -> CaptureBody:
    """``capture_body(path, *, done=False, event_key=None) -> bytes``: the raw body."""

    def load(path: Path, *, done: bool = False, event_key: str | None = None) -> bytes:
        if path.suffix == ".jsonl":
            return rebuild_sse(path.read_text(encoding="utf-8"), done=done, event_key=event_key)
        return path.read_bytes()

    return load


# --- Translating and summarizing (plain helpers, importable by test modules) ------


class Summary(NamedTuple):
    """What a translated stream said, in the terms the tests assert."""

    text: dict[int, str]  # block index -> answer text
    reasoning: dict[int, str]  # block index -> reasoning text (tokenwire:reasoning)
    tool_calls: list[tuple[int, str, str, Any]]  # (index, id, name, parsed arguments)
    stops: dict[int, str]  # block index -> stop_reason
    usage: list[tuple[int, int]]  # every usage event, in order
    errors: list[str]  # error codes


def summarize(out: list[ev.Event]) -> Summary:
    """Fold a list of standard events into a ``Summary``."""
    s = Summary({}, {}, [], {}, [], [])
    for e in out:
        if isinstance(e, ev.ContentDelta):
            where = s.reasoning if e.reasoning else s.text
            where[e.index] = where.get(e.index, "") + e.delta.text
        elif isinstance(e, ev.ToolCall):
            s.tool_calls.append((e.index, e.id, e.name, json.loads(e.arguments)))
        elif isinstance(e, ev.ContentStop):
            s.stops[e.index] = e.stop_reason
        elif isinstance(e, ev.Usage):
            s.usage.append((e.input_tokens, e.output_tokens))
        elif isinstance(e, ev.ErrorEvent):
            s.errors.append(e.code)
    return s


def translate_pieces(
    vendor: str, pieces: Iterable[bytes], *, request_id: str | None = "req-1", **options: Any
) -> list[ev.Event]:
    """Feed ``pieces`` to a fresh ``vendor`` translator, then close it (created fixed at 0)."""
    t = translator(vendor, model="test-model", request_id=request_id, created=0, **options)
    out: list[ev.Event] = []
    for piece in pieces:
        out += t.feed(piece)
    return out + t.close()


def assert_conformant(out: list[ev.Event]) -> None:
    """The events, written as SSE, pass the lifecycle validator with no MUST violation."""
    report = validate([b"".join(map(ev.dump, out))])
    assert report.ok, [str(v) for v in report.violations]
    assert isinstance(out[0], ev.StreamStart) and isinstance(out[-1], ev.StreamEnd)


def assert_tool_deltas_only_add_deltas(
    vendor: str, body: bytes, options: dict[str, Any]
) -> dict[str, str]:
    """``tokenwire:tool_deltas`` adds display-only ``tokenwire.tool_delta`` events that
    add up to each ``tool.call``; every other event (indexes, ids, arguments) is the same,
    except that a call dropped for max_tokens stops the block its deltas went to.
    Returns call id -> the argument text its deltas carried (a call whose arguments
    came whole, in one done event, has none)."""
    from tokenwire.translate import _extensions as x

    plain = translate_pieces(vendor, [body], **options)
    live = translate_pieces(vendor, [body], tool_deltas=True, **options)
    report = validate([b"".join(map(ev.dump, live))])
    assert report.ok and not [v.rule for v in report.violations if v.rule.startswith("tool-")]
    deltas = [x.fields(e, x.TOOL_DELTA) for e in live]
    sent: dict[str, str] = {}
    for d in deltas:
        if d is not None:
            sent[d["id"]] = sent.get(d["id"], "") + d["delta"]
    rest = summarize([e for e, d in zip(live, deltas, strict=True) if d is None])
    before = summarize(plain)
    extra = {i: r for i, r in rest.stops.items() if i not in before.stops}
    assert set(extra.values()) <= {"max_tokens"}
    kept = {i: r for i, r in rest.stops.items() if i in before.stops}
    assert rest._replace(stops=kept) == before
    for call in (e for e in live if isinstance(e, ev.ToolCall)):
        if call.id in sent:
            assert json.loads(sent[call.id]) == json.loads(call.arguments)
    return sent
