"""Clients of the binary binding's own transports that never read (docs/binary.md 6.2, 6.3).

A storm of WebSocket and WebTransport sessions asks ``firehose`` (endless
deltas) for a stream and never reads: the write deadline ends every stream as
it does over HTTP (the request guard is in front of their routes too), the
WebTransport writer waits on aioquic's send buffer instead of filling it, and
the worker stays within 100 MiB of its baseline and comes back within 10 %.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import socket
import ssl
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.hostile import hostile_procs as hp

from tokenwire import binary
from tokenwire.binary import FrameType
from tokenwire.testing import processes
from tokenwire.testing.certs import self_signed

pytest.importorskip("aioquic", reason="the webtransport extra (aioquic)")

SESSIONS = 30
BOUND_MIB = 100
WRITE_TIMEOUT_S = 3


class Served:
    def __init__(self, gateway: processes.ServedProcess, wt_port: int, ca: Path) -> None:
        self.gateway = gateway
        self.wt_port = wt_port
        self.ca = ca
        self.context = ssl.create_default_context(cafile=str(ca))

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.gateway.port}"

    def active(self) -> float:
        """``tokenwire_streams_active`` summed over models: the streams still served."""
        text = httpx.get(self.url + "/metrics", verify=self.context, timeout=30).text
        total = 0.0
        for line in text.splitlines():
            if line.startswith("tokenwire_streams_active{"):
                total += float(line.rpartition(" ")[2])
        return total


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    pytest.importorskip("cryptography", reason="certificates are made with cryptography")
    workdir = tmp_path_factory.mktemp("frames-storm")
    cert, key, ca = self_signed(workdir)
    wt_port = processes.free_udp_port()
    server = {
        "write_timeout_s": WRITE_TIMEOUT_S,
        "certfile": str(cert),
        "keyfile": str(key),
        "webtransport_port": wt_port,
    }
    path = workdir / "gateway.toml"
    path.write_text(hp.config(server))
    port = processes.free_port()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(hp.HERE), os.environ.get("PYTHONPATH")])),
    }
    argv = processes.gateway_argv(str(path), port)
    context = ssl.create_default_context(cafile=str(ca))
    with processes.ServedProcess(argv, port, tls=context, env=env) as gateway:
        yield Served(gateway, wt_port, ca)


def _request_frame(channel: int | None) -> bytes:
    return binary.encode_frame(FrameType.REQUEST, hp.body(), channel=channel)


# --- a WebSocket client that never reads ------------------------------------------------


def _masked(payload: bytes) -> bytes:
    """One client-to-server binary WebSocket message (RFC 6455 5.2: masked)."""
    mask = os.urandom(4)
    size = len(payload)
    head = b"\x82" + (bytes([0x80 | size]) if size < 126 else b"\xfe" + struct.pack(">H", size))
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def _ws_never_reading(served: Served) -> ssl.SSLSocket:
    raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    raw.settimeout(hp.DEADLINE_S)
    raw.connect(("127.0.0.1", served.gateway.port))
    sock = served.context.wrap_socket(raw, server_hostname="localhost")
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(
        (
            f"GET /v1/ws HTTP/1.1\r\nHost: 127.0.0.1:{served.gateway.port}\r\n"
            "Upgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
            "Sec-WebSocket-Protocol: llm-stream-frames.v1\r\n\r\n"
        ).encode()
    )
    answer = b""
    while b"\r\n\r\n" not in answer:
        answer += sock.recv(1)  # the head only: nothing of the stream is read
    assert answer.startswith(b"HTTP/1.1 101"), answer
    sock.sendall(_masked(_request_frame(1)))
    return sock


# --- a WebTransport client that never reads ---------------------------------------------


def _wt_protocol() -> Any:
    from aioquic.asyncio.protocol import QuicConnectionProtocol
    from aioquic.h3.connection import H3Connection
    from aioquic.h3.events import HeadersReceived

    class NeverReading(QuicConnectionProtocol):
        """Opens the session and one stream, then drops every datagram: no ACK, no read."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.h3 = H3Connection(self._quic, enable_webtransport=True)
            self.status: asyncio.Future[int] = asyncio.get_running_loop().create_future()
            self.deaf = False

        def datagram_received(self, data: bytes, addr: Any) -> None:
            if not self.deaf:
                super().datagram_received(data, addr)

        def quic_event_received(self, event: Any) -> None:
            for h3_event in self.h3.handle_event(event):
                if isinstance(h3_event, HeadersReceived) and not self.status.done():
                    self.status.set_result(int(dict(h3_event.headers)[b":status"]))

    return NeverReading


async def _wt_storm(served: Served, count: int, until: Any) -> None:
    from aioquic.asyncio.client import connect
    from aioquic.h3.connection import H3_ALPN
    from aioquic.quic.configuration import QuicConfiguration

    configuration = QuicConfiguration(
        is_client=True,
        alpn_protocols=H3_ALPN,
        server_name="localhost",
        max_datagram_frame_size=65536,
    )
    configuration.load_verify_locations(str(served.ca))
    protocol = _wt_protocol()
    async with contextlib.AsyncExitStack() as stack:
        for _ in range(count):
            client = await stack.enter_async_context(
                connect(
                    "127.0.0.1",
                    served.wt_port,
                    configuration=configuration,
                    create_protocol=protocol,
                )
            )
            session = client._quic.get_next_available_stream_id()
            client.h3.send_headers(
                session,
                [
                    (b":method", b"CONNECT"),
                    (b":scheme", b"https"),
                    (b":authority", f"localhost:{served.wt_port}".encode()),
                    (b":path", b"/v1/wt"),
                    (b":protocol", b"webtransport"),
                ],
            )
            client.transmit()
            assert await asyncio.wait_for(client.status, hp.DEADLINE_S) == 200
            stream = client.h3.create_webtransport_stream(session, is_unidirectional=False)
            client._quic.send_stream_data(stream, _request_frame(None), end_stream=True)
            client.transmit()
            client.deaf = True
        await asyncio.to_thread(until)


# --- the storm ----------------------------------------------------------------------------


def _warm_up(served: Served) -> None:
    for _ in range(3):
        response = httpx.post(
            served.url + "/v1/stream",
            content=hp.body("demo"),
            headers={"content-type": hp.MEDIA_TYPE},
            verify=served.context,
            timeout=60,
        )
        assert response.status_code == 200


def test_never_reading_sessions_are_ended_and_their_memory_bounded(served: Served) -> None:
    _warm_up(served)
    gateway = served.gateway
    baseline = hp.rss_mib(gateway)
    peak = baseline
    seen_active = 0.0

    def all_ended() -> bool:
        nonlocal peak, seen_active
        peak = max(peak, hp.rss_mib(gateway))
        active = served.active()
        seen_active = max(seen_active, active)
        return seen_active > 0 and active == 0

    # WebSocket: half the storm; WebTransport: the other half, at the same time.
    sockets = [_ws_never_reading(served) for _ in range(SESSIONS // 2)]
    started = time.monotonic()
    try:
        asyncio.run(
            _wt_storm(served, SESSIONS // 2, lambda: hp.wait_for(all_ended, "every stream ended"))
        )
    finally:
        for sock in sockets:
            sock.close()
    ended_after = time.monotonic() - started
    growth = peak - baseline
    print(f"baseline {baseline:.1f} MiB, peak +{growth:.1f}, ended after {ended_after:.1f} s")
    # Bounded: each stream holds at most its outbox high-water and a send buffer.
    assert growth <= BOUND_MIB, (
        f"{SESSIONS} never-reading sessions grew the worker {growth:.1f} MiB"
    )

    def back() -> bool:
        return hp.rss_mib(gateway) <= baseline * 1.10

    hp.wait_for(back, f"the worker's memory back within 10 % of {baseline:.1f} MiB")
    assert httpx.get(served.url + "/healthz", verify=served.context, timeout=30).status_code == 200
