"""`tokenwire convert [--from VENDOR] [FILE]`: standard SSE out, exit codes 0 / 1 / 2;
the format detected from the content, JSON-lines recordings read (issue 13)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import tokenwire
from tokenwire import events as ev
from tokenwire.cli._detect import Detected, JSONLinesFramer, UnknownFormat, detect
from tokenwire.cli.convert import command as convert_command
from tokenwire.translate import VENDORS

VECTORS = Path(__file__).resolve().parent / "vectors" / "translate"
DETECT_VECTORS = Path(__file__).resolve().parent / "vectors" / "convert"
FIXTURES = Path(__file__).resolve().parents[1].parent / "shared" / "vendor-fixtures"


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
    # The capture names its model (issue 25: it was "unknown").
    assert (start.model, start.created) == ("gpt-4o-mini", 7)
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
    # Without --from the format is detected; input of no known format is a usage error.
    assert run([], b"not a capture\n").returncode == 2
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


# -- detection and JSON lines (issue 13) --------------------------------------------------


def detect_vectors() -> list[Path]:
    return sorted(DETECT_VECTORS.glob("*.json"))


def vector_input(vector: dict[str, Any]) -> bytes:
    return bytes.fromhex(vector["hex"]) if "hex" in vector else vector["text"].encode()


def convert(args: list[str], body: bytes) -> tuple[int, bytes, str]:
    """``tokenwire convert`` in-process: exit code, stdout bytes, stderr text."""
    result = CliRunner().invoke(convert_command, args, input=body)
    return result.exit_code, result.stdout_bytes, result.stderr


@pytest.mark.parametrize("path", detect_vectors(), ids=lambda p: p.stem)
def test_detect_vectors(path: Path) -> None:
    vector = json.loads(path.read_text(encoding="utf-8"))
    body = vector_input(vector)
    if "error" in vector:
        with pytest.raises(UnknownFormat, match=vector["error"]) as raised:
            detect(body)
        # It says what it would have taken (an empty input only that it is empty).
        assert "expected" in str(raised.value) or "empty" in vector["description"]
        assert "\\x" not in str(raised.value)  # no raw bytes shown as Python escapes
        return
    found = detect(body)
    want = vector["expect"]
    assert (found.vendor, found.framing, found.options) == (
        want["vendor"],
        want["framing"],
        want["options"],
    ), vector["description"]
    # Trailing blank lines (a capture saved by an editor) change nothing.
    assert detect(body + b"\n" * 3).vendor == found.vendor


@pytest.mark.parametrize(
    "path", [p for p in detect_vectors() if "error" not in p.read_text()], ids=lambda p: p.stem
)
def test_auto_detected_conversion_equals_the_explicit_one(path: Path) -> None:
    vector = json.loads(path.read_text(encoding="utf-8"))
    body = vector_input(vector)
    found = detect(body)
    code, out, err = convert(["--created", "1"], body)
    if found.vendor == "standard":
        assert code == 2 and "tokenwire validate" in err
        return
    explicit = ["--from", found.vendor, "--created", "1"]
    explicit += [arg for k, v in found.options.items() for arg in (f"--{k}", v)]
    assert (code, out) == convert(explicit, body)[:2], err
    assert f"reading {found.vendor}" in err
    assert tokenwire.validate([out]).ok, out


def test_json_lines_recording_converts_like_its_sse_body() -> None:
    jsonl = vector_input(json.loads((DETECT_VECTORS / "openai-jsonl.json").read_text()))
    sse_ = vector_input(json.loads((DETECT_VECTORS / "openai-sse.json").read_text()))
    code, out, err = convert(["--from", "openai", "--created", "1"], jsonl)
    assert code == 0, err  # not "truncated": the recording dropped the framing, not the end
    assert "truncated" not in err
    assert out == convert(["--from", "openai", "--created", "1"], sse_)[1]
    assert text_of(parsed(out)) == "Hi"


def test_json_lines_framer_any_split_gives_the_same_body() -> None:
    lines = b'{"a":1}\r\n\n{"b":2}\n{"c":3}'
    whole = JSONLinesFramer(done=True)
    expected = whole.feed(lines) + whole.close()
    assert expected == b'data: {"a":1}\n\ndata: {"b":2}\n\ndata: {"c":3}\n\ndata: [DONE]\n\n'
    for cut in range(len(lines) + 1):
        framer = JSONLinesFramer(done=True)
        got = framer.feed(lines[:cut]) + framer.feed(lines[cut:]) + framer.close()
        assert got == expected, cut


def test_unknown_input_says_what_was_expected() -> None:
    code, out, err = convert([], b"Hello, this is not a stream.\n")
    assert code == 2 and out == b""
    for name in ("anthropic", "gemini", "SignalR", "Connect", "JSON lines", "--from"):
        assert name in err


def test_a_wrong_from_says_what_it_expected_and_what_the_input_looks_like() -> None:
    anthropic = vector_input(json.loads((DETECT_VECTORS / "anthropic-sse.json").read_text()))
    code, out, err = convert(["--from", "openai"], anthropic)
    assert code == 1
    assert isinstance(parsed(out)[-1], ev.StreamEnd)  # still a whole stream on stdout
    assert "expected openai: SSE data: lines of chat.completion.chunk" in err
    assert "looks like anthropic" in err and "try --from anthropic" in err


# -- every recorded format in ../shared/vendor-fixtures -----------------------------------

#: Fixture folder -> the translator its files are for.
FOLDERS = {
    "openai-chat": "openai",
    "openai-responses": "openai-responses",
    "anthropic": "anthropic",
    "gemini": "gemini",
    "cohere": "cohere",
    "mistral": "mistral",
    "connect": "connect",
    "signalr": "signalr",
}


def signalr_frames(capture: Path) -> bytes:
    """The S->C frames of a probe capture (each line a Python repr), or the raw frames."""
    text = capture.read_text(encoding="utf-8")
    if "S->C " not in text:
        return capture.read_bytes()
    frames = [line[5:].strip()[1:-1] for line in text.splitlines() if line.startswith("S->C ")]
    return "".join(frames).replace("\\x1e", "\x1e").encode()


def fixture_cases() -> list[tuple[str, Path]]:
    if not FIXTURES.is_dir():
        return []
    cases = []
    for folder in FOLDERS:
        for path in sorted((FIXTURES / folder).iterdir()):
            # SignalR's .txt files: probe captures (S->C lines) and raw frames.
            if path.suffix in (".sse", ".jsonl", ".bin") or path.name.endswith(
                ("frames.txt", "stream-capture.txt")
            ):
                cases.append((folder, path))
    return cases


def fixture_body(folder: str, path: Path) -> bytes:
    return signalr_frames(path) if folder == "signalr" else path.read_bytes()


@pytest.mark.fixtures
def test_fixtures_cover_every_format() -> None:
    if not FIXTURES.is_dir():
        reason = f"vendor recordings not found at {FIXTURES}"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason} (CI=true: the recordings are required)")
        pytest.skip(reason)
    assert {folder for folder, _ in fixture_cases()} == set(FOLDERS)


@pytest.mark.fixtures
@pytest.mark.parametrize(
    ("folder", "path"), fixture_cases(), ids=lambda v: v.name if isinstance(v, Path) else v
)
def test_every_fixture_is_detected_and_converts_as_with_from(folder: str, path: Path) -> None:
    body = fixture_body(folder, path)
    found: Detected = detect(body[:65536])
    vendor = FOLDERS[folder]
    if found.vendor != vendor:
        # Only an OpenAI-compatible chunk stream from a non-Mistral model, recorded
        # through Mistral's SDK, is told apart wrongly; it translates the same.
        assert (folder, found.vendor) == ("mistral", "openai"), found
    auto = convert(["--created", "1"], body)
    explicit = ["--from", vendor, "--created", "1"]
    explicit += [arg for k, v in found.options.items() for arg in (f"--{k}", v)]
    assert auto[:2] == convert(explicit, body)[:2], auto[2]
    assert auto[0] in (0, 1)  # a stream, clean or ending in its error event, never a usage error
