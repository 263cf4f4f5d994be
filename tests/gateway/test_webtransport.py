"""The binary binding over WebTransport (docs/binary.md section 6.3), against ``tokenwire serve``.

A Python client on aioquic: one HTTP/3 session, one bidirectional stream per
request. The demo model, a tool loop, many streams on one session, a refusal,
cancel by resetting the stream, and a resume on a new session. (A browser's
``WebTransport`` is not driven here: Chromium accepts a self-signed server
only through ``serverCertificateHashes``, which the headless test setup of
this project does not wire yet; the wire is the same.)
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.client.test_ws_frames import tool_follow_up
from tests.gateway.gateway_procs import Gateway

from tokenwire import binary, events, lifecycle
from tokenwire.binary import FrameType
from tokenwire.request import build, dumps
from tokenwire.testing.certs import webtransport_tls

aioquic = pytest.importorskip("aioquic", reason="the webtransport extra (aioquic)")

from aioquic.asyncio.client import connect  # noqa: E402
from aioquic.asyncio.protocol import QuicConnectionProtocol  # noqa: E402
from aioquic.h3.connection import H3_ALPN, H3Connection  # noqa: E402
from aioquic.h3.events import HeadersReceived, WebTransportStreamDataReceived  # noqa: E402
from aioquic.quic.configuration import QuicConfiguration  # noqa: E402
from aioquic.quic.events import StreamDataReceived  # noqa: E402

TIMEOUT = 30.0
WEATHER: dict[str, Any] = {
    "name": "get_weather",
    "description": "Get current weather for a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}


@pytest.fixture(scope="module")
def wt_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Gateway, int, Path]]:
    pytest.importorskip("cryptography", reason="certificates are made with cryptography")
    workdir = tmp_path_factory.mktemp("wt")
    tls = webtransport_tls(workdir)
    config = tls.server_toml + "[resume]\ndefault = true\n"
    with Gateway(workdir, config=config, tls=(tls.cert, tls.key, tls.ca)) as gw:
        yield gw, tls.port, tls.ca


class Client(QuicConnectionProtocol):  # type: ignore[misc]
    """A WebTransport session: ``open`` it, then ``request`` frames on new streams."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.h3 = H3Connection(self._quic, enable_webtransport=True)
        self.session: int | None = None
        self.status: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.data: dict[int, bytearray] = {}
        self.ended: dict[int, asyncio.Event] = {}
        self.progress = asyncio.Event()

    def quic_event_received(self, event: Any) -> None:
        if isinstance(event, StreamDataReceived) and event.stream_id in self.ended:
            # Our own bidirectional streams: aioquic's client-side H3 does not mark a
            # stream it opened as a WebTransport one, so their bytes are read here.
            self.data.setdefault(event.stream_id, bytearray()).extend(event.data)
            if event.end_stream:
                self.ended[event.stream_id].set()
            self.progress.set()
            return
        for h3_event in self.h3.handle_event(event):
            if isinstance(h3_event, HeadersReceived) and h3_event.stream_id == self.session:
                status = int(dict(h3_event.headers)[b":status"])
                if not self.status.done():
                    self.status.set_result(status)
            elif isinstance(h3_event, WebTransportStreamDataReceived):
                self.data.setdefault(h3_event.stream_id, bytearray()).extend(h3_event.data)
                if h3_event.stream_ended:
                    self.ended.setdefault(h3_event.stream_id, asyncio.Event()).set()
                self.progress.set()

    async def open(self, authority: str, headers: list[tuple[bytes, bytes]] = ()) -> int:  # type: ignore[assignment]
        self.session = self._quic.get_next_available_stream_id()
        self.h3.send_headers(
            self.session,
            [
                (b":method", b"CONNECT"),
                (b":scheme", b"https"),
                (b":authority", authority.encode()),
                (b":path", b"/v1/wt"),
                (b":protocol", b"webtransport"),
                *headers,
            ],
        )
        self.transmit()
        return await asyncio.wait_for(self.status, TIMEOUT)

    def send_frame(self, frame: bytes) -> int:
        assert self.session is not None
        stream_id = self.h3.create_webtransport_stream(self.session, is_unidirectional=False)
        self.ended[stream_id] = asyncio.Event()
        self._quic.send_stream_data(stream_id, frame, end_stream=True)
        self.transmit()
        return stream_id

    async def answer(self, stream_id: int) -> list[binary.Frame]:
        await asyncio.wait_for(self.ended[stream_id].wait(), TIMEOUT)
        decoder = binary.Decoder()
        frames = decoder.feed(bytes(self.data.get(stream_id, b"")))
        decoder.close()
        return frames

    async def wait_events(self, stream_id: int, count: int) -> list[events.Event]:
        async with asyncio.timeout(TIMEOUT):
            while True:
                frames = binary.Decoder().feed(bytes(self.data.get(stream_id, b"")))
                evs = [binary.decode_event(f.body) for f in frames if f.type == FrameType.EVENT]
                if len(evs) >= count:
                    return evs
                self.progress.clear()
                await self.progress.wait()

    def reset(self, stream_id: int) -> None:
        self._quic.reset_stream(stream_id, 0)
        self._quic.stop_stream(stream_id, 0)
        self.transmit()


def run(wt: tuple[Gateway, int, Path], body: Any) -> Any:
    _gw, port, ca = wt
    configuration = QuicConfiguration(
        is_client=True,
        alpn_protocols=H3_ALPN,
        server_name="localhost",
        max_datagram_frame_size=65536,
    )
    configuration.load_verify_locations(str(ca))

    async def go() -> Any:
        async with connect(
            "127.0.0.1", port, configuration=configuration, create_protocol=Client
        ) as client:
            return await body(client, f"localhost:{port}")

    return asyncio.run(go())


def request(**fields: Any) -> bytes:
    return binary.encode_frame(FrameType.REQUEST, dumps(build(**fields)))


def evs_of(frames: list[binary.Frame]) -> list[events.Event]:
    return [binary.decode_event(f.body) for f in frames if f.type == FrameType.EVENT]


def text_of(evs: list[events.Event]) -> str:
    return "".join(e.text for e in evs if isinstance(e, events.ContentDelta))


def test_a_stream_per_request_on_one_session(wt_gateway: tuple[Gateway, int, Path]) -> None:
    async def body(client: Client, authority: str) -> list[list[binary.Frame]]:
        assert await client.open(authority) == 200
        ids = [
            client.send_frame(request(model="demo", messages=f"Hello number {i}"))
            for i in range(10)
        ]
        return [await client.answer(i) for i in ids]

    answers = run(wt_gateway, body)
    for i, frames in enumerate(answers):
        assert all(f.channel is None for f in frames)
        evs = evs_of(frames)
        assert [e.seq for e in evs] == list(range(len(evs)))
        report = lifecycle.validate(b"".join(binary.encode_event(e) for e in evs), framing="binary")
        assert report.ok, report.violations
        assert f"number {i}" in text_of(evs)


def test_a_tool_loop(wt_gateway: tuple[Gateway, int, Path]) -> None:
    question = "What is the weather in Vienna?"

    async def body(client: Client, authority: str) -> str:
        await client.open(authority)
        first = evs_of(
            await client.answer(
                client.send_frame(request(model="demo", messages=question, tools=[WEATHER]))
            )
        )
        (call,) = [e for e in first if isinstance(e, events.ToolCall)]
        follow = tool_follow_up(question, [WEATHER], call, "Vienna: 24C")
        frame = binary.encode_frame(FrameType.REQUEST, dumps(follow))
        return text_of(evs_of(await client.answer(client.send_frame(frame))))

    assert "Vienna: 24C" in run(wt_gateway, body)


def test_a_refusal_is_an_error_frame(wt_gateway: tuple[Gateway, int, Path]) -> None:
    async def body(client: Client, authority: str) -> list[binary.Frame]:
        await client.open(authority)
        return await client.answer(client.send_frame(request(model="nope", messages="hi")))

    (frame,) = run(wt_gateway, body)
    assert frame.type == FrameType.ERROR
    assert json.loads(frame.body)["code"] == "model_not_found"


def test_a_reset_cancels_and_a_new_session_resumes(wt_gateway: tuple[Gateway, int, Path]) -> None:
    pace = {"tokenwire:demo": {"delay_ms": 50}}

    async def first(client: Client, authority: str) -> tuple[list[events.Event], str]:
        await client.open(authority)
        sid = client.send_frame(
            request(model="demo", messages="hi", parameters={"max_tokens": 30}, extensions=pace)
        )
        seen = await client.wait_events(sid, 4)
        frames = binary.Decoder().feed(bytes(client.data[sid]))
        token = json.loads(next(f.body for f in frames if f.type == FrameType.META))
        client.reset(sid)  # resumable: the gateway goes on generating, detached
        return seen, token["resume_token"]

    seen, token = run(wt_gateway, first)
    start = seen[0]
    assert isinstance(start, events.StreamStart) and start.request_id

    async def second(client: Client, authority: str) -> list[events.Event]:
        await client.open(authority)
        resume = {"request_id": start.request_id, "after": seen[-1].seq, "token": token}
        frame = binary.encode_frame(FrameType.RESUME, json.dumps(resume).encode())
        return evs_of(await client.answer(client.send_frame(frame)))

    rest = run(wt_gateway, second)
    assert [e.seq for e in rest] == list(range(seen[-1].seq + 1, rest[-1].seq + 1))
    assert isinstance(rest[-1], events.StreamEnd)


def test_the_session_path_and_origin_are_checked(wt_gateway: tuple[Gateway, int, Path]) -> None:
    async def body(client: Client, authority: str) -> int:
        return await client.open(authority, [(b"origin", b"https://evil.example")])

    assert run(wt_gateway, body) == 403


def test_a_reset_is_a_hang_up_that_cancels(wt_gateway: tuple[Gateway, int, Path]) -> None:
    gw = wt_gateway[0]
    pace = {"tokenwire:demo": {"delay_ms": 50}, "tokenwire:resumable": False}

    async def body(client: Client, authority: str) -> str:
        await client.open(authority)
        sid = client.send_frame(
            request(
                model="demo",
                messages="hi",
                parameters={"max_tokens": 200},
                extensions=pace,
                metadata={"request_id": request_id},
            )
        )
        await client.wait_events(sid, 3)
        client.reset(sid)
        return request_id

    request_id = f"wt-reset-{uuid.uuid4().hex}"
    run(wt_gateway, body)

    def logged() -> dict[str, Any] | None:
        for line in gw.stderr_path.read_text().splitlines():
            if request_id in line and '"msg":"request"' in line:
                return dict(json.loads(line))
        return None

    deadline = asyncio.run(_wait_for(logged))
    assert deadline["disconnected"] is True and deadline["events"] < 200, deadline


async def _wait_for(probe: Any) -> Any:
    """Poll ``probe`` until it returns something (bounded): the gateway logs at a stream's end."""
    async with asyncio.timeout(TIMEOUT):
        while (found := probe()) is None:
            await asyncio.sleep(0.05)  # a bounded poll of a file another process writes
        return found
