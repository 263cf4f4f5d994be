"""Cancelling by default, and resume for the clients that opt in (issue 13, issue 16).

Against ``OwnedStreams`` (a resumable endpoint that, like the gateway, binds
each stream to the token its POST answer gave), and against a real gateway
in front of a slow fake OpenAI upstream, whose own record of the disconnect
is what the hang-up tests wait for.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from pathlib import Path

import httpx
import pytest
from tests.client.client_servers import OwnedStreams, ScriptedServer, ServerProcess

from tokenwire import events as ev
from tokenwire.client import AsyncClient, Client, stream_url
from tokenwire.client._common import RESUMABLE, base_url_of
from tokenwire.testing import WaitTimeout, async_wait_until
from tokenwire.testing.upstream import FakeUpstream

WORDS = ["one ", "two ", "three ", "four"]


def methods(server: ScriptedServer) -> list[str]:
    return [r.method for r in server.requests]


# --- the resume token --------------------------------------------------------------------


def test_the_endpoint_refuses_a_resume_without_the_token(scripted: ScriptedServer) -> None:
    # What makes the tests below meaningful: the test endpoint really checks it.
    owned = OwnedStreams(scripted, WORDS, cut_after=2)
    with Client(scripted.url, resume=True) as client:
        with client.stream(model="m", messages="hi") as stream:
            next(iter(stream))
            token = stream.resume_token
            assert token is not None and token == owned.tokens[stream.request_id or ""]
            path = f"{scripted.url}/v1/streams/{stream.request_id}"
            assert httpx.get(path).status_code == 404
            assert httpx.get(path, headers={"tokenwire-resume-token": "guess"}).status_code == 404
            assert httpx.get(path, headers={"tokenwire-resume-token": token}).status_code == 200


def test_resume_sends_the_owner_token(scripted: ScriptedServer) -> None:
    owned = OwnedStreams(scripted, WORDS, cut_after=2)
    with Client(scripted.url, resume=True) as client:
        with client.stream(model="m", messages="hi") as stream:
            seqs = [e.seq for e in stream]
            response = stream.final()
    assert response.text == "one two three four"
    assert seqs == list(range(len(seqs)))
    post, get = scripted.requests
    assert json.loads(post.body)["extensions"][RESUMABLE] is True
    assert get.headers["tokenwire-resume-token"] == owned.tokens[stream.request_id or ""]
    assert get.headers["last-event-id"] == "2"
    assert owned.refused == [] and owned.cancelled == []  # a finished stream is not cancelled


def test_async_resume_sends_the_owner_token(scripted: ScriptedServer) -> None:
    owned = OwnedStreams(scripted, WORDS, cut_after=1)

    async def run() -> str:
        async with AsyncClient(scripted.url, resume=True) as client:
            return (await client.create(model="m", messages="hi")).text

    assert asyncio.run(run()) == "one two three four"
    assert methods(scripted) == ["POST", "GET"]
    assert owned.refused == []


# --- cancelling ----------------------------------------------------------------------------


def test_break_out_of_a_resumable_stream_deletes_it_with_the_token(
    scripted: ScriptedServer,
) -> None:
    owned = OwnedStreams(scripted, WORDS * 3, cut_after=6)
    with Client(scripted.url, resume=True) as client:
        with client.stream(model="m", messages="hi") as stream:
            for event in stream:
                if isinstance(event, ev.ContentDelta):
                    break
    rid = stream.request_id or ""
    assert owned.cancelled == [rid]
    delete = scripted.requests[-1]
    assert (delete.method, delete.path) == ("DELETE", f"/v1/streams/{rid}")
    assert delete.headers["tokenwire-resume-token"] == owned.tokens[rid]


def test_async_close_of_a_resumable_stream_deletes_it(scripted: ScriptedServer) -> None:
    owned = OwnedStreams(scripted, WORDS * 3, cut_after=6)

    async def run() -> str | None:
        async with AsyncClient(scripted.url, resume=True) as client:
            stream = client.stream(model="m", messages="hi")
            await stream.open()
            await anext(aiter(stream))
            await stream.aclose()
            return stream.request_id

    rid = asyncio.run(run())
    assert owned.cancelled == [rid]


def test_closing_the_client_cancels_its_open_streams(scripted: ScriptedServer) -> None:
    owned = OwnedStreams(scripted, WORDS * 3, cut_after=6)
    client = Client(scripted.url, resume=True)
    stream = client.stream(model="m", messages="hi")
    next(iter(stream))
    client.close()
    assert owned.cancelled == [stream.request_id]


def test_the_default_client_is_not_resumable(scripted: ScriptedServer) -> None:
    # Not resumable: the endpoint cancels on the hang-up itself, no DELETE needed.
    OwnedStreams(scripted, WORDS * 3, cut_after=6)
    with Client(scripted.url) as client:
        with client.stream(model="m", messages="hi") as stream:
            next(iter(stream))
    (post,) = scripted.requests
    assert json.loads(post.body)["extensions"][RESUMABLE] is False


# --- one URL form ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("http://127.0.0.1:8080", "http://127.0.0.1:8080/v1/stream"),
        ("http://127.0.0.1:8080/", "http://127.0.0.1:8080/v1/stream"),
        ("http://127.0.0.1:8080/v1/stream", "http://127.0.0.1:8080/v1/stream"),
        ("http://127.0.0.1:8080/v1/stream/", "http://127.0.0.1:8080/v1/stream"),
        ("127.0.0.1:8080", "http://127.0.0.1:8080/v1/stream"),
    ],
)
def test_stream_url_takes_a_base_or_a_full_url(given: str, expected: str) -> None:
    assert stream_url(given) == expected
    assert stream_url(base_url_of(given)) == expected


def test_a_base_url_with_a_prefix_keeps_it() -> None:
    assert (
        base_url_of("https://example.com/llm") + "/v1/stream" == "https://example.com/llm/v1/stream"
    )
    assert base_url_of("https://example.com/llm/v1/stream/") == "https://example.com/llm"


def test_the_client_takes_a_full_stream_url(scripted: ScriptedServer) -> None:
    OwnedStreams(scripted, WORDS, cut_after=20)
    with Client(stream_url(scripted.url)) as client:
        with client.stream(model="m", messages="hi") as stream:
            next(iter(stream))
    assert scripted.requests[0].path == "/v1/stream"


# --- against a real gateway in front of a slow upstream ---------------------------------------


def hang_up_latency(fake: FakeUpstream, before: int, hung_up: float) -> float:
    """Wait (bounded) for the fake to see its client go; the latency in ms.

    The long answer takes 40 s to generate: a disconnect, not a completion,
    means the generation was cancelled.
    """
    completed = fake.completed
    assert fake.wait_for(lambda f: len(f.disconnects) > before, timeout=10.0)
    assert fake.completed == completed
    # FakeUpstream stamps disconnects with time.monotonic() in this process.
    latency = (fake.disconnects[-1] - hung_up) * 1000
    assert latency >= 0
    return latency


def read_some_then(client: Client, words: int) -> float:
    """Read ``words`` deltas of a slow stream, leave it; the monotonic time of leaving."""
    with client.stream(model="slow", messages="talk") as stream:
        seen = 0
        for event in stream:
            if isinstance(event, ev.ContentDelta):
                seen += 1
                if seen == words:
                    break
        left = time.monotonic()
    return left


def record(name: str, latency: float) -> None:
    print(f"{name}: client hang-up -> upstream hang-up {latency:.1f} ms")
    out = os.environ.get("TOKENWIRE_CANCEL_FIGURES")
    if out:
        with Path(out).open("a") as f:
            f.write(f"{name}\t{latency:.1f}\n")


def test_default_client_break_stops_the_upstream(
    slow_gateway: ServerProcess, slow_upstream: FakeUpstream
) -> None:
    before = len(slow_upstream.disconnects)
    with Client(slow_gateway.url) as client:
        left = read_some_then(client, 3)
        record("sync break", hang_up_latency(slow_upstream, before, left))


def test_default_async_client_close_stops_the_upstream(
    slow_gateway: ServerProcess, slow_upstream: FakeUpstream
) -> None:
    before = len(slow_upstream.disconnects)

    async def run() -> float:
        async with AsyncClient(slow_gateway.url) as client:
            stream = client.stream(model="slow", messages="talk")
            async for event in stream:
                if isinstance(event, ev.ContentDelta):
                    break
            await stream.aclose()
            return time.monotonic()

    left = asyncio.run(run())
    record("async aclose", hang_up_latency(slow_upstream, before, left))


def test_resumable_close_cancels_on_the_gateway(
    slow_gateway: ServerProcess, slow_upstream: FakeUpstream
) -> None:
    # Resumable: the gateway would keep generating after the hang-up; the
    # DELETE (with the stream's token) is what stops it.
    before = len(slow_upstream.disconnects)
    with Client(slow_gateway.url, resume=True) as client:
        left = read_some_then(client, 3)
        record("resumable close (DELETE)", hang_up_latency(slow_upstream, before, left))


def test_a_bare_break_cancels_at_once(scripted: ScriptedServer) -> None:
    # No ``with``, no close(): the loop letting go of the stream is enough
    # (nothing waits for the garbage collector).
    owned = OwnedStreams(scripted, WORDS * 3, cut_after=6)
    with Client(scripted.url, resume=True) as client:
        for event in client.stream(model="m", messages="hi"):
            if isinstance(event, ev.ContentDelta):
                break
        assert len(owned.cancelled) == 1  # before the client closes
        assert scripted.requests[-1].method == "DELETE"


def test_a_bare_async_break_cancels(scripted: ScriptedServer) -> None:
    owned = OwnedStreams(scripted, WORDS * 3, cut_after=6)

    async def run() -> int:
        async with AsyncClient(scripted.url, resume=True) as client:
            async for event in client.stream(model="m", messages="hi"):
                if isinstance(event, ev.ContentDelta):
                    break
            # asyncio finalises the abandoned iteration in a task of its own.
            with contextlib.suppress(WaitTimeout):  # the assert below reports a miss
                await async_wait_until(lambda: owned.cancelled, timeout=10)
            return len(owned.cancelled)

    assert asyncio.run(run()) == 1
