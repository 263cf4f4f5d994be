"""The binary binding over WebSocket (docs/binary.md section 6.2), against ``tokenwire serve``.

One socket, channels: the demo model and a translated vendor upstream, many
streams at once, a tool loop, cancel, resume after a cut, refusals in the
stream's own words, keys, and the protocol errors that close the socket.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.client.client_servers import ServerProcess, free_port, gateway_argv
from tests.client.test_client_cancel import hang_up_latency
from tests.client.test_client_gateway import QUESTION, WEATHER
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import ClientConnection, connect

from tokenwire import binary, events, lifecycle
from tokenwire.binary import Decoder, FrameType
from tokenwire.gateway.policy.keys import hash_key, new_key
from tokenwire.request import build, dumps
from tokenwire.testing.upstream import FakeUpstream

SUBPROTOCOL = "llm-stream-frames.v1"
VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "binary" / "frames.json"
TIMEOUT = 30.0


def ws(server: ServerProcess, **headers: str) -> ClientConnection:
    return connect(
        f"ws://127.0.0.1:{server.port}/v1/ws",
        subprotocols=[SUBPROTOCOL],  # type: ignore[list-item]
        additional_headers=headers or None,
        open_timeout=TIMEOUT,
        max_size=2 << 20,
    )


def request_frame(channel: int, **fields: Any) -> bytes:
    return binary.encode_frame(FrameType.REQUEST, dumps(build(**fields)), channel=channel)


class Reader:
    """Frames off one socket, sorted by channel: each message is exactly one frame."""

    def __init__(self, conn: ClientConnection) -> None:
        self.conn = conn
        self.by_channel: dict[int, list[binary.Frame]] = {}

    def next(self) -> binary.Frame:
        message = self.conn.recv(timeout=TIMEOUT)
        assert isinstance(message, bytes)
        decoder = Decoder(channels=True)
        frames = decoder.feed(message)
        decoder.close()
        assert len(frames) == 1, frames  # one frame per message
        frame = frames[0]
        assert frame.channel is not None
        self.by_channel.setdefault(frame.channel, []).append(frame)
        return frame

    def until_done(self, channels: set[int]) -> None:
        """Read until every channel ended (stream.end or ERROR)."""
        open_ = set(channels)
        while open_:
            frame = self.next()
            if frame.type == FrameType.ERROR or (
                frame.type == FrameType.EVENT
                and isinstance(binary.decode_event(frame.body), events.StreamEnd)
            ):
                open_.discard(frame.channel)  # type: ignore[arg-type]

    def events(self, channel: int) -> list[events.Event]:
        return [
            binary.decode_event(f.body)
            for f in self.by_channel.get(channel, [])
            if f.type == FrameType.EVENT
        ]

    def error(self, channel: int) -> dict[str, Any] | None:
        errors = [f for f in self.by_channel.get(channel, []) if f.type == FrameType.ERROR]
        return json.loads(errors[-1].body) if errors else None


def tool_follow_up(
    question: str, tools: list[dict[str, Any]], call: events.ToolCall, result: str
) -> Any:
    """The next turn of a tool loop (§4.8): the question, the model's call, its result."""
    return build(
        model="demo",
        tools=tools,
        messages=[
            {"role": "user", "content": question},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": call.id, "name": call.name, "arguments": call.arguments}],
            },
            {"role": "tool", "tool_call_id": call.id, "content": result},
        ],
    )


def text_of(evs: list[events.Event]) -> str:
    return "".join(e.text for e in evs if isinstance(e, events.ContentDelta))


def test_one_stream_on_a_channel(gateway: ServerProcess) -> None:
    with ws(gateway) as conn:
        conn.send(request_frame(7, model="demo", messages="Hello there"))
        reader = Reader(conn)
        reader.until_done({7})
    evs = reader.events(7)
    assert evs[0].type == "stream.start" and evs[-1].type == "stream.end"
    assert [e.seq for e in evs] == list(range(len(evs)))
    body = b"".join(binary.encode_event(e) for e in evs)
    report = lifecycle.validate(body, framing="binary")
    assert report.ok and report.violations == [], report.violations
    assert "Hello there" in text_of(evs)
    assert set(reader.by_channel) == {7}


def test_many_streams_at_once_on_one_socket(gateway: ServerProcess) -> None:
    channels = set(range(1, 21))
    with ws(gateway) as conn:
        for c in channels:
            conn.send(request_frame(c, model="demo", messages=f"Hello number {c}"))
        reader = Reader(conn)
        reader.until_done(channels)
    for c in channels:
        evs = reader.events(c)
        assert [e.seq for e in evs] == list(range(len(evs))), c
        assert f"number {c}" in text_of(evs)


def test_a_tool_loop_over_the_socket(gateway: ServerProcess) -> None:
    request = build(model="demo", messages=QUESTION, tools=[WEATHER])
    with ws(gateway) as conn:
        conn.send(binary.encode_frame(FrameType.REQUEST, dumps(request), channel=1))
        reader = Reader(conn)
        reader.until_done({1})
        (call,) = [e for e in reader.events(1) if isinstance(e, events.ToolCall)]
        assert call.name == "get_weather" and json.loads(call.arguments) == {"city": "Vienna"}
        follow = tool_follow_up(QUESTION, [WEATHER], call, "Vienna: 24C")
        conn.send(binary.encode_frame(FrameType.REQUEST, dumps(follow), channel=2))
        reader.until_done({2})
    assert "Vienna: 24C" in text_of(reader.events(2))


def test_a_refusal_is_an_error_frame_on_its_channel(gateway: ServerProcess) -> None:
    with ws(gateway) as conn:
        conn.send(request_frame(3, model="no-such-model", messages="hi"))
        conn.send(request_frame(4, model="demo", messages="still served"))
        reader = Reader(conn)
        reader.until_done({3, 4})
    error = reader.error(3)
    assert error is not None and error["code"] == "model_not_found", error
    assert error["message"].startswith("404: ")
    assert "still served" in text_of(reader.events(4))


def test_cancel_ends_the_channel_and_the_upstream(
    slow_gateway: ServerProcess, slow_upstream: FakeUpstream
) -> None:
    before = len(slow_upstream.disconnects)
    not_resumable = {"tokenwire:resumable": False}
    with ws(slow_gateway) as conn:
        conn.send(request_frame(5, model="slow", messages="talk", extensions=not_resumable))
        reader = Reader(conn)
        while sum(isinstance(e, events.ContentDelta) for e in reader.events(5)) < 3:
            reader.next()
        conn.send(binary.encode_frame(FrameType.CANCEL, channel=5))
        left = time.monotonic()
        reader.until_done({5})
    assert reader.error(5) == {"code": "cancelled", "message": "cancelled by the client"}
    hang_up_latency(slow_upstream, before, left)  # waits (bounded) for the upstream cut


def test_a_cut_socket_resumes_on_another(slow_gateway: ServerProcess) -> None:
    with ws(slow_gateway) as conn:
        conn.send(request_frame(1, model="slow", messages="talk"))
        reader = Reader(conn)
        while len(reader.events(1)) < 4:
            reader.next()
    # The socket is gone mid-stream (resumable on this gateway: [resume] default).
    meta = [f for f in reader.by_channel[1] if f.type == FrameType.META]
    assert meta, "the resume token comes first, in a META frame"
    token = json.loads(meta[0].body)["resume_token"]
    seen = reader.events(1)
    start = seen[0]
    assert isinstance(start, events.StreamStart) and start.request_id
    resume = {"request_id": start.request_id, "after": seen[-1].seq, "token": token}
    with ws(slow_gateway) as conn:
        conn.send(binary.encode_frame(FrameType.RESUME, json.dumps(resume).encode(), channel=9))
        again = Reader(conn)
        while len(again.events(9)) < 3:
            again.next()
        conn.send(binary.encode_frame(FrameType.CANCEL, channel=9))
    rest = again.events(9)
    assert [e.seq for e in rest] == list(range(seen[-1].seq + 1, seen[-1].seq + 1 + len(rest)))


def test_a_wrong_resume_token_is_a_missing_stream(slow_gateway: ServerProcess) -> None:
    with ws(slow_gateway) as conn:
        resume = {"request_id": "nobody", "after": 0, "token": "x" * 43}
        conn.send(binary.encode_frame(FrameType.RESUME, json.dumps(resume).encode(), channel=1))
        reader = Reader(conn)
        reader.until_done({1})
    error = reader.error(1)
    assert error is not None and error["message"].startswith("404"), error


@pytest.fixture(scope="module")
def keyed_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, str]]:
    key = new_key()
    config = tmp_path_factory.mktemp("keyed") / "gateway.toml"
    # engine granian: /v1/ws needs WebSocket upgrades (the h1 engine answers them 501).
    config.write_text(
        f'[server]\nengine = "granian"\n[[keys]]\nid = "team"\nhash = "{hash_key(key)}"\n'
    )
    port = free_port()
    server = ServerProcess(gateway_argv(port, config), port).start()
    try:
        yield server, key
    finally:
        server.stop()


def test_keys_hold_on_the_socket(keyed_gateway: tuple[ServerProcess, str]) -> None:
    server, key = keyed_gateway
    with ws(server) as conn:  # no key: the socket opens, no stream is served
        conn.send(request_frame(1, model="demo", messages="hi"))
        stranger = Reader(conn)
        stranger.until_done({1})
    error = stranger.error(1)
    assert error is not None and error["message"].startswith("401"), error
    assert stranger.events(1) == []
    with ws(server, authorization=f"Bearer {key}") as conn:
        conn.send(request_frame(1, model="demo", messages="hi there"))
        holder = Reader(conn)
        holder.until_done({1})
    assert "hi there" in text_of(holder.events(1))


def test_an_unknown_extension_frame_is_skipped_whole(gateway: ServerProcess) -> None:
    """docs/binary.md section 2: "a receiver that does not know one MUST skip it whole";
    one WebSocket message holding one whole extension frame (type 0x41 on a channel)."""
    vectors = json.loads(VECTORS.read_text())["cases"]
    (case,) = [c for c in vectors if c["name"] == "extension-on-a-channel-skipped"]
    with ws(gateway) as conn:
        conn.send(bytes.fromhex(case["hex"]))
        conn.send(request_frame(8, model="demo", messages="still open"))
        reader = Reader(conn)
        reader.until_done({8})
    assert set(reader.by_channel) == {8}  # nothing answered the extension frame
    assert "still open" in text_of(reader.events(8))


def test_protocol_errors_close_the_socket(gateway: ServerProcess) -> None:
    with ws(gateway) as conn:
        conn.send("a text message")
        with pytest.raises(ConnectionClosed) as info:
            while True:
                conn.recv(timeout=TIMEOUT)
    assert info.value.rcvd is not None and info.value.rcvd.code == 1002
    with ws(gateway) as conn:
        two_frames = request_frame(1, model="demo", messages="hi")
        conn.send(two_frames + binary.encode_frame(FrameType.PING, channel=1))
        with pytest.raises(ConnectionClosed):
            while True:
                conn.recv(timeout=TIMEOUT)


def test_the_handshake_needs_the_subprotocol(gateway: ServerProcess) -> None:
    with pytest.raises(InvalidStatus):
        connect(f"ws://127.0.0.1:{gateway.port}/v1/ws", open_timeout=TIMEOUT)


def test_a_page_of_another_origin_cannot_open_the_socket(gateway: ServerProcess) -> None:
    url = f"ws://127.0.0.1:{gateway.port}/v1/ws"
    with pytest.raises(InvalidStatus):
        connect(url, subprotocols=[SUBPROTOCOL], origin="http://evil.example", open_timeout=TIMEOUT)  # type: ignore[list-item,arg-type]
    same = f"http://127.0.0.1:{gateway.port}"
    with connect(url, subprotocols=[SUBPROTOCOL], origin=same, open_timeout=TIMEOUT) as conn:  # type: ignore[list-item,arg-type]
        conn.send(request_frame(1, model="demo", messages="from the playground"))
        reader = Reader(conn)
        reader.until_done({1})
    assert "from the playground" in text_of(reader.events(1))


def test_the_channels_are_bounded(gateway: ServerProcess) -> None:
    # 64 paced streams are open at once on one socket; the 65th is refused.
    pace = {"tokenwire:demo": {"delay_ms": 200}}
    with ws(gateway) as conn:
        for c in range(65):
            conn.send(request_frame(c, model="demo", messages="hi", extensions=pace))
        reader = Reader(conn)
        while reader.error(64) is None:
            reader.next()
    assert reader.error(64) == {
        "code": "overloaded",
        "message": "at most 64 streams per connection",
    }
