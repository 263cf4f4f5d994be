"""What agents send around their turns, through the gateway.

- bodies sent with ``Content-Encoding`` (gzip, deflate, zstd): decoded, with a
  limit on the decoded size (a decompression bomb gets a 413 naming it);
- ``HEAD /`` (a reachability probe) and ``/v1/messages?beta=true`` (the
  Anthropic SDK's beta client);
- ``count_tokens`` with Claude Code's fields, on every upstream format;
- Claude Code's quota and title side calls on every upstream format;
- ``anthropic-beta`` and ``x-`` headers forwarded to a same-vendor upstream only,
  never the client's credentials;
- an upstream's refusal stays a client error at another vendor's route;
- a client that closes the connection right after the final event is logged
  as done, not as disconnected.
"""

from __future__ import annotations

import gzip
import json
import os
import socket
import zlib
from typing import Any

import httpx
import pytest
from tests.agents.clis import PINS, require
from tests.agents.conftest import Served

from tokenwire.server import DEFAULT_MAX_BODY_BYTES
from tokenwire.testing.upstream import Fault, Script
from tokenwire.testing.waiting import wait_until

ANSWER = "Hello from the upstream."
CLAUDE = PINS["upstreams"]["anthropic"]["model"]
GPT = PINS["upstreams"]["chat"]["model"]
CODEX = PINS["upstreams"]["responses"]["model"]


def _messages_body(model: str, **extra: Any) -> bytes:
    body = {
        "model": model,
        "max_tokens": 64,
        "stream": True,
        "messages": [{"role": "user", "content": "Say hello."}],
        **extra,
    }
    return json.dumps(body).encode()


def _zstd(data: bytes) -> bytes:
    zstandard = require("zstandard", "zstd bodies need it (the server extra)")
    return zstandard.ZstdCompressor().compress(data)  # type: ignore[no-any-return]


@pytest.fixture
def answering(served: Served) -> Served:
    for fake in served.fakes.values():
        fake.script = Script(text=ANSWER)
    return served


@pytest.mark.parametrize(
    ("coding", "encode"),
    [
        ("gzip", gzip.compress),
        ("deflate", zlib.compress),
        ("zstd", _zstd),
        ("gzip, gzip", lambda data: gzip.compress(gzip.compress(data))),
    ],
)
def test_compressed_body_is_decoded(answering: Served, coding: str, encode: Any) -> None:
    fake = answering.fakes["anthropic"]
    seen = len(fake.requests)
    headers = {"content-type": "application/json", "content-encoding": coding}
    with httpx.Client(base_url=answering.url, timeout=30) as client:
        answer = client.post(
            "/v1/messages", content=encode(_messages_body(CLAUDE)), headers=headers
        )
    assert answer.status_code == 200, answer.text
    assert "Hello" in answer.text and "message_stop" in answer.text
    # The upstream got the body decoded, and nothing about an encoding.
    sent = fake.requests[seen]
    assert json.loads(sent.body)["messages"][0]["content"] == "Say hello."
    assert "content-encoding" not in sent.headers


def test_decompression_bomb_is_refused_at_the_limit(answering: Served) -> None:
    # A few KiB on the wire that inflate past the limit: refused, never buffered whole.
    padding = " " * (DEFAULT_MAX_BODY_BYTES + 1)
    bomb = gzip.compress(_messages_body(CLAUDE, metadata={"user_id": "u"})[:-1] + padding.encode())
    assert len(bomb) < DEFAULT_MAX_BODY_BYTES // 100
    headers = {"content-type": "application/json", "content-encoding": "gzip"}
    with httpx.Client(base_url=answering.url, timeout=30) as client:
        answer = client.post("/v1/messages", content=bomb, headers=headers)
    assert answer.status_code == 413
    error = answer.json()
    assert error["type"] == "error"  # Anthropic's shape on its route
    assert str(DEFAULT_MAX_BODY_BYTES) in error["error"]["message"]
    assert "gzip" in error["error"]["message"]


def test_corrupt_and_unknown_encodings(answering: Served) -> None:
    headers = {"content-type": "application/json"}
    with httpx.Client(base_url=answering.url, timeout=30) as client:
        broken = client.post(
            "/v1/chat/completions",
            content=gzip.compress(_messages_body(GPT))[:-12],
            headers={**headers, "content-encoding": "gzip"},
        )
        brotli = client.post(
            "/v1/chat/completions",
            content=b"\x1b\x00",
            headers={**headers, "content-encoding": "br"},
        )
    assert broken.status_code == 400
    assert "not valid gzip" in broken.json()["error"]["message"]  # OpenAI's shape
    assert brotli.status_code == 415
    assert "'br' is not supported" in brotli.json()["error"]["message"]
    assert "gzip" in brotli.headers["accept-encoding"]


def test_head_root_and_beta_messages(answering: Served) -> None:
    with httpx.Client(base_url=answering.url, timeout=30) as client:
        probe = client.head("/")
        beta = client.post(
            "/v1/messages?beta=true",
            content=_messages_body(CLAUDE),
            headers={"content-type": "application/json", "anthropic-beta": "context-1m-2025-08-07"},
        )
    assert probe.status_code == 200
    assert beta.status_code == 200, beta.text
    assert "message_stop" in beta.text
    # Same vendor: the beta flag reaches Anthropic as the client sent it.
    assert answering.fakes["anthropic"].requests[-1].headers["anthropic-beta"] == (
        "context-1m-2025-08-07"
    )


#: Who counts for each upstream: its own counting endpoint, or the gateway's estimate
#: (OpenAI Chat has no counting endpoint).
COUNTED_BY = {"anthropic": "upstream", "chat": "estimate", "responses": "upstream"}
COUNTED_BY |= {"gemini": "upstream", "reasoning": "estimate"}


@pytest.mark.parametrize("kind", list(PINS["upstreams"]))
def test_count_tokens_with_claude_codes_fields_on_every_upstream(
    answering: Served, kind: str
) -> None:
    # What Claude Code sends to count a prompt: its turn's fields included.
    body = {
        "model": PINS["upstreams"][kind]["model"],
        "system": [{"type": "text", "text": "You are a coding agent."}],
        "messages": [{"role": "user", "content": "Read notes.txt and sum the numbers in it."}],
        "tools": [
            {
                "name": "Read",
                "description": "Read a file",
                "input_schema": {
                    "type": "object",
                    "properties": {"file_path": {"type": "string"}},
                    "required": ["file_path"],
                },
            }
        ],
        "thinking": {"type": "adaptive"},
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
        "output_config": {"effort": "high"},
    }
    with httpx.Client(base_url=answering.url, timeout=30) as client:
        answer = client.post(
            "/v1/messages/count_tokens?beta=true",
            json=body,
            headers={"anthropic-beta": "token-counting-2024-11-01"},
        )
    assert answer.status_code == 200, answer.text
    assert answer.json()["input_tokens"] > 0
    # The answer says whether the upstream counted or the gateway estimated.
    assert answer.headers["tokenwire-token-count"] == COUNTED_BY[kind]


def _log_lines(served: Served) -> list[dict[str, Any]]:
    return [
        json.loads(line)
        for line in served.gateway.stderr().splitlines()
        if line.startswith("{") and '"msg":"request"' in line
    ]


@pytest.mark.parametrize("model", [CLAUDE, GPT, CODEX])
def test_close_right_after_the_final_event_is_done(answering: Served, model: str) -> None:
    """An agent that hangs up as soon as it has ``message_stop`` finished its turn."""
    body = _messages_body(model)
    before = len(_log_lines(answering))
    with socket.create_connection(("127.0.0.1", answering.gateway.port), timeout=30) as conn:
        conn.sendall(
            b"POST /v1/messages HTTP/1.1\r\nhost: 127.0.0.1\r\n"
            b"content-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(body) + body
        )
        received = b""
        while b"message_stop" not in received:
            chunk = conn.recv(65536)
            assert chunk, received
            received += chunk
    # Lines of earlier requests may still be on their way: wait for this model's.
    line = wait_until(
        lambda: next((x for x in _log_lines(answering)[before:] if x["model"] == model), None),
        timeout=30,
    )
    assert line["status"] == 200
    assert line["error_code"] is None
    assert line["disconnected"] is False


def test_x_headers_reach_a_same_vendor_upstream_only(answering: Served) -> None:
    """Agent and SDK metadata headers pass through to the same vendor, never credentials."""
    headers = {
        "content-type": "application/json",
        "anthropic-beta": "claude-code-20250219",
        "x-app": "cli",
        "x-stainless-retry-count": "0",
        "x-api-key": "sk-client-key",
        "x-forwarded-for": "10.0.0.1",
    }
    anthropic, chat = answering.fakes["anthropic"], answering.fakes["chat"]
    with httpx.Client(base_url=answering.url, timeout=30) as client:
        same = client.post("/v1/messages", content=_messages_body(CLAUDE), headers=headers)
        seen_chat = len(chat.requests)
        across = client.post("/v1/messages", content=_messages_body(GPT), headers=headers)
    assert same.status_code == 200 and across.status_code == 200, (same.text, across.text)
    sent = anthropic.requests[-1].headers
    assert sent["x-app"] == "cli" and sent["x-stainless-retry-count"] == "0"
    assert sent["anthropic-beta"] == "claude-code-20250219"
    assert sent.get("x-api-key") != "sk-client-key"  # the gateway's own key, or none
    assert "x-forwarded-for" not in sent
    crossed = chat.requests[seen_chat].headers
    assert not {"x-app", "x-stainless-retry-count", "anthropic-beta"} & set(crossed)


#: Claude Code's side calls around a turn: the quota probe and the title request.
QUOTA = {"max_tokens": 1, "messages": [{"role": "user", "content": "quota"}]}
TITLE_SCHEMA = {
    "type": "object",
    "properties": {"title": {"type": "string"}},
    "required": ["title"],
    "additionalProperties": False,
}
TITLE = {
    "max_tokens": 512,
    "stream": True,
    "system": [{"type": "text", "text": "Write a short title for this coding session."}],
    "messages": [{"role": "user", "content": "Fix the login bug."}],
    "output_config": {"format": {"type": "json_schema", "schema": TITLE_SCHEMA}},
}


def _asked_schema(kind: str, body: dict[str, Any]) -> Any:
    """The JSON schema an upstream request of ``kind`` asks the answer to follow."""
    if kind == "anthropic":
        return body.get("output_config", {}).get("format", {}).get("schema")
    if kind in ("chat", "reasoning"):
        return body.get("response_format", {}).get("json_schema", {}).get("schema")
    if kind == "responses":
        return body.get("text", {}).get("format", {}).get("schema")
    config = body.get("generationConfig", {})
    return config.get("responseJsonSchema") or config.get("responseSchema")


@pytest.mark.parametrize("kind", list(PINS["upstreams"]))
def test_title_and_quota_side_calls(answering: Served, kind: str) -> None:
    model = PINS["upstreams"][kind]["model"]
    fake = answering.fakes[kind]
    with httpx.Client(base_url=answering.url, timeout=30) as client:
        quota = client.post("/v1/messages", json={**QUOTA, "model": model})
        title = client.post("/v1/messages", json={**TITLE, "model": model})
    assert quota.status_code == 200, quota.text
    assert quota.json()["content"][0]["text"] == ANSWER
    assert title.status_code == 200, title.text
    assert "message_stop" in title.text
    sent = json.loads(fake.requests[-1].body)
    # The schema reaches every upstream, in its own field.
    assert _asked_schema(kind, sent) == TITLE_SCHEMA, sorted(sent)


def test_an_upstream_refusal_stays_a_client_error_across_vendors(answering: Served) -> None:
    """Anthropic's 400 reaches a Gemini client as 400 INVALID_ARGUMENT: a 500 would make
    Gemini CLI retry the same request again and again."""
    fake = answering.fakes["anthropic"]
    body = {"contents": [{"role": "user", "parts": [{"text": "Say hello."}]}]}
    fake.fault = Fault(kind="status", status=400)
    try:
        with httpx.Client(base_url=answering.url, timeout=30) as client:
            answer = client.post(
                f"/v1beta/models/{CLAUDE}:streamGenerateContent?alt=sse",
                json=body,
                headers={"x-goog-api-key": "sk-agent-test"},
            )
    finally:
        fake.fault = None
    errors = [
        json.loads(line[len("data: ") :])["error"]
        for line in answer.text.splitlines()
        if line.startswith("data: ") and '"error"' in line
    ]
    if answer.status_code != 200:  # refused before the stream: the HTTP status says it
        errors = [answer.json()["error"]]
    assert errors, answer.text
    assert errors[0]["code"] == 400 and errors[0]["status"] == "INVALID_ARGUMENT", errors


def test_a_compressed_body_over_the_limit_as_sent_is_refused(answering: Served) -> None:
    # Random bytes do not compress: over the limit before any decoding.
    oversized = gzip.compress(os.urandom(DEFAULT_MAX_BODY_BYTES + 1024), compresslevel=1)
    headers = {"content-type": "application/json", "content-encoding": "gzip"}
    with httpx.Client(base_url=answering.url, timeout=60) as client:
        answer = client.post("/v1/chat/completions", content=oversized, headers=headers)
    assert answer.status_code == 413
    assert "as sent" in answer.json()["error"]["message"]
