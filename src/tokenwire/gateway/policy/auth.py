"""Refusals of inbound keys and limits: their status, code and headers.

The body is written in the error shape of the route's vendor
(``translate.error_body_for``: an SDK raises its normal exceptions only for
its vendor's shape); every other route answers with the standard's JSON error
``{"error": {"code", "message", "path"}}``.
"""

from __future__ import annotations

from typing import Final

import msgspec

__all__ = ["Refusal", "headers_for", "standard_code"]

#: Refusal status -> the standard's error code (any other status: ``forbidden``).
_CODES: Final = {
    401: "unauthorized",
    403: "forbidden",
    429: "rate_limited",
    503: "overloaded",
}


class Refusal(msgspec.Struct, frozen=True):
    """A refused request: status, message, ``Retry-After`` and an optional code."""

    status: int
    message: str
    retry_after: str | None = None
    code: str | None = None


def headers_for(refusal: Refusal) -> list[tuple[bytes, bytes]]:
    """The response headers of ``refusal``."""
    headers = [(b"content-type", b"application/json")]
    if refusal.retry_after is not None:
        headers.append((b"retry-after", refusal.retry_after.encode()))
    if refusal.status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="tokenwire"'))
    return headers


def standard_code(status: int) -> str:
    """The standard's error code for a refusal status."""
    return _CODES.get(status, "forbidden")
