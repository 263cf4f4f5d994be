"""Who may resume or cancel a stream: its resume token and its creator's credential.

A resumable stream's POST answer carries ``tokenwire-resume-token: <token>``
(``secrets.token_urlsafe(32)``: 256 random bits). ``GET`` and ``DELETE
/v1/streams/{request_id}`` must send it back in ``Tokenwire-Resume-Token``, and,
when the POST carried a credential, the same credential. A credential is an API
key the way the SDKs send one (``Authorization: Bearer``, ``x-api-key``,
``x-goog-api-key``; the same key in another of them is the same caller), or any
other ``Authorization`` value as it is. The store keeps digests
only, never the token or the credential (docs/scaling.md "Security"). Pure
functions.

Each credential has its own ``request_id`` namespace (``scoped``):
the store keeps a stream under its creator's credential digest and the
client's id, so a POST, a resume or a cancel finds only the caller's own
streams, and another tenant's use of the same id changes nothing in the
answer. A key sent as ``?key=`` is the same credential as in a header: the
gateway's middleware moves it into ``x-goog-api-key`` for the routes behind it.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Iterable
from typing import Final

from .store import StreamInfo

__all__ = [
    "TOKEN_HEADER",
    "allowed",
    "credential",
    "credential_digest",
    "new_token",
    "presented_token",
    "same_caller",
    "scoped",
    "token_digest",
]

#: The header of the POST answer (and of a resume or cancel request) with the token.
TOKEN_HEADER: Final = b"tokenwire-resume-token"

Headers = Iterable[tuple[bytes, bytes]]


def new_token() -> str:
    """A fresh resume token: 32 random bytes, URL-safe base64 (43 characters)."""
    return secrets.token_urlsafe(32)


def token_digest(token: str | bytes) -> str:
    """What the store keeps of a token: its SHA-256, in hex."""
    raw = token.encode() if isinstance(token, str) else token
    return hashlib.sha256(b"tokenwire-resume-token\0" + raw).hexdigest()


def credential(headers: Headers) -> bytes | None:
    """The caller's credential, or ``None``.

    A bearer token, else ``x-api-key``, else ``x-goog-api-key``: the key itself,
    whichever header it came in, as the gateway's API keys read it. Another
    ``Authorization`` scheme (Basic, say) counts as its whole value. (A key in
    the query string is not a credential here: the token alone binds.)
    """
    bearer = other = api_key = goog_key = None
    for name, value in headers:
        if name == b"authorization":
            scheme, _, rest = value.strip().partition(b" ")
            if scheme.lower() == b"bearer" and rest.strip():
                bearer = bearer or rest.strip()
            elif value.strip():
                other = other or value.strip()
        elif name == b"x-api-key" and value.strip():
            api_key = api_key or value.strip()
        elif name == b"x-goog-api-key" and value.strip():
            goog_key = goog_key or value.strip()
    found = bearer or api_key or goog_key
    if found is not None:
        return b"key\0" + found
    return None if other is None else b"authorization\0" + other


def credential_digest(headers: Headers) -> str:
    """The SHA-256 of the caller's ``credential`` (``""`` when it has none)."""
    found = credential(headers)
    if found is None:
        return ""
    return hashlib.sha256(b"tokenwire-credential\0" + found).hexdigest()


def scoped(credential: str, request_id: str) -> str:
    """The store's id of the caller's stream ``request_id``; ``credential`` is its digest.

    ``k:<32 hex of the digest>:<id>`` for a caller with a credential; the id as
    it is for one without (``a:`` before it when it starts with ``k:`` or
    ``a:``, so that no id of one namespace is an id of another). 128 bits of the
    digest: a collision between two credentials is out of reach.
    """
    if credential:
        return f"k:{credential[:32]}:{request_id}"
    if request_id.startswith(("k:", "a:")):
        return "a:" + request_id
    return request_id


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
    digest = credential_digest(headers)
    credential_ok = hmac.compare_digest(digest, info.credential)
    return token_ok and credential_ok


def same_caller(info: StreamInfo, credential: str) -> bool:
    """Whether a POST with ``credential`` (a digest) comes from the stream's creator."""
    return hmac.compare_digest(info.credential, credential)
