"""What every vendor translator shares: the sans-I/O shape and the never-raise rule.

A translator turns one vendor response body into one standard stream. It is
fed bytes as they arrive and returns standard events, stamped and ordered by a
``Writer``, so its output always passes the lifecycle validator. Nothing raises
past it: a vendor error, a framing problem or a stream cut short becomes an
``error`` event and ``stream.end``.
"""

from __future__ import annotations

from typing import Any, ClassVar

import msgspec

from .. import events as ev
from .. import sse
from ..errors import FramingError, ProtocolError
from ..writer import Writer

__all__ = ["SSETranslator", "StreamTranslator", "VendorRequest"]


class VendorRequest(msgspec.Struct, frozen=True, kw_only=True):
    """An HTTP request for a vendor's API, built from a standard request."""

    method: str = "POST"
    url: str
    headers: dict[str, str]
    body: bytes


class StreamTranslator:
    """Base class: ``feed(bytes) -> list[Event]`` and ``close() -> list[Event]``.

    Subclasses implement ``_feed`` and ``_close``; they use ``self.writer`` to
    emit events. ``reasoning`` says whether reasoning text is carried (on its
    own block, marked ``tokenwire:reasoning``) or dropped.
    """

    name: ClassVar[str]

    def __init__(
        self,
        *,
        model: str,
        request_id: str | None = None,
        reasoning: bool = False,
        created: int | None = None,
    ) -> None:
        self.writer = Writer(model=model, request_id=request_id, created=created)
        self.reasoning = reasoning

    @property
    def done(self) -> bool:
        """True once ``stream.end`` has been produced."""
        return self.writer.ended

    def feed(self, data: bytes) -> list[ev.Event]:
        """Translate the next bytes of the vendor body. Never raises."""
        if self.writer.ended:
            return []
        try:
            return self._feed(data)
        except ProtocolError as exc:
            return self.writer.fail(exc)
        except Exception as exc:  # a translator bug must still end the stream cleanly
            return self.writer.fail("internal_error", f"translation failed: {exc!r}")

    def close(self) -> list[ev.Event]:
        """End of the vendor body. A body without its end marker is an error."""
        if self.writer.ended:
            return []
        try:
            return self._close()
        except ProtocolError as exc:
            return self.writer.fail(exc)
        except Exception as exc:
            return self.writer.fail("internal_error", f"translation failed: {exc!r}")

    def _feed(self, data: bytes) -> list[ev.Event]:
        raise NotImplementedError

    def _close(self) -> list[ev.Event]:
        raise NotImplementedError


class SSETranslator(StreamTranslator):
    """A translator for a vendor that streams SSE: one ``_on_message`` per event."""

    max_event_bytes: ClassVar[int] = 8 << 20

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._decoder = sse.Decoder(max_event_bytes=self.max_event_bytes)

    def _feed(self, data: bytes) -> list[ev.Event]:
        out: list[ev.Event] = []
        try:
            messages = self._decoder.feed(data)
        except FramingError as exc:
            return self.writer.fail("internal_error", f"upstream framing: {exc.message}")
        for msg in messages:
            # One bad vendor event must not lose the events already translated
            # from this chunk: fail here, keeping them, rather than in feed().
            try:
                out += self._on_message(msg)
            except ProtocolError as exc:
                return out + self.writer.fail(exc)
            except Exception as exc:
                return out + self.writer.fail("internal_error", f"translation failed: {exc!r}")
            if self.writer.ended:
                break
        return out

    def _close(self) -> list[ev.Event]:
        out: list[ev.Event] = []
        for msg in self._decoder.close():
            out += self._on_message(msg)
        if not self.writer.ended:
            out += self._on_eof()
        return out

    def _on_message(self, msg: sse.Message) -> list[ev.Event]:
        raise NotImplementedError

    def _on_eof(self) -> list[ev.Event]:
        """The body ended without the vendor's end marker: never a clean finish."""
        return self.writer.fail(
            "internal_error", f"{self.name} stream ended before its end marker (truncated)"
        )
