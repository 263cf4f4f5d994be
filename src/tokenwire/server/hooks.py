"""The protocols a ``StreamEndpoint`` calls out to (providers, observers, resumption,
admission, ingress), and the values they exchange (``StreamRecord``, ``HeldAnswer``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import Any, Protocol, TypeAlias, cast, runtime_checkable

from .. import events as ev
from ..errors import TokenwireError
from ..request import Request
from .asgi import Send, json_error
from .encoders import Encode
from .exchange import Exchange

# --- Protocols -------------------------------------------------------------------


@runtime_checkable
class Provider(Protocol):
    """Anything that turns a request into standard events.

    ``generate`` is an async generator. It may yield any standard event with
    any ``seq`` (the server restamps them); it needs no ``stream.start`` or
    ``stream.end`` (the server adds them), and it may simply raise on failure.

    The other methods are optional: a class that subclasses ``Provider``
    inherits their defaults, and a class that only has ``generate`` is served
    as if it had (``hooked``).
    """

    def generate(self, request: Request) -> AsyncIterator[ev.Event]: ...

    def serve(self, request: Request, exchange: Exchange | None) -> AsyncIterator[ev.Event]:
        """What the endpoint calls: ``generate``, unless the provider reads the
        request's exchange (the gateway's: its passthrough offer, its context)."""
        return self.generate(request)

    def check_request(self, request: Request) -> None:
        """Raise ``InvalidRequest`` for a request this provider will never serve:
        the endpoint then answers 400 naming the field instead of starting a stream."""
        return None

    async def count_tokens(self, request: Request) -> int | None:
        """The upstream's own count of ``request``'s input tokens, or ``None`` when it
        has none (the gateway's counting routes then estimate). Raises
        ``InvalidRequest`` for a request the upstream cannot be sent, ``CountRefused``
        for its error answer, ``ValueError`` for an answer without a count, and
        whatever its transport raises when it cannot be reached."""
        return None


class CountRefused(TokenwireError):
    """An upstream's counting endpoint answered an error: ``status``, and the
    standard's ``code`` and ``message`` for it (the vendor's own mapping)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


class _Undeclared(Provider):
    """A provider whose class does not subclass ``Provider``: its own methods where
    it has them, the defaults for the rest."""

    __slots__ = ("inner", "_check", "_count")

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        # The one place a hook is looked up by name: a class that never declared it.
        self._check: Callable[[Request], None] | None = getattr(inner, "check_request", None)
        self._count: Callable[[Request], Any] | None = getattr(inner, "count_tokens", None)

    def generate(self, request: Request) -> AsyncIterator[ev.Event]:
        return cast(AsyncIterator[ev.Event], self.inner.generate(request))

    def check_request(self, request: Request) -> None:
        if self._check is not None:
            self._check(request)

    async def count_tokens(self, request: Request) -> int | None:
        if self._count is None:
            return None
        return cast(int | None, await self._count(request))


def hooked(provider: Any) -> Provider:
    """``provider`` with every ``Provider`` method: itself when it subclasses
    ``Provider`` (or has them all), else wrapped with the defaults."""
    if Provider in type(provider).__mro__:
        return cast(Provider, provider)  # the usual case, without the protocol's slower check
    return provider if isinstance(provider, Provider) else _Undeclared(provider)


#: How an endpoint finds the provider for a model name (``None``: unknown model).
ProviderLookup: TypeAlias = Callable[[str], Provider | None]


class Tee(Protocol):
    """Sees every event a stream emits, in order, already stamped."""

    def write(self, events: list[ev.Event]) -> None: ...

    def close(self) -> None: ...


class Observer(Protocol):
    """Per-request hooks of a ``StreamEndpoint``.

    ``opened`` runs when a stream starts (after the request was accepted) and
    may return a ``Tee``; ``closed`` runs once for every request, streamed or
    rejected. Neither may block; exceptions they raise are swallowed.
    """

    def opened(self, record: StreamRecord) -> Tee | None: ...

    def closed(self, record: StreamRecord) -> None: ...


class ResumeConflict(TokenwireError):
    """A resumable request's ``request_id`` already names a stored stream (409)."""


class ResumeSession(Protocol):
    """One resumable stream's link to a resume store, for the generation's lifetime.

    The endpoint sends ``headers`` with the stream's answer (the gateway's
    resume token); it calls ``record`` with every event it emits (stamped, in
    order) and that event's SSE frame; ``run`` hands over the generation's task,
    which the session may cancel (explicit cancel, grace period over) after
    setting ``cancel_reason``; ``detach`` says that the client that made the
    request is gone (the generation goes on; it may be said more than once);
    ``close`` runs once when the generation is over and every event has been
    recorded.
    """

    headers: Sequence[tuple[bytes, bytes]]

    def record(self, events: list[ev.Event], frames: list[bytes]) -> None: ...

    def run(self, task: asyncio.Task[None]) -> None: ...

    def detach(self) -> None: ...

    def cancel_reason(self) -> tuple[str, str] | None: ...

    def close(self) -> None: ...


class Resumption(Protocol):
    """Decides which streams are resumable and opens their sessions."""

    async def open(
        self, request: Request, record: StreamRecord, headers: Iterable[tuple[bytes, bytes]]
    ) -> tuple[Request, ResumeSession | None]:
        """The request to serve (its ``request_id`` filled in when it is resumable)
        and its session, or ``None`` for a stream served the classic way.
        ``headers`` are the request's (a resume store may bind the stream to
        the caller's credential).

        Raises ``ResumeConflict`` when the ``request_id`` is taken, and
        ``InvalidRequest`` for a ``request_id`` a store cannot keep.
        """
        ...


class Admission(Protocol):
    """Admits a parsed request before it is routed (the gateway's keys, models, limits).

    ``admit`` sees the request as it will be served: its ``model`` is the one
    the provider lookup takes, so what it checks is what runs (one resolution
    per request, every route and body type alike). It answers a refused
    request itself (and sets ``record.status``) and returns ``False``.
    """

    async def admit(
        self, exchange: Exchange, request: Request, send: Send, record: StreamRecord
    ) -> bool: ...


class Ingress(Protocol):
    """A vendor request format accepted on a dual-format route (§7.3).

    ``parse`` turns the vendor body into a standard ``Request`` and an encoder
    that writes standard events back in the vendor's own stream format; the
    request's ``exchange`` gives it the route's path parameters and query,
    and takes the passthrough offer it may make. It raises ``InvalidRequest``
    (``.path`` naming the field) for a bad body. ``error_body`` writes an error
    answered before any stream in the vendor's own shape.
    """

    name: str
    media_types: frozenset[str]

    def parse(self, body: bytes, exchange: Exchange) -> tuple[Request, Encode]: ...

    def error_body(self, status: int, code: str, message: str, path: str | None) -> bytes:
        """The standard's ``{"error": {"code", "message", "path"}}`` unless the vendor
        writes its errors otherwise."""
        return json_error(code, message, path)


class HeadedEncode:
    """An ``Encode`` that may answer with a status line of its own: ``head`` gives the
    response's status and headers once the first bytes are out (a same-vendor
    passthrough answers an upstream error with the upstream's own status)."""

    __slots__ = ()

    def __call__(self, event: ev.Event) -> bytes:
        raise NotImplementedError

    async def head(
        self, outbox: Any, loop: asyncio.AbstractEventLoop, headers: list[tuple[bytes, bytes]]
    ) -> tuple[int, list[tuple[bytes, bytes]]]:
        """The response's status and headers (``headers``: the stream's own)."""
        return 200, headers


class HeldAnswer:
    """An ``Encode`` whose response head waits until the answer decides it.

    A vendor route's whole (non-streaming) answer is known at ``stream.end``;
    a vendor stream whose upstream fails before the first token is answered
    with the upstream's status, not 200 and an error event. The endpoint
    sends the response head once ``head`` is set: ``(status, headers)``, or
    ``(200, None)`` for the stream's own SSE head. ``__call__`` returns no
    bytes before ``head`` is set. ``keepalive``: SSE comments may go out
    once the head is sent (a stream's, not a JSON body's). ``after``: the
    encoder that takes over once the head is sent, so the rest of a stream
    costs what it cost before (no extra call per event).
    """

    __slots__ = ("head", "keepalive", "after")

    def __init__(self) -> None:
        self.head: tuple[int, list[tuple[bytes, bytes]] | None] | None = None
        self.keepalive = False
        self.after: Encode | None = None

    def __call__(self, event: ev.Event) -> bytes:
        raise NotImplementedError


# --- Per-request record --------------------------------------------------------------


class StreamRecord:
    """What an endpoint saw of one request; filled in as the request goes.

    Times are ``time.perf_counter()`` values. ``events`` counts the events the
    stream produced; ``error_code`` is the HTTP error code of a rejected
    request or the §5.3.6 code of a stream's ``error`` event.
    """

    __slots__ = (
        "route",
        "exchange",
        "format",
        "model",
        "request",
        "status",
        "error_code",
        "error_path",
        "error_message",
        "exception",
        "events",
        "started",
        "first_event",
        "ended",
        "disconnected",
    )

    def __init__(self, route: str, exchange: Exchange | None = None) -> None:
        self.route = route
        #: The request as the endpoint read it (``None`` for a record made by hand).
        self.exchange = exchange
        self.format = "standard"
        self.model: str | None = None
        self.request: Request | None = None
        self.status = 0
        self.error_code: str | None = None
        self.error_path: str | None = None
        #: May quote the request body or user content: log it only with consent (§8.1).
        self.error_message: str | None = None
        self.exception: BaseException | None = None
        self.events = 0
        self.started = time.perf_counter()
        self.first_event: float | None = None
        self.ended: float | None = None
        self.disconnected = False

    @property
    def request_id(self) -> str | None:
        """The request's ``metadata.request_id`` (§4.6), when it was parsed."""
        return self.request.request_id if self.request is not None else None

    @property
    def duration(self) -> float | None:
        """Seconds from the request's arrival to its end."""
        return None if self.ended is None else self.ended - self.started

    @property
    def time_to_first_event(self) -> float | None:
        """Seconds from the request's arrival to the provider's first event."""
        return None if self.first_event is None else self.first_event - self.started
