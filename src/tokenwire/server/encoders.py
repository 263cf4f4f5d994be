"""How a stream's events become bytes: SSE's headers, and the binary binding's ``FramesEncode``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, TypeAlias

from .. import binary
from .. import events as ev

#: An event encoder: one standard event -> the bytes to put on the wire.
Encode: TypeAlias = Callable[[ev.Event], bytes]


#: Response headers of every stream. ``no-cache`` and ``X-Accel-Buffering: no``
#: keep intermediaries (nginx in particular) from buffering the events (§3).
SSE_HEADERS: Final[list[tuple[bytes, bytes]]] = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


class FramesEncode:
    """The ``Encode`` of the binary binding (docs/binary.md): frames instead of SSE.

    A stream answered with it sends ``headers`` and ``PING`` frames as its
    keep-alive; the events, their order and their seqs are the same.
    """

    __slots__ = ("payload", "headers", "keepalive")

    def __init__(self, payload: binary.Payload) -> None:
        self.payload = payload
        media_type = f"{binary.MEDIA_TYPE}; payload={payload}; version={ev.VERSION}"
        self.headers = [(b"content-type", media_type.encode()), *SSE_HEADERS[1:]]
        self.keepalive = binary.encode_frame(binary.FrameType.PING)

    def __call__(self, event: ev.Event) -> bytes:
        return binary.encode_event(event, payload=self.payload)


#: One encoder per payload encoding, made once.
FRAMES: Final[dict[str, FramesEncode]] = {p: FramesEncode(p) for p in binary.PAYLOADS}
