"""``Client`` and ``Stream``: the blocking client over ``httpx.Client``.

The decisions are the stream flow's (``_flow.py``) and the ``Receiver``'s,
shared with the async client; this module only performs the flow's ops,
blocking, with a watchdog thread for the clocks.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Final, TypeAlias

import httpx

from .. import events as ev
from ..request import Request
from . import _flow as ops
from ._common import (
    ErrorBody,
    EventTranslator,
    caused,
    prepare_request,
    send_error,
)
from ._flow import ClientBase, StreamFlow, StreamState
from ._frames import SyncFramesTransport
from ._response import ParsedToolCall, Response
from ._transports import FramesFactory

__all__ = ["Client", "Confirm", "Fallback", "Stream"]

logger: Final = logging.getLogger("tokenwire.client")

#: Asked before a tool marked with side effects is handed out (§8.2).
Confirm: TypeAlias = Callable[[ParsedToolCall], bool]
#: Called on a 415 (§7.2): returns the vendor (a ``tokenwire.translate`` name or
#: a translator) and that vendor's response body.
Fallback: TypeAlias = Callable[[Request], tuple[str | EventTranslator, Iterable[bytes]]]


class Client(ClientBase[httpx.Client, httpx.BaseTransport, Confirm, Fallback]):
    """A blocking LLM-Stream client over ``httpx.Client``.

    ``base_url`` is the endpoint's root, read by the one URL grammar
    (``stream_url``: ``host:port``, ``/v1`` and the full ``/v1/stream`` URL
    work too; a vendor route raises ``ValueError`` saying what to pass);
    requests go to ``POST {base_url}{path}`` and resumes to
    ``GET {base_url}{resume_path}``. ``api_key`` (default: the
    ``TOKENWIRE_API_KEY`` environment variable) is sent as
    ``Authorization: Bearer``, unless ``headers`` has an ``Authorization``
    of its own. ``timeout`` is a
    ``Timeouts``, a number (all three clocks) or ``None``. ``strict=True``
    raises ``RemoteProtocolError`` on any lifecycle violation instead of
    logging it. ``resume=True`` asks the endpoint to keep each stream for a
    resume (``tokenwire:resumable``) and reconnects after a dropped connection;
    by default a hang-up cancels the generation. ``confirm``
    is asked before a tool listed in the request's ``tokenwire:side_effects``
    extension is handed out; without it such calls are refused. ``fallback``
    is called on a 415 answer (§7.2). ``http2`` and ``transport`` go to httpx.
    ``binding="binary"`` asks for the binary binding's frames (docs/binary.md),
    and still reads SSE from an endpoint that answers with it.
    ``transport="ws"`` carries each stream on a channel of one WebSocket
    (``{base_url}/v1/ws``, or ``frames_url``), ``transport="webtransport"``
    on a stream of one WebTransport session (``frames_url``, e.g.
    ``https://HOST:8443/v1/wt``); both speak the binary binding, resume and
    cancel as over HTTP, and send other requests (a resumable stream's
    ``DELETE``) over HTTP. ``cafile`` trusts a private CA on every transport.
    """

    def _new_http(self, *, frames: FramesFactory | None, **options: Any) -> httpx.Client:
        if frames is not None:
            options["transport"] = SyncFramesTransport(frames.build)
        return httpx.Client(**options, timeout=None)

    def stream(self, request: Request | None = None, **kwargs: Any) -> Stream:
        """A ``Stream`` for ``request`` (or ``request.build(**kwargs)``).

        The request is sent when the stream is entered (``with``) or first
        iterated. Raises ``TypeError``/``InvalidRequest`` for a bad request.
        """
        stream = Stream(self, prepare_request(request, kwargs, resume=self.resume))
        self._streams.add(stream)
        return stream

    def create(self, request: Request | None = None, **kwargs: Any) -> Response:
        """Send a request and read its whole stream: ``stream(...).final()``."""
        with self.stream(request, **kwargs) as stream:
            return stream.final()

    def close(self) -> None:
        """Close the streams still open (cancelling them), then the connection pool."""
        for driver in list(self._streams):
            driver.close()
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


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


class Stream(StreamState):
    """One request's event stream: iterate it for typed events.

    Use it as a context manager (``with client.stream(...) as s``) or just
    iterate it; either way the connection is closed at the end. Iterating
    again, or calling ``final()`` after a partial iteration, continues where
    the previous iteration stopped. Closing it before ``stream.end`` cancels
    the generation: the hang-up does for a plain stream, a ``DELETE`` for a
    resumable one. So does a ``break`` out of ``for event in client.stream(...)``
    as soon as the loop lets go of the stream.
    """

    def __init__(self, client: Client, request: Request) -> None:
        super().__init__(client, request)
        # The I/O lives apart, so that the running iteration refers to it and
        # not to this stream: a dropped stream is closed at once, no GC needed.
        self._driver = _Driver(client, self._flow)
        client._streams.add(self._driver)
        self._iterator: Iterator[ev.Event] | None = None

    @property
    def response(self) -> httpx.Response | None:
        """The HTTP response being read (``None`` before sending, between a drop
        and a resume, and in fallback mode)."""
        return self._driver.response

    def open(self) -> None:
        """Send the request and check the answer's status, content type (§4.9).

        Idempotent. Raises ``UnsupportedMediaType`` on a 415 without a
        fallback, ``HTTPStatusError`` for another non-2xx answer,
        ``RemoteProtocolError`` for a content type other than text/event-stream,
        ``TimeoutError`` (phase ``connect``/``first_event``) and
        ``TransportError`` when the endpoint cannot be reached.
        """
        self._driver.open()

    def __enter__(self) -> Stream:
        try:
            self.open()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
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
            self._iterator = self._driver.run()
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
        return self._response()

    def close(self) -> None:
        """Close the connection, cancelling the generation before ``stream.end``.

        Safe to call more than once.
        """
        self._driver.close()


class _Driver:
    """The I/O of one stream: performs its flow's ops (_flow.py), blocking."""

    def __init__(self, client: Client, flow: StreamFlow) -> None:
        self.client = client
        self.flow = flow
        self.response: httpx.Response | None = None
        self._chunks: Iterator[bytes] | None = None
        self._vendor: Iterator[bytes] | None = None
        self._vendor_body: Iterable[bytes] | None = None
        self._watchdog = _Watchdog()

    def open(self) -> None:
        steps = self.flow.open()
        result: Any = None
        try:
            while True:
                result = self._perform(steps.send(result))
        except StopIteration:
            pass

    def close(self) -> None:
        flow = self.flow
        if flow.closed:
            return
        flow.closed = True
        self._watchdog.stop()
        if self.response is not None:
            self.response.close()
            self.response = None
        close = getattr(self._vendor_body, "close", None)
        if callable(close):
            close()
        cancel = flow.cancel_request()
        if cancel is not None:
            try:
                self.client._http.send(cancel).close()
            except (httpx.HTTPError, RuntimeError) as exc:  # RuntimeError: pool closed
                logger.warning(
                    "stream %s: the cancel (DELETE) failed: %s", flow.request.request_id, exc
                )

    def run(self) -> Iterator[ev.Event]:
        """The whole stream: the flow's ops performed, its events handed out here
        (one generator level per event: this one)."""
        # The same loop as ``AsyncStream.run``, blocking: a generator cannot serve
        # both ``for`` and ``async for``, and each event must be yielded right here
        # (one generator level per event, bench/client.py), so it is written twice.
        flow = self.flow
        deliver = flow.receiver.deliver
        steps = flow.run()
        result: Any = None
        try:
            self.open()
            while True:
                op = steps.send(result)
                result = None
                if type(op) is list:
                    for event in op:
                        if flow.closed:  # the caller closed the stream while holding an event
                            break
                        deliver(event)
                        yield event
                else:
                    result = self._perform(op)
        except StopIteration:
            pass
        except GeneratorExit:
            raise
        except BaseException as exc:
            flow.failure = exc
            raise
        finally:
            steps.close()
            self.close()

    def _read(self, op: ops.Read) -> bytes | None | ops.Dropped | ops.TimedOut:
        """The next chunk, the watchdog armed only for the read itself: what the
        flow does with the chunk (a ``confirm`` callback) is not the server's time."""
        assert self._chunks is not None
        watchdog = self._watchdog
        watchdog.set(op.phase, op.deadline)
        try:
            chunk = next(self._chunks, None)
        except httpx.HTTPError as exc:
            if self._expired(op, exc):
                return ops.TimedOut(exc)
            return ops.Dropped(f"{type(exc).__name__}: {exc}")
        finally:
            watchdog.set(op.phase, None)
        if self._expired(op, None):
            return ops.TimedOut()
        return chunk

    def _expired(self, op: ops.Read, exc: httpx.HTTPError | None) -> bool:
        """Whether the watchdog fired or the deadline passed (a read timeout counts too)."""
        if self._watchdog.fired is not None:
            return True
        if op.deadline is not None and time.monotonic() >= op.deadline:
            return True
        return isinstance(exc, httpx.TimeoutException)

    def _perform(self, op: ops.Op) -> Any:
        client = self.client
        if type(op) is ops.Read:
            return self._read(op)
        if isinstance(op, ops.Send):
            try:
                return client._http.send(op.request, stream=True)
            except httpx.HTTPError as exc:
                return caused(send_error(exc, str(op.request.url), phase=op.phase), exc)
        if isinstance(op, ops.Attach):
            self._attach(op.response)
        elif isinstance(op, ops.Close):
            op.response.close()
            if self.response is op.response:
                self.response = None
        elif isinstance(op, ops.ReadErrorBody):
            return self._error_body(op.response)
        elif isinstance(op, ops.Ask):
            assert client.confirm is not None
            return client.confirm(op.call)
        elif isinstance(op, ops.ReadVendor):
            assert self._vendor is not None
            return next(self._vendor, None)
        elif isinstance(op, ops.UseFallback):
            assert client.fallback is not None
            vendor, body = client.fallback(op.request)
            self._vendor_body = body
            self._vendor = iter(body)
            return vendor
        elif isinstance(op, ops.Pause):
            time.sleep(op.seconds)
        return None

    def _error_body(self, response: httpx.Response) -> bytes:
        body = ErrorBody()
        try:
            for chunk in response.iter_raw():
                if body.add(chunk):
                    break
        except httpx.HTTPError:
            pass  # what came is enough to say what went wrong
        finally:
            response.close()
        return bytes(body)

    def _attach(self, response: httpx.Response) -> None:
        self.response = response
        self._chunks = response.iter_bytes()
        sock = _socket_of(response)
        self._watchdog.watch(sock)
        # From here the watchdog keeps the first-event and idle clocks; without
        # a socket to interrupt, a generous read timeout is the backstop.
        t = self.client.timeout
        clocks = [s for s in (t.first_event, t.idle) if s is not None]
        timeouts = response.request.extensions.get("timeout")
        if isinstance(timeouts, dict):
            timeouts["read"] = None if sock is not None or not clocks else max(clocks)
