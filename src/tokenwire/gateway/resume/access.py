"""Who may resume or cancel a stream: its resume token and its creator's credential.

A resumable stream's POST answer carries ``tokenwire-resume-token: <token>``
(``secrets.token_urlsafe(32)``: 256 random bits). ``GET`` and ``DELETE
/v1/streams/{request_id}`` must send it back in ``Tokenwire-Resume-Token``, and,
when the POST carried a credential (``Authorization``, ``x-api-key`` or
``x-goog-api-key``), the same credential. The store keeps digests only, never
the token or the credential (docs/scaling.md "Security"). Pure functions.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Iterable
from typing import Final

from .store import StreamInfo

__all__ = [
    "CREDENTIAL_HEADERS",
    "TOKEN_HEADER",
    "allowed",
    "credential_digest",
    "new_token",
    "presented_token",
    "same_caller",
    "token_digest",
]

#: The header of the POST answer (and of a resume or cancel request) with the token.
TOKEN_HEADER: Final = b"tokenwire-resume-token"
#: The request headers that identify a caller, where the gateway sits behind auth
#: (OpenAI and Anthropic style, and Gemini's key header).
CREDENTIAL_HEADERS: Final = frozenset({b"authorization", b"x-api-key", b"x-goog-api-key"})

Headers = Iterable[tuple[bytes, bytes]]


def new_token() -> str:
    """A fresh resume token: 32 random bytes, URL-safe base64 (43 characters)."""
    return secrets.token_urlsafe(32)


def token_digest(token: str | bytes) -> str:
    """What the store keeps of a token: its SHA-256, in hex."""
    raw = token.encode() if isinstance(token, str) else token
    return hashlib.sha256(b"tokenwire-resume-token\0" + raw).hexdigest()


def credential_digest(headers: Headers) -> str:
    """The SHA-256 of the credential headers in ``headers`` (``""`` when there are none).

    Names and values are length-prefixed, so no two different sets of headers
    give the same input.
    """
    found = sorted((name, value) for name, value in headers if name in CREDENTIAL_HEADERS)
    if not found:
        return ""
    digest = hashlib.sha256(b"tokenwire-credential\0")
    for name, value in found:
        for part in (name, value):
            digest.update(len(part).to_bytes(4, "big") + part)
    return digest.hexdigest()


def presented_token(headers: Headers) -> bytes | None:
    """The one ``Tokenwire-Resume-Token`` of a request (``None``: none, or several)."""
    tokens = [value.strip() for name, value in headers if name == TOKEN_HEADER]
    return tokens[0] if len(tokens) == 1 and tokens[0] else None


def allowed(info: StreamInfo, headers: Headers) -> bool:
    """Whether a request with ``headers`` may resume or cancel the stream of ``info``:
    its token, and the credential its creator had (or none, if it had none)."""
    headers = list(headers)
    token = presented_token(headers)
    if token is None or not info.token:
        return False
    token_ok = hmac.compare_digest(token_digest(token), info.token)
    credential_ok = hmac.compare_digest(credential_digest(headers), info.credential)
    return token_ok and credential_ok


def same_caller(info: StreamInfo, credential: str) -> bool:
    """Whether a POST with ``credential`` (a digest) comes from the stream's creator."""
    return hmac.compare_digest(info.credential, credential)
