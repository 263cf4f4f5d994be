"""A Connect response body -> standard events (sans-I/O)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ... import events as ev
from ...errors import FramingError, TranslationError
from .._base import StreamTranslator
from .codec import _decode_text_chunk, _json_object, decode_event
from .errors import _describe, error_code
from .framing import (
    DEFAULT_MAX_MESSAGE_BYTES,
    Envelope,
    EnvelopeDecoder,
    codec_and_mapping,
    gunzip,
)

# --- the translator ------------------------------------------------------------------


class Translator(StreamTranslator):
    """Connect response body -> standard events (sans-I/O).

    ``codec`` is ``"json"`` or ``"proto"`` (the response ``Content-Type``),
    ``mapping`` ``"text"`` or ``"standard"``, ``encoding`` the response's
    ``Connect-Content-Encoding`` (compressed envelopes use gzip when it is
    ``None``). ``None`` for ``codec``/``mapping`` means the default, so the CLI
    can pass its options through unchanged. Raises ``ValueError`` for an
    unknown codec or mapping.
    """

    name = "connect"

    def __init__(
        self,
        *,
        model: str,
        request_id: str | None = None,
        codec: str | None = None,
        mapping: str | None = None,
        encoding: str | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        reasoning: bool = False,
        created: int | None = None,
    ) -> None:
        super().__init__(model=model, request_id=request_id, reasoning=reasoning, created=created)
        self.codec, self.mapping = codec_and_mapping(codec, mapping)
        self.encoding = encoding.strip().lower() if encoding else None
        self.max_message_bytes = max_message_bytes
        self._decoder = EnvelopeDecoder(max_message_bytes=max_message_bytes)
        #: The end-stream envelope's metadata (trailers), once it arrived.
        self.trailers: dict[str, Any] | None = None

    # -- input -------------------------------------------------------------

    def _frames(self, data: bytes) -> Iterator[Envelope]:
        # One envelope at a time: each is handled before a framing error further on.
        self._decoder.push(data)
        return iter(self._decoder.next_envelope, None)

    def _on_frame(self, frame: Envelope) -> None:
        self.out += self._on_envelope(frame)

    def _on_eof(self) -> None:
        if self._decoder.pending:
            raise FramingError(
                f"Connect body ended inside an envelope ({self._decoder.pending} bytes "
                "of it received; truncated)"
            )
        raise TranslationError(
            "Connect body ended without an end-stream envelope or completion marker (truncated)"
        )

    def idle(self) -> list[ev.Event]:
        """The upstream was silent for the caller's idle timeout (Cursor-style).

        Between envelopes this ends the standard stream cleanly (``text``
        mapping); inside an envelope, or in the ``standard`` mapping before
        ``stream.end``, it is a truncation (``error`` + ``stream.end``).
        Never raises.
        """
        if self.writer.ended:
            return []
        if self._decoder.pending:
            return self.writer.fail(
                "internal_error", "Connect stream went idle inside an envelope (truncated)"
            )
        if self.mapping == "standard":
            return self.writer.fail(
                "internal_error", "Connect stream went idle before stream.end (truncated)"
            )
        return self._end()

    # -- envelopes ----------------------------------------------------------

    def _message(self, envelope: Envelope) -> bytes:
        if not envelope.compressed:
            return envelope.data
        encoding = self.encoding or "gzip"  # gzip when none was negotiated
        if encoding == "identity":
            raise TranslationError(
                "Connect envelope is flagged compressed but the encoding is identity"
            )
        if encoding != "gzip":
            raise TranslationError(f"unsupported Connect-Content-Encoding {encoding!r}")
        return gunzip(envelope.data, self.max_message_bytes)

    def _on_envelope(self, envelope: Envelope) -> list[ev.Event]:
        data = self._message(envelope)
        if envelope.end_stream:
            return self._on_end_stream(data)
        if self.mapping == "standard":
            event = decode_event(data, self.codec)
            return [] if event is None else self._on_event(event)
        text, done = _decode_text_chunk(data, self.codec)
        out = self.writer.text(text, 0) if text else []
        if done:  # §5.3.3: Cursor-style completion marker, no END_STREAM follows
            out += self._end()
        return out

    def _on_end_stream(self, data: bytes) -> list[ev.Event]:
        # Connect: the end-stream message is JSON whatever the codec.
        obj = _json_object(data, "Connect end-stream message")
        metadata = obj.get("metadata")
        self.trailers = metadata if isinstance(metadata, dict) else {}
        error = obj.get("error")
        if error is not None:
            if not isinstance(error, dict):
                raise TranslationError("Connect end-stream error is not an object")
            return self.writer.fail(error_code(error.get("code")), _describe(error))
        if self.mapping == "standard":
            # The standard stream itself ends with stream.end (§5.3.7).
            raise TranslationError("Connect stream ended before stream.end (truncated)")
        return self._end()

    def _end(self) -> list[ev.Event]:
        return self.writer.end("end_turn")

    def _on_event(self, event: ev.Event) -> list[ev.Event]:
        w = self.writer
        match event:
            case ev.StreamStart():
                if w.started:
                    raise TranslationError("§5.4: upstream sent a second stream.start")
                return w.start()
            case ev.ContentDelta():
                if event.reasoning and not self.reasoning:
                    return []
                return w.text(event.delta.text, event.index, reasoning=event.reasoning)
            case ev.ToolCall():
                return w.tool_call(
                    id=event.id, name=event.name, arguments=event.arguments, index=event.index
                )
            case ev.ContentStop():
                return w.stop(event.index, event.stop_reason)
            case ev.Usage():
                return w.usage(event.input_tokens, event.output_tokens)
            case ev.ErrorEvent():
                return w.error(event.code, event.message)
            case ev.StreamEnd():
                return w.end()
            case ev.UnknownEvent():
                _json_object(event.data.encode(), f"unregistered event {event.type!r}")
                return w.add(event)
        raise TranslationError(f"not an event: {event!r}")  # pragma: no cover
