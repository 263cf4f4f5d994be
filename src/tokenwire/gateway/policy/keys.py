"""Inbound keys: generation, hashing, lookup, and the credential each ingress's SDK sends.

A key is ``tw-`` and 43 characters of URL-safe base64 (256 random bits), so a
plain SHA-256 of it is as good as a slow password hash: nobody can enumerate
the input space, and checking costs one hash per request rather than scrypt's
tens of milliseconds. The config stores only ``sha256:<hex>``; a presented key
is hashed and looked up by its digest, and the match is confirmed with
``hmac.compare_digest``. Keys are never logged: the request log carries the
key's ``id``.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Iterable
from typing import Final
from urllib.parse import parse_qs

from ..config.production import KeyConfig

__all__ = ["KEY_PREFIX", "KeyRecord", "KeyRing", "credential", "hash_key", "new_key"]

KEY_PREFIX: Final = "tw-"
#: A longer credential is refused before it is hashed.
MAX_KEY_CHARS: Final = 512


def new_key() -> str:
    """A fresh inbound key (256 random bits)."""
    return KEY_PREFIX + secrets.token_urlsafe(32)


def hash_key(key: str) -> str:
    """What the config stores for ``key``: ``sha256:`` and the hex digest."""
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()


class KeyRecord:
    """One configured key: its id, its digest and what it may do."""

    __slots__ = ("id", "digest", "models", "requests_per_minute", "tokens_per_minute", "budget")

    def __init__(self, config: KeyConfig) -> None:
        self.id = config.id
        self.digest = bytes.fromhex(config.hash.removeprefix("sha256:"))
        #: ``None``: every model.
        self.models: frozenset[str] | None = frozenset(config.models) if config.models else None
        self.requests_per_minute = config.requests_per_minute
        self.tokens_per_minute = config.tokens_per_minute
        self.budget = config.token_budget

    @property
    def limited(self) -> bool:
        """Whether any limit applies to this key."""
        return (
            self.requests_per_minute is not None
            or self.tokens_per_minute is not None
            or self.budget is not None
        )

    @property
    def counts_tokens(self) -> bool:
        """Whether the key's token usage must be charged after each stream."""
        return self.tokens_per_minute is not None or self.budget is not None

    def allows(self, model: str) -> bool:
        """Whether this key may use ``model``."""
        return self.models is None or model in self.models


class KeyRing:
    """The configured keys, found by the digest of a presented key."""

    def __init__(self, keys: Iterable[KeyConfig]) -> None:
        self._by_digest = {record.digest: record for record in map(KeyRecord, keys)}

    def __bool__(self) -> bool:
        return bool(self._by_digest)

    def __len__(self) -> int:
        return len(self._by_digest)

    def find(self, presented: str) -> KeyRecord | None:
        """The key record for ``presented``, or ``None`` when it is no configured key."""
        if not presented or len(presented) > MAX_KEY_CHARS:
            return None
        digest = hashlib.sha256(presented.encode("utf-8", "replace")).digest()
        record = self._by_digest.get(digest)
        if record is None or not hmac.compare_digest(record.digest, digest):
            return None
        return record


def credential(headers: Iterable[tuple[bytes, bytes]], query_string: bytes = b"") -> str | None:
    """The key a client sent, whichever SDK sent it, or ``None``.

    OpenAI's SDK (and ``/v1/stream`` clients) send ``Authorization: Bearer``,
    Anthropic's ``x-api-key``, google-genai ``x-goog-api-key`` (older Gemini
    clients put ``?key=`` in the query string). Every route takes any of them.
    """
    found: str | None = None
    for name, value in headers:
        if name == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
        elif name in (b"x-api-key", b"x-goog-api-key"):
            found = value.decode("latin-1").strip() or found
    if found is None and b"key=" in query_string:
        values = parse_qs(query_string.decode("latin-1")).get("key")
        if values:
            found = values[0]
    return found
