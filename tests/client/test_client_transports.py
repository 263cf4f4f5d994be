"""``Client`` and ``AsyncClient`` on every transport of the binary binding (docs/binary.md 6).

``transport="http"`` (frames over HTTP), ``"ws"`` (channels on one WebSocket)
and ``"webtransport"`` (a stream each on one HTTP/3 session), against one
``tokenwire serve`` on TLS: a tool loop, cancel, resume after a cut, and 20
streams on one connection, each with the blocking and the async client, which
share one flow with the HTTP client.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.client.client_servers import CuttingProxy
from tests.client.test_client_cancel import hang_up_latency
from tests.client.test_client_gateway import QUESTION, WEATHER
from tests.gateway.gateway_procs import Gateway

from tokenwire import events as ev
from tokenwire.client import AsyncClient, Client, Response
from tokenwire.request import Request, build
from tokenwire.testing.certs import webtransport_tls
from tokenwire.testing.upstream import FakeUpstream, Script

pytest.importorskip("aioquic", reason="the webtransport extra (aioquic)")

TRANSPORTS = ["http", "ws", "webtransport"]
#: Long enough that a stream is still running when the test cuts or cancels it.
LONG_TEXT = " ".join(f"word{i}" for i in range(2000))
#: What a resumed stream must deliver whole: 300 words, a few seconds.
SHORT_TEXT = " ".join(f"part{i}" for i in range(300))


class Served:
    """The gateway and where each transport reaches it."""

    def __init__(self, gateway: Gateway, wt_port: int, ca: Path, upstream: FakeUpstream) -> None:
        self.gateway = gateway
        self.wt_port = wt_port
        self.ca = str(ca)
        self.upstream = upstream

    def options(self, transport: str, base: str | None = None) -> dict[str, Any]:
        options: dict[str, Any] = {"transport": transport, "cafile": self.ca}
        if transport == "http":
            options["binding"] = "binary"
        if transport == "webtransport":
            options["frames_url"] = f"https://localhost:{self.wt_port}/v1/wt"
        return {"base_url": base or self.gateway.url, **options}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    pytest.importorskip("cryptography", reason="certificates are made with cryptography")
    workdir = tmp_path_factory.mktemp("transports")
    tls = webtransport_tls(workdir)
    with (
        FakeUpstream("openai", Script(text=LONG_TEXT, delay_s=0.02)) as upstream,
        FakeUpstream("openai", Script(text=SHORT_TEXT, delay_s=0.005)) as short,
    ):
        config = (
            tls.server_toml + '[[models]]\nname = "slow"\nprovider = "openai"\n'
            f'base_url = "{upstream.url}/v1"\nupstream_model = "up-model"\n'
            '[[models]]\nname = "short"\nprovider = "openai"\n'
            f'base_url = "{short.url}/v1"\nupstream_model = "up-model"\n'
            "[resume]\ndefault = true\n"
        )
        with Gateway(workdir, config=config, tls=(tls.cert, tls.key, tls.ca)) as gateway:
            yield Served(gateway, tls.port, tls.ca, upstream)


def _run(coroutine: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coroutine, 120))


# --- a tool loop ------------------------------------------------------------------------


def _check_tool_loop(request: Request, first: Response, second: Response) -> None:
    [call] = first.tool_calls
    assert (call.name, call.arguments) == ("get_weather", {"city": "Vienna"})
    assert first.stop_reason == "tool_use" and first.violations == []
    assert "Vienna: 24C, sunny" in second.text
    assert second.stop_reason == "end_turn" and second.violations == []


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_tool_loop(served: Served, transport: str) -> None:
    request = build(model="demo", messages=QUESTION, tools=[WEATHER])
    with Client(**served.options(transport), strict=True) as client:
        first = client.create(request)
        second = client.create(
            first.follow_up(request, {first.tool_calls[0].id: "Vienna: 24C, sunny"})
        )
    _check_tool_loop(request, first, second)

    async def run() -> tuple[Response, Response]:
        async with AsyncClient(**served.options(transport), strict=True) as client:
            first = await client.create(request)
            result = {first.tool_calls[0].id: "Vienna: 24C, sunny"}
            return first, await client.create(first.follow_up(request, result))

    _check_tool_loop(request, *_run(run()))


# --- cancel -----------------------------------------------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_closing_a_stream_cancels_its_generation(served: Served, transport: str) -> None:
    upstream = served.upstream
    before = len(upstream.disconnects)
    with Client(**served.options(transport)) as client:
        with client.stream(model="slow", messages="talk") as stream:
            deltas = 0
            for event in stream:
                deltas += isinstance(event, ev.ContentDelta)
                if deltas == 3:
                    break
        left = time.monotonic()
        # The connection outlives the cancelled stream: the next one is served on it.
        assert "after" in client.create(model="demo", messages="after").text
    hang_up_latency(upstream, before, left)  # the upstream is cut, not completed

    async def run() -> float:
        async with AsyncClient(**served.options(transport)) as client:
            stream = client.stream(model="slow", messages="talk")
            async with stream:
                deltas = 0
                async for event in stream:
                    deltas += isinstance(event, ev.ContentDelta)
                    if deltas == 3:
                        break
            left = time.monotonic()
            assert "after" in (await client.create(model="demo", messages="after")).text
            return left

    before = len(upstream.disconnects)
    hang_up_latency(upstream, before, _run(run()))


# --- resume after a cut -----------------------------------------------------------------


def _live_sessions(client: Client | AsyncClient) -> list[Any]:
    transport: Any = client._http._transport
    return list(getattr(transport, "_transport", transport)._sessions.values())


def _cut_webtransport(client: Client | AsyncClient) -> list[Any]:
    """Close the client's QUIC connection under its streams, as a network cut would."""
    transport: Any = client._http._transport
    sessions = _live_sessions(client)

    def close() -> None:
        for session in sessions:
            session.protocol._quic.close(error_code=0, reason_phrase="cut by the test")
            session.protocol.transmit()
            session.ended("the test cut the connection")

    loop = getattr(getattr(transport, "_loop", None), "loop", None)
    if loop is None:
        close()
    else:  # the blocking client's loop thread owns the session
        asyncio.run_coroutine_threadsafe(_call(close), loop).result(10)
    return sessions


async def _call(function: Any) -> None:
    function()


class _Cut:
    """Where the client connects, and how its connection is cut after ``events`` events."""

    def __init__(self, served: Served, transport: str) -> None:
        self.served = served
        self.transport = transport
        self.proxy: CuttingProxy | None = None
        self.cut: list[Any] = []  # the WebTransport sessions cut

    def __enter__(self) -> _Cut:
        if self.transport != "webtransport":
            # The TCP proxy cuts the first connection a few KiB into the stream.
            self.proxy = CuttingProxy(self.served.gateway.port, cut_after=6000).__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proxy is not None:
            self.proxy.__exit__(*exc)

    def options(self) -> dict[str, Any]:
        base = None if self.proxy is None else f"https://127.0.0.1:{self.proxy.port}"
        return {**self.served.options(self.transport, base), "resume": True}

    def after_event(self, client: Client | AsyncClient, seen: int) -> None:
        if self.transport == "webtransport" and seen == 20:
            self.cut = _cut_webtransport(client)

    def check_resumed_elsewhere(self, client: Client | AsyncClient) -> None:
        if self.proxy is not None:
            assert self.proxy.connections >= 2  # cut, then resumed on a new connection
        else:
            assert self.cut, "the session was cut"
            assert not set(map(id, self.cut)) & set(map(id, _live_sessions(client)))


def _check_resumed(seqs: list[int], response: Response, cut: _Cut) -> None:
    assert seqs == list(range(len(seqs))), "every seq once, in order"
    assert response.violations == [] and response.stop_reason == "end_turn"
    assert response.text.split() == SHORT_TEXT.split()


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_cut_stream_resumes(served: Served, transport: str) -> None:
    with _Cut(served, transport) as cut, Client(**cut.options()) as client:
        with client.stream(model="short", messages="talk") as stream:
            seqs = []
            for event in stream:
                seqs.append(event.seq)
                cut.after_event(client, len(seqs))
            response = stream.final()
        cut.check_resumed_elsewhere(client)
    _check_resumed(seqs, response, cut)

    async def run() -> tuple[list[int], Response]:
        async with AsyncClient(**cut.options()) as client:
            stream = client.stream(model="short", messages="talk")
            async with stream:
                seqs = []
                async for event in stream:
                    seqs.append(event.seq)
                    cut.after_event(client, len(seqs))
                response = await stream.final()
            cut.check_resumed_elsewhere(client)
            return seqs, response

    with _Cut(served, transport) as cut:
        seqs, response = _run(run())
    _check_resumed(seqs, response, cut)


# --- 20 streams on one connection -------------------------------------------------------


def _sessions(client: Client | AsyncClient) -> int:
    transport: Any = client._http._transport
    return len(getattr(transport, "_transport", transport)._sessions)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_twenty_streams_on_one_connection(served: Served, transport: str) -> None:
    asks = [f"Hello number {i}" for i in range(20)]
    params = {"max_tokens": 12}
    # Frames over HTTP multiplex on HTTP/2; the proxy counts the TCP connections.
    with CuttingProxy(served.gateway.port, cut_after=1 << 40) as proxy:
        base = f"https://127.0.0.1:{proxy.port}"
        options = {**served.options(transport, base), "http2": True}
        with Client(**options, strict=True) as client:
            client.create(model="demo", messages="warm up", parameters=params)
            streams = [client.stream(model="demo", messages=a, parameters=params) for a in asks]
            pending = {i: iter(s) for i, s in enumerate(streams)}
            while pending:  # one event of each open stream in turn: all 20 are open at once
                for i, events in list(pending.items()):
                    if next(events, None) is None:
                        del pending[i]
            texts = [s.final().text for s in streams]
            sessions = _sessions(client) if transport != "http" else 1
        if transport != "webtransport":
            assert proxy.connections == 1
    assert sessions == 1
    assert all(f"Hello number {i}" in text for i, text in enumerate(texts))

    async def run() -> tuple[list[str], int]:
        async with AsyncClient(**options, strict=True) as client:
            await client.create(model="demo", messages="warm up", parameters=params)
            answers = await asyncio.gather(
                *(client.create(model="demo", messages=a, parameters=params) for a in asks)
            )
            return [a.text for a in answers], _sessions(client) if transport != "http" else 1

    with CuttingProxy(served.gateway.port, cut_after=1 << 40) as proxy:
        base = f"https://127.0.0.1:{proxy.port}"
        options = {**served.options(transport, base), "http2": True}
        texts, sessions = _run(run())
        if transport != "webtransport":
            assert proxy.connections == 1
    assert sessions == 1
    assert all(f"Hello number {i}" in text for i, text in enumerate(texts))
