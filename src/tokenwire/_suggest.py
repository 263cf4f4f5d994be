""" "Did you mean": the closest known name to a misspelt one, and what to try
when a connection fails.

Pure functions: ``did_you_mean`` for the gateway's unknown-model error and the
config loader's unknown-key error; ``connection_hint`` for the client's and
``tokenwire check``'s connection errors. No I/O, standard library only.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable
from typing import Final
from urllib.parse import urlsplit

__all__ = ["connection_hint", "did_you_mean", "suggest"]

#: How many known names an error lists at most.
MAX_LISTED: Final = 12


def suggest(name: str, known: Iterable[str]) -> str | None:
    """The known name closest to ``name`` (case aside), or ``None`` when none is close."""
    names = list(dict.fromkeys(known))
    by_lower = {n.lower(): n for n in names}
    if name.lower() in by_lower and by_lower[name.lower()] != name:
        return by_lower[name.lower()]
    found = difflib.get_close_matches(name.lower(), list(by_lower), n=1, cutoff=0.6)
    return by_lower[found[0]] if found else None


def did_you_mean(
    name: str,
    known: Iterable[str],
    *,
    listing: str | None = None,
    quote: Callable[[str], str] = repr,
) -> str:
    """``": did you mean 'x'?"`` for the closest known name, plus ``" (<listing>: a, b, c)"``
    when ``listing`` is given; ``""`` when there is nothing to say. ``quote`` renders
    the suggestion as the rest of the message quotes names."""
    names = list(dict.fromkeys(known))
    best = suggest(name, names)
    out = f": did you mean {quote(best)}?" if best is not None else ""
    if listing is not None and names:
        shown = ", ".join(names[:MAX_LISTED]) + (", …" if len(names) > MAX_LISTED else "")
        out += f" ({listing}: {shown})"
    return out


#: What a TLS handshake reads when the server answers in plain HTTP (OpenSSL's
#: wording across versions).
_PLAIN_HTTP: Final = ("WRONG_VERSION_NUMBER", "wrong version number", "record layer failure")
_REFUSED: Final = ("Connection refused", "Errno 111", "Errno 61", "ECONNREFUSED")
_NO_HOST: Final = (
    "Name or service not known",
    "nodename nor servname",
    "Temporary failure in name resolution",
    "getaddrinfo failed",
)


def connection_hint(error: str, url: str) -> str:
    """``"; <what to try>"`` for a connection to ``url`` that failed with ``error``
    (the transport's own text), or ``""`` when there is nothing better to say."""
    parts = urlsplit(url)
    host = parts.hostname or "?"
    where = f"{host}:{parts.port}" if parts.port else host
    if parts.scheme == "https" and any(s in error for s in _PLAIN_HTTP):
        plain = parts._replace(scheme="http").geturl()
        return f"; the server at {where} speaks plain HTTP, not TLS: try {plain}"
    if any(s in error for s in _REFUSED):
        return (
            f"; nothing listens at {where}: is `tokenwire serve` running there? "
            "(`make run` starts one at http://127.0.0.1:8080)"
        )
    if any(s in error for s in _NO_HOST):
        return f"; the host name {host!r} does not resolve: check the URL"
    return ""
