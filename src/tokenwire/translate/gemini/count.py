"""Gemini's ``POST /v1beta/models/{model}:countTokens`` (issue 23).

The whole ``GenerateContentRequest`` is counted (system instruction and
tools included): it travels as ``generateContentRequest``, with its
``model``, as the endpoint requires.
"""

from __future__ import annotations

from typing import Final

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


COUNT: Final = TokenCount(request=_request, result=lambda body: count_field(body, "totalTokens"))
