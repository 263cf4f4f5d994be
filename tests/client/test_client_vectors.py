"""The client against its vectors (tests/vectors/client/*.json), over real HTTP.

Each vector is a request, the response body as HTTP chunks (with ``resumes``,
the body is cut there and each list in ``resumes`` is the body of the next
``GET /v1/streams/{id}``), client settings and what the caller must see:
delivered event types, text, accepted and rejected tool calls, violations,
the error event, or the exception. Each one runs through ``Client`` and
``AsyncClient`` against a scripted server, and its bytes through the sans-I/O
``Receiver`` under arbitrary re-chunking.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.client.client_servers import (
    Drop,
    Received,
    ScriptedServer,
    Send,
    Step,
    load_vectors,
    sse_answer,
)

from tokenwire import errors
from tokenwire.client import AsyncClient, Client, ParsedToolCall, Response
from tokenwire.client._receiver import Receiver
from tokenwire.request import Request, parse

VECTORS = load_vectors()
IDS = [v["name"] for v in VECTORS]


def request_of(vector: dict[str, Any]) -> Request:
    return parse(json.dumps(vector["request"]))


def body_chunks(vector: dict[str, Any]) -> list[bytes]:
    chunks = [c.encode() for c in vector["chunks"]]
    cuts = vector.get("cuts")
    if not cuts:
        return chunks
    body = b"".join(chunks)
    edges = [0, *cuts, len(body)]
    return [body[a:b] for a, b in zip(edges, edges[1:], strict=False) if b > a]


def confirm_for(vector: dict[str, Any]) -> Any:
    answer = vector["client"].get("confirm")
    if answer is None:
        return None
    return lambda call: answer


def client_options(vector: dict[str, Any]) -> dict[str, Any]:
    opts = vector["client"]
    return {
        "strict": opts.get("strict", False),
        "resume": opts.get("resume", True),
        "confirm": confirm_for(vector),
        "timeout": 10,
        "max_event_bytes": opts.get("max_event_bytes", 1 << 20),
    }


def serve(server: ScriptedServer, vector: dict[str, Any]) -> None:
    """POST answers the vector's body; with ``resumes``, it drops instead of
    ending, and each ``GET /v1/streams/{id}`` answers the next body (each but
    the last dropping too)."""
    resumes: list[list[str]] = vector.get("resumes", [])
    steps: list[Step] = sse_answer()
    steps += [Send(c) for c in body_chunks(vector)]
    server.answer("POST", "/v1/stream", [*steps, Drop()] if resumes else steps)
    bodies = [[Send(c.encode()) for c in body] for body in resumes]

    def resume(_req: Received) -> list[Step]:
        body = bodies.pop(0)
        return [*sse_answer(), *body, *([Drop()] if bodies else [])]

    server.route("GET", "/v1/streams/*", resume)


def check_response(vector: dict[str, Any], response: Response) -> None:
    exp = vector["expect"]
    if exp["events"] is not None:
        assert [e.type for e in response.events] == exp["events"]
    assert response.text == exp["text"]
    assert [
        {"id": c.id, "name": c.name, "arguments": c.arguments} for c in response.tool_calls
    ] == exp["tool_calls"]
    assert [{"id": r.id, "rule": r.rule} for r in response.rejected_tool_calls] == exp["rejected"]
    assert [v.rule for v in response.violations] == exp["violations"]
    assert (response.error.code if response.error else None) == exp["error"]
    assert response.stop_reason == exp["stop_reason"]
    # Whatever the caller may execute passed every check.
    assert all(isinstance(c, ParsedToolCall) for c in response.tool_calls)


def check_raised(vector: dict[str, Any], exc: BaseException) -> None:
    raises = vector["expect"]["raises"]
    assert type(exc).__name__ == raises["type"], exc
    assert raises["match"] in str(exc)


@pytest.mark.parametrize("vector", VECTORS, ids=IDS)
def test_sync_client(vector: dict[str, Any], scripted: ScriptedServer) -> None:
    serve(scripted, vector)
    request = request_of(vector)
    with Client(scripted.url, **client_options(vector)) as client:
        stream = client.stream(request)
        if vector["expect"]["raises"]:
            with pytest.raises(errors.TokenwireError) as info:
                stream.final()
            check_raised(vector, info.value)
            rules = [v.rule for v in stream.violations]
            assert set(vector["expect"]["violations"]) <= set(rules)
            assert [r.id for r in stream.rejected_tool_calls] == [
                r["id"] for r in vector["expect"]["rejected"]
            ]
            return
        with stream:
            delivered = list(stream)
            response = stream.final()
    check_response(vector, response)
    assert delivered == response.events
    # The body went out as the standard's media type (§4.1).
    assert scripted.requests[0].headers["content-type"] == "application/llm-request+json"


@pytest.mark.parametrize("vector", VECTORS, ids=IDS)
def test_async_client(vector: dict[str, Any], scripted: ScriptedServer) -> None:
    serve(scripted, vector)
    request = request_of(vector)

    async def run() -> Response | BaseException:
        async with AsyncClient(scripted.url, **client_options(vector)) as client:
            try:
                async with client.stream(request) as stream:
                    delivered = [e async for e in stream]
                    response = await stream.final()
            except errors.TokenwireError as exc:
                return exc
            assert delivered == response.events
            return response

    outcome = asyncio.run(run())
    if vector["expect"]["raises"]:
        assert isinstance(outcome, BaseException)
        check_raised(vector, outcome)
    else:
        assert isinstance(outcome, Response)
        check_response(vector, outcome)


def test_violations_are_logged(scripted: ScriptedServer, caplog: pytest.LogCaptureFixture) -> None:
    vector = next(v for v in VECTORS if v["name"] == "seq-gap")
    serve(scripted, vector)
    with caplog.at_level(logging.WARNING, logger="tokenwire.client"):
        with Client(scripted.url) as client:
            client.create(request_of(vector))
    assert any("seq-gap" in r.getMessage() for r in caplog.records)


def receive(vector: dict[str, Any], chunks: list[bytes]) -> tuple[list[Any], list[str]]:
    """Run chunks (then each resume body) through the sans-I/O Receiver, as
    connections in turn; returns delivered events and outcome."""
    request = request_of(vector)
    opts = vector["client"]
    receiver = Receiver(
        request,
        strict=opts.get("strict", False),
        max_event_bytes=opts.get("max_event_bytes", 1 << 20),
    )
    bodies = [chunks] + [[c.encode() for c in body] for body in vector.get("resumes", [])]
    delivered: list[Any] = []
    try:
        for body in bodies:
            receiver.connect()
            for chunk in body:
                for event in receiver.feed(chunk):
                    call = receiver.needs_confirmation(event)
                    if call is not None and not receiver.confirm(
                        event, vector["client"].get("confirm")
                    ):
                        continue
                    receiver.deliver(event)
                    delivered.append(event)
                receiver.raise_pending()
            receiver.eof()
    except errors.TokenwireError as exc:
        return delivered, [type(exc).__name__]
    return delivered, [v.rule for v in receiver.violations]


@pytest.mark.parametrize("vector", VECTORS, ids=IDS)
def test_no_seq_is_delivered_twice_or_backwards(vector: dict[str, Any]) -> None:
    delivered, _ = receive(vector, body_chunks(vector))
    seqs = [e.seq for e in delivered if e.seq is not None]
    assert seqs == sorted(set(seqs))


@pytest.mark.parametrize("vector", VECTORS, ids=IDS)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_any_chunking_gives_the_same_events(vector: dict[str, Any], data: st.DataObject) -> None:
    body = b"".join(body_chunks(vector))
    cuts = data.draw(st.lists(st.integers(0, len(body)), max_size=12).map(sorted))
    edges = [0, *cuts, len(body)]
    pieces = [body[a:b] for a, b in zip(edges, edges[1:], strict=False)]
    assert receive(vector, pieces) == receive(vector, [body])
