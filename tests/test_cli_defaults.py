"""Defaults that agree: the Python and JS clients ask for the same resumability, ``chat``
gives a rate only when it means something, and the request log is for a person on a
terminal and JSON elsewhere (``--log-format``)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from tests.js.npm import find_tools

from tokenwire.cli.chat import MIN_RATE_S, rate
from tokenwire.client._common import RESUMABLE, prepare_request
from tokenwire.gateway.telemetry import logs
from tokenwire.testing.processes import ServedProcess, free_port, gateway_argv
from tokenwire.testing.waiting import wait_until

ROOT = Path(__file__).resolve().parents[1]
BROWSER_BUILD = ROOT / "src" / "tokenwire" / "gateway" / "static" / "tokenwire.js"


def test_both_clients_are_not_resumable_unless_asked() -> None:
    node, _ = find_tools()  # installs Node when it is missing, as the JS tests do
    script = (
        f"import {{ prepareRequest }} from {json.dumps(BROWSER_BUILD.as_uri())};\n"
        "const r = { model: 'demo', messages: [{ role: 'user', content: 'hi' }] };\n"
        "console.log(JSON.stringify([prepareRequest(r), prepareRequest(r, { resume: true })]));\n"
    )
    out = subprocess.run(
        [node, "--input-type=module", "-e", script],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    js_default, js_resume = json.loads(out)
    py_default = prepare_request(None, {"model": "demo", "messages": "hi"}, resume=False)
    py_resume = prepare_request(None, {"model": "demo", "messages": "hi"}, resume=True)
    assert js_default["extensions"][RESUMABLE] is py_default.extension(RESUMABLE) is False
    assert js_resume["extensions"][RESUMABLE] is py_resume.extension(RESUMABLE) is True
    from tokenwire.client import Client

    with Client("http://127.0.0.1:9") as client:
        assert client.resume is False


def test_chat_gives_no_rate_for_an_answer_that_arrived_at_once() -> None:
    # 40 tokens in 0.7 ms is no model's speed: it is the loopback's.
    assert rate(40, 0.0007) is None
    assert rate(1, 2.0) is None  # one token has no rate
    assert rate(40, MIN_RATE_S) == f"{40 / MIN_RATE_S:.1f} tokens/s"
    assert rate(50, 2.0) == "25.0 tokens/s"


def test_a_request_line_for_a_person() -> None:
    line = {
        "ts": 0,
        "msg": "request",
        "route": "/v1/stream",
        "model": "demo",
        "status": 200,
        "events": 50,
        "ttfe_ms": 1.2,
        "duration_ms": 41.7,
        "error_code": None,
        "disconnected": False,
    }
    shown = logs.human(line)
    assert shown.split(" ", 1)[1] == "200 /v1/stream demo · 50 events · first event 1 ms · 42 ms"
    refused = {**line, "status": 404, "events": 0, "ttfe_ms": None, "error_code": "model_not_found"}
    assert logs.human(refused).endswith("404 /v1/stream demo · 42 ms · error model_not_found")
    other = logs.human({"ts": 0, "msg": "missing api key", "model": "gpt", "api_key_env": "K"})
    assert other.endswith("missing api key: model=gpt api_key_env=K")


def test_auto_is_json_when_the_log_is_not_a_terminal() -> None:
    assert logs._is_text("auto", io.StringIO()) is False
    assert logs._is_text("text", io.StringIO()) is True
    assert logs._is_text("json", sys.stderr) is False


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_serve_writes_the_log_format_it_is_given(fmt: str, tmp_path: Path) -> None:
    port = free_port()
    argv = [*gateway_argv(None, port), "--log-format", fmt]
    with ServedProcess(argv, port, stderr_path=tmp_path / "stderr") as served:
        body = {"version": "1.0", "stream": True, "model": "demo"}
        body["messages"] = [{"role": "user", "content": "Hi"}]
        answer = httpx.post(
            f"{served.url}/v1/stream",
            json=body,
            headers={"content-type": "application/llm-request+json"},
            timeout=30,
        )
        assert answer.status_code == 200
        wait_until(lambda: "/v1/stream" in served.stderr(), what="the request log line")
        (line,) = [ln for ln in served.stderr().splitlines() if "/v1/stream" in ln]
    if fmt == "json":
        assert json.loads(line)["route"] == "/v1/stream"
    else:
        assert " 200 /v1/stream demo · " in line and not line.startswith("{")
