"""``HTTPProvider`` over the gateway's upstream clients: its events for each upstream
answer (next to what the httpx path gives for the same one), its connections, the
trace context it sends, and which client a configured model gets.

Against small asyncio servers on 127.0.0.1 (tests/gateway/upstream_server.py).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.gateway.upstream_server import OPENAI_OK, Server, answer, chunked, run

from tokenwire import events as ev
from tokenwire import translate
from tokenwire.gateway import config as gwconfig
from tokenwire.gateway import providers
from tokenwire.gateway.context import RequestContext
from tokenwire.gateway.providers import HTTPProvider
from tokenwire.gateway.upstream import MAX_HEAD, Pool
from tokenwire.request import build
from tokenwire.server import Exchange

BAD = {
    v["name"]: v
    for v in json.loads(
        (Path(__file__).parents[2] / "vectors" / "upstream" / "http11-responses.json").read_text()
    )["malformed"]
}


async def generate(provider: HTTPProvider) -> list[ev.Event]:
    request = build(model="m", messages="hi")
    return [event async for event in provider.generate(request)]


def provider_for(url: str, pool: Pool, **kw: Any) -> HTTPProvider:
    return HTTPProvider("openai", pool=pool, base_url=url + "/v1", api_key="sk-test", **kw)


def only_error(events: list[ev.Event]) -> ev.ErrorEvent:
    errors = [e for e in events if isinstance(e, ev.ErrorEvent)]
    assert len(errors) == 1, events
    assert isinstance(events[-1], ev.StreamEnd) or events[-1] is errors[0], events
    return errors[0]


def test_the_provider_streams_and_returns_the_connection_to_the_pool() -> None:
    async def main() -> None:
        async with Server(answer(chunked(OPENAI_OK))) as server:
            pool = Pool()
            provider = provider_for(server.url, pool)
            for _ in range(2):
                events = await generate(provider)
                assert "".join(e.text for e in events if isinstance(e, ev.ContentDelta)) == "Hi"
                assert isinstance(events[-1], ev.StreamEnd)
            assert server.connections == 1
            head = server.requests[0].lower()
            assert b"authorization: bearer sk-test" in head
            assert b"accept-encoding: identity" in head
            await pool.aclose()

    run(main())


async def generate_until_end(provider: HTTPProvider) -> list[ev.Event]:
    """What the server does (server.StreamEndpoint._produce): stop at stream.end, then aclose."""
    request = build(model="m", messages="hi")
    iterator = provider.generate(request)
    events: list[ev.Event] = []
    try:
        async for event in iterator:
            events.append(event)
            if isinstance(event, ev.StreamEnd):
                break
    finally:
        await iterator.aclose()
    return events


def test_a_provider_closed_at_stream_end_still_returns_its_connection() -> None:
    # Regression: closing the generator at stream.end threw GeneratorExit through the
    # pool's block, which dropped the connection though its body had been read to the
    # end: every request through the gateway dialled the upstream anew.
    async def main() -> None:
        async with Server(answer(chunked(OPENAI_OK))) as server:
            pool = Pool()
            provider = provider_for(server.url, pool)
            for _ in range(3):
                events = await generate_until_end(provider)
                assert isinstance(events[-1], ev.StreamEnd)
            assert server.connections == 1
            assert pool.stats()["opened"] == 1
            await pool.aclose()

    run(main())


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            b"HTTP/1.1 200 OK\r\n" + b"x-big: " + b"a" * (MAX_HEAD + 1) + b"\r\n\r\n",
            "upstream connection failed (RemoteProtocolError: response head over "
            f"{MAX_HEAD} bytes)",
        ),
        (
            BAD["bad-chunk-size"]["response"].encode(),
            "upstream connection failed (RemoteProtocolError: malformed response (",
        ),
        (
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
            + b"%x\r\n%s\r\n" % (len(OPENAI_OK[:120]), OPENAI_OK[:120])
            + b"40\r\npart",
            "upstream connection failed (RemoteProtocolError: the upstream closed the "
            "connection mid-response)",
        ),
    ],
    ids=["oversized-head", "bad-chunk-size", "eof-mid-body"],
)
def test_a_broken_response_ends_the_stream_with_internal_error(raw: bytes, message: str) -> None:
    async def main() -> None:
        async with Server(answer(raw, keep=False)) as server:
            pool = Pool()
            events = await generate(provider_for(server.url, pool))
            error = only_error(events)
            assert error.code == "internal_error"
            assert error.message.startswith(message), error.message
            assert isinstance(events[0], ev.StreamStart) and isinstance(events[-1], ev.StreamEnd)
            assert "127.0.0.1" not in error.message
            assert pool.stats()["open"] == 0

    run(main())


def test_a_compressed_body_is_refused_not_fed_to_the_translator() -> None:
    raw = chunked(b"\x1f\x8b\x08\x00garbage", head=b"content-encoding: gzip\r\n")

    async def main() -> None:
        async with Server(answer(raw)) as server:
            events = await generate(provider_for(server.url, Pool()))
            error = only_error(events)
            assert error.code == "internal_error"
            assert "'gzip' body, though identity was asked for" in error.message

    run(main())


def test_a_header_that_would_break_its_line_is_never_sent() -> None:
    async def main() -> None:
        async with Server(answer(chunked(OPENAI_OK))) as server:
            provider = HTTPProvider(
                "openai", pool=Pool(), base_url=server.url + "/v1", api_key="sk\r\nx-evil: 1"
            )
            error = only_error(await generate(provider))
            assert error.code == "internal_error"
            assert error.message.startswith("upstream request not sent (header 'authorization'")
            assert "evil" not in error.message  # the value (a key) is never quoted
            assert server.requests == []

    run(main())


def test_connection_refused_is_internal_error() -> None:
    async def main() -> None:
        async with Server(answer(b"")) as server:
            url = server.url
        # The server is closed: its port refuses.
        events = await generate(provider_for(url, Pool()))
        error = only_error(events)
        assert error.code == "internal_error"
        assert error.message == "upstream connection failed (ConnectError: connection refused)"

    run(main())


def test_a_silent_upstream_is_a_read_timeout_overloaded() -> None:
    async def respond(server: Server, n: int, reader: Any, writer: Any) -> bool:
        await reader.read()
        server.eofs += 1
        return False

    async def main() -> None:
        async with Server(respond) as server:
            pool = Pool()
            events = await generate(provider_for(server.url, pool, timeout_s=0.1))
            error = only_error(events)
            assert error.code == "overloaded"
            assert error.message == "the upstream did not answer in time (read timeout)"
            await server.until(lambda: server.eofs >= 1)  # and it was hung up on
            assert pool.stats()["open"] == 0

    run(main())


def test_a_stall_between_chunks_is_a_read_timeout() -> None:
    async def respond(server: Server, n: int, reader: Any, writer: Any) -> bool:
        first = OPENAI_OK.split(b"\n\n")[0] + b"\n\n"
        writer.write(
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n%x\r\n%s\r\n"
            % (len(first), first)
        )
        await reader.read()
        return False

    async def main() -> None:
        async with Server(respond) as server:
            events = await generate(provider_for(server.url, Pool(), timeout_s=0.1))
            assert "".join(e.text for e in events if isinstance(e, ev.ContentDelta)) == "Hi"
            error = only_error(events)
            assert (error.code, error.message) == (
                "overloaded",
                "the upstream did not answer in time (read timeout)",
            )

    run(main())


@pytest.mark.parametrize("status", [429, 500, 503, 400])
def test_an_error_status_is_the_same_event_as_over_httpx(status: int) -> None:
    body = b'{"error":{"message":"nope","type":"invalid_request_error","code":"bad"}}'
    raw = b"HTTP/1.1 %d Error\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (
        status,
        len(body),
        body,
    )
    # The vendor's own mapping decides (the table in providers.py's docstring).
    code, message = translate.get("openai").http_error(status, body)
    assert code == {429: "rate_limited", 503: "overloaded"}.get(status, code)

    async def main() -> None:
        async with Server(answer(raw)) as server:
            pool = Pool()
            ours = await generate(provider_for(server.url, pool))
            async with httpx.AsyncClient() as client:
                theirs = await generate(
                    HTTPProvider("openai", client=client, base_url=server.url + "/v1", api_key="k")
                )
            assert ours == theirs
            # ...and the status rides along, for routing (never parsed from the message).
            expected = ev.ErrorEvent(
                v=ev.VERSION, seq=0, code=code, message=message, upstream_status=status
            )
            assert ours == [expected]
            assert pool.stats()["idle"] == 1  # the error body was read whole: reusable
            await pool.aclose()

    run(main())


def test_the_trace_context_goes_upstream() -> None:
    async def main() -> None:
        async with Server(answer(chunked(OPENAI_OK))) as server:
            ctx = RequestContext()
            ctx.traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
            ctx.tracestate = "vendor=1"
            pool = Pool()
            try:
                request = build(model="m", messages="hi")
                provider = provider_for(server.url, pool)
                [event async for event in provider.serve(request, Exchange(context=ctx))]
            finally:
                await pool.aclose()
            head = server.requests[0]
            assert b"traceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" in head
            assert b"tracestate: vendor=1" in head

    run(main())


# --- which client a model gets ------------------------------------------------------------


def _models(**keys: Any) -> gwconfig.Config:
    entry = {"name": "m", "provider": "openai", "base_url": "http://127.0.0.1:9/v1", **keys}
    return gwconfig.parse({"models": [entry]})


def test_the_default_is_the_http11_pool_and_http2_keeps_httpx() -> None:
    clients = providers.UpstreamClients()
    default = providers.build_providers(_models(), clients)["m"]
    assert isinstance(default, HTTPProvider)
    assert default.pool is clients.pool and default.client is None
    # No http = "2" model yet: httpx's client is not made (nor imported, in a gateway).
    assert clients._httpx is None
    h2 = providers.build_providers(_models(http="2"), clients)["m"]
    assert isinstance(h2, HTTPProvider)
    assert h2.client is clients.http2 and h2.pool is None
    explicit = providers.build_providers(_models(http="1.1"), clients)["m"]
    assert isinstance(explicit, HTTPProvider) and explicit.pool is default.pool


def test_the_http2_client_gets_the_hooks_registered_before_it_is_made() -> None:
    clients = providers.UpstreamClients()
    seen: list[Any] = []
    clients.on_http2(seen.append)
    assert seen == []
    client = clients.http2
    assert seen == [client] and clients.http2 is client
    clients.on_http2(seen.append)  # registered after: called at once
    assert seen == [client, client]
    asyncio.run(clients.aclose())


def test_the_http_option_is_checked() -> None:
    with pytest.raises(gwconfig.ConfigError, match=r'models\[0\]\.http: must be "1.1" or "2"'):
        _models(http="3")
    with pytest.raises(gwconfig.ConfigError, match=r"models\[0\]\.http: only for provider"):
        gwconfig.parse({"models": [{"name": "d", "provider": "demo", "http": "2"}]})


def test_closing_the_upstream_clients_closes_the_pool_and_httpx() -> None:
    async def main() -> None:
        async with Server(answer(chunked(OPENAI_OK))) as server:
            clients = providers.UpstreamClients()
            client = clients.http2
            await generate(provider_for(server.url, clients.pool))
            assert clients.pool.stats()["idle"] == 1
            await clients.aclose()
            assert clients.pool.stats()["idle"] == 0 and client.is_closed
            await server.until(lambda: server.eofs == 1)

    run(main())
