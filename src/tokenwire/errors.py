"""Every exception tokenwire raises, in one tree.

::

    TokenwireError
    ├── ProtocolError                 something broke the LLM-Stream protocol
    │   ├── LocalProtocolError        we were asked to build something illegal
    │   │                             (an SSE field with CR/LF, an event after stream.end)
    │   │   └── CycleMisuse           server.http1: an ASGI app sent out of order
    │   └── RemoteProtocolError       a peer or upstream sent something illegal
    │       ├── FramingError          SSE / envelope framing (size limits, truncation); has .offset
    │       ├── EventDecodeError      one SSE event whose JSON is not a valid envelope; has .rule
    │       ├── TranslationError      a vendor stream that cannot be translated
    │       └── InvalidRequest        a request envelope (§4) that is not valid; has .path
    │           └── RequestTooLarge   over a size or depth limit (HTTP 413)
    ├── TransportError                the connection itself (client side)
    │   ├── TimeoutError              connect, first-event or idle timeout
    │   ├── UnsupportedMediaType      the endpoint answered 415 (§7.2)
    │   ├── HTTPStatusError           any other non-2xx answer
    │   └── StreamTruncated           the connection ended before stream.end
    ├── StreamError                   raised only by Response.raise_for_error() for an
    │                                 `error` event, which is otherwise plain data
    └── raised where they belong (each module's own job), still in this one tree:
        ├── ClientDisconnected        server.asgi: the client left before its body was read
        ├── MediaTypeError            mediatype: a Content-Type or Accept that does not parse
        ├── BodyDecodeError           gateway.body_encoding: a compressed request body
        │                             that cannot be decoded (400, 413, 415)
        ├── ConfigError               gateway.config: a bad config, naming the key
        │   (ConfigProblem, gateway.config.production, for the production keys)
        ├── ResumeConflict            server: a resumable request_id already stored (409)
        ├── CountRefused              server: an upstream's counting endpoint answered an
        │                             error (its status, the standard's code and message)
        ├── Refusal                   server.http1: a request our HTTP/1.1 server refuses
        │                             before the app sees it (a 4xx and Connection: close)
        ├── ResumeStoreError          gateway.resume.store: the store failed
        │   └── StoreUnavailable (Unreached: part of a batch), StoreRefused, StreamNotFound,
        │       EventsTrimmed
        ├── SessionStateError         gateway.resume.session: an input its table does not allow
        ├── NegotiateError            gateway.providers.signalr: the hub's negotiate step failed
        ├── ClientEventError          gateway.responses_ws.protocol: a Responses WebSocket
        │                             client event the mode refuses; has .param
        ├── UnknownResponse           gateway.responses_ws.chain: a previous_response_id the
        │                             socket's chain does not hold (or holds no longer)
        ├── UpstreamError             gateway.upstream: the HTTP/1.1 upstream connection failed,
        │                             timed out (.timeout, .phase) or sent a malformed response
        ├── UnknownFormat             cli._detect: a capture whose format is not recognised
        └── WaitTimeout               testing.waiting: a test's condition did not hold in
                                      time (an AssertionError too, so pytest fails it)
    (private control-flow exceptions descend from TokenwireError too; a test walks the
    package and checks every exception class is in this tree)

Each protocol error knows the HTTP status a server should answer with
(``status_hint``) and the §5.3.6 wire code it maps to (``code``).
"""

from __future__ import annotations

__all__ = [
    "EventDecodeError",
    "FramingError",
    "HTTPStatusError",
    "InvalidRequest",
    "LocalProtocolError",
    "ProtocolError",
    "RemoteProtocolError",
    "RequestTooLarge",
    "StreamError",
    "StreamTruncated",
    "TimeoutError",
    "TokenwireError",
    "TranslationError",
    "TransportError",
    "UnsupportedMediaType",
]


class TokenwireError(Exception):
    """Base class of every error raised by tokenwire."""


class ProtocolError(TokenwireError):
    """The LLM-Stream protocol was broken.

    ``status_hint`` is the HTTP status a server should answer with, and
    ``code`` the §5.3.6 error code to put on the wire.
    """

    status_hint: int = 400
    code: str = "internal_error"

    def __init__(
        self, message: str, *, status_hint: int | None = None, code: str | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        if status_hint is not None:
            self.status_hint = status_hint
        if code is not None:
            self.code = code


class LocalProtocolError(ProtocolError):
    """We were asked to produce something the protocol forbids."""

    status_hint = 500


class RemoteProtocolError(ProtocolError):
    """A peer or upstream sent something the protocol forbids."""

    status_hint = 502


class FramingError(RemoteProtocolError):
    """A framing layer (SSE, a vendor's envelope) could not be parsed.

    ``offset`` is the byte offset in the input where the problem was found.
    """

    def __init__(self, message: str, *, offset: int | None = None) -> None:
        super().__init__(message if offset is None else f"{message} (at byte {offset})")
        self.offset = offset


class EventDecodeError(RemoteProtocolError):
    """One SSE event did not hold a valid event envelope (§5.1, §5.2).

    ``rule`` is the lifecycle rule code it breaks (``invalid-json``,
    ``type-mismatch``, ``invalid-field``), and ``seq`` the event's seq when it
    could still be read, so a validator can keep counting.
    """

    def __init__(self, message: str, *, rule: str, seq: int | None = None) -> None:
        super().__init__(message)
        self.rule = rule
        self.seq = seq


class TranslationError(RemoteProtocolError):
    """A vendor stream could not be turned into standard events."""


class InvalidRequest(RemoteProtocolError):
    """A request envelope (§4) is not valid. ``path`` names the JSON path."""

    status_hint = 400

    def __init__(self, message: str, *, path: str = "$") -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path
        self.reason = message


class RequestTooLarge(InvalidRequest):
    """A request is over a size or nesting limit."""

    status_hint = 413


class TransportError(TokenwireError):
    """The connection to an endpoint failed."""


class TimeoutError(TransportError):  # noqa: A001 - mirrors httpx.TimeoutException's role
    """A connect, first-event or idle timeout fired. ``phase`` says which."""

    def __init__(self, message: str, *, phase: str) -> None:
        super().__init__(message)
        self.phase = phase


class HTTPStatusError(TransportError):
    """The endpoint answered with a non-2xx status. ``body`` is its (bounded) body."""

    def __init__(self, message: str, *, status_code: int, body: bytes = b"") -> None:
        super().__init__(message)
        self.status_code = status_code
        self.body = body


class UnsupportedMediaType(HTTPStatusError):
    """The endpoint answered 415: it does not speak the standard (§7.2)."""


class StreamTruncated(TransportError):
    """The stream ended before its stream.end event. ``last_seq`` is the last seq seen."""

    def __init__(self, message: str, *, last_seq: int | None) -> None:
        super().__init__(message)
        self.last_seq = last_seq


class StreamError(TokenwireError):
    """An `error` event, raised on request by ``raise_for_error()``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
