"""`tokenwire convert --from VENDOR [FILE]`: standard SSE out, exit codes 0 / 1 / 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import tokenwire
from tokenwire import events as ev
from tokenwire.translate import VENDORS

VECTORS = Path(__file__).resolve().parent / "vectors" / "translate"


def run(args: list[str], stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "tokenwire", "convert", *args],
        input=stdin,
        capture_output=True,
        timeout=120,
    )


def vector_body(vendor: str, name: str) -> bytes:
    vector = json.loads((VECTORS / vendor / f"{name}.json").read_text(encoding="utf-8"))
    frames = [f"data: {json.dumps(item)}\n\n" for item in vector["data"]]
    if vector.get("done", True):
        frames.append("data: [DONE]\n\n")
    return "".join(frames).encode()


def parsed(stdout: bytes) -> list[ev.Event]:
    report = tokenwire.validate([stdout])
    assert report.ok, [str(v) for v in report.violations]
    return list(tokenwire.iter_events(stdout))


def text_of(events_: list[ev.Event], *, reasoning: bool = False) -> str:
    return "".join(
        e.delta.text for e in events_ if isinstance(e, ev.ContentDelta) and e.reasoning == reasoning
    )


def test_clean_capture_from_stdin_exits_zero() -> None:
    res = run(["--from", "openai", "--created", "7"], vector_body("openai", "text-basic"))
    assert res.returncode == 0, res.stderr
    events_ = parsed(res.stdout)
    assert text_of(events_) == "Hello, world! \u00e9\u2028\U0001f600"
    start = events_[0]
    assert isinstance(start, ev.StreamStart)
    assert (start.model, start.created) == ("unknown", 7)
    assert [e.type for e in events_ if isinstance(e, ev.Usage)] == ["usage"]
    # Each event is written as events.dump writes it.
    assert res.stdout == b"".join(ev.dump(e) for e in events_)


def test_capture_with_an_error_exits_one(tmp_path: Path) -> None:
    capture = tmp_path / "cut.sse"
    capture.write_bytes(vector_body("openai", "truncated-mid-answer"))
    res = run(["--from", "openai", str(capture)])
    assert res.returncode == 1
    events_ = parsed(res.stdout)
    errors = [e for e in events_ if isinstance(e, ev.ErrorEvent)]
    assert [e.code for e in errors] == ["internal_error"]
    assert isinstance(events_[-1], ev.StreamEnd)


def test_mistral_and_in_stream_error_code() -> None:
    res = run(["--from", "mistral"], vector_body("mistral", "flat-error-rate-limited"))
    assert res.returncode == 1
    assert [e.code for e in parsed(res.stdout) if isinstance(e, ev.ErrorEvent)] == ["rate_limited"]


def test_request_gives_model_request_id_and_reasoning(tmp_path: Path) -> None:
    req: dict[str, Any] = {
        "version": "1.0",
        "stream": True,
        "model": "deepseek-reasoner",
        "messages": [{"role": "user", "content": "hi"}],
        "metadata": {"request_id": "req-42"},
        "extensions": {"tokenwire:reasoning": True},
    }
    path = tmp_path / "req.json"
    path.write_text(json.dumps(req))
    body = vector_body("openai", "reasoning-dropped")
    res = run(["--from", "openai", "--request", str(path)], body)
    assert res.returncode == 0, res.stderr
    events_ = parsed(res.stdout)
    start, end = events_[0], events_[-1]
    assert isinstance(start, ev.StreamStart) and isinstance(end, ev.StreamEnd)
    assert (start.model, start.request_id, end.request_id) == (
        "deepseek-reasoner",
        "req-42",
        "req-42",
    )
    assert text_of(events_, reasoning=True) == "Thinking."
    assert text_of(events_) == "Answer"


def test_reasoning_flag() -> None:
    body = vector_body("openai", "reasoning-dropped")
    plain = parsed(run(["--from", "openai"], body).stdout)
    flagged = parsed(run(["--from", "openai", "--reasoning"], body).stdout)
    assert text_of(plain, reasoning=True) == ""
    assert text_of(flagged, reasoning=True) == "Thinking."


def test_usage_errors_exit_two(tmp_path: Path) -> None:
    body = vector_body("openai", "text-basic")
    assert run([], body).returncode == 2  # --from is required
    res = run(["--from", "nope"], body)
    assert res.returncode == 2 and b"nope" in res.stderr
    res = run(["--from", "openai", str(tmp_path / "missing.sse")])
    assert res.returncode == 2
    bad = tmp_path / "bad.json"
    bad.write_text('{"version": "1.0"}')
    res = run(["--from", "openai", "--request", str(bad)], body)
    assert res.returncode == 2 and b"invalid request" in res.stderr
    # OpenAI's translator takes no --mapping: a usage error, not a traceback.
    res = run(["--from", "openai", "--mapping", "x"], body)
    assert res.returncode == 2 and b"Traceback" not in res.stderr


def test_help_lists_every_vendor() -> None:
    res = run(["--help"])
    assert res.returncode == 0
    for name in VENDORS:
        assert name.encode() in res.stdout
