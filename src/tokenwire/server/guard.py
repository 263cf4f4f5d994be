"""The request guard: an ASGI middleware that bounds what one client can hold.

It wraps the whole app (``tokenwire serve`` puts it in front of the gateway)
and enforces, for every HTTP request:

- **Content-Type** (RFC 9110): more than one ``Content-Type`` field is a 400;
  a value that does not parse, a ``charset`` other than UTF-8, or a §9.1
  ``version`` of ``application/llm-request+json`` other than ``1.0`` is a 415
  naming what is supported. Checked before anything is read.
- **Body deadline**: the whole body must arrive within ``body_timeout_s`` of
  the request's start, or the request is answered ``408 request_timeout``
  (``Connection: close``) and the app sees the client as gone.
- **Write deadline**: a ``send`` to the client that has not completed within
  ``write_timeout_s`` (the client stopped reading) ends the stream: the app's
  ``send`` fails as it does for a vanished client (``OSError``), so the
  endpoint cancels the producer; the stream's queued frames are dropped and
  the connection is closed without a clean end. granian accepts a send into
  its own buffer (up to ~2 MB per connection) before the socket takes it, so
  ``tokenwire serve`` also sets ``TCP_USER_TIMEOUT`` to the same deadline
  (``gateway.serving``): the kernel resets a connection whose client has read
  nothing for that long, and granian's send then fails the same way.
- **Memory budgets**: each stream's outbox may queue ``stream_budget_bytes``
  (``outbox.Outbox``; past it the stream is cut like a stalled one). While
  every stream's queued plus in-flight bytes (``outbox.BUDGET``) are over
  ``memory_budget_bytes``, a new ``POST`` gets ``503 overloaded`` with
  ``Retry-After``, the streams whose send has been stuck for ``STALL_S`` are
  ended (longest-stuck first) until the total fits, and every outbox's
  high-water mark is ``outbox.LOW_WATER`` (for an endpoint that asks
  ``Outbox.full()``).

Each request's ``StreamAccount`` reaches the outboxes made for it in the
request's scope (``exchange.ACCOUNT_KEY``), which every ASGI layer between the
guard and the endpoint hands on, and from there as a parameter.

The server's own limits (request heads that never complete, idle keep-alive
connections) are the HTTP server's: granian's, or tokenwire's own
(``server.http1``, ``[server] engine = "h1"``), both set by ``tokenwire serve``
(docs/gateway.md, "Request limits and timeouts").
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import math
from collections.abc import Awaitable, Callable
from typing import Final

import msgspec

from .. import mediatype
from ..errors import InvalidRequest, TokenwireError
from .asgi import Message, Receive, Scope, Send, json_error, send_json
from .exchange import ACCOUNT_KEY, content_length
from .outbox import BUDGET, DEFAULT_STREAM_BUDGET, StreamAccount

__all__ = ["Guard", "Limits", "content_type_problem"]

#: Methods whose requests carry a body the gateway reads.
_BODY_METHODS: Final = frozenset({"POST", "PUT", "PATCH"})


class Limits(msgspec.Struct, frozen=True, kw_only=True):
    """The guard's limits (``[server]`` keys of the same names, docs/gateway.md)."""

    body_timeout_s: float = 30.0
    write_timeout_s: float = 30.0
    stream_budget_bytes: int = DEFAULT_STREAM_BUDGET
    memory_budget_bytes: int = 32 << 20
    retry_after_s: int = 5


class _Refused(TokenwireError, OSError):
    """The guard answered the request itself; the app's own response has nowhere to go."""


def content_type_problem(headers: list[tuple[bytes, bytes]]) -> tuple[int, str, str] | None:
    """``(status, code, message)`` when a request's Content-Type must be refused, else ``None``."""
    values = [value for name, value in headers if name == b"content-type"]
    if not values:
        return None
    if len(values) > 1:
        # RFC 9110 §5.3: Content-Type is a singleton field; two of them leave
        # the body's type ambiguous, so neither is believed.
        return 400, "invalid_request", f"{len(values)} Content-Type fields; send exactly one"
    try:
        media_type = mediatype.parse(values[0])
    except mediatype.MediaTypeError as exc:
        return 415, "unsupported_media_type", f"Content-Type is not a valid media type: {exc}"
    problem = mediatype.request_type_problem(media_type)
    if problem is not None:
        return problem[0], "unsupported_media_type", problem[1]
    return None


async def _send_error(
    send: Send, status: int, code: str, message: str, headers: list[tuple[bytes, bytes]]
) -> None:
    await send_json(send, status, json_error(code, message), headers)


class _Request:
    """One request under guard: its deadlines and its stream account."""

    __slots__ = (
        "limits",
        "receive_inner",
        "send_inner",
        "account",
        "body_done",
        "started",
        "answered",
        "body_deadline",
        "send_started",
        "send_timeout",
        "body_left",
        "pending",
        "cut",
    )

    def __init__(
        self,
        limits: Limits,
        receive: Receive,
        send: Send,
        now: float,
        content_length: int | None = None,
    ) -> None:
        self.limits = limits
        self.receive_inner = receive
        self.send_inner = send
        self.account = StreamAccount(limits.stream_budget_bytes, limits.memory_budget_bytes)
        self.body_done = False
        self.started = False  # the response has started
        self.answered = False  # the guard answered (408): the app's sends go nowhere
        self.body_deadline = now + limits.body_timeout_s
        self.send_started = 0.0  # loop time the send in flight began
        self.send_timeout: asyncio.Timeout | None = None  # its deadline
        #: Body bytes still to come, when Content-Length says: the body is
        #: over once they are in, before the server's closing empty message
        #: (``asgi.read_body`` stops there too).
        self.body_left = content_length
        #: The server's first ``receive()``, asked for ahead of the app (``ask_early``).
        self.pending: Awaitable[Message] | None = None
        #: A send failed: the stream was cut (its memory is released after it ends).
        self.cut = False

    def ask_early(self) -> None:
        """Ask the server for the body now, so that it fetches it while the app
        looks at the headers (granian answers ``receive()`` from its I/O thread:
        ~0.1 ms). Only an awaitable that is not a coroutine: a coroutine would
        not start before it is awaited, and would warn if it never were."""
        pending = self.receive_inner()
        if asyncio.iscoroutine(pending):
            pending.close()
            return
        self.pending = pending

    def receive(self) -> Awaitable[Message]:
        if self.body_done and not self.answered:
            # The server's own awaitable: a stream waiting for its client's
            # hang-up (all of them, for as long as they are open) holds no
            # frame of the guard's.
            return self.receive_inner()
        return self._receive()

    async def _receive(self) -> Message:
        if self.answered:
            return {"type": "http.disconnect"}
        pending = self.pending
        if pending is None:
            pending = self.receive_inner()
        else:
            self.pending = None
        try:
            async with asyncio.timeout_at(self.body_deadline):
                message = await pending
        except TimeoutError:
            return await self._body_timed_out()
        if message["type"] != "http.request" or not message.get("more_body", False):
            self.body_done = True
        elif self.body_left is not None:
            self.body_left -= len(message.get("body", b""))
            if self.body_left <= 0:
                self.body_done = True
        return message

    async def _body_timed_out(self) -> Message:
        self.body_done = True
        if not self.started:
            self.answered = True
            seconds = f"{self.limits.body_timeout_s:g}"
            with contextlib.suppress(Exception):
                await _send_error(
                    self.send_inner,
                    408,
                    "request_timeout",
                    f"the request body did not arrive within {seconds} s",
                    [(b"connection", b"close")],
                )
        # The app sees the client as gone: it stops reading and answers nobody.
        return {"type": "http.disconnect"}

    async def send(self, message: Message) -> None:
        if self.answered:
            raise _Refused("the guard already answered this request")
        kind = message["type"]
        if kind == "http.response.start":
            self.started = True
            await self.send_inner(message)
            return
        if kind != "http.response.body":
            await self.send_inner(message)
            return
        if self.account.overflowed:
            # Cut, not ended: a clean end would pass a truncated stream for a whole one.
            self.account.end()
            raise OSError("the stream went over its memory budget")
        size = len(message.get("body", b""))
        limits = self.limits
        if BUDGET.total > limits.memory_budget_bytes:
            _shed(limits)
        BUDGET.in_flight += size
        self.send_started = asyncio.get_running_loop().time()
        _SENDING.add(self)
        try:
            async with asyncio.timeout(limits.write_timeout_s) as deadline:
                self.send_timeout = deadline
                await self.send_inner(message)
        except TimeoutError:
            # The client stopped reading (or was shed over the memory budget):
            # end the stream as for a vanished client.
            self.account.end()
            self.cut = True
            raise OSError(f"the client read nothing for {limits.write_timeout_s:g} s") from None
        except OSError:
            # The client is gone mid-stream (the kernel's TCP_USER_TIMEOUT reset it,
            # or it hung up): what the stream held is garbage once it ends.
            self.cut = True
            raise
        finally:
            BUDGET.in_flight -= size
            _SENDING.discard(self)
            self.send_timeout = None


#: Requests whose send is in flight now (a stalled client's send stays here).
_SENDING: Final[set[_Request]] = set()
#: A send in flight this long counts as stalled, and may be shed over the budget.
STALL_S: Final = 1.0


def _shed(limits: Limits) -> int:
    """Over the memory budget: end the longest-stalled streams until it would fit again.

    A stream is stalled when its send has been in flight for ``STALL_S``
    (or the write deadline, when shorter): its client is not reading. The
    oldest go first; their deadline is moved to now, so they end exactly as
    a write deadline ends them. Returns how many were ended.
    """
    loop = asyncio.get_running_loop()
    now = loop.time()
    stall = min(STALL_S, limits.write_timeout_s)
    stalled = sorted(
        (r for r in _SENDING if r.send_timeout is not None and now - r.send_started >= stall),
        key=lambda r: r.send_started,
    )
    excess = BUDGET.total - limits.memory_budget_bytes
    ended = 0
    for request in stalled:
        if excess <= 0:
            break
        timeout = request.send_timeout
        if timeout is None or timeout.expired():
            continue
        timeout.reschedule(now)
        excess -= sum(outbox.size for outbox in request.account.outboxes)
        ended += 1
    return ended


_trim: Callable[[int], int] | None | bool = False
#: The event loop a trim is scheduled on (a trim scheduled on a loop that was
#: closed before it ran never runs: another loop schedules its own).
_trim_pending: asyncio.AbstractEventLoop | None = None


def _release_memory_soon() -> None:
    """Give freed heap back to the OS a moment after streams were cut (glibc only).

    A cut stream frees its frames, but the C heap keeps the pages; without
    this, the worker's RSS after a storm of stalled clients stays at its peak.
    At most one trim per second, whatever the number of streams cut.
    """
    global _trim_pending
    loop = asyncio.get_running_loop()
    if _trim_pending is loop:
        return
    _trim_pending = loop
    loop.call_later(1.0, _malloc_trim)


def _malloc_trim() -> None:
    global _trim, _trim_pending
    _trim_pending = None
    # A cut stream leaves reference cycles (its CancelledError's traceback holds
    # the frames that hold it, its transport, its outbox): only the cyclic
    # collector frees them, and an idle worker allocates too little to run it.
    # Without this, after a storm of stalled clients their memory stays.
    if gc.collect():
        # Garbage found: streams cut just before may finish just after; look
        # again in a moment (until a collection finds none).
        with contextlib.suppress(RuntimeError):
            _release_memory_soon()
    if _trim is False:
        _trim = None
        with contextlib.suppress(OSError, AttributeError):
            import ctypes

            _trim = ctypes.CDLL("libc.so.6").malloc_trim
    if callable(_trim):
        _trim(0)


class Guard:
    """ASGI middleware enforcing ``limits`` in front of ``app`` (see the module doc)."""

    def __init__(
        self,
        app: object,
        limits: Limits | None = None,
        *,
        first_request: Callable[[], object] | None = None,
    ) -> None:
        self.app = app
        self.limits = limits if limits is not None else Limits()
        #: Runs once, before the first HTTP request is served.
        self.first_request = first_request
        if not (math.isfinite(self.limits.write_timeout_s) and self.limits.write_timeout_s > 0):
            raise ValueError("write_timeout_s must be > 0")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        app = self.app
        assert callable(app)
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        if self.first_request is not None:
            first, self.first_request = self.first_request, None
            first()
        method = scope.get("method", "GET")
        length = None
        if method in _BODY_METHODS:
            headers = list(scope.get("headers", ()))
            with contextlib.suppress(InvalidRequest):  # an invalid one: the app answers it
                length = content_length(headers)
            problem = content_type_problem(headers)
            if problem is not None:
                await _send_error(send, *problem, [])
                return
            limits = self.limits
            if BUDGET.total > limits.memory_budget_bytes:
                _shed(limits)
                await _send_error(
                    send,
                    503,
                    "overloaded",
                    "the gateway is holding its memory budget for slow clients; retry later",
                    [(b"retry-after", str(limits.retry_after_s).encode())],
                )
                return
        loop = asyncio.get_running_loop()
        guarded = _Request(self.limits, receive, send, loop.time(), length)
        if method in _BODY_METHODS:
            guarded.ask_early()
        # For the endpoint's outboxes: in the scope, which every ASGI layer between
        # the guard and the endpoint hands on.
        scope[ACCOUNT_KEY] = guarded.account
        try:
            await app(scope, guarded.receive, guarded.send)
        except Exception:
            if not guarded.answered:
                raise
            # The guard answered (408); what the app made of the "disconnect"
            # it saw has no client to go to.
        finally:
            guarded.account.end()
            if guarded.cut:
                _release_memory_soon()
