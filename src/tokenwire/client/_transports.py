"""Which frames transport a client asked for, and the httpx transport that carries it.

``FramesFactory`` holds the choice (``"ws"`` or ``"webtransport"``) and where
the connection goes; ``Client`` and ``AsyncClient`` turn it into their httpx
transport (``SyncFramesTransport`` / ``AsyncFramesTransport``).
"""

from __future__ import annotations

import ssl
from typing import Final

import httpx

from ._frames import AsyncFramesTransport, FramesTransportName, Session
from ._ws import connect_websocket
from ._wt import connect_webtransport

__all__ = ["FramesFactory", "WEBSOCKET_PATH"]

#: The gateway's WebSocket route for the binding (docs/binary.md section 6.2).
WEBSOCKET_PATH: Final = "/v1/ws"


class FramesFactory:
    """Builds the async frames transport for ``kind`` (see ``Client``'s ``transport``)."""

    def __init__(
        self,
        kind: FramesTransportName,
        base_url: str,
        frames_url: str | None,
        *,
        stream_path: str,
        resume_path: str,
        max_frame_bytes: int,
        http2: bool,
        cafile: str | None,
    ) -> None:
        base = httpx.URL(base_url)
        prefix = base.path.rstrip("/")
        if frames_url is None:
            if kind == "webtransport":
                raise ValueError(
                    "transport='webtransport' needs frames_url: the gateway's WebTransport "
                    "session URL (https://HOST:WEBTRANSPORT_PORT/v1/wt)"
                )
            scheme = "wss" if base.scheme == "https" else "ws"
            frames_url = str(base.copy_with(scheme=scheme, path=prefix + WEBSOCKET_PATH))
        self.kind = kind
        self.url = frames_url
        self.stream_path = prefix + stream_path
        self.resume_prefix = prefix + resume_path.partition("{")[0]
        self.max_frame_bytes = max_frame_bytes
        self.http2 = http2
        self.cafile = cafile

    async def _connect(self, headers: list[tuple[str, str]], timeout: float | None) -> Session:
        if self.kind == "ws":
            context = ssl.create_default_context(cafile=self.cafile) if self.cafile else None
            return await connect_websocket(
                self.url, headers, timeout, max_frame_bytes=self.max_frame_bytes, ssl=context
            )
        return await connect_webtransport(
            self.url, headers, timeout, max_frame_bytes=self.max_frame_bytes, cafile=self.cafile
        )

    def build(self) -> AsyncFramesTransport:
        """The transport; built on the event loop that will drive it."""
        verify: ssl.SSLContext | bool = (
            ssl.create_default_context(cafile=self.cafile) if self.cafile else True
        )
        return AsyncFramesTransport(
            self._connect,
            stream_path=self.stream_path,
            resume_prefix=self.resume_prefix,
            http=httpx.AsyncHTTPTransport(http2=self.http2, verify=verify),
        )
