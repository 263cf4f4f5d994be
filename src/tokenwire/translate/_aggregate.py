"""Non-streaming answers built from the standard events, the part every vendor shares.

A vendor's aggregator is the inverse of its ingress's stream encoder, and it
is written as ``accumulate(encode(events))``: each standard event goes through
the vendor's own stream encoder (the one that answers a streaming request),
and the vendor frames it writes are accumulated the way that vendor's SDK
builds its final object from a stream (openai's ``ChatCompletionStreamState``,
anthropic's ``accumulate_event``, google-genai's candidate merging). So the
standard -> vendor mapping (text, reasoning and signatures, citations,
refusals, tool calls, every choice, usage details, the finish reason) exists
once, in the encoder, and a streamed and a whole answer always agree.

Sans-I/O: ``feed(event)`` as the events come, ``result()`` once the stream is
over -> ``(HTTP status, the vendor's JSON object)``; a stream that failed gives
the vendor's error body and the status its SDK maps to the right exception.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, Final, Protocol

import msgspec

from .. import events as ev
from .. import sse

__all__ = [
    "GATEWAY_REFUSES",
    "MAX_ANSWER_BYTES",
    "Aggregator",
    "FrameAggregator",
    "error_status",
    "upstream_status",
]

#: The largest whole answer an aggregator holds (the encoded frames it reads
#: are bounded one by one by the decoder, the answer as a whole by this).
MAX_ANSWER_BYTES: Final = 64 << 20

#: What every ``http_error`` mapping writes first (``_contract.status_error``), or
#: what the gateway writes when it refuses a request itself before calling the
#: upstream (``GATEWAY_REFUSES``: a model whose key is not set).
_UPSTREAM_STATUS: Final = re.compile(r"^(?:upstream answered|the gateway answers) HTTP (\d{3})\b")

#: The start of an ``error`` message the gateway writes for a refusal of its own,
#: followed by the status: the vendor routes answer with that status.
GATEWAY_REFUSES: Final = "the gateway answers HTTP"


def upstream_status(message: str) -> int | None:
    """The upstream's own HTTP status, when an ``error`` event reports one it answered."""
    found = _UPSTREAM_STATUS.match(message)
    return int(found.group(1)) if found is not None else None


#: §5.3.6 code -> HTTP status, when the upstream did not answer one itself.
_CODE_STATUS: Final[dict[str, int]] = {
    "rate_limited": 429,
    "overloaded": 503,
    "context_length_exceeded": 400,
    "content_filtered": 400,
    "invalid_request": 400,
    "internal_error": 500,
}


def error_status(code: str, message: str, overrides: Mapping[str, int] | None = None) -> int:
    """The HTTP status a whole answer that failed with ``(code, message)`` gets.

    The upstream's own error status when it answered one (a 404 stays a 404,
    so the SDK raises ``NotFoundError``), else the code's (``overrides`` first:
    Anthropic answers ``overloaded`` with 529).
    """
    status = upstream_status(message)
    if status is not None and 400 <= status <= 599:
        return status
    if overrides is not None and code in overrides:
        return overrides[code]
    return _CODE_STATUS.get(code, 500)


class Aggregator(Protocol):
    """Standard events in, one vendor JSON answer out."""

    def feed(self, event: ev.Event) -> None: ...

    def result(self) -> tuple[int, dict[str, Any]]:
        """``(status, body)``: 200 and the vendor's answer object, or an error status
        and the vendor's error body."""
        ...


_decode = msgspec.json.Decoder().decode


class FrameAggregator:
    """An aggregator over a vendor's SSE encoder: ``frame(name, obj)`` sees each frame.

    Subclasses set ``encode`` (a fresh encoder's ``encode``) and implement
    ``frame`` and ``result``. ``[DONE]`` and non-JSON data are skipped.
    """

    def __init__(self, encode: Callable[[ev.Event], bytes]) -> None:
        self._encode = encode
        self._decoder = sse.Decoder(max_event_bytes=MAX_ANSWER_BYTES)
        self._size = 0
        #: ``(code, message)`` of the stream's ``error`` event, when it failed.
        self.failure: tuple[str, str] | None = None

    def feed(self, event: ev.Event) -> None:
        """Take one standard event (in stream order)."""
        if isinstance(event, ev.ErrorEvent) and self.failure is None:
            self.failure = (event.code, event.message)
        data = self._encode(event)
        if not data:
            return
        self._size += len(data)
        if self._size > MAX_ANSWER_BYTES:
            # A whole answer has to fit in memory; the stream route has no such bound.
            if self.failure is None:
                self.failure = ("internal_error", "the answer is too large to send whole")
            return
        for message in self._decoder.feed(data):
            if message.data == "[DONE]":
                continue
            try:
                obj = _decode(message.data)
            except msgspec.DecodeError:
                continue
            if isinstance(obj, dict):
                self.frame(message.event, obj)

    def frame(self, name: str, obj: dict[str, Any]) -> None:
        raise NotImplementedError
