"""Upstream HTTP/1.1 clients side by side, in one run, against the same fake upstream.

The gateway's upstream client is its most expensive part per streamed chunk
(bench/RESULTS.md, "vs-litellm" profiles). This bench puts the candidates in
front of **one** ``tokenwire.testing.upstream.FakeUpstream("openai")`` running in
a process of its own on 127.0.0.1, each sending the same OpenAI streaming request
(built by ``translate.get("openai").build_request``):

- ``httpx``: ``AsyncClient.stream`` + ``aiter_raw`` (the gateway's client
  until now, built by ``providers.new_client``);
- ``aiohttp``: ``ClientSession.post`` + ``content.iter_any`` (a bench peer only);
- ``h11``: h11 over an ``asyncio.Protocol`` (a minimal client written here);
- ``httptools``: httptools over an ``asyncio.Protocol`` (a minimal client written here);
- ``tokenwire``: ``tokenwire.gateway.upstream.Pool``, the transport the gateway uses.

For each, every round (rounds interleave the candidates, A B C D E A B C D E...,
because the machine is shared):

- **first content chunk**: ``--requests`` sequential requests for a 4-word answer
  on the pooled connection; the time from writing the request to the first body
  piece holding the first word; median and p99 over all rounds;
- **CPU µs per chunk**: ``time.process_time`` of this (the client's) process over
  ``--streams`` 2,000-chunk streams, divided by their chunks; median over the rounds;
- **connections**: the distinct local ports the candidate's requests used, over
  the whole run (1 means every request reused one connection).

Then the same through the gateway: one ``tokenwire serve`` (one worker) with two
pairs of models in front of the same fake, one pair on ``http = "1.1"`` (this
transport) and one on ``http = "2"`` (httpx, the client until now), measured
in interleaved rounds with the raw client of ``tokenwire.testing.loadgen``: the
time to the first content chunk minus the fake's own (called directly, measured
in the same round), and the gateway's CPU (``/proc``, the process tree) per
streamed chunk.

It prints the tables and ratios against httpx, and rewrites the "## upstream"
section of bench/RESULTS.md.

Run: ``.venv/bin/python bench/upstream.py [--rounds 7] [--requests 40] [--streams 3]``
``[--loop uvloop]``
(``--no-write``: print only)
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit

import h11
import httptools

from _common import header, md_table, pkg_version, write_section
from tokenwire import translate
from tokenwire.gateway.upstream import Pool
from tokenwire.request import build
from tokenwire.testing import processes as tb

LONG = 2000
SCRIPTS = {"long": {"text": tb.words(LONG)}, "short": {"text": tb.words(4)}}
#: The first content word of every script (``words`` numbers them from 0).
FIRST = b"word0"
HEADERS_EXTRA = {"accept-encoding": "identity"}


@dataclass
class Figures:
    first_ms: list[float] = field(default_factory=list)
    cpu_us: list[float] = field(default_factory=list)
    ports: set[int] = field(default_factory=set)


class Candidate:
    """One client: ``stream(request)`` yields the body's pieces; ``port`` names the
    connection the last request used (its local port, or a count of connections made)."""

    name = ""
    port = 0

    async def start(self) -> None:
        return None

    def stream(self, request: Any) -> AsyncIterator[bytes]:
        raise NotImplementedError

    async def aclose(self) -> None:
        return None


class Httpx(Candidate):
    name = "httpx"

    async def start(self) -> None:
        from tokenwire.gateway.providers import new_client

        self.client = new_client()

    async def stream(self, request: Any) -> AsyncIterator[bytes]:
        async with self.client.stream(
            request.method,
            request.url,
            headers={**request.headers, **HEADERS_EXTRA},
            content=request.body,
        ) as response:
            sock = response.extensions["network_stream"].get_extra_info("socket")
            self.port = sock.getsockname()[1]
            async for chunk in response.aiter_raw():
                yield chunk

    async def aclose(self) -> None:
        await self.client.aclose()


class Aiohttp(Candidate):
    name = "aiohttp"

    async def start(self) -> None:
        import aiohttp

        # The response may be released before its first read: count the
        # connections the connector makes instead of asking for a port.
        trace = aiohttp.TraceConfig()

        async def made(*_: Any) -> None:
            self.port += 1

        trace.on_connection_create_end.append(made)
        self.session = aiohttp.ClientSession(auto_decompress=False, trace_configs=[trace])

    async def stream(self, request: Any) -> AsyncIterator[bytes]:
        async with self.session.request(
            request.method,
            request.url,
            headers={**request.headers, **HEADERS_EXTRA},
            data=request.body,
        ) as response:
            async for chunk in response.content.iter_any():
                yield chunk

    async def aclose(self) -> None:
        await self.session.close()


class _MiniProtocol(asyncio.Protocol):
    """What the two minimal clients share: a list of body pieces and a waiter."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.pieces: list[bytes] = []
        self.done = False
        self.waiter: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, only alike.
        self.transport = cast(asyncio.Transport, transport)

    def wake(self) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        self.done = True
        self.wake()

    async def pieces_until_done(self) -> AsyncIterator[list[bytes]]:
        loop = asyncio.get_running_loop()
        while True:
            if self.pieces:
                pieces, self.pieces = self.pieces, []
                yield pieces
                continue
            if self.done:
                return
            self.waiter = loop.create_future()
            await self.waiter


class _H11Protocol(_MiniProtocol):
    def __init__(self) -> None:
        super().__init__()
        self.conn = h11.Connection(h11.CLIENT)

    def data_received(self, data: bytes) -> None:
        conn = self.conn
        conn.receive_data(data)
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA or event is h11.PAUSED:
                break
            if type(event) is h11.Data:
                self.pieces.append(event.data)
            elif type(event) is h11.EndOfMessage:
                self.done = True
                break
        self.wake()


class _HttptoolsProtocol(_MiniProtocol):
    def __init__(self) -> None:
        super().__init__()
        self.parser = httptools.HttpResponseParser(self)

    def data_received(self, data: bytes) -> None:
        self.parser.feed_data(data)
        self.wake()

    def on_body(self, body: bytes) -> None:
        self.pieces.append(body)

    def on_message_complete(self) -> None:
        self.done = True


def _request_bytes(request: Any) -> bytes:
    parts = urlsplit(request.url)
    lines = [f"{request.method} {parts.path} HTTP/1.1", f"host: {parts.netloc}"]
    lines += [f"{k}: {v}" for k, v in {**request.headers, **HEADERS_EXTRA}.items()]
    lines.append(f"content-length: {len(request.body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + request.body


class _Minimal(Candidate):
    """One kept-alive connection, re-dialled if the server closed it."""

    factory: Callable[[], _MiniProtocol]

    def __init__(self) -> None:
        self.protocol: _MiniProtocol | None = None

    async def stream(self, request: Any) -> AsyncIterator[bytes]:
        protocol = self.protocol
        if protocol is None or protocol.transport is None or protocol.transport.is_closing():
            parts = urlsplit(request.url)
            loop = asyncio.get_running_loop()
            _, protocol = await loop.create_connection(
                type(self).factory, parts.hostname, parts.port
            )
            assert protocol.transport is not None
            self.port = protocol.transport.get_extra_info("sockname")[1]
        else:
            self.reset(protocol)
        self.protocol = protocol
        assert protocol.transport is not None
        protocol.transport.write(_request_bytes(request))
        async for pieces in protocol.pieces_until_done():
            for piece in pieces:
                yield piece

    def reset(self, protocol: Any) -> None:
        protocol.done = False

    async def aclose(self) -> None:
        if self.protocol is not None and self.protocol.transport is not None:
            self.protocol.transport.close()


class H11(_Minimal):
    name = "h11"
    factory = _H11Protocol

    async def stream(self, request: Any) -> AsyncIterator[bytes]:
        # h11 tracks both sides: the request goes through its state machine too.
        protocol = self.protocol
        if protocol is None or protocol.transport is None or protocol.transport.is_closing():
            parts = urlsplit(request.url)
            loop = asyncio.get_running_loop()
            _, new = await loop.create_connection(_H11Protocol, parts.hostname, parts.port)
            assert isinstance(new, _H11Protocol) and new.transport is not None
            protocol = new
            self.port = new.transport.get_extra_info("sockname")[1]
        else:
            assert isinstance(protocol, _H11Protocol)
            protocol.done = False
            protocol.conn.start_next_cycle()
        self.protocol = protocol
        assert isinstance(protocol, _H11Protocol) and protocol.transport is not None
        parts = urlsplit(request.url)
        headers = [("host", parts.netloc), ("content-length", str(len(request.body)))]
        headers += list({**request.headers, **HEADERS_EXTRA}.items())
        conn = protocol.conn
        data = conn.send(h11.Request(method=request.method, target=parts.path, headers=headers))
        data += conn.send(h11.Data(data=request.body)) or b""
        data += conn.send(h11.EndOfMessage()) or b""
        protocol.transport.write(data)
        async for pieces in protocol.pieces_until_done():
            for piece in pieces:
                yield piece


class Httptools(_Minimal):
    name = "httptools"
    factory = _HttptoolsProtocol

    def reset(self, protocol: Any) -> None:
        protocol.done = False
        protocol.parser = httptools.HttpResponseParser(protocol)


class Tokenwire(Candidate):
    name = "tokenwire (gateway.upstream)"

    async def start(self) -> None:
        self.pool = Pool()

    async def stream(self, request: Any) -> AsyncIterator[bytes]:
        async with self.pool.stream(
            request.method,
            request.url,
            {**request.headers, **HEADERS_EXTRA},
            request.body,
            read_timeout=60.0,
            connect_timeout=10.0,
            pool_timeout=10.0,
        ) as response:
            connection = response._connection
            assert connection.transport is not None
            self.port = connection.transport.get_extra_info("sockname")[1]
            read = response.read
            while pieces := await read():
                for piece in pieces:
                    yield piece

    async def aclose(self) -> None:
        await self.pool.aclose()


CANDIDATES: list[type[Candidate]] = [Httpx, Aiohttp, H11, Httptools, Tokenwire]

#: How the gateway hands the pieces of one read to the translator.
FEEDS = {"each piece as received": False, "the pieces of a read joined first": True}


async def cpu_us_translated(pool: Pool, request: Any, join: bool) -> float:
    """CPU µs per chunk of ``gateway.upstream`` + the OpenAI translator, as HTTPProvider runs."""
    translator = translate.get("openai").new_translator(model="m", request_id="r")
    feed = translator.feed
    events = 0
    started = time.process_time()
    async with pool.stream(
        request.method,
        request.url,
        {**request.headers, **HEADERS_EXTRA},
        request.body,
        read_timeout=60.0,
        connect_timeout=10.0,
        pool_timeout=10.0,
    ) as response:
        while pieces := await response.read():
            if join:
                events += len(feed(b"".join(pieces) if len(pieces) > 1 else pieces[0]))
            else:
                for piece in pieces:
                    events += len(feed(piece))
    events += len(translator.close())
    spent = time.process_time() - started
    if events < LONG:
        raise RuntimeError(f"translated {events} events of {LONG} chunks")
    return spent / LONG * 1e6


async def first_chunk_ms(candidate: Candidate, request: Any) -> float:
    started = time.perf_counter()
    first = 0.0
    async for piece in candidate.stream(request):
        if not first and FIRST in piece:
            first = time.perf_counter()
    if not first:
        raise RuntimeError(f"{candidate.name}: no content chunk")
    return (first - started) * 1000


async def cpu_us_per_chunk(candidate: Candidate, request: Any, streams: int) -> float:
    started = time.process_time()
    for _ in range(streams):
        size = 0
        async for piece in candidate.stream(request):
            size += len(piece)
        if size < LONG * 10:
            raise RuntimeError(f"{candidate.name}: short body ({size} bytes)")
    spent = time.process_time() - started
    return spent / (LONG * streams) * 1e6


async def run(
    url: str, rounds: int, requests: int, streams: int
) -> tuple[dict[str, Figures], dict[str, list[float]]]:
    fmt = translate.get("openai")
    short = fmt.build_request(build(model="short", messages="hi"), base_url=url, api_key="sk-x")
    long = fmt.build_request(build(model="long", messages="hi"), base_url=url, api_key="sk-x")
    candidates = [cls() for cls in CANDIDATES]
    figures = {c.name: Figures() for c in candidates}
    feeds: dict[str, list[float]] = {name: [] for name in FEEDS}
    feed_pool = Pool()
    for candidate in candidates:
        await candidate.start()
        await first_chunk_ms(candidate, short)  # warm-up: connect, first allocations
    try:
        for r in range(rounds):
            for candidate in candidates:
                fig = figures[candidate.name]
                for _ in range(requests):
                    fig.first_ms.append(await first_chunk_ms(candidate, short))
                    fig.ports.add(candidate.port)
                fig.cpu_us.append(await cpu_us_per_chunk(candidate, long, streams))
                fig.ports.add(candidate.port)
            for name, join in FEEDS.items():
                feeds[name].append(await cpu_us_translated(feed_pool, long, join))
            print(f"round {r + 1}/{rounds} done", flush=True)
    finally:
        for candidate in candidates:
            await candidate.aclose()
        await feed_pool.aclose()
    return figures, feeds


def feed_batches(repeats: int = 15) -> list[list[str]]:
    """The OpenAI translator alone, fed the fake's 2,000 events ``n`` to a read: a feed
    per event, or the read's events joined into one feed. µs per event, median."""
    import importlib

    from tokenwire.testing.upstream import RENDERERS, RecordedRequest, Script

    renderer = importlib.import_module(RENDERERS["openai"])
    body = b'{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}'
    recorded = RecordedRequest(method="POST", path="/v1/chat/completions", headers={}, body=body)
    events = list(renderer.render(Script(text=tb.words(LONG)), model="m", request=recorded))
    fmt = translate.get("openai")

    def once(n: int, join: bool) -> float:
        translator = fmt.new_translator(model="m", request_id="r")
        started = time.process_time()
        for i in range(0, len(events), n):
            read = events[i : i + n]
            if join:
                translator.feed(b"".join(read) if len(read) > 1 else read[0])
            else:
                for piece in read:
                    translator.feed(piece)
        translator.close()
        return (time.process_time() - started) / len(events) * 1e6

    rows = []
    for n in (1, 4, 16):
        each = statistics.median(once(n, False) for _ in range(repeats))
        joined = statistics.median(once(n, True) for _ in range(repeats))
        rows.append([str(n), f"{each:.2f}", f"{joined:.2f}", f"{each / joined:.2f}x"])
    return rows


async def through_gateway(
    upstream: tb.UpstreamProcess, rounds: int, requests: int, streams: int
) -> dict[str, dict[str, list[float]]]:
    """``{"1.1" | "2": {"added_ms": [...], "cpu_us": [...]}}`` through one gateway."""
    from tokenwire.testing import loadgen as lg

    models = {
        f"h{version}-{name}": {
            "provider": "openai",
            "base_url": upstream.url + "/v1",
            "upstream_model": name,
            "http": version,
        }
        for version in ("1.1", "2")
        for name in SCRIPTS
    }
    out: dict[str, dict[str, list[float]]] = {
        v: {"added_ms": [], "cpu_us": []} for v in ("1.1", "2")
    }
    first = lg.FIRST_OPENAI
    with tempfile.TemporaryDirectory(prefix="bench-upstream-") as tmp:
        config = Path(tmp) / "gateway.toml"
        config.write_text(tb.gateway_config(models))
        port = tb.free_port()
        with tb.ServedProcess(
            tb.gateway_argv(str(config), port), port, ready_path="/healthz"
        ) as gw:
            for version in out:  # warm-up
                warm = lg.openai_request(port, f"h{version}-short")
                await lg.first_chunk_times(port, warm, 5, first=first)
            for r in range(rounds):
                direct = await lg.first_chunk_times(
                    upstream.port, lg.openai_request(upstream.port, "short"), requests, first=first
                )
                for version, fig in out.items():
                    request = lg.openai_request(port, f"h{version}-short")
                    via = await lg.first_chunk_times(port, request, requests, first=first)
                    fig["added_ms"].append(
                        (statistics.median(via) - statistics.median(direct)) * 1e3
                    )
                    reader, writer = await lg.connect(port)
                    try:
                        cpu0 = tb.cpu_seconds(gw.pids())
                        for _ in range(streams):
                            long = lg.openai_request(port, f"h{version}-long")
                            ex = await lg.exchange(reader, writer, long, first=first)
                            if ex.frames < LONG:
                                raise RuntimeError(f"http {version}: {ex.frames} frames")
                        spent = tb.cpu_seconds(gw.pids()) - cpu0
                    finally:
                        writer.close()
                    fig["cpu_us"].append(spent / (streams * LONG) * 1e6)
                print(f"gateway round {r + 1}/{rounds} done", flush=True)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--requests", type=int, default=40, help="first-chunk requests a round")
    parser.add_argument("--streams", type=int, default=3, help="2,000-chunk streams a round")
    parser.add_argument("--loop", choices=("uvloop", "asyncio"), default="uvloop")
    parser.add_argument("--gateway-rounds", type=int, default=5, help="0: no gateway phase")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    load_before = tb.loadavg()
    with tb.fake_upstream_process(SCRIPTS) as upstream:
        work = run(upstream.url, args.rounds, args.requests, args.streams)
        if args.loop == "uvloop":
            import uvloop

            figures, feeds = uvloop.run(work)
        else:
            figures, feeds = asyncio.run(work)
        gateway = None
        if args.gateway_rounds:
            gateway = asyncio.run(
                through_gateway(upstream, args.gateway_rounds, args.requests, args.streams)
            )

    base = figures[Httpx.name]
    base_first = statistics.median(base.first_ms)
    base_cpu = statistics.median(base.cpu_us)
    rows = []
    for name, fig in figures.items():
        first = statistics.median(fig.first_ms)
        cpu = statistics.median(fig.cpu_us)
        rows.append(
            [
                name,
                f"{first:.3f}",
                f"{tb.percentile(fig.first_ms, 0.99):.3f}",
                f"{base_first / first:.2f}x",
                f"{cpu:.1f}",
                f"{base_cpu / cpu:.2f}x",
                str(len(fig.ports)),
            ]
        )
    columns = [
        "client",
        "first chunk, median (ms)",
        "p99 (ms)",
        "httpx / this",
        "CPU µs per chunk",
        "httpx / this",
        "connections",
    ]
    table = md_table(columns, rows)
    print("\n".join(table))
    feed_rows = [[name, f"{statistics.median(v):.2f}"] for name, v in feeds.items()]
    feed_table = md_table(
        ["gateway.upstream + OpenAI translator, fed", "CPU µs per chunk"], feed_rows
    )
    print("\n".join(feed_table))
    batch_table = md_table(
        ["events a read", "a feed each (µs/event)", "joined, one feed", "each / joined"],
        feed_batches(),
    )
    print("\n".join(batch_table))
    gateway_table: list[str] = []
    if gateway is not None:
        h2_added = statistics.median(gateway["2"]["added_ms"])
        h2_cpu = statistics.median(gateway["2"]["cpu_us"])
        gateway_rows = []
        for version, label in (("2", 'httpx (`http = "2"`)'), ("1.1", "gateway.upstream")):
            added = statistics.median(gateway[version]["added_ms"])
            cpu = statistics.median(gateway[version]["cpu_us"])
            gateway_rows.append(
                [
                    label,
                    f"{added:.3f}",
                    f"{h2_added / added:.2f}x",
                    f"{cpu:.1f}",
                    f"{h2_cpu / cpu:.2f}x",
                ]
            )
        gateway_table = md_table(
            [
                "gateway's upstream client",
                "added to first chunk (ms)",
                "httpx / this",
                "gateway CPU µs per chunk",
                "httpx / this",
            ],
            gateway_rows,
        )
        print("\n".join(gateway_table))
    versions = ", ".join(
        f"{p} {pkg_version(p)}" for p in ("httpx", "httpcore", "h11", "aiohttp", "httptools")
    )
    samples = len(base.first_ms)
    lines = [
        "## upstream",
        "",
        *header("bench/upstream.py", load_before),
        f"- clients: {versions}; event loop: {args.loop}",
        "",
        "The gateway's upstream HTTP/1.1 client candidates side by side in one run, in "
        'front of the same fake OpenAI upstream (`FakeUpstream("openai")`, its own '
        f"process, 127.0.0.1), rounds interleaved ({args.rounds} rounds). First chunk: "
        "request written -> first body piece holding content, over "
        f"{samples} sequential requests on the pooled connection (4-word answers). CPU: "
        f"this process's `time.process_time` over {args.streams} streams of {LONG} chunks, "
        "per chunk, median of the rounds (it depends on how many chunks each socket read "
        "brings, so on the load: compare the rows of one run). Connections: distinct "
        "local ports over the whole run. Ratios above 1 are better than httpx.",
        "",
        *table,
        "",
        "The same 2,000-chunk stream through `gateway.upstream` and the OpenAI translator "
        "(what `HTTPProvider` runs), the body pieces of each socket read fed one by one "
        "as httptools cut them, or joined first, as `HTTPProvider` does (median of the "
        "rounds; with one chunk a read the two are the same):",
        "",
        *feed_table,
        "",
        "The translator alone (no I/O, deterministic), fed the fake's events n to a read:",
        "",
        *batch_table,
    ]
    if gateway_table:
        lines += [
            "",
            f"Through one `tokenwire serve` worker ({args.gateway_rounds} interleaved rounds): "
            "OpenAI Chat Completions in and out, the time to the first content chunk minus "
            "the fake's own (median per round, then the median of the rounds), and the "
            f"gateway's CPU per chunk over {args.streams} streams of {LONG} chunks a round:",
            "",
            *gateway_table,
        ]
    if not args.no_write:
        write_section("upstream", "\n".join(lines), keep="Choice")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
