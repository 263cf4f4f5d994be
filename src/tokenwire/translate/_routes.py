"""Which vendor's clients call a gateway path: the one answer for the error shape it gets.

An SDK raises its own exceptions only for errors in its vendor's shape, so
every error the gateway answers on a vendor's path (a refused key, an unknown
route, a bad body) is written by that vendor's ``error_body``, and every other
path answers in the standard's. A path the gateway does not serve gets the
same answer as one it serves under the same prefix (an OpenAI client calling
``/v1/embeddings`` reads OpenAI's shape whatever the status).
"""

from __future__ import annotations

from typing import Final

from ._contract import get

__all__ = ["error_body_for", "vendor_of"]

#: Gemini's methods, at the end of a path under any API version (``/v1/`` too:
#: google-genai 3.x calls ``v1`` by default).
_GEMINI_METHODS: Final = (":streamGenerateContent", ":generateContent", ":countTokens")
#: Gemini's API versions besides ``v1``: the whole path is Google's.
_GEMINI_VERSIONS_SEGMENT: Final = (["v1beta"], ["v1alpha"])
#: Path prefixes and the vendor format whose clients call them, first match wins.
_PREFIXES: Final = (
    ("/v1/messages", "anthropic"),
    ("/v1/responses", "openai-responses"),
    ("/v1/chat/completions", "openai"),
    ("/v1/completions", "openai"),
    ("/v1/embeddings", "openai"),
    ("/v1/models", "openai"),
)


def vendor_of(path: str) -> str | None:
    """The vendor format whose error shape ``path`` answers in; ``None``: the standard's."""
    if path.endswith(_GEMINI_METHODS) or path.split("/", 2)[1:2] in _GEMINI_VERSIONS_SEGMENT:
        return "gemini"
    for prefix, vendor in _PREFIXES:
        if path.startswith(prefix):
            return vendor
    return None


def error_body_for(
    path: str, status: int, code: str, message: str, field: str | None = None
) -> bytes | None:
    """An error answered on ``path`` in its vendor's shape; ``None`` on the standard's paths."""
    vendor = vendor_of(path)
    if vendor is None:
        return None
    ingress = get(vendor).ingress
    if ingress is None or ingress.error_body is None:  # pragma: no cover - each has one
        return None
    return ingress.error_body(status, code, message, field)
