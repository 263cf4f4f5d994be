"""Anthropic's ``POST /v1/messages/count_tokens`` (issue 23)."""

from __future__ import annotations

from typing import Final

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


COUNT: Final = TokenCount(request=_request, result=lambda body: count_field(body, "input_tokens"))
