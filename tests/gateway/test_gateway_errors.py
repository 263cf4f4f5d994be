"""Every refusal has its 4xx and a JSON error body, and the gateway survives it."""

from __future__ import annotations

import json
import select
import socket
import time
from typing import Any

import httpx
import pytest
from tests.gateway.conftest import VECTORS
from tests.gateway.gateway_procs import Gateway

CASES: list[dict[str, Any]] = json.loads((VECTORS / "http-errors.json").read_text())["cases"]


def _payload(case: dict[str, Any]) -> bytes | None:
    if "body" in case:
        return str(case["body"]).encode()
    if "body_hex" in case:
        return bytes.fromhex(case["body_hex"])
    if "body_nested" in case:
        depth = case["body_nested"]
        return b'{"model": "demo", "stream": true, "x": ' + b"[" * depth + b"]" * depth + b"}"
    if "body_size" in case:
        pad = b"x" * case["body_size"]
        return b'{"version": "1.0", "stream": true, "model": "demo", "pad": "' + pad + b'"}'
    return None


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_refusals_have_json_bodies(
    gateway: Gateway, http: httpx.Client, case: dict[str, Any]
) -> None:
    payload = _payload(case)
    headers = {}
    if case.get("content_type"):
        headers["content-type"] = case["content_type"]
    response = http.request(
        case.get("method", "POST"), case["path"], content=payload, headers=headers
    )
    status, content = response.status_code, response.content
    media = response.headers["content-type"]
    assert status == case["status"], content
    assert media == "application/json"
    answer = json.loads(content)
    error = answer["error"]
    assert isinstance(error["message"], str) and error["message"]
    shape = case.get("shape", "standard")
    if shape == "standard":
        assert error["code"] == case["code"]
        if "error_path" in case:
            assert error["path"] == case["error_path"]
    elif shape == "openai":  # the openai SDK's APIStatusError body
        assert (error["type"], error["code"]) == (case["type"], case["code"])
        if "error_path" in case:
            assert error["param"] == case["error_path"]
    elif shape == "anthropic":  # what the anthropic SDK reads to pick its exception
        assert answer["type"] == "error" and error["type"] == case["type"]
        if case.get("error_path"):
            assert case["error_path"] in error["message"]
    else:  # google-genai's APIError: code is the HTTP status, status its RPC name
        assert (error["code"], error["status"]) == (case["status"], case["type"])
    if "message_contains" in case:
        assert case["message_contains"] in error["message"]
    # The gateway survives and keeps serving.
    assert http.get("/healthz").status_code == 200


def _send_until_answered(sock: socket.socket, total: int, framing: str) -> tuple[int, bytes]:
    """Send up to ``total`` body bytes, stopping as soon as an answer can be read.

    Returns (bytes of body sent, what was read).
    """
    block = b"x" * (256 * 1024)
    sent = 0
    sock.setblocking(False)
    answer = b""
    deadline = time.monotonic() + 30
    while sent < total and time.monotonic() < deadline:
        readable, writable, _ = select.select([sock], [sock], [], 1.0)
        if readable:
            try:
                chunk = sock.recv(65536)
            except (ConnectionResetError, BlockingIOError):
                chunk = b""
            answer += chunk
            if b"\r\n\r\n" in answer or not chunk:
                break
        if writable:
            piece = block[: min(len(block), total - sent)]
            data = b"%x\r\n%s\r\n" % (len(piece), piece) if framing == "chunked" else piece
            try:
                n = sock.send(data)
            except (BrokenPipeError, ConnectionResetError):
                break
            except BlockingIOError:
                continue
            if framing == "chunked" and n < len(data):
                sock.setblocking(True)
                sock.sendall(data[n:])  # finish the chunk so the framing stays sound
                sock.setblocking(False)
            sent += len(piece) if framing == "chunked" else n
    sock.setblocking(True)
    sock.settimeout(10)
    try:
        while b"\r\n\r\n" not in answer:
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
        head, _, rest = answer.partition(b"\r\n\r\n")
        if b"content-length:" in head.lower():
            length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
            while len(rest) < length:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                answer += chunk
                rest += chunk
    except (ConnectionResetError, TimeoutError):
        pass
    return sent, answer


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_64mb_body_is_refused_before_it_is_read(
    gateway: Gateway, http: httpx.Client, framing: str
) -> None:
    total = 64 << 20
    length = f"Content-Length: {total + 2}\r\n" if framing == "content-length" else ""
    chunked = "Transfer-Encoding: chunked\r\n" if framing == "chunked" else ""
    head = (
        "POST /v1/stream HTTP/1.1\r\nHost: x\r\n"
        f"Content-Type: application/llm-request+json\r\n{length}{chunked}\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=10) as sock:
        sock.sendall(head + (b'2\r\n{"\r\n' if framing == "chunked" else b'{"'))
        sent, answer = _send_until_answered(sock, total, framing)
    print(f"{framing}: 413 after {sent} of {total} body bytes sent")
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    error = json.loads(answer.partition(b"\r\n\r\n")[2])["error"]
    assert error["code"] == "request_too_large"
    # The 413 came while the client was still sending: the server stopped
    # reading long before 64 MB (4 MiB limit, plus socket buffers).
    assert sent < total // 4, f"sent {sent} bytes before the answer"
    assert http.get("/healthz").status_code == 200
