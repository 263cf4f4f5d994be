"""OpenAI Responses' ``POST /v1/responses/input_tokens``."""

from __future__ import annotations

from typing import Final

from .._base import VendorRequest
from .._contract import TokenCount
from .._count import count_field, count_request

__all__ = ["COUNT"]

#: The fields ``input_tokens`` takes (no ``stream``, ``store``, sampling or limits).
#: The fake upstream keeps its own copy (testing/openai_responses.py) on purpose:
#: a test oracle that imported this list could not catch a wrong one.
_FIELDS: Final = frozenset(
    {
        "model",
        "input",
        "instructions",
        "tools",
        "tool_choice",
        "reasoning",
        "text",
        "truncation",
        "parallel_tool_calls",
        "previous_response_id",
        "conversation",
    }
)


def _request(request: VendorRequest) -> VendorRequest:
    url = request.url.split("?", 1)[0].removesuffix("/responses") + "/responses/input_tokens"
    return count_request(request, url, keep=_FIELDS)


COUNT: Final = TokenCount(
    request=_request,
    result=lambda body: count_field(body, "input_tokens"),
    answer=lambda n: {"object": "response.input_tokens", "input_tokens": n},
)
