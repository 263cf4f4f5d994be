"""Which vendor format a capture is in, from its first bytes (``tokenwire convert``).

Pure functions, no I/O. ``detect(head)`` looks at the framing first, then at
the payloads:

- **Connect** envelopes: a flags byte (0x00-0x03), a 4-byte big-endian length,
  the message; the codec is ``json`` when the first data message is a JSON
  object, else ``proto``;
- **SignalR** records: JSON separated by 0x1E, the handshake answer first;
  ``copilot`` mapping when the hub pushes ``update`` invocations;
- **SSE** (``data:``/``event:`` lines) or **JSON lines** (one vendor JSON chunk
  per line, how many recordings are stored): the vendor from the SSE event
  names and the JSON shapes (Anthropic ``message_start``, Responses
  ``response.*``, Cohere ``message-start``, Gemini ``candidates``, the OpenAI
  family's ``choices``, Mistral by its model names and content-part lists).

It mirrors the playground's ``sniffFormat`` (gateway/static/app.js), and adds
the framings the playground does not see. ``JSONLinesFramer`` turns JSON lines
back into the SSE body the translators read.
"""

from __future__ import annotations

import gzip
import re
import zlib
from typing import Any, Final, Literal, NamedTuple

import msgspec

from ..errors import TokenwireError
from ..translate.anthropic.stream import EVENT_TYPES

__all__ = [
    "EXPECTED",
    "HEAD_BYTES",
    "MAX_DEPTH",
    "Detected",
    "JSONLinesFramer",
    "UnknownFormat",
    "detect",
    "capture_model",
    "detect_framing",
    "too_deep",
]

#: How much of the input ``detect`` needs to see.
HEAD_BYTES: Final = 64 * 1024

Framing = Literal["sse", "jsonl", "signalr", "connect"]

#: What ``detect`` recognises, for error messages.
EXPECTED: Final = (
    "SSE (data:/event: lines) or JSON lines (one JSON chunk per line) from anthropic, "
    "cohere, gemini, mistral, openai or openai-responses; SignalR records (JSON ending "
    "in 0x1E); or Connect envelopes (a flags byte and a 4-byte length)"
)

_RS: Final = b"\x1e"
#: Anthropic's stream event types, but ``error``: other vendors send that one too.
_ANTHROPIC_TYPES: Final = EVENT_TYPES - {"error"}
_COHERE_TYPES: Final = frozenset(
    {
        "message-start",
        "content-start",
        "content-delta",
        "content-end",
        "tool-plan-delta",
        "tool-call-start",
        "tool-call-delta",
        "tool-call-end",
        "citation-start",
        "citation-end",
        "message-end",
        "stream-start",
        "text-generation",
        "stream-end",
    }
)
#: Mistral's model families (its chunks are otherwise OpenAI's).
_MISTRAL_MODEL: Final = re.compile(
    r"^(mistral|magistral|ministral|codestral|devstral|pixtral|open-mi)", re.IGNORECASE
)
_SSE_FIELD: Final = re.compile(rb"^(data|event|id|retry)\s*:|^:", re.MULTILINE)
_JSON: Final = msgspec.json.Decoder()


class UnknownFormat(TokenwireError, ValueError):
    """The input is in no format ``detect`` knows; the message says what it expected."""


class Detected(NamedTuple):
    """What ``detect`` found: the translator name (or ``"standard"``) and its options."""

    vendor: str
    framing: Framing
    options: dict[str, str]
    reason: str  # what gave it away, for messages


def detect_framing(head: bytes) -> Framing | None:
    """The framing of a capture from its first bytes, or ``None`` when unknown."""
    if len(head) >= 5 and head[0] <= 0x03:
        return "connect"  # text formats never start with a control byte this low
    text = head.removeprefix(b"\xef\xbb\xbf").lstrip()
    if not text:
        return None
    if text[:1] == b"{" and _RS in head[:4096]:
        return "signalr"
    if _SSE_FIELD.search(head[:4096]) and not text.startswith(b"{"):
        return "sse"
    if text.startswith(b"{"):
        return "jsonl"
    return None


def detect(head: bytes) -> Detected:
    """The format of a capture from its first bytes (``HEAD_BYTES`` is plenty).

    Returns a ``Detected``; ``vendor`` is ``"standard"`` for a stream that is
    already LLM-Stream. Raises ``UnknownFormat`` saying what was expected.
    """
    framing = detect_framing(head)
    if framing == "connect":
        return _connect(head)
    if framing == "signalr":
        return _signalr(head)
    if framing is None:
        if not head.removeprefix(b"\xef\xbb\xbf").strip():
            raise UnknownFormat(f"the input is empty ({_size(head)}): nothing to convert")
        raise UnknownFormat(f"cannot tell the format of {show_input(head)}: expected {EXPECTED}")
    payloads = _sse_payloads(head) if framing == "sse" else _json_lines(head)
    found = _vendor(payloads)
    if found is None:
        shown = f"{len(payloads)} JSON payload(s) of no known vendor shape"
        raise UnknownFormat(
            f"cannot tell the vendor of this {framing.upper()} capture ({shown}, starting "
            f"with {show_input(head)}): expected {EXPECTED}"
        )
    vendor, reason = found
    return Detected(vendor, framing, {}, reason)


def _size(head: bytes) -> str:
    return "no bytes" if not head else f"{len(head)} byte{'s' * (len(head) != 1)} of whitespace"


def show_input(head: bytes) -> str:
    """The input for a message: its first characters when it is text, a hex dump when not.

    Raw bytes of a binary file (control characters, escapes) never reach the terminal.
    """
    first = head[:60]
    try:
        text = first.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < 56 or len(head) <= 60:  # not a character cut by the slice
            return f"binary data ({_hex(head)})"
        text = first[: exc.start].decode("utf-8")
    if any(not (c.isprintable() or c in "\t\n\r") for c in text):
        return f"binary data ({_hex(head)})"
    shown = text.replace("\r", "\\r").replace("\n", "\\n").replace("\t", "\\t")
    return f"the text '{shown}{'…' if len(head) > len(first) else ''}'"


def _hex(head: bytes) -> str:
    more = "…" if len(head) > 8 else ""
    return f"{len(head)} bytes starting {head[:8].hex(' ')}{more}"


# -- text framings ------------------------------------------------------------------------

_Payload = tuple[str | None, Any]  # (SSE event name, decoded JSON)


#: Nesting deeper than this is no vendor's chunk: it is not decoded at all, so
#: detection never recurses with the input (no RecursionError).
MAX_DEPTH: Final = 64
_QUOTE, _BACKSLASH = 0x22, 0x5C
_OPEN: Final = frozenset(b"[{")
_CLOSE: Final = frozenset(b"]}")


def too_deep(raw: bytes, limit: int = MAX_DEPTH) -> bool:
    """True when the JSON text ``raw`` nests arrays/objects deeper than ``limit``.

    One pass, linear in ``raw`` (brackets inside strings do not count); none at
    all when there are too few brackets to nest that deep (every real chunk).
    """
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return False
    depth = 0
    in_string = escaped = False
    for byte in raw:
        if in_string:
            if escaped:
                escaped = False
            elif byte == _BACKSLASH:
                escaped = True
            elif byte == _QUOTE:
                in_string = False
        elif byte == _QUOTE:
            in_string = True
        elif byte in _OPEN:
            depth += 1
            if depth > limit:
                return True
        elif byte in _CLOSE:
            depth -= 1
    return False


def _decode(raw: bytes) -> Any:
    if too_deep(raw):
        return None
    try:
        return _JSON.decode(raw)
    except (msgspec.DecodeError, RecursionError):  # cut by the head, or not JSON at all
        return None


def _sse_payloads(head: bytes) -> list[_Payload]:
    out: list[_Payload] = []
    for frame in re.split(rb"\r\n\r\n|\n\n|\r\r", head):
        event: str | None = None
        data: list[bytes] = []
        for line in frame.splitlines():
            name, _, value = line.partition(b":")
            value = value.removeprefix(b" ")
            if name == b"event":
                event = value.decode("utf-8", "replace").strip()
            elif name == b"data":
                data.append(value)
        if event is not None or data:
            out.append((event, _decode(b"\n".join(data)) if data else None))
    return out


def _json_lines(head: bytes) -> list[_Payload]:
    return [(None, _decode(line)) for line in head.splitlines() if line.strip()]


def _vendor(payloads: list[_Payload]) -> tuple[str, str] | None:
    found: tuple[str, str] | None = None
    for event, obj in payloads:
        found = _one(event, obj)
        if found is not None:
            break
    if found is not None and found[0] == "openai":
        for _, obj in payloads:
            if _mistral_like(obj):
                return "mistral", "OpenAI-style chunks from a Mistral model"
    return found


def _one(event: str | None, obj: Any) -> tuple[str, str] | None:
    kind = obj.get("type") if isinstance(obj, dict) else None
    kind = kind if isinstance(kind, str) else None
    if event == "stream.start" or (kind == "stream.start" and "seq" in obj):
        return "standard", "stream.start: already an LLM-Stream"
    for name in (event, kind):
        if name in _ANTHROPIC_TYPES:
            return "anthropic", f"Anthropic event {name}"
        if name is not None and name.startswith("response."):
            return "openai-responses", f"Responses event {name}"
        if name in _COHERE_TYPES:
            return "cohere", f"Cohere event {name}"
    if not isinstance(obj, dict):
        return None
    if kind == "error" and isinstance(obj.get("error"), dict):
        if "sequence_number" in obj:
            return "openai-responses", "Responses error event (sequence_number)"
        return "anthropic", "Anthropic error event"
    error = obj.get("error")
    if kind is None and isinstance(error, dict):
        # In-stream errors: Gemini's carry a google.rpc status, OpenAI's a type.
        if "status" in error:
            return "gemini", "Gemini error chunk (error.status)"
        return "openai", "OpenAI-style error chunk"
    if "candidates" in obj or "promptFeedback" in obj:
        return "gemini", "Gemini GenerateContentResponse (candidates)"
    if "choices" in obj or obj.get("object") == "chat.completion.chunk":
        return "openai", "OpenAI chat.completion.chunk (choices)"
    return None


def capture_model(head: bytes) -> str | None:
    """The model the capture names, from its first payload that says: OpenAI's and
    Mistral's ``model``, Anthropic's ``message.model``, the Responses API's
    ``response.model``, Gemini's ``modelVersion``. ``None`` for the binary
    framings and for captures that never say (Cohere's)."""
    framing = detect_framing(head)
    if framing not in ("sse", "jsonl"):
        return None
    for _, obj in _sse_payloads(head) if framing == "sse" else _json_lines(head):
        if not isinstance(obj, dict):
            continue
        for holder in (obj, obj.get("message"), obj.get("response")):
            if isinstance(holder, dict):
                model = holder.get("model", holder.get("modelVersion"))
                if isinstance(model, str) and model.strip():
                    return model
    return None


def _mistral_like(obj: Any) -> bool:
    if not isinstance(obj, dict):
        return False
    model = obj.get("model")
    if isinstance(model, str) and _MISTRAL_MODEL.match(model):
        return True
    choices = obj.get("choices")
    for choice in choices if isinstance(choices, list) else []:
        delta = choice.get("delta") if isinstance(choice, dict) else None
        if isinstance(delta, dict) and isinstance(delta.get("content"), list):
            return True  # Mistral's content-part lists (thinking, text)
    return False


# -- binary framings ----------------------------------------------------------------------


def _signalr(head: bytes) -> Detected:
    records = [_decode(r) for r in head.split(_RS)[:-1] if r.strip()]
    copilot = any(
        isinstance(r, dict) and (r.get("target") == "update" or _has_messages(r.get("item")))
        for r in records
    )
    mapping = "copilot" if copilot else "stream"
    why = "copilot-style update invocations" if copilot else "StreamItem records"
    return Detected("signalr", "signalr", {"mapping": mapping}, f"SignalR 0x1E records, {why}")


def _has_messages(item: Any) -> bool:
    return isinstance(item, dict) and isinstance(item.get("messages"), list)


def _connect(head: bytes) -> Detected:
    pos = 0
    while pos + 5 <= len(head):
        flags = head[pos]
        size = int.from_bytes(head[pos + 1 : pos + 5], "big")
        message = head[pos + 5 : pos + 5 + size]
        pos += 5 + size
        if flags & 0x02:  # end-stream: always JSON, says nothing of the codec
            continue
        if flags & 0x01:
            try:
                message = gzip.decompress(message)
            except (OSError, EOFError, zlib.error):
                break
        return _connect_message(message)
    return Detected("connect", "connect", {}, "Connect envelopes (codec not seen)")


def _connect_message(message: bytes) -> Detected:
    if message.lstrip().startswith(b"{"):
        obj = _decode(message)
        standard = isinstance(obj, dict) and "seq" in obj and "v" in obj
        mapping = "standard" if standard else "text"
        return Detected(
            "connect", "connect", {"codec": "json", "mapping": mapping}, "Connect JSON envelopes"
        )
    # tokenwire.llmstream.v1.Event starts with field 1, v = "1.0".
    mapping = "standard" if message.startswith(b"\x0a\x031.0") else "text"
    return Detected(
        "connect", "connect", {"codec": "proto", "mapping": mapping}, "Connect proto envelopes"
    )


# -- JSON lines back to SSE ---------------------------------------------------------------


class JSONLinesFramer:
    """JSON lines -> the SSE body a translator reads: ``data: <line>\\n\\n`` per line.

    ``close`` adds ``data: [DONE]`` for the OpenAI family (``done=True``): a
    JSON-lines recording keeps the chunks and drops the framing, end marker
    included, so its absence there is no truncation. ``max_line_bytes``
    bounds a line (a runaway line is passed on as it is and the translator
    reports it).
    """

    def __init__(self, *, done: bool, max_line_bytes: int = 16 << 20) -> None:
        self._done = done
        self._max = max_line_bytes
        self._buf = bytearray()

    def feed(self, data: bytes) -> bytes:
        """The SSE frames of the complete lines in ``data`` (and before it)."""
        self._buf += data
        cut = self._buf.rfind(b"\n")
        if cut < 0:
            if len(self._buf) > self._max:
                line, self._buf = bytes(self._buf), bytearray()
                return _frame(line)
            return b""
        lines, self._buf = bytes(self._buf[:cut]), self._buf[cut + 1 :]
        return b"".join(_frame(line) for line in lines.split(b"\n"))

    def close(self) -> bytes:
        """The last line's frame, and the end marker when the vendor has one."""
        rest, self._buf = bytes(self._buf), bytearray()
        return _frame(rest) + (b"data: [DONE]\n\n" if self._done else b"")


def _frame(line: bytes) -> bytes:
    line = line.strip(b"\r \t")
    if line.startswith(b"\xef\xbb\xbf"):
        line = line[3:]
    return b"data: " + line + b"\n\n" if line else b""
