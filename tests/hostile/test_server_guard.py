"""The request guard in process: Content-Type rules, the body and write deadlines, budgets.

The guard (``tokenwire.server.guard.Guard``) wraps the gateway in ``tokenwire
serve``; here it wraps ``build_app()`` or a bare ``StreamEndpoint`` and is
driven by scripted ASGI messages (tests/server/server_asgi.py), so a client
that never sends the rest of its body, or never reads, is exact.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from tests.hostile.hostile_procs import Firehose
from tests.server.server_asgi import Exchange

from tokenwire import events as ev
from tokenwire.gateway.app import build_app
from tokenwire.request import MEDIA_TYPE
from tokenwire.server import StreamEndpoint
from tokenwire.server import outbox as _outbox
from tokenwire.server.guard import Guard, Limits
from tokenwire.testing import async_wait_until

BODY = json.dumps(
    {
        "version": "1.0",
        "stream": True,
        "model": "demo",
        "messages": [{"role": "user", "content": "Hello"}],
    }
).encode()


def error(x: Exchange) -> dict[str, Any]:
    err: dict[str, Any] = x.json()["error"]
    return err


@pytest.fixture(scope="module")
def app() -> Guard:
    return Guard(build_app())


# --- Content-Type ----------------------------------------------------------------------


def test_two_content_type_fields_are_a_400(app: Guard) -> None:
    x = Exchange(BODY, headers={"x": "y"})
    x.scope["headers"].append((b"content-type", b"application/json"))
    x.run(app)
    assert x.status == 400
    assert error(x)["code"] == "invalid_request"
    assert "Content-Type" in error(x)["message"]


def test_even_two_identical_content_types_are_refused(app: Guard) -> None:
    x = Exchange(BODY)
    x.scope["headers"].append((b"content-type", MEDIA_TYPE.encode()))
    x.run(app)
    assert x.status == 400


@pytest.mark.parametrize(
    ("content_type", "words"),
    [
        (f"{MEDIA_TYPE}; version=2.0", ['"1.0"', "'2.0'"]),
        (f'{MEDIA_TYPE}; Version="0.9"', ['"1.0"', "'0.9'"]),
        (f"{MEDIA_TYPE}; charset=iso-8859-1", ["UTF-8", "'iso-8859-1'"]),
        ('application/json; charset="utf-16"', ["UTF-8", "'utf-16'"]),
        (f'{MEDIA_TYPE}; version="1.0', ["offset"]),
    ],
)
def test_unsupported_types_are_a_415_naming_what_is_supported(
    app: Guard, content_type: str, words: list[str]
) -> None:
    x = Exchange(BODY, content_type=content_type)
    x.run(app)
    assert x.status == 415
    assert error(x)["code"] == "unsupported_media_type"
    for word in words:
        assert word in error(x)["message"]


@pytest.mark.parametrize(
    "content_type",
    [
        MEDIA_TYPE,
        f'{MEDIA_TYPE}; version="1.0"; charset=UTF-8',
        "Application/LLM-Request+JSON ; VERSION=1.0",
    ],
)
def test_the_supported_type_in_any_spelling_streams(app: Guard, content_type: str) -> None:
    x = Exchange(BODY, content_type=content_type)
    x.run(app)
    assert x.status == 200
    assert [e.type for e in x.events()][-1] == "stream.end"


def test_q_zero_for_the_profile_gets_the_vendor_format(app: Guard) -> None:
    body = json.dumps(
        {"model": "demo", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    ).encode()
    accept = 'text/event-stream; profile="llm-stream-1.0"; q=0'
    x = Exchange(body, content_type="application/json", headers={"accept": accept})
    x.scope["path"] = "/v1/chat/completions"
    x.run(app)
    assert x.status == 200
    assert b"chat.completion.chunk" in x.body  # OpenAI chunks, not the standard
    x = Exchange(
        body,
        content_type="application/json",
        headers={"accept": 'text/event-stream; profile="llm-stream-1.0"; q=0.5'},
    )
    x.scope["path"] = "/v1/chat/completions"
    x.run(app)
    assert b"event: stream.end" in x.body


# --- the body deadline -----------------------------------------------------------------


class StalledBody(Exchange):
    """Sends the first bytes of the body, then nothing, ever (until hung up)."""

    async def receive(self) -> dict[str, Any]:
        if self.received == 0:
            self.received = 1
            return {"type": "http.request", "body": self.chunks[0][:5], "more_body": True}
        await self.gone.wait()
        return {"type": "http.disconnect"}


def test_a_body_that_never_completes_gets_a_408() -> None:
    app = Guard(build_app(), Limits(body_timeout_s=0.2))
    x = StalledBody(BODY)
    x.run(app)
    assert x.status == 408
    assert error(x)["code"] == "request_timeout"
    assert x.headers["connection"] == "close"
    # One response only: the endpoint's own "body ended early" went nowhere.
    assert [m["type"] for m in x.messages] == ["http.response.start", "http.response.body"]


# --- the write deadline and the budgets ------------------------------------------------


class NeverReads(Exchange):
    """A client whose socket stops taking bytes after ``reads`` body sends."""

    def __init__(self, body: bytes, reads: int) -> None:
        super().__init__(body)
        self.reads = reads

    async def send(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body" and len(self.bodies) >= self.reads:
            await asyncio.Event().wait()  # blocked for good: the client reads nothing
        await super().send(message)


def firehose_endpoint() -> StreamEndpoint:
    return StreamEndpoint(Firehose())


def test_a_client_that_stops_reading_is_cut_by_the_write_deadline() -> None:
    app = Guard(firehose_endpoint(), Limits(write_timeout_s=0.2))
    x = NeverReads(BODY, reads=3)
    x.run(app)  # returns: the stream was ended, the producer cancelled
    assert x.status == 200
    # Cut, not ended: no final empty send, no stream.end on the wire.
    assert all(m.get("more_body", False) for m in x.messages[1:])
    assert b"event: stream.end" not in x.body
    # Nothing is left counted against the memory budget.
    assert _outbox.BUDGET.queued == 0
    assert _outbox.BUDGET.in_flight == 0


def test_a_stream_over_its_own_budget_is_cut() -> None:
    app = Guard(firehose_endpoint(), Limits(stream_budget_bytes=4096))
    x = Exchange(BODY, hang_up_after=10_000)
    x.run(app)
    assert x.status == 200
    assert all(m.get("more_body", False) for m in x.messages[1:])
    assert b"event: stream.end" not in x.body
    assert _outbox.BUDGET.queued == 0


def test_over_the_memory_budget_new_streams_get_503_and_stalled_ones_are_shed() -> None:
    limits = Limits(write_timeout_s=60, memory_budget_bytes=64 * 1024)
    app = Guard(firehose_endpoint(), limits)

    async def go() -> tuple[NeverReads, Exchange, Exchange]:
        stalled = NeverReads(BODY, reads=2)
        task = asyncio.create_task(app(stalled.scope, stalled.receive, stalled.send))
        # The stalled stream fills its outbox to the high-water mark.
        await async_wait_until(
            lambda: _outbox.BUDGET.total > limits.memory_budget_bytes, timeout=100
        )
        refused = Exchange(BODY)
        await app(refused.scope, refused.receive, refused.send)
        # Once stalled for STALL_S, the next arrival sheds it.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60
        while not task.done() and loop.time() < deadline:
            probe = Exchange(BODY, hang_up_after=1)
            await app(probe.scope, probe.receive, probe.send)
            # A bounded retry, not a wait: shedding happens only on an arrival once
            # the stream has been stalled STALL_S, so arrivals come every 0.1 s.
            await asyncio.sleep(0.1)
        await asyncio.wait_for(task, 60)
        after = Exchange(BODY, hang_up_after=1)
        await app(after.scope, after.receive, after.send)
        return stalled, refused, after

    stalled, refused, after = asyncio.run(go())
    assert refused.status == 503
    assert refused.headers["retry-after"] == "5"
    assert error(refused)["code"] == "overloaded"
    assert b"event: stream.end" not in stalled.body  # shed: cut like a stalled stream
    assert after.status == 200  # the memory is back: streams are served again
    assert _outbox.BUDGET.total == 0


def test_the_documented_limits_are_the_defaults() -> None:
    import tomllib
    from pathlib import Path

    from tokenwire.gateway.config import parse

    doc = (Path(__file__).resolve().parents[2] / "docs" / "gateway.md").read_text()
    section = doc.split("## Request limits and timeouts", 1)[1]
    block = section.split("```toml\n", 1)[1].split("```", 1)[0]
    documented = parse(tomllib.loads(block)).server
    # Every value shown is the default (shutdown_timeout_s's is fitted to drain_s at parse).
    assert documented == parse({}).server
    assert len(tomllib.loads(block)["server"]) == 8


def test_over_the_memory_budget_every_stream_gets_the_low_water_mark() -> None:
    account = _outbox.StreamAccount(memory_budget=64 * 1024)
    hog, other = _outbox.Outbox(0.0, account), _outbox.Outbox(0.0, account)
    other.push(b"x" * (_outbox.LOW_WATER + 1))
    assert other.high_water() == _outbox.OUTBOX_HIGH_WATER and not other.full()
    hog.push(b"y" * (100 * 1024))  # the process is now over its 64 KiB budget
    assert other.high_water() == _outbox.LOW_WATER and other.full()
    hog.take()
    assert not other.full()  # back under the budget: the usual mark again
    other.close(drop=True)
    assert _outbox.BUDGET.total == 0


# --- a body whole by its Content-Length ------------------------------------------------


class BodyThenSilence(Exchange):
    """A server that hands over the whole body with ``more_body`` true and only
    says later that it ended (granian does): here, never before the hang-up."""

    async def receive(self) -> dict[str, Any]:
        if self.received == 0:
            self.received = 1
            return {"type": "http.request", "body": self.chunks[0], "more_body": True}
        await self.gone.wait()
        return {"type": "http.disconnect"}


class AfterTheBodyDeadline:
    """A provider that answers only once the guard's body deadline has passed."""

    def __init__(self, deadline_s: float) -> None:
        self.deadline_s = deadline_s

    async def generate(self, request: Any) -> Any:
        loop = asyncio.get_running_loop()
        until = loop.time() + self.deadline_s * 2
        while loop.time() < until:  # a condition, polled: the deadline is behind us
            # Time passing is the behaviour here (the guard's clock is real time).
            await asyncio.sleep(self.deadline_s / 4)
        yield ev.ContentDelta(v="1.0", seq=0, index=0, role="assistant", delta=ev.Delta(text="x"))


def test_a_body_whole_by_its_content_length_is_served_without_the_end_message() -> None:
    # Content-Length bytes are the whole body: the stream is served at once, and
    # the body deadline no longer applies (it would cut a stream whose server
    # never sends the closing empty message).
    app = Guard(StreamEndpoint(AfterTheBodyDeadline(0.05)), Limits(body_timeout_s=0.05))
    x = BodyThenSilence(BODY)
    asyncio.run(asyncio.wait_for(app(x.scope, x.receive, x.send), 30))
    assert x.status == 200
    types = [e.type for e in x.events()]
    assert types[0] == "stream.start" and "content.delta" in types
    assert types[-1] == "stream.end"
    assert x.messages[-1]["more_body"] is False


class FutureReceive(Exchange):
    """A server whose ``receive()`` returns a future (granian's do), counting the calls."""

    def __init__(self, body: bytes) -> None:
        super().__init__(body)
        self.calls = 0

    def receive(self) -> Any:  # type: ignore[override]
        self.calls += 1
        return asyncio.ensure_future(super().receive())


def test_a_body_asked_for_ahead_of_the_app_reaches_it_once() -> None:
    # The guard asks a future-returning server for the body before the app
    # reads it; the app still gets the body, once, and streams.
    x = FutureReceive(BODY)
    asyncio.run(asyncio.wait_for(Guard(quick_endpoint())(x.scope, x.receive, x.send), 30))
    assert x.status == 200
    assert [e.type for e in x.events()][-1] == "stream.end"


def test_an_app_that_never_reads_the_body_still_answers() -> None:
    async def refuses(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 401, "headers": []})
        await send({"type": "http.response.body", "body": b"no", "more_body": False})

    x = FutureReceive(BODY)
    asyncio.run(asyncio.wait_for(Guard(refuses)(x.scope, x.receive, x.send), 30))
    assert x.status == 401 and x.body == b"no"
    assert x.calls == 1  # the body asked for ahead, no more


def quick_endpoint() -> StreamEndpoint:
    return StreamEndpoint(AfterTheBodyDeadline(0.001))
