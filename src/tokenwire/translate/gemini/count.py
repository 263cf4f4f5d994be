"""Gemini's ``POST /v1beta/models/{model}:countTokens``.

The whole ``GenerateContentRequest`` is counted (system instruction and
tools included): it travels as ``generateContentRequest``, with its
``model``, as the endpoint requires.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from .._base import VendorRequest
from .._contract import TokenCount
from .._count import count_field, count_request

__all__ = ["COUNT"]


def _request(request: VendorRequest) -> VendorRequest:
    url, _, _ = request.url.partition("?")
    head, _, _ = url.rpartition(":")
    model = head.rsplit("/models/", 1)[-1]
    return count_request(
        request,
        head + ":countTokens",
        wrap="generateContentRequest",
        extra={"model": f"models/{model}"},
    )


def _generation_body(body: dict[str, Any], params: Mapping[str, str]) -> dict[str, Any]:
    inner = body.get("generateContentRequest")
    if isinstance(inner, dict):
        body = inner  # the whole request form (its model is the path's)
    body["model"] = params.get("model", body.get("model"))
    return body


COUNT: Final = TokenCount(
    request=_request,
    result=lambda body: count_field(body, "totalTokens"),
    answer=lambda n: {"totalTokens": n},
    generation_body=_generation_body,
)
