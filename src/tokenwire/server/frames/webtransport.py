"""The binary binding over WebTransport (docs/binary.md section 6.3), on aioquic.

An HTTP/3 server on UDP beside the gateway's TCP port. A client opens a
WebTransport session (extended CONNECT to ``path``), then one bidirectional
stream per request: it writes one ``REQUEST`` (or ``RESUME``) frame and
finishes its side; the stream is served by ``channel.serve`` (through
the app's own HTTP routes, with the session's headers, so keys and limits
apply as over HTTP) and its frames, without channels, come back on the same
stream, which the server then finishes. Resetting the stream is the hang-up.

aioquic (the ``webtransport`` extra) is imported only when this is started.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, Final

from ... import binary
from ...binary import FrameType
from ...errors import FramingError
from .channel import Channel, Routes, client_headers, serve

__all__ = ["WebTransportServer"]

DEFAULT_MAX_STREAMS: Final = 64
#: Bytes a stream may hold unacknowledged in aioquic's send buffer before its
#: writer waits: the QUIC connection's own window, as ``outbox.OUTBOX_HIGH_WATER``
#: is the HTTP sender's. aioquic keeps whatever it is given; without this a
#: client that never reads would make the server buffer the whole stream.
SEND_HIGH_WATER: Final = 256 * 1024


def _protocol_class() -> Any:
    """The QUIC protocol class, built on first use (aioquic is imported here only)."""
    from aioquic.asyncio.protocol import QuicConnectionProtocol
    from aioquic.h3.connection import H3Connection
    from aioquic.h3.events import HeadersReceived, WebTransportStreamDataReceived
    from aioquic.quic.events import ConnectionTerminated, ProtocolNegotiated, StreamReset

    class Protocol(QuicConnectionProtocol):
        server: WebTransportServer

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.h3: Any = None
            self.sessions: dict[int, dict[str, Any]] = {}  # session id -> base scope
            self.buffers: dict[int, bytearray] = {}
            self.streams: dict[int, Channel] = {}
            #: Set when datagrams came in (acknowledgements free send buffers).
            self.progress = asyncio.Event()

        def datagram_received(self, data: bytes | str, addr: Any) -> None:
            super().datagram_received(data, addr)
            self.progress.set()

        def unsent(self, stream_id: int) -> int:
            """Bytes of ``stream_id`` aioquic holds: not yet sent, or sent and not acknowledged."""
            stream = self._quic._streams.get(stream_id)
            return len(stream.sender._buffer) if stream is not None else 0

        async def drained(self, stream_id: int, state: Channel) -> None:
            """Wait until the stream's send buffer is under ``SEND_HIGH_WATER``: the
            writer's backpressure; the request guard's write deadline bounds the wait."""
            while (
                self.unsent(stream_id) > SEND_HIGH_WATER
                and not state.hang_up.is_set()
                and not state.route_done
            ):
                self.progress.clear()
                await self.progress.wait()

        def quic_event_received(self, event: Any) -> None:
            if isinstance(event, ProtocolNegotiated):
                self.h3 = H3Connection(self._quic, enable_webtransport=True)
            elif isinstance(event, StreamReset):
                state = self.streams.get(event.stream_id)
                if state is not None:
                    state.hang_up.set()  # the client cancelled: as an HTTP hang-up
                    self.progress.set()
            elif isinstance(event, ConnectionTerminated):
                for state in self.streams.values():
                    state.hang_up.set()
                self.progress.set()  # writers waiting to drain see the hang-up
            if self.h3 is None:
                return
            for h3_event in self.h3.handle_event(event):
                if isinstance(h3_event, HeadersReceived):
                    self.headers(h3_event.stream_id, h3_event.headers)
                elif isinstance(h3_event, WebTransportStreamDataReceived):
                    self.data(
                        h3_event.session_id,
                        h3_event.stream_id,
                        h3_event.data,
                        h3_event.stream_ended,
                    )

        def respond(self, stream_id: int, status: int, end: bool) -> None:
            headers = [(b":status", str(status).encode())]
            if status == 200:
                headers.append((b"sec-webtransport-http3-draft", b"draft02"))
            self.h3.send_headers(stream_id, headers, end_stream=end)
            self.transmit()

        def headers(self, stream_id: int, raw: list[tuple[bytes, bytes]]) -> None:
            fields = dict(raw)
            if fields.get(b":method") != b"CONNECT" or fields.get(b":protocol") != b"webtransport":
                self.respond(stream_id, 405, end=True)
                return
            if fields.get(b":path", b"").partition(b"?")[0] != self.server.path.encode():
                self.respond(stream_id, 404, end=True)
                return
            authority = fields.get(b":authority", b"")
            origin = fields.get(b"origin")
            if origin is not None and origin.partition(b"://")[2].rstrip(b"/") != authority:
                self.respond(stream_id, 403, end=True)  # as the WebSocket binding (no CORS)
                return
            transport: Any = self._transport
            # The server's one UDP socket has no peer: the peer is the QUIC path's.
            paths = getattr(self._quic, "_network_paths", None) or [None]
            peer = getattr(paths[0], "addr", None)
            sockname = transport.get_extra_info("sockname")
            self.sessions[stream_id] = {
                "headers": [(b"host", authority), *client_headers(raw)],
                "scheme": "https",
                "client": tuple(peer[:2]) if peer else None,
                "server": tuple(sockname[:2]) if sockname else None,
            }
            self.respond(stream_id, 200, end=False)

        def data(self, session_id: int, stream_id: int, data: bytes, ended: bool) -> None:
            base = self.sessions.get(session_id)
            if base is None or stream_id in self.streams:
                return  # an unknown session, or more bytes after the request: ignored
            buffer = self.buffers.setdefault(stream_id, bytearray())
            buffer += data
            limit = self.server.routes.max_frame_bytes + binary.HEAD_BYTES
            if len(buffer) > limit:
                self.fail(stream_id, "the request frame is over the limit")
                return
            if not ended:
                return
            del self.buffers[stream_id]
            decoder = binary.Decoder(max_frame_bytes=self.server.routes.max_frame_bytes)
            try:
                frames = decoder.feed(bytes(buffer))
                decoder.close()
            except FramingError as exc:
                self.fail(stream_id, str(exc))
                return
            if len(frames) != 1 or frames[0].type not in (FrameType.REQUEST, FrameType.RESUME):
                self.fail(stream_id, "a stream carries one REQUEST or RESUME frame")
                return
            if len(self.streams) >= self.server.max_streams:
                error = binary.encode_error(
                    "overloaded", f"at most {self.server.max_streams} streams per session"
                )
                self.write(stream_id, error, end=True)
                return
            state = self.streams[stream_id] = Channel()
            state.task = asyncio.get_running_loop().create_task(
                self.serve(stream_id, frames[0], state, base)
            )

        def write(self, stream_id: int, data: bytes, *, end: bool = False) -> None:
            with contextlib.suppress(Exception):  # a reset stream takes nothing more
                self._quic.send_stream_data(stream_id, data, end_stream=end)
                self.transmit()

        def fail(self, stream_id: int, message: str) -> None:
            self.buffers.pop(stream_id, None)
            self.write(stream_id, binary.encode_error("invalid_request", message), end=True)

        async def serve(
            self, stream_id: int, frame: binary.Frame, state: Channel, base: dict[str, Any]
        ) -> None:
            async def write(data: bytes) -> None:
                if not state.hang_up.is_set():
                    self.write(stream_id, data)
                    await self.drained(stream_id, state)

            try:
                await serve(self.server.routes, base, frame, state, write)
            finally:
                del self.streams[stream_id]
                if not state.hang_up.is_set():
                    self.write(stream_id, b"", end=True)

    return Protocol


class WebTransportServer:
    """WebTransport over HTTP/3 on ``host:port`` (UDP), each stream served through ``routes``."""

    def __init__(
        self,
        routes: Routes,
        *,
        host: str,
        port: int,
        certfile: str,
        keyfile: str,
        path: str = "/v1/wt",
        max_streams: int = DEFAULT_MAX_STREAMS,
    ) -> None:
        self.routes = routes
        self.host, self.port = host, port
        self.certfile, self.keyfile = certfile, keyfile
        self.path = path
        self.max_streams = max_streams
        self._server: Any = None

    async def start(self) -> None:
        """Bind the UDP socket and serve. Raises ``ImportError`` without aioquic."""
        from aioquic.asyncio.server import serve as quic_serve
        from aioquic.h3.connection import H3_ALPN
        from aioquic.quic.configuration import QuicConfiguration

        configuration = QuicConfiguration(
            is_client=False, alpn_protocols=H3_ALPN, max_datagram_frame_size=65536
        )
        configuration.load_cert_chain(self.certfile, self.keyfile)
        protocol = _protocol_class()
        server = self

        def create(*args: Any, **kwargs: Any) -> Any:
            instance = protocol(*args, **kwargs)
            instance.server = server
            return instance

        self._server = await quic_serve(
            self.host, self.port, configuration=configuration, create_protocol=create
        )

    def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
