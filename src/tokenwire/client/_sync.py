"""``Client`` and ``Stream``: the blocking client over ``httpx.Client``."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from types import TracebackType
from typing import Any, Final, TypeAlias

import httpx

from .. import errors
from .. import events as ev
from ..lifecycle import Violation
from ..request import Request, dumps
from ._common import (
    DEFAULT_TIMEOUTS,
    MAX_ERROR_BODY,
    EventTranslator,
    Resumer,
    Timeouts,
    check_content_type,
    make_translator,
    post_headers,
    prepare_request,
    send_error,
    status_error,
    timeout_message,
)
from ._receiver import Receiver
from ._response import ParsedToolCall, RejectedToolCall, Response

__all__ = ["Client", "Confirm", "Fallback", "Stream"]

logger: Final = logging.getLogger("tokenwire.client")

#: Asked before a tool marked with side effects is handed out (§8.2).
Confirm: TypeAlias = Callable[[ParsedToolCall], bool]
#: Called on a 415 (§7.2): returns the vendor (a ``tokenwire.translate`` name or
#: a translator) and that vendor's response body.
Fallback: TypeAlias = Callable[[Request], tuple[str | EventTranslator, Iterable[bytes]]]


class Client:
    """A blocking LLM-Stream client over ``httpx.Client``.

    ``base_url`` is the endpoint's root; requests go to ``POST {base_url}{path}``
    and resumes to ``GET {base_url}{resume_path}``. ``timeout`` is a
    ``Timeouts``, a number (all three clocks) or ``None``. ``strict=True``
    raises ``RemoteProtocolError`` on any lifecycle violation instead of
    logging it. ``resume`` reconnects after a dropped connection. ``confirm``
    is asked before a tool listed in the request's ``tokenwire:side_effects``
    extension is handed out; without it such calls are refused. ``fallback``
    is called on a 415 answer (§7.2). ``http2`` and ``transport`` go to httpx.
    """

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8080",
        *,
        headers: dict[str, str] | None = None,
        timeout: Timeouts | float | None = DEFAULT_TIMEOUTS,
        strict: bool = False,
        resume: bool = True,
        confirm: Confirm | None = None,
        fallback: Fallback | None = None,
        http2: bool = False,
        transport: httpx.BaseTransport | None = None,
        path: str = "/v1/stream",
        resume_path: str = "/v1/streams/{request_id}",
        max_event_bytes: int = 1 << 20,
    ) -> None:
        self.timeout = Timeouts.of(timeout)
        self.strict = strict
        self.resume = resume
        self.confirm = confirm
        self.fallback = fallback
        self.path = path
        self.resume_path = resume_path
        self.max_event_bytes = max_event_bytes
        self._http = httpx.Client(
            base_url=base_url, headers=headers, http2=http2, transport=transport, timeout=None
        )

    @property
    def base_url(self) -> httpx.URL:
        return self._http.base_url

    def stream(self, request: Request | None = None, **kwargs: Any) -> Stream:
        """A ``Stream`` for ``request`` (or ``request.build(**kwargs)``).

        The request is sent when the stream is entered (``with``) or first
        iterated. Raises ``TypeError``/``InvalidRequest`` for a bad request.
        """
        return Stream(self, prepare_request(request, kwargs, resume=self.resume))

    def create(self, request: Request | None = None, **kwargs: Any) -> Response:
        """Send a request and read its whole stream: ``stream(...).final()``."""
        with self.stream(request, **kwargs) as stream:
            return stream.final()

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- HTTP --------------------------------------------------------------

    def _send(self, request: httpx.Request, phase: str) -> httpx.Response:
        try:
            return self._http.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise send_error(exc, str(request.url), phase=phase) from exc

    def _checked(self, response: httpx.Response) -> httpx.Response:
        """Raise for a non-2xx answer or a content type other than text/event-stream."""
        if not response.is_success:
            body = bytearray()
            try:
                for chunk in response.iter_raw():
                    body += chunk
                    if len(body) >= MAX_ERROR_BODY:
                        break
            except httpx.HTTPError:
                pass
            finally:
                response.close()
            raise status_error(response, bytes(body[:MAX_ERROR_BODY]))
        try:
            check_content_type(response)
        except errors.RemoteProtocolError:
            response.close()
            raise
        return response


class _Watchdog:
    """Shuts a stream's socket down when the deadline for its next event passes.

    Sync httpx fixes a body's read timeout when the body starts and measures
    it per socket read, not per event; a blocked read is only interrupted by
    shutting the socket down from another thread, which this one does.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._deadline: float | None = None
        self._phase = ""
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._stopped = False
        self.fired: str | None = None

    def watch(self, sock: socket.socket | None) -> None:
        with self._cond:
            self._sock = sock
            self._deadline = None

    def set(self, phase: str, deadline: float | None) -> None:
        """Arm for ``deadline`` (monotonic seconds), or pause with ``None``."""
        with self._cond:
            earlier = deadline is not None and (self._deadline is None or deadline < self._deadline)
            self._phase, self._deadline = phase, deadline
            if deadline is None or self._sock is None:
                return
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="tokenwire-client-watchdog", daemon=True
                )
                self._thread.start()
            elif earlier:
                self._cond.notify()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._sock = None
            self._cond.notify()

    def _run(self) -> None:
        with self._cond:
            while not self._stopped:
                deadline = self._deadline
                if deadline is None:
                    self._cond.wait()
                    continue
                delay = deadline - time.monotonic()
                if delay > 0:
                    self._cond.wait(delay)
                    continue
                self.fired = self._phase
                self._deadline = None
                if self._sock is not None:
                    try:
                        self._sock.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass


def _socket_of(response: httpx.Response) -> socket.socket | None:
    stream = response.extensions.get("network_stream")
    sock = stream.get_extra_info("socket") if stream is not None else None
    return sock if isinstance(sock, socket.socket) else None


class Stream:
    """One request's event stream: iterate it for typed events.

    Use it as a context manager (``with client.stream(...) as s``) or just
    iterate it; either way the connection is closed at the end. Iterating
    again, or calling ``final()`` after a partial iteration, continues where
    the previous iteration stopped.
    """

    def __init__(self, client: Client, request: Request) -> None:
        self._client = client
        self.request = request
        self._receiver = Receiver(
            request, strict=client.strict, max_event_bytes=client.max_event_bytes
        )
        #: The HTTP response being read (``None`` before sending, between a drop
        #: and a resume, and in fallback mode).
        self.response: httpx.Response | None = None
        self._fallback: tuple[EventTranslator, Iterable[bytes]] | None = None
        self._opened = False
        self._closed = False
        self._iterator: Iterator[ev.Event] | None = None
        self._failure: BaseException | None = None
        self._watchdog = _Watchdog()
        self._phase = "first_event"
        self._deadline: float | None = None
        self._resumer = Resumer(
            enabled=client.resume, template=client.resume_path, timeouts=client.timeout
        )

    # -- public ------------------------------------------------------------

    @property
    def request_id(self) -> str | None:
        """The ``metadata.request_id`` the request was sent with."""
        return self.request.request_id

    @property
    def violations(self) -> list[Violation]:
        """The lifecycle violations seen so far."""
        return self._receiver.violations

    @property
    def rejected_tool_calls(self) -> list[RejectedToolCall]:
        """Tool calls withheld so far (§8.2), with the reason."""
        return list(self._receiver.builder.rejected)

    def open(self) -> None:
        """Send the request and check the answer's status, content type (§4.9).

        Idempotent. Raises ``UnsupportedMediaType`` on a 415 without a
        fallback, ``HTTPStatusError`` for another non-2xx answer,
        ``RemoteProtocolError`` for a content type other than text/event-stream,
        ``TimeoutError`` (phase ``connect``/``first_event``) and
        ``TransportError`` when the endpoint cannot be reached.
        """
        if self._opened:
            return
        self._opened = True
        client = self._client
        timeout = client.timeout
        request = client._http.build_request(
            "POST",
            client.path,
            content=dumps(self.request),
            headers=post_headers(),
            timeout=timeout.for_headers(),
        )
        sent = time.monotonic()
        if timeout.first_event is not None:
            self._deadline = sent + timeout.first_event
        response = client._send(request, phase="first_event")
        if response.status_code == 415 and client.fallback is not None:
            response.close()
            logger.info("%s answered 415: using the fallback (§7.2)", request.url)
            vendor, chunks = client.fallback(self.request)
            self._fallback = (make_translator(vendor, self.request), chunks)
            return
        self._attach(client._checked(response))

    def __enter__(self) -> Stream:
        try:
            self.open()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __iter__(self) -> Iterator[ev.Event]:
        return self.iter_events()

    def iter_events(self) -> Iterator[ev.Event]:
        """Yield typed events (``tokenwire.events``) as they arrive.

        Undecodable events and tool calls that fail §8.2 are withheld;
        duplicates after a resume are dropped. Raises ``StreamTruncated`` when
        the stream cannot be completed, ``TimeoutError`` when a clock runs
        out, ``RemoteProtocolError`` on a violation in strict mode (always for
        §4.9 and §8.4), plus what ``open`` raises.
        """
        if self._iterator is None:
            self._iterator = self._run()
        return self._iterator

    @property
    def text_stream(self) -> Iterator[str]:
        """Only the answer's text fragments (reasoning blocks left out)."""
        for event in self.iter_events():
            if isinstance(event, ev.ContentDelta) and not event.reasoning:
                yield event.delta.text

    def final(self) -> Response:
        """Read the rest of the stream and return the ``Response``.

        Raises what ``iter_events`` raises (again, if iteration already
        failed), and ``StreamTruncated`` if the stream was closed before
        ``stream.end``.
        """
        for _ in self.iter_events():
            pass
        if self._failure is not None:
            raise self._failure
        if not self._receiver.done:
            raise self._receiver.truncated("the stream was closed before it ended")
        return self._receiver.response()

    def close(self) -> None:
        """Close the connection. Safe to call more than once."""
        if self._closed:
            return
        self._closed = True
        self._watchdog.stop()
        if self.response is not None:
            self.response.close()
        chunks = self._fallback[1] if self._fallback is not None else None
        close = getattr(chunks, "close", None)
        if callable(close):
            close()

    # -- reading -----------------------------------------------------------

    def _attach(self, response: httpx.Response) -> None:
        self.response = response
        self._receiver.connect()
        sock = _socket_of(response)
        self._watchdog.watch(sock)
        # From here the watchdog keeps the first-event and idle clocks; without
        # a socket to interrupt, a generous read timeout is the backstop.
        t = self._client.timeout
        clocks = [s for s in (t.first_event, t.idle) if s is not None]
        timeouts = response.request.extensions.get("timeout")
        if isinstance(timeouts, dict):
            timeouts["read"] = None if sock is not None or not clocks else max(clocks)

    def _run(self) -> Iterator[ev.Event]:
        receiver = self._receiver
        try:
            self.open()
            while not receiver.done and not self._closed:
                # The readers yield batches; each event is handed out here.
                if self._fallback is not None:
                    for batch in self._read_fallback(*self._fallback):
                        yield from self._hand_out(batch)
                    if not receiver.done and not self._closed:
                        raise receiver.truncated("the fallback stream ended before stream.end")
                elif self.response is not None:
                    for batch in self._read_http(self.response):
                        yield from self._hand_out(batch)
                else:
                    self._resume()
            if receiver.done:
                receiver.finish()
        except GeneratorExit:
            raise
        except BaseException as exc:
            self._failure = exc
            raise
        finally:
            self.close()

    def _read_http(self, response: httpx.Response) -> Iterator[list[ev.Event]]:
        """Yield batches of checked events; the caller hands each batch out."""
        receiver = self._receiver
        watchdog = self._watchdog
        idle = self._client.timeout.idle
        chunks = response.iter_bytes()
        try:
            while True:
                watchdog.set(self._phase, self._deadline)
                try:
                    chunk = next(chunks, None)
                except httpx.HTTPError as exc:
                    self._check_clock(exc)
                    self._resumer.drop = f"{type(exc).__name__}: {exc}"
                    logger.info("stream %s dropped: %s", self.request_id, self._resumer.drop)
                    return
                self._check_clock(None)
                if chunk is None:
                    receiver.eof()
                    self._resumer.drop = "the connection closed"
                    return
                before = receiver.messages
                events = receiver.feed(chunk)
                if receiver.messages != before:
                    watchdog.set(self._phase, None)  # the caller's time is not the server's
                    yield self._confirmed(events)
                    self._phase = "idle"
                    self._deadline = None if idle is None else time.monotonic() + idle
                    if receiver.done or self._closed:
                        return
        finally:
            watchdog.set(self._phase, None)
            self.response = None
            response.close()

    def _check_clock(self, exc: httpx.HTTPError | None) -> None:
        """Raise ``TimeoutError`` if the watchdog fired or the deadline passed."""
        phase = self._watchdog.fired
        if phase is None and self._deadline is not None and time.monotonic() >= self._deadline:
            phase = self._phase
        if phase is None and isinstance(exc, httpx.TimeoutException):
            phase = self._phase
        if phase is not None:
            t = self._client.timeout
            seconds = t.first_event if phase == "first_event" else t.idle
            raise errors.TimeoutError(
                timeout_message(phase, seconds, self.request_id), phase=phase
            ) from exc

    def _read_fallback(
        self, translator: EventTranslator, chunks: Iterable[bytes]
    ) -> Iterator[list[ev.Event]]:
        """Yield batches of checked events from the vendor body, through its translator."""
        receiver = self._receiver
        for chunk in chunks:
            yield self._confirmed(receiver.feed_events(translator.feed(chunk)))
            if receiver.done or self._closed:
                return
        yield self._confirmed(receiver.feed_events(translator.close()))

    def _confirmed(self, events: list[ev.Event]) -> list[ev.Event]:
        """``events`` less the side-effect tool calls ``confirm`` did not approve (§8.2)."""
        receiver = self._receiver
        if not receiver.side_effects:
            return events
        confirm = self._client.confirm
        out: list[ev.Event] = []
        for event in events:
            call = receiver.needs_confirmation(event)
            if call is not None:
                approved = None if confirm is None else bool(confirm(call))
                if not receiver.confirm(event, approved):
                    continue
            out.append(event)
        return out

    def _hand_out(self, events: list[ev.Event]) -> Iterator[ev.Event]:
        """Deliver ``events`` one by one, then raise an error found after them."""
        receiver = self._receiver
        for event in events:
            if self._closed:  # the caller closed the stream while holding an event
                return
            receiver.deliver(event)
            yield event
        receiver.raise_pending()

    def _resume(self) -> None:
        """Reconnect with ``Last-Event-ID`` (DESIGN.md) or raise ``StreamTruncated``."""
        receiver = self._receiver
        resumer = self._resumer
        delay = resumer.next_delay(receiver)
        if delay:
            time.sleep(delay)
        request = resumer.request(self._client._http, receiver)
        logger.info("stream %s: resuming after seq %s", self.request_id, receiver.last_seq)
        self._phase = resumer.phase(receiver)
        seconds = resumer.seconds(receiver)
        self._deadline = None if seconds is None else time.monotonic() + seconds
        client = self._client
        try:
            response = client._send(request, phase="idle")
        except errors.TransportError as exc:
            resumer.drop = f"resume failed: {exc}"
            return
        problem = resumer.problem(response)
        if problem is not None:
            response.close()
            raise receiver.truncated(problem)
        self._attach(response)
