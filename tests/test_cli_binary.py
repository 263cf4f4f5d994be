"""`tokenwire validate` and `convert` on the binary binding's frames (docs/binary.md)."""

from __future__ import annotations

import subprocess
import sys

from tests.test_binary import binary_wire
from tests.test_lifecycle import VECTORS, wire

from tokenwire import binary, iter_events, validate

EXAMPLE = next(c for c in VECTORS if c["name"] == "spec-5.5-complete-example")
GAP = next(c for c in VECTORS if c["name"] == "seq-gap")


def run(*args: str, stdin: bytes) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "tokenwire", *args], input=stdin, capture_output=True, timeout=120
    )


def test_validate_reads_frames_by_their_first_bytes() -> None:
    res = run("validate", stdin=binary_wire(EXAMPLE))
    assert res.returncode == 0, res.stderr
    assert b"8 events: conformant" in res.stderr


def test_validate_reports_the_same_lines_for_both_bindings() -> None:
    sse_res = run("validate", stdin=wire(GAP))
    bin_res = run("validate", "--framing", "binary", stdin=binary_wire(GAP))
    assert bin_res.returncode == sse_res.returncode == 1
    assert bin_res.stdout == sse_res.stdout
    assert b"seq-gap" in bin_res.stdout


def test_validate_names_the_offset_of_a_cut_frame() -> None:
    body = binary_wire(EXAMPLE)
    res = run("validate", "--framing", "binary", stdin=body[:-3])
    assert res.returncode == 1
    assert b"framing" in res.stdout and b"ended inside a frame's payload" in res.stdout
    assert b"Traceback" not in res.stderr


def test_validate_gives_no_vendor_hint_for_corrupted_frames() -> None:
    """A frames capture with a zeroed type byte (a reserved type, docs/binary.md section 2)
    is a broken LLM-Stream, not a vendor capture to convert."""
    body = binary_wire(EXAMPLE)
    for corrupted in (b"\x00" + body[1:], body[:5] + b"\x00" * 8 + body[13:]):
        res = run("validate", "--framing", "binary", stdin=corrupted)
        assert res.returncode == 1 and res.stdout  # the violation, named
        assert b"vendor capture" not in res.stderr and b"convert" not in res.stderr


def test_convert_writes_frames_that_validate_like_its_sse() -> None:
    capture = b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"},"finish_reason":null}]}\n\ndata: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'  # noqa: E501
    as_sse = run("convert", "--from", "openai", "--created", "1", stdin=capture)
    as_frames = run(
        "convert", "--from", "openai", "--created", "1", "--to", "binary", stdin=capture
    )
    assert as_sse.returncode == as_frames.returncode == 0, as_frames.stderr
    assert binary.looks_like_frames(as_frames.stdout)
    assert list(binary.iter_events(as_frames.stdout)) == list(iter_events(as_sse.stdout))
    by_frames = validate(as_frames.stdout, framing="binary")
    assert by_frames.violations == validate(as_sse.stdout).violations


def test_convert_reframes_a_binary_capture_as_sse() -> None:
    res = run("convert", stdin=binary_wire(EXAMPLE))
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith(b"event: stream.start\nid: 0\ndata: ")
    assert validate(res.stdout).ok
