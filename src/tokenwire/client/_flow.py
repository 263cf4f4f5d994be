"""One stream's control flow, written once and driven by ``Stream`` and ``AsyncStream``.

As httpx writes an auth flow once (``Auth.auth_flow``) and lets ``Client``
and ``AsyncClient`` drive it, ``StreamFlow.run`` is a plain generator that
yields what to do next (an *op*) and is sent its outcome. The flow decides
everything: when to send, which clock runs, when to resume, what to hand out,
when a stream must be cancelled; a driver only performs the op, blocking or
awaiting. Failures come back as values (a ``TokenwireError``, ``Dropped``,
``TimedOut``), never thrown into the generator, so an error is raised from
the flow's own line, with the driver's frame above it.

Ops and what the driver sends back:

=================  ==========================================================
``Send``           send ``request``: the ``httpx.Response`` or a ``TokenwireError``
``ReadErrorBody``  up to ``MAX_ERROR_BODY`` bytes of a non-2xx body, then close it
``Attach``         start reading ``response`` (``None``)
``Read``           the next body chunk, ``None`` at its end, ``Dropped``, ``TimedOut``
``list``           hand these events to the caller, one by one (``None``)
``Ask``            the ``confirm`` callback's answer for ``call`` (``None``: no callback)
``UseFallback``    ``(vendor, body)`` from the ``fallback`` callback (§7.2)
``ReadVendor``     the next chunk of the fallback body, ``None`` at its end
``Pause``          sleep ``seconds`` (``None``)
``Close``          close ``response`` (``None``)
=================  ==========================================================
"""

from __future__ import annotations

import logging
import os
import ssl
import time
import weakref
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, Final, Generic, Literal, TypeAlias, TypeVar

import httpx

from .. import binary, errors
from .. import events as ev
from ..lifecycle import Violation
from ..request import Request, dumps
from ._common import (
    DEFAULT_TIMEOUTS,
    RESUMABLE,
    RESUME_TOKEN_HEADER,
    STREAM_PATH,
    Binding,
    EventTranslator,
    Resumer,
    Timeouts,
    check_content_type,
    make_translator,
    post_headers,
    status_error,
    timeout_message,
)
from ._frames import FRAMES_TRANSPORTS
from ._receiver import Receiver
from ._response import ParsedToolCall, RejectedToolCall, Response
from ._transports import FramesFactory
from ._url import endpoint

__all__ = [
    "API_KEY_ENV",
    "Ask",
    "Attach",
    "ClientBase",
    "Close",
    "Dropped",
    "Op",
    "Pause",
    "Read",
    "ReadErrorBody",
    "ReadVendor",
    "Send",
    "StreamFlow",
    "StreamState",
    "TimedOut",
    "UseFallback",
    "with_api_key",
]

logger: Final = logging.getLogger("tokenwire.client")

#: How long ``close()`` waits for the DELETE that cancels a resumable stream.
CANCEL_TIMEOUT: Final = httpx.Timeout(2.0)


@dataclass(slots=True)
class Send:
    request: httpx.Request
    phase: str  # the clock a read timeout belongs to
    deadline: float | None  # monotonic seconds


@dataclass(slots=True)
class ReadErrorBody:
    response: httpx.Response


@dataclass(slots=True)
class Attach:
    response: httpx.Response


@dataclass(slots=True)
class Read:
    phase: str
    deadline: float | None


@dataclass(slots=True)
class Ask:
    call: ParsedToolCall


@dataclass(slots=True)
class UseFallback:
    request: Request


@dataclass(slots=True)
class ReadVendor:
    pass


@dataclass(slots=True)
class Pause:
    seconds: float


@dataclass(slots=True)
class Close:
    response: httpx.Response


@dataclass(slots=True)
class Dropped:
    """``Read``: the connection failed mid-body (``why`` names the httpx error)."""

    why: str


@dataclass(slots=True)
class TimedOut:
    """``Read``: the running clock expired; ``cause`` is the httpx error, if any."""

    cause: BaseException | None = None


#: What a flow yields; a ``list`` is a batch of events to hand out.
Op: TypeAlias = (
    Send | ReadErrorBody | Attach | Read | list[ev.Event] | Ask | UseFallback | ReadVendor
) | (Pause | Close)
Flow: TypeAlias = Generator[Op, Any, None]

_READ_VENDOR: Final = ReadVendor()


HTTP = TypeVar("HTTP", httpx.Client, httpx.AsyncClient)
Transport = TypeVar("Transport")
ConfirmT = TypeVar("ConfirmT")
FallbackT = TypeVar("FallbackT")


class ClientBase(Generic[HTTP, Transport, ConfirmT, FallbackT]):
    """The settings ``Client`` and ``AsyncClient`` share (see ``Client`` for each)."""

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8080",
        *,
        api_key: str | None = None,
        headers: dict[str, str] | None = None,
        timeout: Timeouts | float | None = DEFAULT_TIMEOUTS,
        strict: bool = False,
        resume: bool = False,
        confirm: ConfirmT | None = None,
        fallback: FallbackT | None = None,
        http2: bool = False,
        transport: Transport | Literal["http", "ws", "webtransport"] | None = None,
        path: str = STREAM_PATH,
        resume_path: str = "/v1/streams/{request_id}",
        max_event_bytes: int = 1 << 20,
        binding: Binding = "sse",
        frames_url: str | None = None,
        cafile: str | None = None,
    ) -> None:
        if binding not in ("sse", "binary"):
            raise ValueError(f"binding must be 'sse' or 'binary', not {binding!r}")
        if isinstance(transport, str):
            if transport not in ("http", *FRAMES_TRANSPORTS):
                raise ValueError(
                    f"transport must be 'http', 'ws', 'webtransport' or an httpx transport, "
                    f"not {transport!r}"
                )
            if transport != "http":
                binding = "binary"  # the binding's own transports carry frames only
        self.binding: Binding = binding
        self.timeout = Timeouts.of(timeout)
        self.strict = strict
        self.resume = resume
        self.confirm = confirm
        self.fallback = fallback
        self.path = path
        self.resume_path = resume_path
        self.max_event_bytes = max_event_bytes
        params = None
        if path == STREAM_PATH:
            # The one URL grammar (_url.py): host:port, /v1 or the stream URL work too.
            found = endpoint(base_url)
            base_url, params = found.base, found.query.removeprefix("?") or None
        frames: FramesFactory | None = None
        if transport in FRAMES_TRANSPORTS:
            frames = FramesFactory(
                transport,  # type: ignore[arg-type]
                base_url,
                frames_url,
                stream_path=path,
                resume_path=resume_path,
                max_frame_bytes=max_event_bytes,
                http2=http2,
                cafile=cafile,
            )
        verify: dict[str, Any] = {}
        if cafile is not None:  # a private CA (a test's, a company's) for every transport
            verify["verify"] = ssl.create_default_context(cafile=cafile)
        self._http: HTTP = self._new_http(
            base_url=base_url,
            headers=with_api_key(headers, api_key),
            params=params,
            http2=http2,
            transport=None if transport == "http" else transport,
            frames=frames,
            **verify,
        )
        #: The I/O drivers of streams not closed yet: closing the client closes
        #: (cancels) them.
        self._streams: weakref.WeakSet[Any] = weakref.WeakSet()

    def _new_http(self, *, frames: FramesFactory | None, **options: Any) -> HTTP:
        raise NotImplementedError

    @property
    def base_url(self) -> httpx.URL:
        return self._http.base_url


#: Where ``Client`` / ``AsyncClient`` (and ``tokenwire chat``/``check``) find a
#: key when none is passed.
API_KEY_ENV: Final = "TOKENWIRE_API_KEY"


def with_api_key(headers: dict[str, str] | None, api_key: str | None) -> dict[str, str]:
    """``headers`` plus ``Authorization: Bearer`` for ``api_key`` (else ``$TOKENWIRE_API_KEY``).

    An ``Authorization`` header given in ``headers`` wins: it was asked for by name.
    """
    out = dict(headers or {})
    key = api_key if api_key is not None else os.environ.get(API_KEY_ENV, "")
    if key and not any(name.lower() == "authorization" for name in out):
        out["authorization"] = f"Bearer {key}"
    return out


class StreamFlow:
    """The decisions of one stream, over one or more connections; see the module docstring.

    ``http`` only builds requests here (no I/O). ``closed`` is set by the
    driver when the caller closes the stream, also while it holds an event.
    """

    def __init__(self, client: ClientBase[Any, Any, Any, Any], request: Request) -> None:
        self.http = client._http
        self.request = request
        self.timeout = client.timeout
        self.path = client.path
        self.has_confirm = client.confirm is not None
        self.has_fallback = client.fallback is not None
        self.receiver = Receiver(
            request, strict=client.strict, max_event_bytes=client.max_event_bytes
        )
        self.resumer = Resumer(
            enabled=client.resume,
            template=client.resume_path,
            timeouts=client.timeout,
            binding=client.binding,
        )
        self.binding = client.binding
        #: The request asked the endpoint to keep generating after a hang-up.
        self.resumable = request.extension(RESUMABLE) is True
        self.opened = False  # the POST went out
        self.open_error: BaseException | None = None
        #: What ended the iteration, raised again by ``final()``.
        self.failure: BaseException | None = None
        self.streaming = False  # an LLM-Stream answer came back (not a fallback)
        self.closed = False
        self.attached: httpx.Response | None = None
        self.translator: EventTranslator | None = None
        self.phase = "first_event"
        self.deadline: float | None = None

    # -- the flow ------------------------------------------------------------

    def open(self) -> Flow:
        """Send the request and check the answer's status and content type (§4.9)."""
        if self.opened:
            if self.open_error is not None:
                raise self.open_error
            return
        self.opened = True
        try:
            yield from self._open()
        except BaseException as exc:
            self.open_error = exc
            raise

    def _open(self) -> Flow:
        timeout = self.timeout
        request = self.http.build_request(
            "POST",
            self.path,
            content=dumps(self.request),
            headers=post_headers(self.binding),
            timeout=timeout.for_headers(),
        )
        if timeout.first_event is not None:
            self.deadline = time.monotonic() + timeout.first_event
        response = yield Send(request, "first_event", self.deadline)
        if isinstance(response, errors.TokenwireError):
            raise response
        assert isinstance(response, httpx.Response)
        if response.status_code == 415 and self.has_fallback:
            yield Close(response)
            logger.info("%s answered 415: using the fallback (§7.2)", request.url)
            vendor = yield UseFallback(self.request)
            self.translator = make_translator(vendor, self.request)
            return
        if not response.is_success:
            body = yield ReadErrorBody(response)
            raise status_error(response, body)
        try:
            framing = check_content_type(response)
        except errors.RemoteProtocolError:
            yield Close(response)
            raise
        self.streaming = True
        self.resumer.token = response.headers.get(RESUME_TOKEN_HEADER)
        if self.resumer.token is not None:
            self.resumable = True  # the endpoint keeps it, whatever was asked
        yield from self._attach(response, framing)

    def run(self) -> Flow:
        """The whole stream: open, read, resume after drops, finish."""
        receiver = self.receiver
        yield from self.open()
        while not receiver.done and not self.closed:
            if self.translator is not None:
                yield from self._read_fallback(self.translator)
                if not receiver.done and not self.closed:
                    raise receiver.truncated("the fallback stream ended before stream.end")
            elif self.attached is not None:
                yield from self._read_http(self.attached)
            else:
                yield from self._resume()
        if receiver.done:
            receiver.finish()

    def _attach(self, response: httpx.Response, framing: binary.Payload | None = None) -> Flow:
        self.attached = response
        self.receiver.connect(framing)
        yield Attach(response)

    def _read_http(self, response: httpx.Response) -> Flow:
        yield from self._read_body()
        # Only on a normal end: after a raise, the driver closes what is open.
        self.attached = None
        yield Close(response)

    def _read_body(self) -> Flow:
        receiver = self.receiver
        idle = self.timeout.idle
        while True:
            chunk = yield Read(self.phase, self.deadline)
            if type(chunk) is bytes:
                before = receiver.messages
                events = receiver.feed(chunk)
                if receiver.messages == before:
                    continue  # no whole event yet (or only comments): same clock
                yield from self._hand_out(events)
                # The caller's time is not the server's: the idle clock starts now.
                self.phase = "idle"
                self.deadline = None if idle is None else time.monotonic() + idle
                if receiver.done or self.closed:
                    return
            elif chunk is None:
                receiver.eof()
                self.resumer.drop = "the connection closed"
                return
            elif isinstance(chunk, TimedOut):
                seconds = self.timeout.first_event if self.phase == "first_event" else idle
                message = timeout_message(self.phase, seconds, self.request.request_id)
                raise errors.TimeoutError(message, phase=self.phase) from chunk.cause
            else:
                assert isinstance(chunk, Dropped)
                self.resumer.drop = chunk.why
                logger.info("stream %s dropped: %s", self.request.request_id, chunk.why)
                return

    def _read_fallback(self, translator: EventTranslator) -> Flow:
        receiver = self.receiver
        while True:
            chunk = yield _READ_VENDOR
            if chunk is None:
                break
            yield from self._hand_out(receiver.feed_events(translator.feed(chunk)))
            if receiver.done or self.closed:
                return
        yield from self._hand_out(receiver.feed_events(translator.close()))

    def _hand_out(self, events: list[ev.Event]) -> Flow:
        """Hand ``events`` out, less side-effect calls not approved (§8.2); then
        raise an error found after them."""
        receiver = self.receiver
        if receiver.side_effects:
            events = yield from self._confirmed(events)
        if events:
            yield events
        receiver.raise_pending()

    def _confirmed(self, events: list[ev.Event]) -> Generator[Op, Any, list[ev.Event]]:
        receiver = self.receiver
        out: list[ev.Event] = []
        for event in events:
            call = receiver.needs_confirmation(event)
            if call is not None:
                approved = (yield Ask(call)) if self.has_confirm else None
                if not receiver.confirm(event, None if approved is None else bool(approved)):
                    continue
            out.append(event)
        return out

    def _resume(self) -> Flow:
        """Reconnect with ``Last-Event-ID`` (DESIGN.md) or raise ``StreamTruncated``."""
        receiver = self.receiver
        resumer = self.resumer
        delay = resumer.next_delay(receiver)
        if delay:
            yield Pause(delay)
        request = resumer.request(self.http, receiver)
        logger.info("stream %s: resuming after seq %s", self.request.request_id, receiver.last_seq)
        self.phase = resumer.phase(receiver)
        seconds = resumer.seconds(receiver)
        self.deadline = None if seconds is None else time.monotonic() + seconds
        response = yield Send(request, "idle", self.deadline)
        if isinstance(response, errors.TransportError):
            resumer.drop = f"resume failed: {response}"
            return
        if isinstance(response, errors.TokenwireError):
            raise response
        assert isinstance(response, httpx.Response)
        problem = resumer.problem(response)
        if problem is not None:
            yield Close(response)
            raise receiver.truncated(problem)
        yield from self._attach(response, check_content_type(response))

    # -- cancelling ------------------------------------------------------------

    def cancel_request(self) -> httpx.Request | None:
        """The ``DELETE`` that stops a resumable stream's generation, when one is due.

        A stream that is not resumable is cancelled by the hang-up itself; a
        resumable one keeps generating for a resume, so closing it before
        ``stream.end`` must say so (DESIGN.md: the resume route). Not sent
        after ``stream.end`` or a truncation (the stream is over or gone).
        """
        receiver = self.receiver
        if not (self.resumable and self.streaming) or receiver.done or receiver.finished:
            return None
        return self.resumer.cancel(self.http, receiver, CANCEL_TIMEOUT)


class StreamState:
    """What ``Stream`` and ``AsyncStream`` show of their flow, shared by both."""

    def __init__(self, client: ClientBase[Any, Any, Any, Any], request: Request) -> None:
        self.request = request
        self._flow = StreamFlow(client, request)

    def _response(self) -> Response:
        """``final()`` once the events are read: the ``Response``, or the failure."""
        flow = self._flow
        if flow.failure is not None:
            raise flow.failure
        receiver = flow.receiver
        if not receiver.done:
            raise receiver.truncated("the stream was closed before it ended")
        return receiver.response()

    @property
    def closed(self) -> bool:
        """Whether the stream is closed: by the caller, at its end, or after a failure."""
        return self._flow.closed

    @property
    def request_id(self) -> str | None:
        """The ``metadata.request_id`` the request was sent with."""
        return self.request.request_id

    @property
    def resume_token(self) -> str | None:
        """The endpoint's ``tokenwire-resume-token`` for this stream, if it gave one."""
        return self._flow.resumer.token

    @property
    def violations(self) -> list[Violation]:
        """The lifecycle violations seen so far."""
        return self._flow.receiver.violations

    @property
    def rejected_tool_calls(self) -> list[RejectedToolCall]:
        """Tool calls withheld so far (§8.2), with the reason."""
        return list(self._flow.receiver.builder.rejected)
