"""tokenwire.testing.upstream: the fake vendor server, its bytes, and every fault kind."""

from __future__ import annotations

import asyncio
import importlib
import json
import socket
import threading
from typing import Any, NamedTuple

import httpx
import pytest

from tokenwire.testing import openai as openai_wire
from tokenwire.testing.upstream import (
    RENDERERS,
    FakeUpstream,
    Fault,
    RecordedRequest,
    Script,
    ScriptedToolCall,
    split_words,
)
from tokenwire.translate import translator

CHAT = {"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}], "stream": True}
CHAT_BODY = json.dumps(CHAT).encode()
SCRIPT = Script(text="One two three four five six.")


# --- A raw HTTP/1.1 client, to see the exact chunks on the wire -------------------------


class RawResponse(NamedTuple):
    status: int
    headers: dict[str, str]
    chunks: list[bytes]  # the HTTP chunks, in order
    complete: bool  # the terminating zero chunk arrived


def raw_post(url: str, body: bytes = CHAT_BODY, path: str = "/v1/chat/completions") -> RawResponse:
    port = int(url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        head = (
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        )
        sock.sendall(head.encode() + body)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head_bytes, _, rest = data.partition(b"\r\n\r\n")
    lines = head_bytes.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:])}
    if "chunked" not in headers.get("transfer-encoding", ""):
        return RawResponse(status, headers, [rest], True)
    chunks: list[bytes] = []
    while rest:
        size_line, sep, rest = rest.partition(b"\r\n")
        if not sep:
            break
        size = int(size_line, 16)
        if size == 0:
            return RawResponse(status, headers, chunks, True)
        if len(rest) < size + 2:
            chunks.append(rest[:size])
            break
        chunks.append(rest[:size])
        rest = rest[size + 2 :]
    return RawResponse(status, headers, chunks, False)


def rendered(script: Script, body: bytes = CHAT_BODY) -> list[bytes]:
    request = RecordedRequest("POST", "/v1/chat/completions", {}, body)
    return openai_wire.render(script, model="gpt-test", request=request)


# --- The plain path --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "pieces"),
    [
        ("", []),
        ("Hello", ["Hello"]),
        ("Hello from  the fake.", ["Hello", " from", "  the", " fake."]),
        ("  lead and trail  ", ["  lead", " and", " trail  "]),
        ("   ", ["   "]),
        ("line\nbreak", ["line", "\nbreak"]),
    ],
)
def test_split_words(text: str, pieces: list[str]) -> None:
    assert split_words(text) == pieces
    assert "".join(split_words(text)) == text


def test_one_http_chunk_per_vendor_event_exactly_as_rendered() -> None:
    with FakeUpstream("openai", SCRIPT) as fake:
        resp = raw_post(fake.url)
        assert fake.wait_for(lambda f: f.completed == 1)
    assert resp.status == 200 and resp.complete
    assert resp.headers["content-type"] == openai_wire.CONTENT_TYPE
    assert resp.headers["x-request-id"] == "req_fake"
    assert resp.chunks == rendered(SCRIPT)


def test_requests_are_recorded() -> None:
    seen: list[RecordedRequest] = []

    def script_for(request: RecordedRequest) -> Script:
        seen.append(request)
        return Script(text=request.json()["messages"][0]["content"])

    with FakeUpstream("openai", script_for) as fake:
        with httpx.Client() as client:
            for word in ("first", "second"):  # one kept-alive connection, two requests
                body = dict(CHAT, messages=[{"role": "user", "content": word}])
                r = client.post(
                    fake.url + "/v1/chat/completions?x=1", json=body, headers={"X-Key": "k"}
                )
                assert r.status_code == 200 and f'"content":"{word}"'.encode() in r.content
        # The fake counts a reply once its last byte is written, which the client
        # may see first: wait for the count rather than read it at once.
        assert fake.wait_for(lambda f: f.completed == 2, timeout=30)
        assert fake.disconnects == [] and fake.errors == []
    first = fake.requests[0]
    assert (first.method, first.path) == ("POST", "/v1/chat/completions?x=1")
    assert first.headers["x-key"] == "k" and first.json()["model"] == "gpt-test"
    assert seen == fake.requests


def test_request_check_answers_400() -> None:
    with FakeUpstream("openai") as fake:
        r = httpx.post(fake.url + "/v1/embeddings", json=CHAT)
        assert r.status_code == 400
        assert "chat/completions" in r.headers["x-fake-upstream-problem"]
        assert r.json()["error"]["type"] == "invalid_request_error"
        r = httpx.post(fake.url + "/v1/chat/completions", content=b"{not json")
        assert r.status_code == 400
        assert r.headers["x-fake-upstream-problem"] == "body is not JSON"
        assert httpx.get(fake.url + "/v1/chat/completions").status_code == 405
        assert len(fake.errors) == 2


def test_unknown_vendor() -> None:
    with pytest.raises(ValueError, match="unknown vendor"):
        FakeUpstream("nope")


@pytest.mark.parametrize("vendor", sorted(RENDERERS))
def test_every_registered_renderer_keeps_the_contract(vendor: str) -> None:
    try:
        module: Any = importlib.import_module(RENDERERS[vendor])
    except ImportError:
        pytest.skip(f"{RENDERERS[vendor]} is not written yet")
    assert isinstance(module.CONTENT_TYPE, str)
    request = RecordedRequest("POST", "/", {}, CHAT_BODY)
    events = module.render(Script(), model="m", request=request)
    assert events and all(isinstance(e, bytes) and e for e in events)
    assert isinstance(module.error_body(500), bytes)


# --- Faults ----------------------------------------------------------------------------


@pytest.mark.parametrize("status", [429, 500, 529])
def test_fault_status(status: int) -> None:
    with FakeUpstream("openai", fault=Fault(kind="status", status=status)) as fake:
        r = httpx.post(fake.url + "/v1/chat/completions", json=CHAT)
    assert r.status_code == status
    assert r.content == openai_wire.error_body(status)
    assert r.headers["content-type"] == "application/json"


def test_fault_cut_drops_the_connection_mid_body() -> None:
    with FakeUpstream("openai", SCRIPT, fault=Fault(kind="cut", after_events=3)) as fake:
        resp = raw_post(fake.url)
        with pytest.raises(httpx.RemoteProtocolError):
            httpx.post(fake.url + "/v1/chat/completions", json=CHAT)
        assert fake.completed == 0
    assert resp.status == 200 and not resp.complete
    assert resp.chunks == rendered(SCRIPT)[:3]


def test_fault_cut_graceful_ends_the_body_without_the_rest() -> None:
    fault = Fault(kind="cut", after_events=2, graceful=True)
    with FakeUpstream("openai", SCRIPT, fault=fault) as fake:
        r = httpx.post(fake.url + "/v1/chat/completions", json=CHAT)
        # The fake counts the response once its writer is done, which may be
        # just after the client has read the body.
        assert fake.wait_for(lambda f: f.completed == 1, timeout=10)
    assert r.content == b"".join(rendered(SCRIPT)[:2])
    out = translator("openai", model="m").feed(r.content)
    assert not any(e.type == "stream.end" for e in out)  # no end marker: still open


def test_fault_stall_before_first_byte_and_disconnect() -> None:
    fault = Fault(kind="stall_before_first_byte", stall_s=60)
    with FakeUpstream("openai", SCRIPT, fault=fault) as fake:
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(fake.url + "/v1/chat/completions", json=CHAT, timeout=0.3)
        # The hang-up is seen during the stall, long before the stall ends.
        assert fake.wait_for(lambda f: f.disconnects, timeout=30)
        assert fake.completed == 0


def test_fault_short_stall_still_delivers_everything() -> None:
    fault = Fault(kind="stall_before_first_byte", stall_s=0.01)
    with FakeUpstream("openai", SCRIPT, fault=fault) as fake:
        r = httpx.post(fake.url + "/v1/chat/completions", json=CHAT)
    assert r.content == b"".join(rendered(SCRIPT))


def test_fault_stall_after_first_event() -> None:
    fault = Fault(kind="stall_after_first_event", stall_s=60)
    with FakeUpstream("openai", SCRIPT, fault=fault) as fake:
        timeout = httpx.Timeout(10, read=0.3)
        received = b""
        with httpx.Client(timeout=timeout) as client:
            with client.stream("POST", fake.url + "/v1/chat/completions", json=CHAT) as r:
                with pytest.raises(httpx.ReadTimeout):
                    for piece in r.iter_raw():
                        received += piece
        assert received == rendered(SCRIPT)[0]
        assert fake.wait_for(lambda f: f.disconnects, timeout=30)


def test_fault_bad_json_garbles_one_event() -> None:
    with FakeUpstream("openai", SCRIPT, fault=Fault(kind="bad_json", after_events=2)) as fake:
        resp = raw_post(fake.url)
    good = rendered(SCRIPT)
    assert resp.complete and len(resp.chunks) == len(good)
    assert resp.chunks[:2] == good[:2] and resp.chunks[3:] == good[3:]
    assert resp.chunks[2] != good[2]
    with pytest.raises(json.JSONDecodeError):
        json.loads(resp.chunks[2].decode()[len("data: ") :])
    t = translator("openai", model="m")
    out = t.feed(b"".join(resp.chunks)) + t.close()
    errors = [e for e in out if e.type == "error"]
    assert len(errors) == 1 and errors[0].code == "internal_error"  # type: ignore[union-attr]


@pytest.mark.parametrize("every", [1, 7])
def test_fault_split_bytes(every: int) -> None:
    fault = Fault(kind="split_bytes", split_every=every)
    with FakeUpstream("openai", SCRIPT, fault=fault) as fake:
        resp = raw_post(fake.url)
    assert resp.complete
    assert all(len(c) <= every for c in resp.chunks)
    assert b"".join(resp.chunks) == b"".join(rendered(SCRIPT))


def test_fault_huge_event() -> None:
    size = (1 << 20) + 123
    with FakeUpstream("openai", SCRIPT, fault=Fault(kind="huge_event", size=size)) as fake:
        r = httpx.post(fake.url + "/v1/chat/completions", json=CHAT, timeout=30)
    good = rendered(SCRIPT)
    body = r.content
    assert body.startswith(good[0]) and body.endswith(b"".join(good[1:]))
    huge = body[len(good[0]) : len(body) - len(b"".join(good[1:]))]
    line = huge.rstrip(b"\n")
    assert huge.endswith(b"\n\n") and b"\n" not in line and len(line) == size
    json.loads(line[len(b"data: ") :])  # one valid (huge) JSON event


# --- Disconnects, stop, threads, async use ----------------------------------------------


def test_client_hangup_mid_stream_is_recorded() -> None:
    script = Script(text=" ".join(["word"] * 200), delay_s=0.02)
    with FakeUpstream("openai", script) as fake:
        with httpx.Client() as client:
            with client.stream("POST", fake.url + "/v1/chat/completions", json=CHAT) as r:
                first = next(r.iter_raw())
        assert first.startswith(b"data: ")
        assert fake.wait_for(lambda f: f.disconnects, timeout=30)
        assert fake.completed == 0 and len(fake.disconnects) == 1


def test_stop_frees_the_port_and_ends_the_thread() -> None:
    before = set(threading.enumerate())
    fake = FakeUpstream("openai", SCRIPT).start()
    port = fake.port
    assert httpx.post(fake.url + "/v1/chat/completions", json=CHAT).status_code == 200
    # A connection still open (stalled) must not keep stop() waiting.
    stalled = FakeUpstream("openai", fault=Fault(kind="stall_before_first_byte")).start()
    sock = socket.create_connection(("127.0.0.1", stalled.port))
    sock.sendall(
        b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: %d\r\n\r\n%s"
        % (len(CHAT_BODY), CHAT_BODY)
    )
    assert stalled.wait_for(lambda f: f.requests)
    ours = [t for t in threading.enumerate() if t not in before]
    assert len(ours) == 2
    stalled.stop()
    fake.stop()
    fake.stop()  # idempotent
    sock.close()
    assert not any(t.is_alive() for t in ours)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", port))  # free again
    with pytest.raises(httpx.ConnectError):
        httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=CHAT)


def test_restart_is_refused_while_running() -> None:
    with FakeUpstream("openai") as fake:
        with pytest.raises(RuntimeError):
            fake.start()


def test_usable_from_async_code() -> None:
    script = Script(text="async works", tool_calls=[ScriptedToolCall("f", {"a": 1})])

    async def main() -> bytes:
        async with FakeUpstream("openai", script) as fake:
            async with httpx.AsyncClient() as client:
                r = await client.post(fake.url + "/v1/chat/completions", json=CHAT)
                return r.content

    assert asyncio.run(main()) == b"".join(rendered(script))
