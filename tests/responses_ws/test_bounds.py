"""Each bound of a Responses WebSocket, hit on a real ``tokenwire serve`` with tight bounds.

Turns per socket, responses in flight, chain bytes, chain time to live, idle
time: each past its bound gets the mode's ``error`` event with its own code
and the config key that sets it; and a client that never reads gets the HTTP
write deadline: its responses are cancelled upstream and the socket is closed.
"""

from __future__ import annotations

import base64
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from tests.gateway.gateway_procs import Gateway
from tests.responses_ws.helpers import client, turn
from websockets.exceptions import ConnectionClosed
from websockets.frames import Frame, Opcode

from tokenwire.testing.processes import words
from tokenwire.testing.upstream import FakeUpstream, RecordedRequest, Script
from tokenwire.testing.waiting import wait_until

TTL_S = 0.3
BOUNDS = {
    "max_turns": 3,
    "max_in_flight": 2,
    "idle_timeout_s": 3.0,
    "chain_ttl_s": TTL_S,
    "max_chain_bytes": 3000,
}
BIG_WORDS = 40_000  # megabytes of events: more than the socket's buffers hold


def script(request: RecordedRequest) -> Script:
    model = request.json()["model"]
    if model == "up-slow":
        return Script(text=words(400), delay_s=0.1)
    if model == "up-big":
        return Script(text=words(BIG_WORDS))
    return Script(text="quick answer")


@pytest.fixture(scope="module")
def tight(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Gateway, FakeUpstream]]:
    with FakeUpstream("openai-responses", script) as fake:
        models = "".join(
            f'[[models]]\nname = "{name}"\nprovider = "openai-responses"\n'
            f'base_url = "{fake.url}"\nupstream_model = "up-{name}"\n'
            for name in ("fast", "slow", "big")
        )
        bounds = "".join(f"{key} = {value}\n" for key, value in BOUNDS.items())
        server = "[server]\nwrite_timeout_s = 1.0\nmax_body_bytes = 20000\n"
        config = f"{server}\n[responses_websocket]\n{bounds}\n{models}"
        workdir: Path = tmp_path_factory.mktemp("responses-ws-bounds")
        with Gateway(workdir, config=config) as gateway:
            yield gateway, fake


def closed_lines(gateway: Gateway) -> list[dict[str, Any]]:
    lines = [msgspec.json.decode(x) for x in gateway.stderr().splitlines() if x.startswith("{")]
    return [line for line in lines if line.get("msg") == "responses_websocket_closed"]


def test_turns_per_socket(tight: tuple[Gateway, FakeUpstream]) -> None:
    gateway, _ = tight
    with client(gateway.url).responses.connect() as conn:
        for _ in range(BOUNDS["max_turns"]):
            assert turn(conn, model="fast", input="hi")[1].type == "response.completed"
        _, refused = turn(conn, model="fast", input="hi")
        assert (refused.type, refused.error.code) == ("error", "socket_turn_limit_reached")
        assert "responses_websocket.max_turns" in refused.error.message
        # Still open: the socket answers the next event.
        conn.response.steer(input="hello", previous_response_id="resp_unknown")
        assert conn.recv().error.code == "response_not_found"


def test_a_message_over_the_body_limit(tight: tuple[Gateway, FakeUpstream]) -> None:
    gateway, _ = tight
    with client(gateway.url).responses.connect() as conn:
        _, refused = turn(conn, model="fast", input="x" * 30_000)
        assert (refused.type, refused.error.code, refused.status) == (
            "error",
            "message_too_large",
            413,
        )
        assert turn(conn, model="fast", input="hi")[1].type == "response.completed"


def test_responses_in_flight_per_socket(tight: tuple[Gateway, FakeUpstream]) -> None:
    gateway, fake = tight
    disconnects = len(fake.disconnects)
    with client(gateway.url).responses.connect() as conn:
        conn.response.create(model="slow", input="one", stream_id="a")
        conn.response.create(model="slow", input="two", stream_id="b")
        created: set[str] = set()
        while created != {"a", "b"}:
            event = conn.recv()
            if event.type == "response.created":
                created.add(event.stream_id)
        conn.response.create(model="fast", input="three", stream_id="c")
        event = conn.recv()
        while event.stream_id != "c":
            event = conn.recv()
        assert (event.type, event.error.code, event.status) == (
            "error",
            "too_many_responses_in_flight",
            429,
        )
        assert "responses_websocket.max_in_flight" in event.error.message
    wait_until(lambda: len(fake.disconnects) >= disconnects + 2, what="both lanes' hang-ups")


def test_chain_bytes_per_socket(tight: tuple[Gateway, FakeUpstream]) -> None:
    gateway, _ = tight
    padding = "x" * 1000
    codes: list[str] = []
    with client(gateway.url).responses.connect() as conn:
        previous = None
        for _ in range(BOUNDS["max_turns"]):
            extra = {"previous_response_id": previous} if previous else {}
            _, last = turn(conn, model="fast", input=padding, **extra)
            if last.type == "error":
                codes.append(last.error.code)
                assert "responses_websocket.max_chain_bytes" in last.error.message
                break
            codes.append(last.type)
            previous = last.response.id
    assert codes[0] == "response.completed"
    assert codes[-1] == "chain_size_limit_reached"


def test_chain_time_to_live(tight: tuple[Gateway, FakeUpstream]) -> None:
    gateway, _ = tight
    with client(gateway.url).responses.connect() as conn:
        _, first = turn(conn, model="fast", input="hi")
        done = time.monotonic()
        wait_until(lambda: time.monotonic() - done > 2 * TTL_S, what="the chain's time to live")
        _, late = turn(conn, model="fast", input="again", previous_response_id=first.response.id)
        assert (late.type, late.error.code) == ("error", "previous_response_not_found")
        assert "chain_ttl_s" in late.error.message


def test_idle_socket_is_closed_with_a_reason(tight: tuple[Gateway, FakeUpstream]) -> None:
    gateway, _ = tight
    with client(gateway.url).responses.connect() as conn:
        event = conn.recv()
        assert (event.type, event.error.code, event.status) == ("error", "socket_idle_timeout", 408)
        assert "responses_websocket.idle_timeout_s" in event.error.message
        with pytest.raises(ConnectionClosed):
            conn.recv()
    wait_until(lambda: any(line["reason"] == "idle" for line in closed_lines(gateway)))


def _never_reading_socket(port: int, create: dict[str, Any]) -> socket.socket:
    """A WebSocket client that sends one ``response.create`` and never reads again."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(
        (
            f"GET /v1/responses HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        ).encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(1)
        assert chunk, "the gateway closed the handshake"
        head += chunk
    assert head.startswith(b"HTTP/1.1 101"), head
    sock.sendall(Frame(Opcode.TEXT, msgspec.json.encode(create)).serialize(mask=True))
    return sock


def test_a_client_that_never_reads_gets_the_write_deadline(
    tight: tuple[Gateway, FakeUpstream],
) -> None:
    gateway, fake = tight
    disconnects = len(fake.disconnects)
    sock = _never_reading_socket(
        gateway.port, {"type": "response.create", "model": "big", "input": "hi"}
    )
    try:
        # The gateway stops generating for it: the upstream request is cancelled
        # long before its megabytes are through, and the socket is closed.
        wait_until(lambda: len(fake.disconnects) > disconnects, timeout=120, what="the hang-up")
        # Closed for the deadline (server.write_timeout_s), as an HTTP stream is.
        wait_until(
            lambda: any(line["reason"] == "write_timeout" for line in closed_lines(gateway)),
            timeout=60,
        )
    finally:
        sock.close()
