"""What the sync and async clients share: clocks, the request, URLs, resume, HTTP checks, errors.

Plain values and functions, no I/O; the stream's control flow is ``_flow.py``.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any, Final, Literal, Protocol, TypeAlias
from urllib.parse import quote

import httpx
import msgspec

from .. import binary, errors
from .. import events as ev
from .._suggest import connection_hint
from ..request import MEDIA_TYPE, Request, build
from ._receiver import Receiver, side_effect_tools
from ._url import STREAM_PATH, endpoint

__all__ = [
    "DEFAULT_TIMEOUTS",
    "EVENT_STREAM",
    "Binding",
    "MAX_ERROR_BODY",
    "MAX_RESUME_ATTEMPTS",
    "RESUMABLE",
    "RESUME_TOKEN_HEADER",
    "STREAM_PATH",
    "ErrorBody",
    "EventTranslator",
    "Timeouts",
    "base_url_of",
    "caused",
    "check_content_type",
    "make_translator",
    "post_headers",
    "Resumer",
    "prepare_request",
    "send_error",
    "status_error",
    "stream_url",
    "timeout_message",
]

#: How much of a non-2xx body is kept on ``HTTPStatusError.body``.
MAX_ERROR_BODY: Final = 64 * 1024

#: Consecutive resume attempts that bring no new event before the stream is
#: declared truncated.
MAX_RESUME_ATTEMPTS: Final = 3

#: §4.9: the response media type.
EVENT_STREAM: Final = "text/event-stream"
#: The response binding a client asks for: SSE (§5.1) or binary frames (docs/binary.md).
Binding: TypeAlias = Literal["sse", "binary"]


class Timeouts(msgspec.Struct, frozen=True, kw_only=True):
    """The client's three clocks, in seconds (``None`` disables one).

    ``connect``: opening the TCP/TLS connection. ``first_event``: from sending
    the request to the first event (``stream.start``), headers included.
    ``idle``: between one event and the next while the client is waiting for
    it (time spent in the caller's own code does not count, nor do SSE
    comments: a keep-alive comment keeps proxies open, not this clock).
    Each expiry raises ``tokenwire.errors.TimeoutError`` with ``phase`` set to
    ``"connect"``, ``"first_event"`` or ``"idle"``.
    """

    connect: float | None = 5.0
    first_event: float | None = 60.0
    idle: float | None = 60.0

    @classmethod
    def of(cls, value: Timeouts | float | None) -> Timeouts:
        """``value`` as ``Timeouts``: a number sets all three, ``None`` disables all."""
        if isinstance(value, Timeouts):
            return value
        if value is None:
            return cls(connect=None, first_event=None, idle=None)
        return cls(connect=float(value), first_event=float(value), idle=float(value))

    def for_headers(self) -> httpx.Timeout:
        """httpx's timeouts up to the response headers: connect, then first_event."""
        return httpx.Timeout(
            connect=self.connect, read=self.first_event, write=self.first_event, pool=self.connect
        )


DEFAULT_TIMEOUTS: Final = Timeouts()


RESUMABLE: Final = "tokenwire:resumable"

#: The header that carries a resumable stream's owner token: the POST answer
#: gives it, the resume ``GET`` and the cancelling ``DELETE`` send it back.
RESUME_TOKEN_HEADER: Final = "tokenwire-resume-token"


def stream_url(url: str) -> str:
    """The URL to POST standard requests to, from what a user gives for the endpoint.

    The one URL grammar of the client, ``tokenwire chat`` and ``tokenwire check``
    (``_url.endpoint``): a base URL, ``/v1``, the stream URL or a bare
    ``host:port`` all give ``http(s)://host:port[/prefix]/v1/stream``. Raises
    ``ValueError`` in one line, saying what to pass, for anything else.
    """
    return endpoint(url).stream


def base_url_of(url: str) -> str:
    """The endpoint's base URL (no ``/v1/stream``, no query), by the same grammar."""
    return endpoint(url).base


def prepare_request(
    request: Request | None, kwargs: Mapping[str, Any], *, resume: bool = False
) -> Request:
    """The request to send: ``request``, or one built from ``request.build`` kwargs.

    A ``metadata.request_id`` (a uuid4) is added when there is none, so the
    stream can be found again for a resume (DESIGN.md) and is echoed (§4.6).
    Unless the request says otherwise itself, it also says whether the stream
    is resumable: ``"tokenwire:resumable": true`` with ``resume``, else
    ``false``, so that a hang-up cancels even where resumable is the default.
    Raises ``TypeError`` for both or neither, ``InvalidRequest`` for a request
    that breaks §4 (or a malformed ``tokenwire:side_effects`` extension).
    """
    if request is None:
        if not kwargs:
            raise TypeError("stream() needs a Request or request.build() keyword arguments")
        request = build(**kwargs)
    elif kwargs:
        raise TypeError("pass either a Request or keyword arguments, not both")
    side_effect_tools(request)  # fail before sending, not at the first tool call
    if request.request_id is None:
        metadata = dict(request.metadata or {})
        metadata["request_id"] = str(uuid.uuid4())
        request = msgspec.structs.replace(request, metadata=metadata)
    if request.extension(RESUMABLE) is None:
        # Said either way: a gateway may make streams resumable by default
        # (docs/scaling.md), and then a hang-up would no longer cancel.
        extensions = {**(request.extensions or {}), RESUMABLE: resume}
        request = msgspec.structs.replace(request, extensions=extensions)
    return request


#: ``Accept`` of a client on the binary binding: frames preferred, SSE still taken
#: from an endpoint that does not speak them (docs/binary.md section 7).
FRAMES_ACCEPT: Final = f"{binary.MEDIA_TYPE}, {EVENT_STREAM};q=0.5"


def accept_for(binding: Binding) -> str:
    """The ``Accept`` a client on ``binding`` sends."""
    return FRAMES_ACCEPT if binding == "binary" else EVENT_STREAM


def post_headers(binding: Binding = "sse") -> dict[str, str]:
    """§4.1: the request media type; §4.9 (or docs/binary.md): the answer we expect."""
    return {"content-type": MEDIA_TYPE, "accept": accept_for(binding)}


class Resumer:
    """When and how to reconnect after a drop (DESIGN.md: the resume route).

    ``drop`` says why the last connection ended. ``next_delay`` decides the
    next attempt; ``request`` builds it; ``phase`` and ``seconds`` give the clock
    that runs while waiting for the resumed stream.
    """

    def __init__(
        self, *, enabled: bool, template: str, timeouts: Timeouts, binding: Binding = "sse"
    ) -> None:
        self.enabled = enabled
        self.binding = binding
        self.template = template
        self.timeouts = timeouts
        self.drop = ""
        #: The POST answer's ``tokenwire-resume-token``, sent back on GET and DELETE.
        self.token: str | None = None
        self.fruitless = 0  # attempts in a row that brought no new event
        self._messages = -1

    def next_delay(self, receiver: Receiver) -> float:
        """Seconds to wait before the next attempt. Raises ``StreamTruncated`` when
        resume is off, or ``MAX_RESUME_ATTEMPTS`` in a row brought nothing new."""
        if not self.enabled:
            raise receiver.truncated(f"{self.drop} (resume is off)")
        self.fruitless = self.fruitless + 1 if receiver.messages == self._messages else 0
        self._messages = receiver.messages
        if self.fruitless >= MAX_RESUME_ATTEMPTS:
            raise receiver.truncated(
                f"{self.drop}; {MAX_RESUME_ATTEMPTS} resume attempts brought nothing new"
            )
        return min(0.1 * 2**self.fruitless, 2.0) if self.fruitless else 0.0

    def request(self, http: httpx.Client | httpx.AsyncClient, receiver: Receiver) -> httpx.Request:
        """``GET {resume_path}`` with ``Last-Event-ID``: seq doubles as the SSE id
        (DESIGN.md), so it is the last seq seen."""
        headers = {"accept": accept_for(self.binding), "cache-control": "no-cache"}
        if receiver.last_seq is not None:
            headers["last-event-id"] = str(receiver.last_seq)
        if self.token is not None:
            headers[RESUME_TOKEN_HEADER] = self.token
        t = self.timeouts
        return http.build_request(
            "GET",
            self._url(receiver),
            headers=headers,
            timeout=Timeouts(connect=t.connect, first_event=self.seconds(receiver)).for_headers(),
        )

    def cancel(
        self, http: httpx.Client | httpx.AsyncClient, receiver: Receiver, timeout: httpx.Timeout
    ) -> httpx.Request:
        """``DELETE {resume_path}``: stop a resumable stream's generation (the owner's token)."""
        headers = {} if self.token is None else {RESUME_TOKEN_HEADER: self.token}
        return http.build_request("DELETE", self._url(receiver), headers=headers, timeout=timeout)

    def _url(self, receiver: Receiver) -> str:
        rid = receiver.request.request_id or ""
        return self.template.format(request_id=quote(rid, safe=""))

    def phase(self, receiver: Receiver) -> str:
        """The clock while waiting for the resumed stream: idle, unless nothing came yet."""
        return "first_event" if receiver.last_seq is None else "idle"

    def seconds(self, receiver: Receiver) -> float | None:
        t = self.timeouts
        return t.first_event if self.phase(receiver) == "first_event" else t.idle

    def problem(self, response: httpx.Response) -> str | None:
        """Why a resume answer cannot continue the stream, or ``None`` when it can."""
        if not response.is_success:
            unsupported = response.status_code in (404, 405, 501)
            return (
                f"{self.drop}; the resume answered {response.status_code} "
                f"{response.reason_phrase}"
                + (" (the endpoint does not support resume)" if unsupported else "")
            )
        try:
            check_content_type(response)
        except errors.RemoteProtocolError as exc:
            return f"{self.drop}; the resume answer is not a stream: {exc}"
        return None


class ErrorBody:
    """The first ``MAX_ERROR_BODY`` bytes of a non-2xx answer, for ``HTTPStatusError.body``."""

    def __init__(self) -> None:
        self._data = bytearray()

    def add(self, chunk: bytes) -> bool:
        """Keep ``chunk``; True once enough is kept (stop reading)."""
        self._data += chunk
        return len(self._data) >= MAX_ERROR_BODY

    def __bytes__(self) -> bytes:
        return bytes(self._data[:MAX_ERROR_BODY])


def status_error(response: httpx.Response, body: bytes) -> errors.HTTPStatusError:
    """The error for a non-2xx answer; 415 is ``UnsupportedMediaType`` (§7.2)."""
    detail = _error_detail(body)
    where = f"{response.request.method} {response.request.url}"
    message = f"{where} answered {response.status_code} {response.reason_phrase}"
    if detail:
        message = f"{message}: {detail}"
    cls = errors.UnsupportedMediaType if response.status_code == 415 else errors.HTTPStatusError
    return cls(message, status_code=response.status_code, body=body)


def _error_detail(body: bytes) -> str:
    """A short text for an error body: its JSON ``error.message`` or ``message``, else text."""
    try:
        obj = msgspec.json.decode(body)
    except (msgspec.DecodeError, RecursionError):  # a hostile body nested too deeply too
        return body[:200].decode("utf-8", "replace").strip()
    if isinstance(obj, dict):
        inner = obj.get("error", obj)
        if isinstance(inner, dict):
            text = inner.get("message")
            path = inner.get("path")
            if isinstance(text, str):
                return f"{path}: {text}" if isinstance(path, str) else text
        elif isinstance(inner, str):
            return inner
    return body[:200].decode("utf-8", "replace").strip()


def check_content_type(response: httpx.Response) -> binary.Payload | None:
    """§4.9: the answer must be ``text/event-stream`` (``None``), or the binary binding
    (docs/binary.md: its payload encoding). Raises ``RemoteProtocolError`` otherwise."""
    value = response.headers.get("content-type", "")
    media_type = value.split(";", 1)[0].strip().lower()
    if media_type == binary.MEDIA_TYPE:
        payload = "json"
        for param in value.split(";")[1:]:
            name, _, found = param.partition("=")
            if name.strip().lower() == "payload":
                payload = found.strip().strip('"').lower()
        if payload not in binary.PAYLOADS:
            raise errors.RemoteProtocolError(
                f"{response.request.url} answered frames with payload={payload!r}, "
                f"not one of {', '.join(binary.PAYLOADS)}"
            )
        return "json" if payload == "json" else "msgpack"
    if media_type != EVENT_STREAM:
        raise errors.RemoteProtocolError(
            f"§4.9: {response.request.url} answered {media_type or 'no content type'!r}, "
            f"not {EVENT_STREAM!r}: the endpoint does not speak LLM-Stream"
        )
    return None


def caused(error: errors.TokenwireError, cause: BaseException) -> errors.TokenwireError:
    """``error`` with ``cause`` as its ``__cause__``, as ``raise error from cause`` would set."""
    error.__cause__ = cause
    return error


def send_error(exc: httpx.HTTPError, url: str, *, phase: str) -> errors.TokenwireError:
    """Map an httpx failure before the response headers to tokenwire's tree.

    ``phase`` is the clock that was running for a read timeout.
    """
    if isinstance(exc, httpx.ConnectTimeout | httpx.PoolTimeout):
        return errors.TimeoutError(f"connecting to {url} timed out", phase="connect")
    if isinstance(exc, httpx.TimeoutException):
        return errors.TimeoutError(f"no answer from {url} in time ({phase})", phase=phase)
    text = f"{type(exc).__name__}: {exc}"
    return errors.TransportError(f"{url}: {text}{connection_hint(text, url)}")


class EventTranslator(Protocol):
    """A vendor translator (``tokenwire.translate``): bytes in, standard events out."""

    def feed(self, data: bytes) -> list[ev.Event]: ...

    def close(self) -> list[ev.Event]: ...


def make_translator(vendor: str | EventTranslator, request: Request) -> EventTranslator:
    """The translator for a fallback answer: a vendor name or a ready translator."""
    if isinstance(vendor, str):
        from ..translate import translator

        made: EventTranslator = translator(
            vendor, model=request.model, request_id=request.request_id
        )
        return made
    return vendor


def timeout_message(phase: str, seconds: float | None, request_id: str | None) -> str:
    """The text of a first-event or idle ``TimeoutError``."""
    if phase == "first_event":
        return f"stream {request_id}: no first event within {seconds} s (first_event timeout)"
    return f"stream {request_id}: no event for {seconds} s after the last one (idle timeout)"
