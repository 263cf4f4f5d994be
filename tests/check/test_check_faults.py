"""`tokenwire check` against purpose-built endpoints: one clean, and one per fault.

Each broken endpoint differs from the clean one in exactly one way; `check` must
fail it and name the right probe and draft section.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tokenwire import binary, events, request, sse
from tokenwire.conformance import Target, run
from tokenwire.errors import InvalidRequest
from tokenwire.writer import Writer


def answer(req: request.Request, fault: str | None) -> list[bytes]:
    """A tiny reference endpoint: echo text, or call the first declared tool."""
    rid = None if fault == "no-request-id-echo" else req.request_id
    w = Writer(model=req.model, request_id=rid, created=1)
    out: list[events.Event] = []
    last = req.messages[-1]
    if req.tools and last.role == "user":
        tool = req.tools[0]
        name = "delete_files" if fault == "undeclared-tool" else tool.name
        out += w.tool_call(id="call_1", name=name, arguments={"city": "Vienna"}, index=0)
        out += w.stop(0, "tool_use")
    else:
        for word in ["Hello", " there", "."]:
            out += w.text(word)
    out += w.usage(5, 3)
    out += w.end()
    frames = [events.dump(e) for e in out]
    if fault == "seq-gap":
        del frames[2]
    elif fault == "no-end":
        frames.pop()
    elif fault == "type-mismatch":
        frames[1] = frames[1].replace(b"event: content.delta", b"event: usage", 1)
    elif fault == "partial-json":
        data = events.to_json(out[1]).decode()
        half = len(data) // 2
        frames[1] = f"event: {out[1].type}\ndata: {data[:half]}\n\n".encode()
        frames.insert(2, f"event: {out[1].type}\ndata: {data[half:]}\n\n".encode())
    return frames


def as_frames(sse_text: bytes) -> bytes:
    """The same events in the binary binding: each SSE message's data in an EVENT frame."""
    decoder = sse.Decoder()
    messages = decoder.feed(sse_text) + decoder.close()
    return b"".join(binary.encode_frame(binary.FrameType.EVENT, m.data.encode()) for m in messages)


def make_handler(fault: str | None) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, *args: Any) -> None:
            pass

        def reply(self, status: int, body: dict[str, Any]) -> None:
            raw = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            ctype = self.headers.get("Content-Type", "")
            if fault != "no-415" and not ctype.startswith(request.MEDIA_TYPE):
                return self.reply(415, {"error": {"message": "unsupported media type"}})
            try:
                req = request.parse(raw)
            except InvalidRequest as exc:
                return self.reply(400, {"error": {"message": str(exc), "path": exc.path}})
            if fault == "unknown-field-rejected" and b"x_future_field" in raw:
                return self.reply(400, {"error": {"message": "unknown field x_future_field"}})
            # docs/binary.md section 7: frames when Accept prefers them, SSE otherwise.
            framed = "llm-stream-frames" in self.headers.get("Accept", "")
            self.send_response(200)
            self.send_header("Content-Type", binary.MEDIA_TYPE if framed else "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.end_headers()
            try:
                for frame in answer(req, fault):
                    self.wfile.write(as_frames(frame) if framed else frame)
                    self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass

    return Handler


@contextmanager
def endpoint(fault: str | None) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(fault))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1/stream"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_clean_endpoint_passes_every_probe() -> None:
    with endpoint(None) as url:
        results = list(run(Target(url=url, model="m")))
    assert {r.id: r.verdict for r in results} == {r.id: "pass" for r in results}
    assert all(r.ttfe_ms is not None for r in results if r.id == "media-type")


FAULTS = [
    ("no-415", "unsupported-media-type", "7.2", "fail"),
    ("seq-gap", "envelope", "5.2", "fail"),
    ("no-end", "lifecycle", "5.4", "fail"),
    ("type-mismatch", "envelope", "5.2", "fail"),
    ("partial-json", "envelope", "5.2", "fail"),
    ("unknown-field-rejected", "unknown-fields", "4.7", "fail"),
    ("no-request-id-echo", "request-id-echo", "4.6", "warn"),
    ("undeclared-tool", "tool-call", "8.2", "fail"),
]


@pytest.mark.parametrize(
    ("fault", "probe", "section", "verdict"), FAULTS, ids=[f[0] for f in FAULTS]
)
def test_each_fault_is_caught_by_the_right_probe(
    fault: str, probe: str, section: str, verdict: str
) -> None:
    with endpoint(fault) as url:
        results = {r.id: r for r in run(Target(url=url, model="m"))}
    assert results[probe].verdict == verdict, results[probe].seen
    assert results[probe].section == section


#: In frames the envelope's own ``type`` names the event (docs/binary.md section 3): an
#: SSE ``event:`` line that disagrees with it has no counterpart there.
FRAMES_FAULTS = [f for f in FAULTS if f[0] != "type-mismatch"]


def test_clean_frames_endpoint_passes_every_probe() -> None:
    with endpoint(None) as url:
        results = list(run(Target(url=url, model="m", binding="binary")))
    assert {r.id: r.verdict for r in results} == {r.id: "pass" for r in results}


@pytest.mark.parametrize(
    ("fault", "probe", "section", "verdict"), FRAMES_FAULTS, ids=[f[0] for f in FRAMES_FAULTS]
)
def test_each_fault_in_frames_gets_the_same_verdict(
    fault: str, probe: str, section: str, verdict: str
) -> None:
    with endpoint(fault) as url:
        framed = {r.id: r.verdict for r in run(Target(url=url, model="m", binding="binary"))}
        sse_run = {r.id: r.verdict for r in run(Target(url=url, model="m"))}
    assert framed[probe] == verdict
    assert framed == sse_run  # the same verdict table, whichever binding carried it


def test_cli_exit_codes_json_junit_and_save(tmp_path: Path) -> None:
    with endpoint("no-request-id-echo") as url:
        cmd = [sys.executable, "-m", "tokenwire", "check", url, "--model", "m"]
        ok = subprocess.run(
            [*cmd, "--json", str(tmp_path / "r.json"), "--junit", str(tmp_path / "r.xml")],
            capture_output=True,
            timeout=120,
        )
        strict = subprocess.run([*cmd, "--strict", "--only", "request-id-echo"], timeout=120)
        saved = subprocess.run(
            [*cmd, "--only", "media-type", "--save", str(tmp_path / "raw")], timeout=120
        )
    assert ok.returncode == 0, ok.stdout.decode()[-2000:]
    assert strict.returncode == 1
    assert saved.returncode == 0
    report = json.loads((tmp_path / "r.json").read_text())
    assert {r["id"]: r["verdict"] for r in report}["request-id-echo"] == "warn"
    assert "<testsuite" in (tmp_path / "r.xml").read_text()
    assert (tmp_path / "raw" / "media-type.0.response.txt").read_text().startswith("event: ")
    with endpoint("seq-gap") as url:
        bad = subprocess.run([*cmd[:4], url, "--model", "m"], capture_output=True, timeout=120)
    assert bad.returncode == 1
    assert b"envelope" in bad.stdout and b"seq-gap" in bad.stdout
