"""The HTTP/1.1 server's limits and its timeouts and socket options (``Settings``)."""

from __future__ import annotations

from typing import Final

#: The request line and headers (and the trailers), at most (granian's max_buffer_size).
MAX_HEAD: Final = 64 * 1024
#: Header fields in one request, at most.
MAX_HEADERS: Final = 100
#: A chunk-size line with its extensions, at most.
MAX_CHUNK_LINE: Final = 4096
#: Request body bytes buffered for the app before the socket stops being read.
BODY_HIGH_WATER: Final = 256 * 1024
#: Response bytes the transport may hold before ``send`` waits for the client to read.
WRITE_HIGH_WATER: Final = 64 * 1024


class Settings:
    """The server's timeouts and socket options (``[server]`` keys of the same names)."""

    __slots__ = ("header_timeout_s", "idle_timeout_s", "write_timeout_s", "send_buffer_bytes")

    def __init__(
        self,
        *,
        header_timeout_s: float = 10.0,
        idle_timeout_s: float = 60.0,
        write_timeout_s: float = 30.0,
        send_buffer_bytes: int = 0,
    ) -> None:
        self.header_timeout_s = header_timeout_s
        self.idle_timeout_s = idle_timeout_s
        self.write_timeout_s = write_timeout_s
        self.send_buffer_bytes = send_buffer_bytes
