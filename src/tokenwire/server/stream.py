"""One accepted stream: who owns its generation (the request, or a resume session)."""

from __future__ import annotations

import asyncio
import contextlib
import types
from collections.abc import Generator, Sequence
from typing import Final

from .. import events as ev
from ..writer import Writer
from .encoders import Encode
from .hooks import ResumeSession, StreamRecord, Tee
from .outbox import Outbox

#: How long a cancelled provider may take to clean up before it is cancelled again.
CLEANUP_S: Final = 5.0


class _Owner:
    """The part of a stream that depends on who owns its generation.

    ``emit`` is the one place every event passes through on its way out (the
    tees see stamped events, so seq can serve Last-Event-ID); ``release`` runs
    when the request is over, hung up or not.
    """

    __slots__ = ("outbox", "tees")

    headers: Sequence[tuple[bytes, bytes]] = ()

    def __init__(self, outbox: Outbox, tees: Sequence[Tee]) -> None:
        self.outbox = outbox
        self.tees = tees

    def _tee(self, batch: list[ev.Event]) -> None:
        for tee in self.tees:
            try:
                tee.write(batch)
            except Exception:  # a broken observer must not break the stream
                pass

    def _close_tees(self) -> None:
        for tee in self.tees:
            with contextlib.suppress(Exception):
                tee.close()

    def emit(self, batch: list[ev.Event]) -> None:
        raise NotImplementedError

    def cancel_reason(self) -> tuple[str, str] | None:
        return None

    def adopt(self, producer: asyncio.Task[None]) -> None:
        pass

    def finished(self, producer: asyncio.Task[None]) -> None:
        """The producer's task is over (its done callback; resumable streams only)."""

    async def release(
        self, producer: asyncio.Task[None], record: StreamRecord, *, hung_up: bool
    ) -> None:
        raise NotImplementedError


class _RequestOwns(_Owner):
    """The request owns the generation: a hang-up cancels it at once."""

    __slots__ = ("encode",)

    def __init__(self, outbox: Outbox, tees: Sequence[Tee], encode: Encode) -> None:
        super().__init__(outbox, tees)
        self.encode = encode

    def emit(self, batch: list[ev.Event]) -> None:
        self._tee(batch)
        encode = self.encode
        data = encode(batch[0]) if len(batch) == 1 else b"".join([encode(e) for e in batch])
        if data:
            self.outbox.push(data)

    async def release(
        self, producer: asyncio.Task[None], record: StreamRecord, *, hung_up: bool
    ) -> None:
        if hung_up:
            record.disconnected = True
            self.outbox.close()
        # Cancel once. A second cancel would interrupt the provider's own
        # cleanup (closing its upstream response), leaving the upstream
        # connection open; a provider gets CLEANUP_S to finish it. The endpoint
        # cancels the producer only here, so it cancels unconditionally:
        # ``producer.cancelling()`` also counts cancels that code inside the
        # provider made and will undo (anyio's happy-eyeballs connect, under
        # httpx, cancels the task it runs in once an attempt wins and
        # uncancels it when its scope exits), and a hang-up in that window
        # would otherwise leave the upstream stream running to its end.
        if not producer.done():
            producer.cancel()
        await asyncio.wait([producer], timeout=CLEANUP_S)
        if not producer.done():
            producer.cancel()
            await asyncio.wait([producer])
        self._close_tees()


class _SessionOwns(_Owner):
    """A resume session owns the generation: a hang-up only detaches the request.

    Each event is encoded once, as the standard frame that goes out and into
    the store (its SSE ``id:`` is its seq). The session's runner decides when
    the generation stops: its end, an explicit cancel, or the grace period.
    """

    __slots__ = ("session", "headers", "writer", "encode")

    def __init__(
        self,
        outbox: Outbox,
        tees: Sequence[Tee],
        session: ResumeSession,
        writer: Writer,
        encode: Encode = ev.dump,
    ) -> None:
        super().__init__(outbox, tees)
        self.session = session
        self.headers = session.headers
        self.writer = writer
        self.encode = encode

    def emit(self, batch: list[ev.Event]) -> None:
        # The store keeps SSE frames whatever the binding (a resume may ask for
        # either); a client on the binary binding gets its own frames.
        frames = [ev.dump(event) for event in batch]
        self.session.record(batch, frames)
        self._tee(batch)
        if self.encode is not ev.dump:
            frames = [self.encode(event) for event in batch]
        if frames:
            self.outbox.push(frames[0] if len(frames) == 1 else b"".join(frames))

    def cancel_reason(self) -> tuple[str, str] | None:
        return self.session.cancel_reason()

    def adopt(self, producer: asyncio.Task[None]) -> None:
        self.session.run(producer)

    def finished(self, producer: asyncio.Task[None]) -> None:
        writer = self.writer
        self.outbox.close()
        if not writer.ended:
            # "Every stream ends", the stored one too, whoever is reading.
            code, message = self.session.cancel_reason() or ("internal_error", "internal error")
            with contextlib.suppress(Exception):
                self.emit(writer.fail(code, message))
        self._close_tees()
        self.session.close()

    async def release(
        self, producer: asyncio.Task[None], record: StreamRecord, *, hung_up: bool
    ) -> None:
        if hung_up or not producer.done():
            # Disconnect is not cancel (docs/scaling.md): the session owns it now.
            record.disconnected = True
            self.outbox.close()
            self.session.detach()


@types.coroutine
def _one_step() -> Generator[None, None, None]:
    """Yield to the event loop once (``asyncio.sleep(0)`` without its checks)."""
    yield
