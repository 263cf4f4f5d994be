"""Structured request logs: one JSON line per request, at its end (on a terminal, or
with ``--log-format text``, one line for a person instead: ``human``).

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
from ...translate.adapt import report_of

__all__ = [
    "LOGGER_NAME",
    "LOG_FORMATS",
    "LOG_FORMAT_ENV",
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


#: ``tokenwire serve --log-format``: ``auto`` is ``text`` on a terminal, ``json`` elsewhere.
LOG_FORMATS: Final = ("auto", "text", "json")
#: The environment variable that carries ``--log-format`` to the workers.
LOG_FORMAT_ENV: Final = "TOKENWIRE_LOG_FORMAT"
_TEXT_SKIPPED: Final = frozenset({"ts", "msg"})


def human(line: Mapping[str, Any]) -> str:
    """One log line's fields as a person reads them on a terminal: the time, then for a
    request its status, route, model and timings, for anything else its message and
    ``key=value`` pairs."""
    ts = line.get("ts")
    # A line without a time (written at start-up) gets the current one.
    when = time.strftime("%H:%M:%S", time.localtime(ts if isinstance(ts, int | float) else None))
    if line.get("msg") == "request":
        parts = [f"{when} {line.get('status')} {line.get('route')} {line.get('model') or '-'}"]
        if line.get("events"):
            parts.append(f"{line['events']} events")
        if line.get("ttfe_ms") is not None:
            parts.append(f"first event {line['ttfe_ms']:.0f} ms")
        if line.get("duration_ms") is not None:
            parts.append(f"{line['duration_ms']:.0f} ms")
        if line.get("error_code"):
            parts.append(f"error {line['error_code']}")
        if line.get("disconnected"):
            parts.append("client left")
        return " · ".join(parts)
    rest = " ".join(
        f"{key}={value}" for key, value in line.items() if key not in _TEXT_SKIPPED and value
    )
    return f"{when} {line.get('msg', '')}" + (f": {rest}" if rest else "")


class _TextFormatter(logging.Formatter):
    """The JSON line, rewritten for a person (``human``); a message that is no JSON
    object is written as it is."""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        try:
            line = msgspec.json.decode(message)
        except msgspec.DecodeError:
            return message
        return human(line) if isinstance(line, dict) else message


def _is_text(fmt: str, stream: Any) -> bool:
    if fmt == "auto":
        isatty = getattr(stream, "isatty", None)
        return bool(isatty is not None and isatty())
    return fmt == "text"


def configure(stream: Any = None, level: int = logging.INFO, fmt: str = "json") -> logging.Logger:
    """Send the gateway's log lines to ``stream`` (stderr by default), once, as JSON
    lines or (``fmt``: ``text``, or ``auto`` on a terminal) as lines for a person.

    Returns the logger. Idempotent: a second call changes nothing.
    """
    logger = logging.getLogger(LOGGER_NAME)
    if not any(getattr(h, "_tokenwire", False) for h in logger.handlers):
        stream = stream if stream is not None else sys.stderr
        handler = logging.StreamHandler(stream)
        text = _is_text(fmt, stream)
        handler.setFormatter(_TextFormatter() if text else _JSONLineFormatter())
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
        adapted = report_of(record.request)
        if adapted:
            # What crossed to another vendor format changed (translate/adapt):
            # JSON paths of the client's body, never its values.
            line["adapted"] = [f"{path}={outcome}@{target}" for path, target, outcome in adapted]
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
