"""Structured request logs, with prompts and completions redacted by default (§8.1)."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import httpx
import pytest
from tests.gateway.gateway_http import body, post, request_of
from tests.gateway.gateway_procs import Gateway

from tokenwire.gateway.providers.demo import plan_reply
from tokenwire.testing import WaitTimeout, wait_until

SECRET = "SECRET-PROMPT-4242"


def _lines(gateway: Gateway, request_id: str, count: int = 1) -> list[dict[str, Any]]:
    """The JSON log lines carrying ``request_id`` (waits up to 5 s for ``count`` of them)."""

    def found() -> list[dict[str, Any]]:
        lines = gateway.stderr().splitlines()
        return [json.loads(line) for line in lines if line.startswith("{") and request_id in line]

    # Fewer than ``count`` after 5 s is returned, not raised: the caller's assert names it.
    with contextlib.suppress(WaitTimeout):
        wait_until(lambda: len(found()) >= count, timeout=5)
    return found()


def test_one_redacted_json_line_per_request(gateway: Gateway, http: httpx.Client) -> None:
    request_id = "log-redacted-1"
    payload = body("demo", f"My {SECRET} question", metadata={"request_id": request_id})
    response = post(http, payload)
    assert response.status_code == 200
    (line,) = _lines(gateway, request_id)
    assert line["msg"] == "request"
    assert line["route"] == "/v1/stream"
    assert line["model"] == "demo"
    assert line["status"] == 200
    assert line["events"] == response.content.count(b"event: ")
    assert line["duration_ms"] > 0 and line["ttfe_ms"] > 0
    assert line["error_code"] is None
    assert "prompt" not in line and "completion" not in line
    assert SECRET not in gateway.stderr()
    completion = plan_reply(request_of(payload)).text
    assert completion[20:60] not in gateway.stderr()  # nor is the completion


def test_failures_are_logged_without_their_message(gateway: Gateway, http: httpx.Client) -> None:
    request_id = "log-failing-1"
    post(http, body("failing", f"{SECRET} in a failing call", metadata={"request_id": request_id}))
    (line,) = _lines(gateway, request_id)
    assert line["error_code"] == "internal_error"
    assert line["exception"] == "RuntimeError"
    assert any("gateway_plugins.py" in frame for frame in line["traceback"])  # where
    assert SECRET not in gateway.stderr()  # not what: the message quoted the prompt


def test_rejections_are_logged_by_code_and_path(gateway: Gateway, http: httpx.Client) -> None:
    bad = body("demo", SECRET, metadata={"request_id": "log-rejected-1"}, version="9.9")
    response = post(http, bad)
    assert response.status_code == 400
    lines = [
        json.loads(line)
        for line in gateway.stderr().splitlines()
        if line.startswith("{") and '"error_path":"version"' in line
    ]
    assert lines and lines[-1]["status"] == 400 and lines[-1]["error_code"] == "invalid_request"
    assert SECRET not in gateway.stderr()


@pytest.fixture(scope="module")
def content_gateway(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with Gateway(tmp_path_factory.mktemp("logcontent"), args=("--log-content",)) as gw:
        yield gw


def test_log_content_flag_logs_prompt_and_completion(content_gateway: Gateway) -> None:
    request_id = "log-content-1"
    with content_gateway.client(timeout=20.0) as client:
        payload = body("demo", f"My {SECRET}", metadata={"request_id": request_id})
        response = post(client, payload)
    assert response.status_code == 200
    (line,) = _lines(content_gateway, request_id)
    assert line["prompt"] == [{"role": "user", "content": f"My {SECRET}"}]
    assert line["completion"] == plan_reply(request_of(payload)).text
