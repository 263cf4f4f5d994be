"""One URL form for every command: a base URL or the full stream URL.

``http://127.0.0.1:8080`` and ``http://127.0.0.1:8080/v1/stream`` name the
same endpoint; a URL with any other path is taken as the stream URL itself
(an endpoint mounted elsewhere, ``https://example.com/api/llm``).
"""

from __future__ import annotations

from typing import Final
from urllib.parse import urlsplit, urlunsplit

__all__ = ["STREAM_PATH", "stream_url"]

#: Where the standard is served on a tokenwire gateway (DESIGN.md, "Gateway surface").
STREAM_PATH: Final = "/v1/stream"


def stream_url(url: str) -> str:
    """The URL to POST standard requests to, from a base URL or a stream URL.

    A URL without a path (or with ``/``) gets ``/v1/stream``, one ending in
    ``/v1`` gets ``/stream``; any other path is kept. Query and fragment are
    kept. Raises ``ValueError`` for a URL that is not ``http(s)://host...``.
    """
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"{url!r} is not an http:// or https:// URL")
    path = parts.path.rstrip("/")
    if path == "":
        path = STREAM_PATH
    elif path.endswith("/v1"):
        path += "/stream"
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, parts.fragment))
