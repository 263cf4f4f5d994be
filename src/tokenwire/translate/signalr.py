"""SignalR JSON hub protocol (Azure / Copilot over WebSocket) -> the standard (§1.1, §7.1).

The input is the bytes the client received on the WebSocket, frames simply
concatenated: JSON records each ended by the record separator 0x1E, the
handshake response (``{}`` or ``{"error": ...}``) first. A record may be split
across frames and a frame may hold several records. Message types handled:
Invocation (1), StreamItem (2), Completion (3, with or without ``error``),
Ping (6) and Close (7, with ``error``); the others are ignored.

Two mappings (``mapping=``):

* ``"stream"`` (default): the hub streams the answer as the items of one
  stream invocation. An item is a text delta, either a string or an object
  ``{"text": ...}`` (``{"delta": ...}`` is read the same way); an object may
  also carry ``tool_call`` ``{id, name, arguments}``, ``usage``
  ``{input_tokens, output_tokens}``, ``stop_reason`` and ``index``.
* ``"copilot"``: Copilot / Bing ChatHub. The hub pushes ``update``
  Invocations (type 1, no invocationId) whose ``arguments[0].messages[].text``
  is the **cumulative** text so far; only the new suffix is sent. The final
  StreamItem carries the finished messages and ``result.value`` (``"Success"``
  or an error). A snapshot that does not extend the text already sent is a
  rewrite; see ``_CopilotBlock`` and docs/bindings.md for the rule.

The Completion for the stream invocation ends the standard stream
(``content.stop`` + ``stream.end``); a Completion ``error`` or a Close
``error`` becomes ``error`` + ``stream.end``, and so does a body that ends
first.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping
from typing import Any, Final

import msgspec

from .. import events as ev
from .. import request as rq
from ..errors import FramingError, TranslationError
from ._base import PushBuffer, StreamTranslator, VendorRequest
from ._contract import VendorFormat

__all__ = [
    "FORMAT",
    "DEFAULT_MAX_RECORD_BYTES",
    "MAPPINGS",
    "METHODS",
    "RECORD_SEPARATOR",
    "MessageType",
    "RecordDecoder",
    "Translator",
    "build_request",
    "cancel_invocation",
    "close_message",
    "completion",
    "error_code",
    "handshake_request",
    "invocation_arguments",
    "ping",
    "record",
    "stream_invocation",
    "stream_item",
]

#: The JSON hub protocol's record separator (ASCII RS).
RECORD_SEPARATOR: Final = b"\x1e"
DEFAULT_MAX_RECORD_BYTES: Final = 8 << 20
MAPPINGS: Final = ("stream", "copilot")

#: The hub method each mapping invokes by default.
METHODS: Final[dict[str, str]] = {"stream": "StreamChat", "copilot": "chat"}


class MessageType(enum.IntEnum):
    """The hub protocol's message ``type`` values (HubProtocol.md)."""

    INVOCATION = 1
    STREAM_ITEM = 2
    COMPLETION = 3
    STREAM_INVOCATION = 4
    CANCEL_INVOCATION = 5
    PING = 6
    CLOSE = 7
    ACK = 8
    SEQUENCE = 9


_encode_json = msgspec.json.Encoder().encode
_decode_json = msgspec.json.Decoder().decode


def error_code(message: str) -> tuple[str, str]:
    """``(§5.3.6 code, message)`` for a hub error string.

    Hub errors are free text. A hub that speaks the ``stream`` mapping may
    prefix it with a registered code and a colon (``"rate_limited: slow
    down"``); anything else is ``internal_error``.
    """
    head, sep, rest = message.partition(":")
    if sep and head.strip() in ev.ERROR_CODES | {"cancelled"}:
        return head.strip(), rest.strip() or head.strip()
    return "internal_error", message or "hub error"


# --- records ---------------------------------------------------------------------------


class RecordDecoder(PushBuffer):
    """Incremental 0x1E record framing: ``push(bytes)``, then ``next_record()``.

    Records come out one at a time so that each is handled before a framing
    error further on. ``next_record`` raises ``FramingError`` once a record is
    over ``max_record_bytes`` without its separator.
    """

    def __init__(self, *, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES) -> None:
        self.max_record_bytes = max_record_bytes
        super().__init__()

    def next_record(self) -> bytes | None:
        """The next complete record (without its separator), or ``None``."""
        end = self._buf.find(RECORD_SEPARATOR, self._pos)
        if end < 0:
            if len(self._buf) - self._pos > self.max_record_bytes:
                raise FramingError(
                    f"SignalR record is over the {self.max_record_bytes}-byte limit",
                    offset=self._offset + self._pos,
                )
            return None
        if end - self._pos > self.max_record_bytes:
            raise FramingError(
                f"SignalR record is over the {self.max_record_bytes}-byte limit",
                offset=self._offset + self._pos,
            )
        out = bytes(self._buf[self._pos : end])
        self._pos = end + 1
        return out


def record(message: Mapping[str, Any]) -> bytes:
    """One JSON hub-protocol record: the message and the 0x1E separator."""
    return _encode_json(message) + RECORD_SEPARATOR


def handshake_request(protocol: str = "json", version: int = 1) -> bytes:
    """The client's handshake record, always sent first."""
    return record({"protocol": protocol, "version": version})


def stream_invocation(target: str, arguments: list[Any], invocation_id: str) -> bytes:
    """A StreamInvocation (type 4) record."""
    return record(
        {
            "type": MessageType.STREAM_INVOCATION,
            "invocationId": invocation_id,
            "target": target,
            "arguments": arguments,
        }
    )


def stream_item(invocation_id: str, item: Any) -> bytes:
    """A StreamItem (type 2) record."""
    return record({"type": MessageType.STREAM_ITEM, "invocationId": invocation_id, "item": item})


def completion(invocation_id: str, *, error: str | None = None) -> bytes:
    """A Completion (type 3) record; a stream's Completion carries no ``result``."""
    message: dict[str, Any] = {"type": MessageType.COMPLETION, "invocationId": invocation_id}
    if error is not None:
        message["error"] = error
    return record(message)


def cancel_invocation(invocation_id: str) -> bytes:
    """A CancelInvocation (type 5) record: the client stops a stream."""
    return record({"type": MessageType.CANCEL_INVOCATION, "invocationId": invocation_id})


def ping() -> bytes:
    """A Ping (type 6) record: ``{"type":6}`` and nothing else."""
    return record({"type": MessageType.PING})


def close_message(error: str | None = None, *, allow_reconnect: bool | None = None) -> bytes:
    """A Close (type 7) record."""
    message: dict[str, Any] = {"type": MessageType.CLOSE}
    if error is not None:
        message["error"] = error
    if allow_reconnect is not None:
        message["allowReconnect"] = allow_reconnect
    return record(message)


# --- the request ------------------------------------------------------------------------


def _last_user_text(req: rq.Request) -> str:
    for message in reversed(req.messages):
        if message.role == "user":
            return message.text
    return ""


def invocation_arguments(req: rq.Request, mapping: str | None = None) -> list[Any]:
    """The hub method's arguments for ``req``.

    ``stream``: one argument, the §4 request envelope as a JSON object.
    ``copilot``: one ChatHub-style argument whose ``message`` holds the last
    user message's text (Copilot keeps the conversation on its side).
    Raises ``ValueError`` for an unknown mapping.
    """
    mapping = mapping or "stream"
    if mapping == "stream":
        return [_decode_json(rq.dumps(req))]
    if mapping == "copilot":
        return [
            {
                "message": {
                    "author": "user",
                    "text": _last_user_text(req),
                    "messageType": "Chat",
                },
                "isStartOfSession": True,
            }
        ]
    raise ValueError(f"unknown SignalR mapping {mapping!r} (known: stream, copilot)")


def build_request(
    req: rq.Request,
    *,
    hub_url: str,
    method: str | None = None,
    mapping: str | None = None,
    invocation_id: str = "0",
    headers: Mapping[str, str] | None = None,
) -> VendorRequest:
    """The records to send on a hub's WebSocket for ``req``.

    A SignalR call is not one HTTP request: ``url`` is the hub's WebSocket URL
    (``http(s)`` becomes ``ws(s)``), ``method`` is ``GET`` (the upgrade), and
    ``body`` is what to send once the socket is open: the handshake record,
    then a StreamInvocation of ``method`` (default ``StreamChat``, or ``chat``
    for ``copilot``). Raises ``ValueError`` for an unknown mapping.
    """
    mapping = mapping or "stream"
    arguments = invocation_arguments(req, mapping)
    target = method or METHODS[mapping]
    url = hub_url
    if url.startswith(("http://", "https://")):
        url = "ws" + url[len("http") :]
    body = handshake_request() + stream_invocation(target, arguments, invocation_id)
    return VendorRequest(method="GET", url=url, headers=dict(headers or {}), body=body)


# --- the translator -------------------------------------------------------------------


class _CopilotBlock:
    """The diff state of one Copilot message, which is one content block.

    ``sent`` is the text already delivered as deltas. Deltas are append-only
    (§5.3.2), so a rewrite cannot be undone: see ``Translator._snapshot``.
    """

    __slots__ = ("index", "reasoning", "sent")

    def __init__(self, index: int, reasoning: bool) -> None:
        self.index = index
        self.reasoning = reasoning
        self.sent = ""


#: Copilot message types that are the assistant's answer; the others
#: (``InternalSearchQuery``, ``InternalLoaderMessage``, ``Progress``...) are not.
_ANSWER_TYPES: Final = frozenset({None, "Chat"})
_REASONING_ORIGINS: Final = frozenset({"ChainOfThoughtSummary"})
#: Copilot ``result.value`` -> §5.3.6 code, for a turn that did not succeed.
_COPILOT_RESULTS: Final[dict[str, str]] = {"Throttled": "rate_limited"}


class Translator(StreamTranslator):
    """SignalR JSON hub records -> standard events (sans-I/O).

    ``mapping`` is ``"stream"`` (default) or ``"copilot"``; ``None`` means the
    default. ``invocation_id`` is the id of the stream invocation to follow;
    when ``None``, the first StreamItem or Completion names it. Raises
    ``ValueError`` for an unknown mapping.
    """

    name = "signalr"

    def __init__(
        self,
        *,
        model: str,
        request_id: str | None = None,
        mapping: str | None = None,
        invocation_id: str | None = None,
        max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
        reasoning: bool = False,
        created: int | None = None,
    ) -> None:
        super().__init__(model=model, request_id=request_id, reasoning=reasoning, created=created)
        mapping = mapping or "stream"
        if mapping not in MAPPINGS:
            raise ValueError(f"unknown SignalR mapping {mapping!r} (known: stream, copilot)")
        self.mapping = mapping
        self.invocation_id = invocation_id
        self._records = RecordDecoder(max_record_bytes=max_record_bytes)
        self._handshake_done = False
        self._tool_blocks: set[int] = set()
        # copilot: message key -> block; the key of the last message updated.
        self._blocks: dict[str, _CopilotBlock] = {}
        self._current_key = ""
        self._next_index = 0

    # -- input -------------------------------------------------------------

    def _frames(self, data: bytes) -> Iterator[bytes]:
        # One record at a time: each is handled before a framing error further on.
        self._records.push(data)
        return iter(self._records.next_record, None)

    def _on_frame(self, frame: bytes) -> None:
        self.out += self._on_record(frame)

    def _on_eof(self) -> None:
        if self._records.pending:
            raise FramingError(
                f"SignalR input ended inside a record ({self._records.pending} bytes "
                "without the 0x1E separator; truncated)"
            )
        raise TranslationError("SignalR input ended before the Completion (truncated)")

    # -- records -------------------------------------------------------------

    def _on_record(self, raw: bytes) -> list[ev.Event]:
        try:
            message = _decode_json(raw)
        except msgspec.DecodeError as exc:
            raise TranslationError(f"SignalR record is not valid JSON: {exc}") from None
        if not isinstance(message, dict):
            raise TranslationError("SignalR record is not a JSON object")
        kind = message.get("type")
        if not self._handshake_done:
            self._handshake_done = True
            if kind is None:  # the handshake response: {} or {"error": ...}
                error = message.get("error")
                if error is not None:
                    return self.writer.fail("internal_error", f"SignalR handshake refused: {error}")
                return []
        if isinstance(kind, bool) or not isinstance(kind, int):
            raise TranslationError("SignalR message has no integer type")
        if kind == MessageType.STREAM_ITEM:
            if not self._ours(message):
                return []
            item = message.get("item")
            if self.mapping == "copilot":
                return self._copilot_item(item)
            return self._stream_item(item)
        if kind == MessageType.COMPLETION:
            if not self._ours(message):
                return []
            error = message.get("error")
            if error is not None:
                return self.writer.fail(*error_code(str(error)))
            return self._finish()
        if kind == MessageType.INVOCATION:
            if self.mapping == "copilot" and message.get("target") == "update":
                return self._copilot_update(message.get("arguments"))
            return []  # the hub calling another client method: not part of the answer
        if kind == MessageType.CLOSE:
            error = message.get("error")
            if error is not None:
                code, text = error_code(str(error))
                return self.writer.fail(code, f"hub closed the connection: {text}")
            raise TranslationError("hub closed the connection before the Completion (truncated)")
        # Ping (6), Ack (8), Sequence (9), client-to-server types, future types.
        return []

    def _ours(self, message: dict[str, Any]) -> bool:
        """Whether a StreamItem / Completion belongs to the stream we follow."""
        invocation_id = message.get("invocationId")
        if not isinstance(invocation_id, str):
            raise TranslationError("SignalR StreamItem/Completion has no invocationId")
        if self.invocation_id is None:
            self.invocation_id = invocation_id
        return invocation_id == self.invocation_id

    def _finish(self) -> list[ev.Event]:
        """The stream's Completion: stop open blocks, then ``stream.end``."""
        out: list[ev.Event] = []
        if not self.writer.errored:
            for index in sorted(self.writer.open_blocks):
                # §4.8: a block that called a tool stops with tool_use.
                reason = "tool_use" if index in self._tool_blocks else "end_turn"
                out += self.writer.stop(index, reason)
        return out + self.writer.end("end_turn")

    # -- the stream mapping -------------------------------------------------------------

    def _stream_item(self, item: Any) -> list[ev.Event]:
        w = self.writer
        if isinstance(item, str):
            return w.text(item, 0) if item else []
        if not isinstance(item, dict):
            return []  # not a shape of this mapping: ignored (forward compatibility)
        index = item.get("index", 0)
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            raise TranslationError("SignalR stream item index is not a non-negative integer")
        # One item may make several events: they go straight to this call's
        # output, so that a failure half-way (an unregistered stop_reason after
        # the usage) keeps those already stamped (their seqs are spent).
        out = self.out
        for key in ("text", "delta"):
            text = item.get(key)
            if isinstance(text, dict):
                text = text.get("text")
            if isinstance(text, str) and text:
                out += w.text(text, index)
        call = item.get("tool_call")
        if isinstance(call, dict):
            call_id, name = call.get("id"), call.get("name")
            arguments = call.get("arguments", {})
            if not isinstance(call_id, str) or not isinstance(name, str):
                raise TranslationError("SignalR tool_call item needs string id and name")
            if not isinstance(arguments, str | dict):
                raise TranslationError("SignalR tool_call arguments are not a JSON object")
            out += w.tool_call(id=call_id, name=name, arguments=arguments, index=index)
            self._tool_blocks.add(index)
        usage = item.get("usage")
        if isinstance(usage, dict):
            counts = [usage.get("input_tokens", 0), usage.get("output_tokens", 0)]
            if not all(type(n) is int and n >= 0 for n in counts):
                raise TranslationError("SignalR usage item counts are not non-negative integers")
            out += w.usage(counts[0], counts[1])
        stop = item.get("stop_reason")
        if isinstance(stop, str):
            out += w.stop(index, stop)
        error = item.get("error")
        if isinstance(error, dict):
            code, message = error.get("code"), error.get("message")
            code = code if isinstance(code, str) and code in ev.ERROR_CODES else "internal_error"
            out += w.error(code, message if isinstance(message, str) else code)
        return []

    # -- the copilot mapping ---------------------------------------------------------------

    def _copilot_update(self, arguments: Any) -> list[ev.Event]:
        if not isinstance(arguments, list) or not arguments or not isinstance(arguments[0], dict):
            return []
        update = arguments[0]
        # Newer frames may carry increments ("writeAtCursor") instead of snapshots.
        increment = update.get("writeAtCursor") is True
        return self._messages(update.get("messages"), increment=increment)

    def _copilot_item(self, item: Any) -> list[ev.Event]:
        if not isinstance(item, dict):
            return []
        out = self._messages(item.get("messages"), increment=False)
        result = item.get("result")
        if isinstance(result, dict):
            value = result.get("value")
            if isinstance(value, str) and value != "Success":
                message = result.get("message") or result.get("error") or value
                code = _COPILOT_RESULTS.get(value, "internal_error")
                out += self.writer.fail(code, f"Copilot result {value}: {message}")
        return out

    def _messages(self, messages: Any, *, increment: bool) -> list[ev.Event]:
        if not isinstance(messages, list):
            return []
        out: list[ev.Event] = []
        for message in messages:
            if not isinstance(message, dict) or message.get("author", "bot") != "bot":
                continue
            if message.get("messageType") not in _ANSWER_TYPES:
                continue
            reasoning = message.get("contentOrigin") in _REASONING_ORIGINS
            if reasoning and not self.reasoning:
                continue
            text = _message_text(message)
            if text is None:
                continue
            message_id = message.get("messageId")
            key = message_id if isinstance(message_id, str) else self._current_key
            out += self._snapshot(key, text, reasoning=reasoning, increment=increment)
        return out

    def _block(self, key: str, reasoning: bool) -> _CopilotBlock:
        block = self._blocks.get(key)
        if block is None:
            block = self._blocks[key] = _CopilotBlock(self._next_index, reasoning)
            self._next_index += 1
        self._current_key = key
        return block

    def _snapshot(self, key: str, text: str, *, reasoning: bool, increment: bool) -> list[ev.Event]:
        """Send what ``text`` (cumulative, or an increment) adds to the block.

        The copilot rewrite rule (docs/bindings.md):

        1. a snapshot that extends the text sent sends only the new suffix;
        2. a snapshot that is a prefix of it (the vendor trimmed a tail) sends
           nothing, and later snapshots are still compared with the text sent;
        3. any other snapshot replaced text already delivered, which deltas
           cannot withdraw: the block is closed with ``content.stop``
           ``content_filter`` (the vendor withdrew it, as Copilot does when
           its filter revokes an answer) and the whole new snapshot opens the
           next block, so that the last block of a message is its final text.
        """
        block = self._block(key, reasoning)
        w = self.writer
        if increment:
            block.sent += text
            return w.text(text, block.index, reasoning=reasoning) if text else []
        if text.startswith(block.sent):
            suffix = text[len(block.sent) :]
            block.sent = text
            return w.text(suffix, block.index, reasoning=reasoning) if suffix else []
        if block.sent.startswith(text):
            return []
        out = w.stop(block.index, "content_filter")
        block = self._blocks[key] = _CopilotBlock(self._next_index, reasoning)
        self._next_index += 1
        block.sent = text
        return out + (w.text(text, block.index, reasoning=reasoning) if text else [])


def _message_text(message: dict[str, Any]) -> str | None:
    """A Copilot message's text, or its first adaptive card's text block."""
    text = message.get("text")
    if isinstance(text, str):
        return text
    cards = message.get("adaptiveCards")
    if isinstance(cards, list) and cards and isinstance(cards[0], dict):
        body = cards[0].get("body")
        if isinstance(body, list) and body and isinstance(body[0], dict):
            card_text = body[0].get("text")
            if isinstance(card_text, str):
                return card_text
    return None


#: The SignalR hubs (Azure, Copilot) vendor format.
FORMAT = VendorFormat(
    name="signalr",
    title="SignalR hubs (Azure, Copilot)",
    transport="signalr",
    media_type="application/json",
    translator=Translator,
    build_request=build_request,
    endpoint="GET {hub_url} (WebSocket)",
)
