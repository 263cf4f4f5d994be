"""``Exchange``: one HTTP request as the endpoint and everything after it see it.

Made once per request, from its ASGI scope, and passed as a parameter: to the
ingress that parses the body, to the admission, to the provider that serves
it, and (``StreamRecord.exchange``) to the observers. It holds what several
of them read, read once: the headers the endpoint looks at, the body's
length, the route's path parameters and query, and the state a gateway keeps
for the request (``context``) and the request guard's account of its streams
(``account``). The ingress may set ``offer`` (a same-vendor
passthrough, gateway/providers/passthrough.py) for the provider to take.

Pure: no I/O.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final

from ..errors import InvalidRequest

if TYPE_CHECKING:
    from .outbox import StreamAccount

__all__ = ["ACCOUNT_KEY", "CONTEXT_KEY", "Exchange", "content_length"]

#: The scope key under which a middleware in front of the endpoint leaves its
#: per-request state (the gateway's ``RequestContext``); ASGI scopes carry
#: such extensions as Starlette's ``path_params`` do.
CONTEXT_KEY: Final = "tokenwire.context"
#: The scope key under which the request guard leaves the request's
#: ``outbox.StreamAccount`` (its streams' budgets), for the endpoint's outboxes.
ACCOUNT_KEY: Final = "tokenwire.stream_account"
#: A query is only looked at, never kept: a bound on what is parsed of it.
MAX_QUERY: Final = 4096

_EMPTY: Final[Mapping[str, str]] = MappingProxyType({})


def content_length(headers: Iterable[tuple[bytes, bytes]]) -> int | None:
    """The request's ``Content-Length`` as a number, ``None`` when it sent none.

    Raises ``InvalidRequest`` when the header is there but is not one decimal
    number (several values, a sign, a blank: RFC 9110 §8.6).
    """
    found: bytes | None = None
    for name, value in headers:
        if name == b"content-length":
            if found is not None and value != found:
                raise InvalidRequest("Content-Length is given twice, differently", path="$")
            found = value
    if found is None:
        return None
    if not found.isdigit():
        raise InvalidRequest("Content-Length is not a number", path="$")
    return int(found)


class Exchange:
    """One request: what its head says, read once, and what the layers add to it."""

    __slots__ = (
        "method",
        "path",
        "headers",
        "content_type",
        "accept",
        "length",
        "length_error",
        "path_params",
        "query",
        "context",
        "account",
        "offer",
    )

    def __init__(
        self,
        *,
        method: str = "POST",
        path: str = "",
        headers: Sequence[tuple[bytes, bytes]] = (),
        path_params: Mapping[str, str] = _EMPTY,
        query: Mapping[str, str] = _EMPTY,
        context: Any = None,
        account: StreamAccount | None = None,
    ) -> None:
        self.method = method
        self.path = path
        #: The request's header fields, lower-cased names, as the ASGI server gave them.
        self.headers = headers
        content_type = accept = None
        for name, value in headers:
            if name == b"content-type":
                content_type = value
            elif name == b"accept":
                accept = value
        self.content_type: bytes | None = content_type
        self.accept: bytes | None = accept
        #: The body's announced length (``None``: not announced, or not valid).
        self.length: int | None = None
        #: Why the announced length is not valid, for the endpoint's 400.
        self.length_error: InvalidRequest | None = None
        try:
            self.length = content_length(headers)
        except InvalidRequest as exc:
            self.length_error = exc
        #: The route's path parameters (Gemini's ``{model}``).
        self.path_params = path_params
        #: The query's parameters (Gemini's ``alt=sse``).
        self.query = query
        #: A gateway's state for this request (``gateway.context.RequestContext``).
        self.context = context
        #: The request guard's account of this request's streams, when it is guarded.
        self.account = account
        #: The same-vendor passthrough the ingress offers the provider, if any.
        self.offer: Any = None

    @classmethod
    def from_scope(cls, scope: Mapping[str, Any]) -> Exchange:
        """The exchange of an ASGI HTTP request."""
        raw_query: bytes = scope.get("query_string") or b""
        query = (
            dict(urllib.parse.parse_qsl(raw_query.decode("latin-1")[:MAX_QUERY]))
            if raw_query
            else _EMPTY
        )
        return cls(
            method=scope.get("method", "POST"),
            path=scope.get("path", ""),
            headers=scope.get("headers") or (),
            path_params=scope.get("path_params") or _EMPTY,
            query=query,
            context=scope.get(CONTEXT_KEY),
            account=scope.get(ACCOUNT_KEY),
        )

    def forwarded(self, names: Iterable[bytes]) -> dict[str, str]:
        """The request's headers among ``names``, as text (those a passthrough forwards)."""
        wanted = frozenset(names)
        if not wanted:
            return {}
        return {
            name.decode("latin-1"): value.decode("latin-1")
            for name, value in self.headers
            if name in wanted
        }
