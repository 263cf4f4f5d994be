"""`tokenwire check` as a newcomer meets it (issue 13): credentials never written,
a base URL or the stream URL, one line for an unreachable endpoint, and no probe
passing on an answer that is not a stream (404, 405...)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from tests.check.test_check_faults import endpoint

from tokenwire.conformance import (
    PROBES,
    SECRET_HEADERS,
    Target,
    reachable,
    redact_headers,
    redact_url,
    run,
)

SECRET = "sk-tokenwire-test-SECRET-7f3a9"


def check(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tokenwire", "check", *args],
        capture_output=True,
        text=True,
        timeout=180,
    )


def every_file(folder: Path) -> Iterator[Path]:
    return (p for p in sorted(folder.rglob("*")) if p.is_file())


# -- secrets ----------------------------------------------------------------------------


def test_no_report_format_carries_a_credential(tmp_path: Path) -> None:
    headers = [
        f"Authorization: Bearer {SECRET}",
        f"x-api-key: {SECRET}",
        f"x-goog-api-key: {SECRET}",
        f"api-key: {SECRET}",
        f"Cookie: session={SECRET}",
    ]
    out = tmp_path / "out"
    with endpoint(None) as url:
        res = check(
            f"{url}?key={SECRET}",
            "--model", "m",
            *(arg for h in headers for arg in ("--header", h)),
            "--json", str(out / "r.json"),
            "--junit", str(out / "r.xml"),
            "--save", str(out / "raw"),
        )  # fmt: skip
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    written = list(every_file(out))
    assert {p.name for p in written} >= {"r.json", "r.xml", "media-type.0.json"}
    for path in written:
        assert SECRET not in path.read_text(errors="replace"), f"{path.name} leaks the secret"
    assert SECRET not in res.stdout and SECRET not in res.stderr
    # The headers were sent (the report says which), only their values are hidden.
    saved = json.loads((out / "raw" / "media-type.0.json").read_text())
    sent = {k.lower(): v for k, v in saved["request_headers"].items()}
    assert {k: sent[k] for k in ("authorization", "x-api-key", "cookie")} == {
        "authorization": "[redacted]",
        "x-api-key": "[redacted]",
        "cookie": "[redacted]",
    }
    assert "key=[redacted]" in saved["url"]


def test_redaction_covers_every_credential_header_in_any_case() -> None:
    headers = {name.title(): SECRET for name in SECRET_HEADERS} | {"Accept": "text/plain"}
    redacted = redact_headers(headers)
    assert SECRET not in json.dumps(redacted)
    assert redacted["Accept"] == "text/plain"
    assert redact_url(f"https://u:{SECRET}@h/v1/stream?alt=sse&key={SECRET}") == (
        "https://[redacted]@h/v1/stream?alt=sse&key=[redacted]"
    )


# -- one URL form -----------------------------------------------------------------------


def test_check_takes_the_base_url_too() -> None:
    with endpoint(None) as url:
        base = url.removesuffix("/v1/stream")
        res = check(base, "--model", "m", "--only", "media-type")
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert "/v1/stream" in res.stdout


# -- unreachable ------------------------------------------------------------------------


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port  # closed now: connections to it are refused


def test_an_unreachable_endpoint_gets_one_line_and_exit_two() -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    res = check(url)
    assert res.returncode == 2
    assert res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert f"cannot reach {url}/v1/stream" in lines[0]
    assert "Traceback" not in res.stderr
    assert reachable(Target(url=url)) is not None


# -- no probe passes on an answer that is not a stream ----------------------------------


def refusing_handler(status: int) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, *args: Any) -> None:
            pass

        def answer(self) -> None:
            raw = json.dumps({"error": {"code": "method_not_allowed"}}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            if status == 405:
                self.send_header("Allow", "GET")
            self.end_headers()
            self.wfile.write(raw)

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            self.answer()

        do_GET = answer

    return Handler


@contextmanager
def refusing(status: int) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), refusing_handler(status))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1/stream"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.mark.parametrize("status", [404, 405, 401])
def test_no_probe_passes_when_every_answer_is_a_refusal(status: int) -> None:
    with refusing(status) as url:
        results = list(run(Target(url=url)))
    assert len(results) == len(PROBES)
    passed = {r.id: r.seen for r in results if r.verdict == "pass"}
    assert not passed, passed
    # Everything that needs a stream fails outright (nothing is "not exercised").
    musts = {r.id: r.verdict for r in results if r.level == "must"}
    assert set(musts.values()) == {"fail"}, musts
    envelope = next(r for r in results if r.id == "invalid-envelope")
    assert f"HTTP {status}" in envelope.seen
