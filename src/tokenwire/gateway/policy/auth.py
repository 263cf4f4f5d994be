"""Refusals of inbound keys and limits, in the error shape of each ingress's own vendor.

An SDK raises its normal exceptions only when the body looks like its
vendor's: ``openai.AuthenticationError``/``RateLimitError`` read
``{"error": {"message", "type", "code"}}``; ``anthropic``'s read
``{"type": "error", "error": {"type", "message"}}``; google-genai's
``ClientError`` reads ``{"error": {"code", "message", "status"}}``.
``/v1/stream`` (and every other route) answers with the standard's JSON error
``{"error": {"code", "message", "path"}}``.
"""

from __future__ import annotations

from typing import Final

import msgspec

from ...server.asgi import json_error

__all__ = ["Refusal", "error_body", "ingress_of"]

_encode = msgspec.json.Encoder().encode

#: status -> (standard code, OpenAI type, OpenAI code, Anthropic type, Gemini status)
_KINDS: Final = {
    401: (
        "unauthorized",
        "invalid_request_error",
        "invalid_api_key",
        "authentication_error",
        "UNAUTHENTICATED",
    ),
    403: (
        "forbidden",
        "invalid_request_error",
        "model_not_allowed",
        "permission_error",
        "PERMISSION_DENIED",
    ),
    429: (
        "rate_limited",
        "rate_limit_error",
        "rate_limit_exceeded",
        "rate_limit_error",
        "RESOURCE_EXHAUSTED",
    ),
    503: ("overloaded", "server_error", "service_unavailable", "overloaded_error", "UNAVAILABLE"),
}


class Refusal(msgspec.Struct, frozen=True):
    """A refused request: status, message, ``Retry-After`` and an optional code."""

    status: int
    message: str
    retry_after: str | None = None
    code: str | None = None


def ingress_of(path: str) -> str:
    """Whose error shape a route answers in: openai, anthropic, gemini or standard."""
    if path.endswith((":streamGenerateContent", ":generateContent", ":countTokens")):
        return "gemini"  # under /v1/ too (google-genai 3.x's default version, issue 23)
    if path.startswith("/v1/messages"):
        return "anthropic"
    if path.startswith(
        ("/v1/chat/completions", "/v1/responses", "/v1/models", "/v1/completions", "/v1/embeddings")
    ):
        return "openai"
    if path.startswith(("/v1beta/", "/v1alpha/")) or ":streamGenerateContent" in path:
        return "gemini"
    return "standard"


def error_body(ingress: str, refusal: Refusal) -> bytes:
    """The JSON body of ``refusal`` as ``ingress``'s vendor writes errors."""
    standard, oa_type, oa_code, an_type, gm_status = _KINDS.get(refusal.status, _KINDS[403])
    code = refusal.code or standard
    if ingress == "openai":
        body = {
            "error": {
                "message": refusal.message,
                "type": oa_type,
                "param": None,
                "code": refusal.code or oa_code,
            }
        }
        return _encode(body)
    if ingress == "anthropic":
        return _encode({"type": "error", "error": {"type": an_type, "message": refusal.message}})
    if ingress == "gemini":
        gemini = {
            "error": {"code": refusal.status, "message": refusal.message, "status": gm_status}
        }
        return _encode(gemini)
    return json_error(code, refusal.message, None)


def headers_for(ingress: str, refusal: Refusal) -> list[tuple[bytes, bytes]]:
    """The response headers of ``refusal``."""
    headers = [(b"content-type", b"application/json")]
    if refusal.retry_after is not None:
        headers.append((b"retry-after", refusal.retry_after.encode()))
    if refusal.status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="tokenwire"'))
    return headers


def standard_code(status: int) -> str:
    """The standard's error code for a refusal status."""
    return _KINDS.get(status, _KINDS[403])[0]
