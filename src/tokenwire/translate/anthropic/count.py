"""Anthropic's ``POST /v1/messages/count_tokens``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from .._base import VendorRequest
from .._contract import TokenCount
from .._count import count_field, count_request

__all__ = ["COUNT"]

#: The fields ``count_tokens`` takes; it refuses the generation-only ones
#: (``max_tokens``, ``stream``, ``temperature``...).
_FIELDS: Final = frozenset(
    {"model", "messages", "system", "tools", "tool_choice", "thinking", "mcp_servers"}
)


def _request(request: VendorRequest) -> VendorRequest:
    url = request.url.split("?", 1)[0].removesuffix("/messages") + "/messages/count_tokens"
    return count_request(request, url, keep=_FIELDS)


def _generation_body(body: dict[str, Any], _params: Mapping[str, str]) -> dict[str, Any]:
    body.setdefault("max_tokens", 1)  # count_tokens bodies have none; Messages needs one
    return body


COUNT: Final = TokenCount(
    request=_request,
    result=lambda body: count_field(body, "input_tokens"),
    answer=lambda n: {"input_tokens": n},
    generation_body=_generation_body,
)
