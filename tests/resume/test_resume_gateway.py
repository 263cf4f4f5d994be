"""Resumable streams end to end: real gateway processes, a real redis-server.

What the issue asks to see: a stream read in part from replica A and resumed
from replica B joins into the uninterrupted stream; DELETE stops the provider;
the grace period runs out; Redis dies mid-stream; a replica dies mid-stream;
the same resume on the in-memory store; and the client SDK resuming through a
load balancer by itself.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
from tests.gateway.gateway_procs import Gateway
from tests.resume.conftest import GRACE_S, LEASE_S, redis_config, start_all
from tests.resume.redis_proc import RedisServer
from tests.resume.resume_http import (
    MEDIA,
    QUESTION,
    TOKEN_HEADER,
    TOKENS,
    Balancer,
    auth,
    cancel,
    complete_frames,
    events_of,
    new_id,
    payload,
    post_all,
    read_part,
    resume,
    start_of,
    text_of,
    wait_for,
    wait_record,
)

import tokenwire
import tokenwire.client._common
from tokenwire import events as ev
from tokenwire.client import Client, Timeouts

PACE_MS = 50  # the demo's pace: the stream is still going when the client comes back


def _check_joined(part: bytes, rest: bytes, expected: bytes) -> list[ev.Event]:
    """The joined stream is the uninterrupted one: same seqs, same text, and valid."""
    joined = events_of(part + rest)
    whole = events_of(expected)
    assert [e.seq for e in joined] == list(range(len(joined))), "a gap or a duplicate"
    assert [e.type for e in joined] == [e.type for e in whole]
    assert text_of(joined) == text_of(whole)
    assert isinstance(joined[-1], ev.StreamEnd)
    report = tokenwire.validate([part + rest])
    assert report.ok, report.violations
    return joined


def _resume_across(first: Gateway, second: Gateway) -> None:
    request_id = new_id("across")
    body = payload(request_id=request_id, delay_ms=PACE_MS)
    with first.client(timeout=30.0) as a, second.client(timeout=30.0) as b:
        part = read_part(a, body, count=6)  # ...then hang up
        last = events_of(part)[-1].seq
        response = resume(b, request_id, last)
        assert response.status_code == 200, response.text
        assert response.headers["content-type"] == "text/event-stream"
        # The same request, uninterrupted and not resumable, as the reference.
        expected = post_all(a, payload(request_id=new_id("ref"), resumable=None))
    joined = _check_joined(part, response.content, expected)
    assert start_of(joined).request_id == request_id
    end = joined[-1]
    assert isinstance(end, ev.StreamEnd) and end.request_id == request_id


def test_resume_on_another_replica(replicas: tuple[Gateway, Gateway]) -> None:
    a, b = replicas
    _resume_across(a, b)
    _resume_across(b, a)


def test_resume_on_the_memory_store(memory_gateway: Gateway) -> None:
    _resume_across(memory_gateway, memory_gateway)


def test_resume_with_after_query_and_replay_from_start(replicas: tuple[Gateway, Gateway]) -> None:
    a, b = replicas
    request_id = new_id("query")
    with a.client(timeout=30.0) as client:
        whole = post_all(client, payload(request_id=request_id))
    with b.client(timeout=30.0) as client:
        by_query = resume(client, request_id, 3, query=True)
        from_start = resume(client, request_id, None)
        finished = resume(client, request_id, len(events_of(whole)) - 1)
    assert by_query.status_code == 200
    assert [e.seq for e in events_of(by_query.content)][0] == 4
    # The stored frames are the bytes that were sent.
    assert from_start.content == whole
    # A client that already has stream.end gets 204: EventSource stops reconnecting.
    assert finished.status_code == 204


def test_request_id_generated_and_echoed(replicas: tuple[Gateway, Gateway]) -> None:
    a, b = replicas
    with a.client(timeout=30.0) as client:
        whole = post_all(client, payload(request_id=None))
    events = events_of(whole)
    request_id = start_of(events).request_id
    assert request_id is not None and len(request_id) == 36  # a uuid4
    end = events[-1]
    assert isinstance(end, ev.StreamEnd) and end.request_id == request_id
    with b.client(timeout=30.0) as client:
        assert resume(client, request_id, None).content == whole


def test_request_id_in_use_is_409(replicas: tuple[Gateway, Gateway]) -> None:
    a, b = replicas
    request_id = new_id("taken")
    with a.client(timeout=30.0) as client:
        post_all(client, payload(request_id=request_id))
    with b.client(timeout=30.0) as client:
        response = client.post(
            "/v1/stream",
            content=msgspec.json.encode(payload(request_id=request_id)),
            headers={"content-type": MEDIA},
        )
    assert response.status_code == 409
    error = response.json()["error"]
    assert (error["code"], error["path"]) == ("request_id_in_use", "metadata.request_id")


def test_unknown_and_bad_resumes(replicas: tuple[Gateway, Gateway]) -> None:
    a, _b = replicas
    with a.client(timeout=30.0) as client:
        missing = resume(client, new_id("never"), 3)
        bad = client.get("/v1/streams/whatever", headers={"last-event-id": "three"})
        cancel_missing = cancel(client, new_id("never"))
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "stream_not_found"
    assert bad.status_code == 400 and bad.json()["error"]["path"] == "Last-Event-ID"
    assert cancel_missing.status_code == 404
    assert cancel_missing.json()["error"]["code"] == "stream_not_found"


def test_a_plain_stream_is_not_stored(replicas: tuple[Gateway, Gateway]) -> None:
    a, _b = replicas
    request_id = new_id("plain")
    with a.client(timeout=30.0) as client:
        post_all(client, payload(request_id=request_id, resumable=None))
        assert resume(client, request_id, None).status_code == 404


# --- cancel -------------------------------------------------------------------------------
def _assert_estimated_usage(events: list[ev.Event], prompt: str) -> None:
    """docs/extensions.md: a cancelled or failed stream that sent output still
    reports usage (before stream.end), estimated and marked: one token per 4
    characters of the prompt's text and of the text it sent."""
    usage = events[-2]
    text = "".join(e.delta.text for e in events if isinstance(e, ev.ContentDelta))
    assert text, "the stream sent output"
    assert isinstance(usage, ev.Usage) and usage.estimated, usage
    assert (usage.input_tokens, usage.output_tokens) == (
        -(-len(prompt) // 4),
        -(-len(text) // 4),
    )


def test_delete_stops_the_provider_on_another_replica(
    replicas: tuple[Gateway, Gateway], record_dir: Path
) -> None:
    a, b = replicas
    request_id = new_id("delete")
    with a.client(timeout=30.0) as ca, b.client(timeout=30.0) as cb:
        part = read_part(ca, payload("recorder", request_id=request_id), count=4)
        answer = cancel(cb, request_id)
        assert answer.status_code == 200, answer.text
        assert answer.json() == {"request_id": request_id, "status": "cancelled"}
        record = wait_record(record_dir, request_id)
        assert "cancelled_at" in record, record  # the provider saw the cancellation
        rest = resume(ca, request_id, events_of(part)[-1].seq)
        again = cancel(cb, request_id)  # idempotent
    assert again.status_code == 200
    assert again.json() == {"request_id": request_id, "status": "cancelled"}
    joined = events_of(part + rest.content)
    assert [e.seq for e in joined] == list(range(len(joined)))
    error, _usage, end = joined[-3:]
    assert isinstance(error, ev.ErrorEvent) and error.code == "cancelled"
    _assert_estimated_usage(joined, QUESTION)
    assert isinstance(end, ev.StreamEnd)
    report = tokenwire.validate([part + rest.content])
    assert report.ok, report.violations  # `cancelled` is the documented extension code


def test_delete_ends_the_attached_stream(memory_gateway: Gateway, record_dir: Path) -> None:
    # The client that made the request is still reading when the stream is cancelled:
    # it gets the error and stream.end on its own connection.
    request_id = new_id("attached")
    started = threading.Event()
    received: list[bytes] = []

    def read() -> None:
        raw = b""
        body = msgspec.json.encode(payload("recorder", request_id=request_id))
        with memory_gateway.client(timeout=30.0) as client:
            with client.stream(
                "POST", "/v1/stream", content=body, headers={"content-type": MEDIA}
            ) as response:
                TOKENS[request_id] = response.headers[TOKEN_HEADER]
                for chunk in response.iter_raw():
                    raw += chunk
                    if len(events_of(complete_frames(raw))) >= 3:
                        started.set()
        received.append(raw)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert started.wait(30), "the stream never started"
        with memory_gateway.client(timeout=30.0) as client:
            answer = cancel(client, request_id)
    finally:
        started.set()
        reader.join(30)
    assert answer.json() == {"request_id": request_id, "status": "cancelled"}
    (whole,) = received
    events = events_of(whole)
    error, _usage, end = events[-3:]
    assert isinstance(error, ev.ErrorEvent) and error.code == "cancelled"
    _assert_estimated_usage(events, QUESTION)
    assert isinstance(end, ev.StreamEnd)
    assert tokenwire.validate([whole]).ok
    assert "cancelled_at" in wait_record(record_dir, request_id)


# --- disconnect is not cancel, for resumable streams only -----------------------------------


def test_grace_period_expiry(replicas: tuple[Gateway, Gateway], record_dir: Path) -> None:
    a, b = replicas
    request_id = new_id("grace")
    with a.client(timeout=30.0) as client:
        part = read_part(client, payload("recorder", request_id=request_id), count=3)
    hung_up = time.time()
    record = wait_record(record_dir, request_id)
    assert "cancelled_at" in record, record
    # Nobody read it: it went on for the grace period, then it was stopped.
    assert record["cancelled_at"] - hung_up >= GRACE_S - 0.05
    with b.client(timeout=30.0) as client:
        rest = resume(client, request_id, events_of(part)[-1].seq)
    joined = events_of(part + rest.content)
    assert [e.seq for e in joined] == list(range(len(joined)))
    assert len(joined) > 3 + 2  # it kept generating after the hang-up
    error = joined[-3]
    assert isinstance(error, ev.ErrorEvent) and error.code == "cancelled"
    _assert_estimated_usage(joined, QUESTION)
    assert "nobody read" in error.message
    assert tokenwire.validate([part + rest.content]).ok


def test_a_resume_in_progress_keeps_it_alive(
    replicas: tuple[Gateway, Gateway], record_dir: Path
) -> None:
    # 40 tokens 100 ms apart: 4 s, twice the grace period. A reader on the other
    # replica counts, so it runs to its end.
    a, b = replicas
    request_id = new_id("kept")
    with a.client(timeout=30.0) as client:
        part = read_part(client, payload("recorder-short", request_id=request_id), count=2)
    with b.client(timeout=30.0) as client:
        rest = resume(client, request_id, events_of(part)[-1].seq)
    record = wait_record(record_dir, request_id)
    assert "completed_at" in record, record
    joined = events_of(part + rest.content)
    assert text_of(joined) == "".join(f" t{i}" for i in range(40))
    assert tokenwire.validate([part + rest.content]).ok


def test_a_plain_stream_is_cancelled_at_hang_up(
    replicas: tuple[Gateway, Gateway], record_dir: Path
) -> None:
    a, _b = replicas
    request_id = new_id("plain-hangup")
    with a.client(timeout=30.0) as client:
        read_part(client, payload("recorder", request_id=request_id, resumable=None), count=3)
    record = wait_record(record_dir, request_id)
    assert "cancelled_at" in record  # the hang-up cancelled it (it never ends by itself)
    with a.client(timeout=30.0) as client:
        assert resume(client, request_id, None).status_code == 404  # and nothing was kept


# --- limits -------------------------------------------------------------------------------


def test_trimmed_events_are_410(memory_gateway: Gateway) -> None:
    request_id = new_id("trim")
    body = payload(request_id=request_id)
    body["extensions"]["tokenwire:demo"] = {"tokens": 200}  # a long reply (max_tokens only caps)
    with memory_gateway.client(timeout=30.0) as client:
        whole = post_all(client, body)
        events = events_of(whole)
        early = resume(client, request_id, 0)
        late = resume(client, request_id, len(events) - 11)
    assert early.status_code == 410
    assert early.json()["error"]["code"] == "events_trimmed"
    assert late.status_code == 200
    assert [e.seq for e in events_of(late.content)] == list(range(len(events) - 10, len(events)))


# --- failures -----------------------------------------------------------------------------


def _stream_in_thread(
    gateway: Gateway, body: dict[str, object]
) -> tuple[threading.Thread, list[bytes | BaseException]]:
    out: list[bytes | BaseException] = []

    def run() -> None:
        try:
            with gateway.client(timeout=60.0) as client:
                with client.stream(
                    "POST",
                    "/v1/stream",
                    content=msgspec.json.encode(body),
                    headers={"content-type": MEDIA},
                ) as response:
                    assert response.status_code == 200
                    metadata = body.get("metadata")
                    token = response.headers.get(TOKEN_HEADER)
                    if isinstance(metadata, dict) and token is not None:
                        TOKENS[metadata["request_id"]] = token
                    out.append(response.read())
        except BaseException as exc:  # reported by the test
            out.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, out


def test_redis_killed_mid_stream(
    fresh_redis: RedisServer, tmp_path: Path, record_dir: Path
) -> None:
    gateway = Gateway(tmp_path, config=redis_config(record_dir, fresh_redis.url))
    start_all(gateway)
    try:
        request_id = new_id("redis-dies")
        thread, out = _stream_in_thread(gateway, payload(request_id=request_id, delay_ms=PACE_MS))
        with gateway.client(timeout=30.0) as client:
            stored = f"/v1/streams/{request_id}"
            wait_for(lambda: request_id in TOKENS, what="the answer's headers")
            wait_for(
                lambda: client.head(stored, headers=auth(request_id)).status_code == 200,
                what="the recording",
            )
            fresh_redis.kill()
            thread.join(60)
            (whole,) = out
            assert isinstance(whole, bytes), whole
            # The live stream finished as if nothing happened.
            expected = post_all(client, payload(request_id=new_id("ref"), resumable=None))
            _check_joined(b"", whole, expected)
            # Resume is refused cleanly, with a JSON error.
            refused = resume(client, request_id, 4)
            assert refused.status_code == 503
            assert refused.json()["error"]["code"] == "resume_unavailable"
            # New resumable streams are served, live only.
            other = new_id("while-down")
            _check_joined(b"", post_all(client, payload(request_id=other)), expected)
            assert resume(client, other, None).status_code == 503
            lines = [x for x in gateway.stderr().splitlines() if "resume_store_unavailable" in x]
            assert len(lines) == 1, lines  # one clear log line, not one per event
            assert fresh_redis.url in lines[0]
            # Redis is back (empty: no persistence): the old stream is gone, new ones resume.
            fresh_redis.start()
            wait_for(lambda: resume(client, request_id, 4).status_code == 404, what="redis back")
            again = new_id("after")
            whole_again = post_all(client, payload(request_id=again))
            resumed = resume(client, again, None).content
            # Its events may not all be stored yet when the resume comes (they go to
            # the client first): the resume then starts with a keep-alive comment.
            frames = [f for f in resumed.split(b"\n\n") if not f.startswith(b":")]
            assert b"\n\n".join(frames) == whole_again
        wait_for(lambda: "resume_store_available" in gateway.stderr(), what="the log line")
    finally:
        gateway.stop()


def test_a_replica_dies_mid_stream(
    replicas: tuple[Gateway, Gateway],
    redis_server: RedisServer,
    tmp_path: Path,
    record_dir: Path,
) -> None:
    _a, b = replicas
    doomed = Gateway(tmp_path, config=redis_config(record_dir, redis_server.url))
    start_all(doomed)
    try:
        request_id = new_id("dies")
        with doomed.client(timeout=30.0) as client:
            part = read_part(client, payload("recorder", request_id=request_id), count=3)
        assert doomed.proc is not None
        os.killpg(doomed.proc.pid, signal.SIGKILL)  # server and worker, no goodbye
        doomed.proc.wait(10)
        died = time.monotonic()
        with b.client(timeout=60.0) as client:
            rest = resume(client, request_id, events_of(part)[-1].seq)
        waited = time.monotonic() - died
    finally:
        doomed.stop()
    assert rest.status_code == 200
    joined = events_of(part + rest.content)
    assert [e.seq for e in joined] == list(range(len(joined)))
    error, end = joined[-2:]
    assert isinstance(error, ev.ErrorEvent), (rest.content[-500:], b.stderr()[-3000:])
    assert error.code == "internal_error"
    assert "replica" in error.message
    assert isinstance(end, ev.StreamEnd)
    assert tokenwire.validate([part + rest.content]).ok
    # Bounded: the lease runs out, then the next idle check ends it (docs/scaling.md).
    assert waited < LEASE_S + 20, waited


# --- the client SDK -------------------------------------------------------------------------


@pytest.mark.parametrize("cut_after", [900, 2500])
def test_client_resumes_through_a_load_balancer(
    replicas: tuple[Gateway, Gateway], cut_after: int
) -> None:
    a, b = replicas
    with Client(a.url) as client:
        expected = client.create(model="demo", messages="Hello there")
    with Balancer([a.port, b.port], cut_after=cut_after) as balancer:
        with Client(
            balancer.url, resume=True, strict=True, timeout=Timeouts(first_event=30, idle=30)
        ) as client:
            with client.stream(
                model="demo",
                messages="Hello there",
                extensions={"tokenwire:resumable": True, "tokenwire:demo": {"delay_ms": 20}},
            ) as stream:
                seqs = [event.seq for event in stream]
                response = stream.final()
    assert balancer.routed == [a.port, b.port]  # POST to A, cut; GET /v1/streams/... to B
    assert seqs == list(range(len(expected.events)))
    assert response.text == expected.text
    assert response.violations == []
    assert response.request_id == stream.request_id


def test_default_true_makes_streams_resumable(
    redis_server: RedisServer, tmp_path: Path, record_dir: Path
) -> None:
    gateway = Gateway(tmp_path, config=redis_config(record_dir, redis_server.url, default=True))
    start_all(gateway)
    try:
        with gateway.client(timeout=30.0) as client:
            implicit, opted_out = new_id("implicit"), new_id("opted-out")
            whole = post_all(client, payload(request_id=implicit, resumable=None))
            post_all(client, payload(request_id=opted_out, resumable=False))
            assert resume(client, implicit, None).content == whole
            assert resume(client, opted_out, None).status_code == 404
    finally:
        gateway.stop()


def test_scaling_doc_example_runs(
    memory_gateway: Gateway, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "scaling.md").read_text()
    match = re.search(r"<!-- example: resume-client -->\n```python\n(.*?)```", doc, re.S)
    assert match, "no resume-client example in docs/scaling.md"
    code = match.group(1).replace("http://127.0.0.1:8080", memory_gateway.url)
    # The example does not print its resume token: take it off the wire.
    tokens: list[str] = []
    send = httpx.Client.send

    def spy(self: httpx.Client, request: httpx.Request, **kw: Any) -> httpx.Response:
        response = send(self, request, **kw)
        if request.method == "POST" and TOKEN_HEADER in response.headers:
            tokens.append(response.headers[TOKEN_HEADER])
        return response

    monkeypatch.setattr(httpx.Client, "send", spy)
    exec(compile(code, "docs/scaling.md", "exec"), {"__name__": "docs_example"})
    monkeypatch.undo()
    request_id, _, text = capsys.readouterr().out.partition(" ")
    (token,) = tokens
    with memory_gateway.client(timeout=30.0) as client:
        # Stored, and only for whoever has the token.
        assert resume(client, request_id, None, token="").status_code == 404
        stored = resume(client, request_id, None, token=token)
    assert stored.status_code == 200
    assert text.strip() == text_of(events_of(stored.content)).strip()


def test_scaling_doc_curl_example_runs(memory_gateway: Gateway) -> None:
    # The POST, the resume with the token, and the DELETE, as docs/scaling.md shows them.
    doc = (Path(__file__).resolve().parents[2] / "docs" / "scaling.md").read_text()
    block = re.findall(r"```sh\n(.*?)```", doc, re.S)[0]
    assert "Tokenwire-Resume-Token" in block
    code = block.replace("http://127.0.0.1:8080", memory_gateway.url)
    done = subprocess.run(["sh", "-e", "-c", code], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    deleted = out[out.rindex(b"\n\n") + 2 :]
    assert msgspec.json.decode(deleted)["status"] == "completed"
    streams = out[: out.rindex(b"\n\n") + 2]
    end = streams.index(b"\n\n", streams.index(b"event: stream.end")) + 2
    posted, resumed = events_of(streams[:end]), events_of(streams[end:])
    # The resume had the token: it answered the events after seq 3, not a 404.
    assert isinstance(posted[-1], ev.StreamEnd)
    assert [e.seq for e in resumed] == [e.seq for e in posted if (e.seq or 0) > 3]
    assert resumed and isinstance(resumed[-1], ev.StreamEnd)
