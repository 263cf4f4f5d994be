"""Structured request logs: one JSON line per request, at its end.

§8.1: prompts may hold highly sensitive data, so the line carries what an
operator needs (route, model, status, event count, timings, error code, the
request's ``request_id``) and nothing the user wrote. Error messages from
request validation quote the body, and exception messages may quote anything,
so by default neither is logged: only the error code, the JSON path and the
exception type with its traceback frames (file, line, function: where, never
what; neither the message nor the source lines).

With ``log_content=True`` (``tokenwire serve --log-content``) the line also
carries the prompt (the request's messages), the completion (the streamed
text and tool calls) and full error messages. Collecting the completion costs
a little per event, so it only happens then.

Bounded: every string a request can choose (the ``route``/path,
``model``, ``request_id``, ``error_path``, ``format``...) is cut to
``MAX_FIELD_CHARS`` characters, ending in ``…`` and the count cut
(``bounded``), so a 100 KB ``request_id`` or a 60 KB path writes at most a
few hundred bytes. Only what ``log_content`` adds (the operator asked for the
content itself) is written whole.
"""

from __future__ import annotations

import logging
import sys
import time
import traceback
from collections.abc import Mapping
from typing import Any, Final

import msgspec

from ... import events as ev
from ...server import StreamRecord, Tee

__all__ = [
    "LOGGER_NAME",
    "MAX_FIELD_CHARS",
    "RequestLog",
    "bounded",
    "configure",
    "cut",
    "log_unknown_events",
]

LOGGER_NAME: Final = "tokenwire.gateway"
#: The longest string a request puts in a log line; longer ones are cut (docs/gateway.md).
MAX_FIELD_CHARS: Final = 256
#: The fields ``log_content`` adds: the content itself, written whole.
_CONTENT_FIELDS: Final = frozenset(
    {"prompt", "completion", "tool_calls", "error_message", "exception_message"}
)


def cut(value: str, limit: int = MAX_FIELD_CHARS) -> str:
    """``value``, or its first ``limit`` characters and ``…(N more)`` when it is longer."""
    if len(value) <= limit:
        return value
    return f"{value[:limit]}…({len(value) - limit} more)"


def _bound(value: Any) -> Any:
    if isinstance(value, str):
        return cut(value)
    if isinstance(value, dict):
        return {cut(str(k)): _bound(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_bound(v) for v in value[:64]]
    return value


def bounded(line: dict[str, Any]) -> dict[str, Any]:
    """``line`` with every string (nested ones too) cut to ``MAX_FIELD_CHARS``,
    except the ``log_content`` fields."""
    return {key: value if key in _CONTENT_FIELDS else _bound(value) for key, value in line.items()}


_encode = msgspec.json.Encoder().encode


class _JSONLineFormatter(logging.Formatter):
    """The message is already a JSON object: write it as one line."""

    def format(self, record: logging.LogRecord) -> str:
        return record.getMessage()


def configure(stream: Any = None, level: int = logging.INFO) -> logging.Logger:
    """Send the gateway's log lines to ``stream`` (stderr by default), once.

    Returns the logger. Idempotent: a second call changes nothing.
    """
    logger = logging.getLogger(LOGGER_NAME)
    if not any(getattr(h, "_tokenwire", False) for h in logger.handlers):
        handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
        handler.setFormatter(_JSONLineFormatter())
        handler._tokenwire = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
        logger.propagate = False
    logger.setLevel(level)
    return logger


def log_unknown_events(
    vendor: str,
    request_id: str | None,
    counts: Mapping[str, int],
    logger: logging.Logger | None = None,
) -> None:
    """One JSON line for a stream whose upstream sent event types its translator skipped.

    Called once per stream, at its end (docs/extensions.md: unknown vendor
    events are never silently dropped). Names the types and how many of each:
    vendor event type names, never their content (§8.1).
    """
    if not counts:
        return
    log = logger if logger is not None else logging.getLogger(LOGGER_NAME)
    if not log.isEnabledFor(logging.WARNING):
        return
    line = {
        "ts": round(time.time(), 3),
        "msg": "unknown vendor events",
        "vendor": vendor,
        "request_id": request_id,
        "types": dict(sorted(counts.items())),
    }
    log.warning(_encode(bounded(line)).decode())


class _Transcript:
    """A ``Tee`` collecting the completion, used only with ``log_content``."""

    __slots__ = ("text", "tool_calls")

    def __init__(self) -> None:
        self.text: list[str] = []
        self.tool_calls: list[dict[str, str]] = []

    def write(self, events: list[ev.Event]) -> None:
        for event in events:
            if isinstance(event, ev.ContentDelta):
                self.text.append(event.delta.text)
            elif isinstance(event, ev.ToolCall):
                self.tool_calls.append(
                    {"id": event.id, "name": event.name, "arguments": event.arguments}
                )

    def close(self) -> None:
        pass


class RequestLog:
    """An ``Observer`` writing one JSON line per request to the gateway logger."""

    def __init__(self, *, log_content: bool = False, logger: logging.Logger | None = None) -> None:
        self.log_content = log_content
        self.logger = logger if logger is not None else logging.getLogger(LOGGER_NAME)
        self._transcripts: dict[int, _Transcript] = {}

    def opened(self, record: StreamRecord) -> Tee | None:
        """With ``log_content``, tee the stream to collect its completion."""
        if not self.log_content:
            return None
        transcript = _Transcript()
        self._transcripts[id(record)] = transcript
        return transcript

    def closed(self, record: StreamRecord) -> None:
        """Log the request's line."""
        transcript = self._transcripts.pop(id(record), None)
        if not self.logger.isEnabledFor(logging.INFO):
            return
        self.logger.info(_encode(bounded(self.line(record, transcript))).decode())

    def line(self, record: StreamRecord, transcript: _Transcript | None = None) -> dict[str, Any]:
        """The log line's fields for ``record``."""
        duration, ttfe = record.duration, record.time_to_first_event
        line: dict[str, Any] = {
            "ts": round(time.time(), 3),
            "msg": "request",
            "route": record.route,
            "format": record.format,
            "model": record.model,
            "request_id": record.request_id,
            "status": record.status,
            "events": record.events,
            "duration_ms": None if duration is None else round(duration * 1000, 3),
            "ttfe_ms": None if ttfe is None else round(ttfe * 1000, 3),
            "error_code": record.error_code,
            "error_path": record.error_path,
            "disconnected": record.disconnected,
        }
        exc = record.exception
        if exc is not None:
            line["exception"] = type(exc).__qualname__
            # The frames say where; the message could quote user content (§8.1).
            line["traceback"] = [
                f"{frame.filename}:{frame.lineno} in {frame.name}"
                for frame in traceback.extract_tb(exc.__traceback__)
            ]
            if self.log_content:
                line["exception_message"] = str(exc)
        if self.log_content and record.error_message is not None:
            line["error_message"] = record.error_message
        if self.log_content and record.request is not None:
            line["prompt"] = msgspec.to_builtins(record.request.messages)
            if transcript is not None:
                line["completion"] = "".join(transcript.text)
                if transcript.tool_calls:
                    line["tool_calls"] = transcript.tool_calls
        return line
