"""Bytes in, typed events out: the SSE decoder and the event parser in one loop."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator

from . import events, sse

__all__ = ["aiter_events", "iter_events"]


def iter_events(
    chunks: bytes | Iterable[bytes], *, max_event_bytes: int = 1 << 20
) -> Iterator[events.Event]:
    """Yield typed events from an LLM-Stream SSE body, whole or in chunks.

    Raises ``FramingError`` when an event is over ``max_event_bytes`` and
    ``EventDecodeError`` for an event that is not a valid envelope. Lifecycle
    rules are not checked here; use ``tokenwire.validate`` or
    ``lifecycle.Validator`` for those.
    """
    decoder = sse.Decoder(max_event_bytes=max_event_bytes)
    parse = events.parse
    if isinstance(chunks, bytes | bytearray | memoryview):
        chunks = (bytes(chunks),)
    for chunk in chunks:
        for msg in decoder.feed(chunk):
            yield parse(msg.event, msg.data)
    for msg in decoder.close():
        yield parse(msg.event, msg.data)


async def aiter_events(
    chunks: AsyncIterable[bytes], *, max_event_bytes: int = 1 << 20
) -> AsyncIterator[events.Event]:
    """The async twin of ``iter_events``, for an async byte stream."""
    decoder = sse.Decoder(max_event_bytes=max_event_bytes)
    parse = events.parse
    async for chunk in chunks:
        for msg in decoder.feed(chunk):
            yield parse(msg.event, msg.data)
    for msg in decoder.close():
        yield parse(msg.event, msg.data)
