"""The one URL grammar of ``Client``, ``AsyncClient``, ``tokenwire chat`` and ``tokenwire check``.

``endpoint(url)`` reads what a user types for "the gateway" and gives its
base URL (what ``/v1/stream``, ``/v1/streams/{id}`` and ``/v1/models`` hang
from) and its stream URL. The TypeScript ``Client`` (js/src/url.ts) follows
the same rules; both are tested on one table, tests/vectors/url/grammar.json.

- ``127.0.0.1:8080`` or ``localhost:8080`` (no scheme): ``http://`` is meant;
- ``http://h:p``, ``http://h:p/``, ``http://h:p/v1`` and ``http://h:p/v1/stream``
  (trailing slashes allowed) all name the same endpoint;
- any other path is a prefix the gateway is mounted under (a reverse proxy's
  ``https://example.com/llm``), as an SDK's ``base_url`` is;
- a vendor route (``/v1/chat/completions``, ``/v1/messages``, Gemini's
  ``:streamGenerateContent``...) or another gateway route (``/v1/models``,
  ``/v1/streams/{id}``, ``/healthz``) given by mistake is refused, with a
  one-line ``ValueError`` that names it and says what to pass;
- the query string is kept on the stream URL (``?key=`` of a proxy);
  a fragment is dropped (never sent).

String slicing, not ``urllib``: the TypeScript twin must give the same bytes,
and WHATWG ``URL`` and ``urlsplit`` normalise differently.
"""

from __future__ import annotations

import re
from typing import Final, NamedTuple

__all__ = ["STREAM_PATH", "Endpoint", "endpoint"]

#: Where an endpoint takes requests, below its base URL.
STREAM_PATH: Final = "/v1/stream"

#: Paths that are some other route than the endpoint: (pattern on the path's end, name).
_ROUTES: Final = (
    (re.compile(r"/v1/chat/completions$"), "the OpenAI Chat Completions route"),
    (re.compile(r"/v1/completions$"), "the OpenAI legacy completions route"),
    (re.compile(r"/v1/responses(/input_tokens)?$"), "the OpenAI Responses route"),
    (re.compile(r"/v1/messages(/count_tokens)?$"), "the Anthropic Messages route"),
    (re.compile(r"/v2/chat$"), "the Cohere chat route"),
    (re.compile(r"/v1(beta|alpha)?/models/[^/]*:[A-Za-z]+$"), "a Gemini model route"),
    (re.compile(r"/v1/models(/[^/]*)?$"), "the models list"),
    (re.compile(r"/v1/streams(/[^/]*)?$"), "the resume route"),
    (re.compile(r"/(healthz|metrics)$"), "a monitoring route"),
    (re.compile(r"/v1/.+$"), "a route below /v1"),
)
_SCHEME: Final = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


class Endpoint(NamedTuple):
    """An endpoint as ``endpoint`` reads it."""

    base: str  # scheme://authority[/prefix], no trailing slash, no query
    stream: str  # base + "/v1/stream" + the query, what standard requests are POSTed to
    query: str  # "" or "?..." as given


def endpoint(url: str) -> Endpoint:
    """The endpoint ``url`` names: its base URL and its stream URL.

    Raises ``ValueError`` (one line, naming what was given and what to pass)
    for an empty URL, a scheme other than http(s), no host, or a path that is
    another route (see the module docstring).
    """
    given = url.strip()
    if not given:
        raise ValueError(f"no URL given: {_PASS_EXAMPLE}")
    if any(c.isspace() for c in given):
        raise ValueError(f"{given} has a space in it: {_PASS_EXAMPLE}")
    m = _SCHEME.match(given)
    if m is None:
        scheme, rest = "http", given  # a bare host:port
    else:
        scheme, rest = m.group(1).lower(), given[m.end() :]
    if scheme not in ("http", "https"):
        raise ValueError(f"{given} is not an http:// or https:// URL: {_PASS_EXAMPLE}")
    rest = rest.split("#", 1)[0]
    cut = _first_of(rest, "/?")
    authority, rest = rest[:cut], rest[cut:]
    if not authority or authority.startswith(":"):
        raise ValueError(f"{given} names no host: {_PASS_EXAMPLE}")
    qcut = _first_of(rest, "?")
    path, query = rest[:qcut].rstrip("/"), rest[qcut:]
    origin = f"{scheme}://{authority}"
    if path.endswith(STREAM_PATH):
        path = path.removesuffix(STREAM_PATH)
    elif path.endswith("/v1"):
        path = path.removesuffix("/v1")
    else:
        for pattern, name in _ROUTES:
            found = pattern.search(path)
            if found is not None:
                prefix = origin + path[: found.start()]
                raise ValueError(
                    f"{origin + path} is {name}, not an LLM-Stream endpoint: pass the "
                    f"gateway's base URL ({prefix}) or its stream URL ({prefix}{STREAM_PATH})"
                )
    base = origin + path
    return Endpoint(base=base, stream=base + STREAM_PATH + query, query=query)


_PASS_EXAMPLE: Final = (
    "pass the gateway's base URL (http://127.0.0.1:8080) or its stream URL "
    "(http://127.0.0.1:8080/v1/stream)"
)


def _first_of(text: str, chars: str) -> int:
    found = [i for i in (text.find(c) for c in chars) if i >= 0]
    return min(found) if found else len(text)
