"""The fake upstream's Gemini ``streamGenerateContent?alt=sse`` format (``FakeUpstream("gemini")``).

Rendered like the recordings in ``vendor-fixtures/gemini/``: ``data:
<GenerateContentResponse>`` frames separated by CRLF CRLF, JSON with ``": "``
spacing and raw UTF-8, no ``event:`` lines and no end marker. One chunk per
word of text; one chunk per tool call, its ``functionCall`` whole with an
``args`` object (Gemini does not fragment arguments) and no ``id`` unless the
script gives one; a last chunk with an empty text part and the
``finishReason``. Every chunk carries ``usageMetadata`` with running totals that
reach the script's counts on the last chunk (``promptTokenCount``,
``candidatesTokenCount``, ``totalTokenCount``).

Stop reasons: ``end_turn`` and ``tool_use`` -> ``STOP`` (Gemini has no
tool-call reason), ``max_tokens`` -> ``MAX_TOKENS``, ``content_filter`` ->
``SAFETY`` with a blocked safety rating and no content. A scripted error
becomes a ``data: {"error": {...}}`` chunk with the status the code maps to
(``ERRORS``), and the body ends there; ``content_filtered`` becomes a prompt
block (``promptFeedback.blockReason``, no candidates) instead, since that is
how Gemini refuses. SDK setup: ``genai.Client(api_key="x",
http_options=types.HttpOptions(base_url=fake.url, api_version="v1beta"))``.
"""

from __future__ import annotations

import json
from typing import Any, Final

from .upstream import RecordedRequest, Script, json_object

__all__ = [
    "CONTENT_TYPE",
    "ERRORS",
    "FINISH_REASONS",
    "check_request",
    "error_body",
    "render",
]

CONTENT_TYPE: Final = "text/event-stream"

#: Standard stop reason -> Gemini ``finishReason``.
FINISH_REASONS: Final = {
    "end_turn": "STOP",
    "tool_use": "STOP",
    "max_tokens": "MAX_TOKENS",
    "content_filter": "SAFETY",
}

#: Draft error code -> (HTTP code, Google RPC status, message prefix) of the
#: in-stream error object. The prefix makes ``context_length_exceeded``
#: recognisable, as Gemini's own message is.
ERRORS: Final[dict[str, tuple[int, str, str]]] = {
    "rate_limited": (429, "RESOURCE_EXHAUSTED", "Resource has been exhausted. "),
    "overloaded": (503, "UNAVAILABLE", "The model is overloaded. "),
    "context_length_exceeded": (
        400,
        "INVALID_ARGUMENT",
        "The input token count exceeds the maximum number of tokens allowed. ",
    ),
    "internal_error": (500, "INTERNAL", "An internal error has occurred. "),
}

_STATUSES: Final[dict[int, tuple[str, str]]] = {
    400: ("INVALID_ARGUMENT", "Request contains an invalid argument."),
    401: ("UNAUTHENTICATED", "API key not valid. Please pass a valid API key."),
    403: ("PERMISSION_DENIED", "The caller does not have permission."),
    404: ("NOT_FOUND", "models/fake is not found for API version v1beta."),
    405: ("INVALID_ARGUMENT", "Method not allowed."),
    429: ("RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota)."),
    500: ("INTERNAL", "An internal error has occurred. Please retry."),
    503: ("UNAVAILABLE", "The model is overloaded. Please try again later."),
    504: ("DEADLINE_EXCEEDED", "The request timed out. Please try again."),
    529: ("UNAVAILABLE", "The model is overloaded. Please try again later."),
}


def _json(obj: Any) -> bytes:
    # Gemini's own spacing (", " is not used, ": " is) and raw UTF-8.
    return json.dumps(obj, ensure_ascii=False, separators=(",", ": ")).encode()


def _frame(obj: Any) -> bytes:
    return b"data: " + _json(obj) + b"\r\n\r\n"


def error_body(status: int) -> bytes:
    """Google's pretty-printed JSON error body for an HTTP ``status``."""
    rpc, message = _STATUSES.get(status, ("UNKNOWN", f"Upstream error {status}."))
    body = {"error": {"code": status, "message": message, "status": rpc}}
    return json.dumps(body, indent=2).encode() + b"\n"


def check_request(request: RecordedRequest) -> str | None:
    """The problem with a ``streamGenerateContent`` request, or ``None``."""
    path, _, query = request.path.partition("?")
    if ":streamGenerateContent" not in path or "/models/" not in path:
        return f"expected POST .../models/{{model}}:streamGenerateContent, got {request.path}"
    if "alt=sse" not in query.split("&"):
        return "the fake speaks the SSE form only: add ?alt=sse"
    body = json_object(request, model=False)  # the model is in the path
    if isinstance(body, str):
        return body
    contents = body.get("contents")
    if not isinstance(contents, list) or not contents:
        return "contents: a non-empty array is required"
    return None


def render(script: Script, *, model: str, request: RecordedRequest) -> list[bytes]:
    """The Gemini SSE body for ``script``, one item per chunk (CRLF framing)."""
    pieces = script.pieces
    output_tokens = script.usage_output_tokens
    steps = len(pieces) + len(script.tool_calls) + 1  # content chunks + the finish chunk
    step = 0

    def usage(final: bool = False) -> dict[str, Any]:
        # A running total (never an increment) that reaches the script's count.
        nonlocal step
        step += 1
        done = output_tokens if final else output_tokens * step // steps
        return {
            "promptTokenCount": script.input_tokens,
            "candidatesTokenCount": done,
            "totalTokenCount": script.input_tokens + done,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": script.input_tokens}],
        }

    def chunk(candidate: dict[str, Any], final: bool = False) -> bytes:
        return _frame(
            {
                "candidates": [candidate],
                "usageMetadata": usage(final),
                "modelVersion": model,
                "responseId": "fakeGeminiResponse0001",
            }
        )

    out = [
        chunk({"content": {"parts": [{"text": piece}], "role": "model"}, "index": 0})
        for piece in pieces
    ]
    for call in script.tool_calls:
        function_call: dict[str, Any] = {"name": call.name, "args": call.arguments}
        if call.id is not None:
            function_call = {"id": call.id, **function_call}
        out.append(
            chunk(
                {
                    "content": {"parts": [{"functionCall": function_call}], "role": "model"},
                    "index": 0,
                }
            )
        )
    if script.error is not None:
        code, message = script.error
        if code == "content_filtered":
            block = {"blockReason": "SAFETY", "blockReasonMessage": message}
            feedback = {"promptFeedback": block, "usageMetadata": usage(True)}
            out.append(_frame({**feedback, "modelVersion": model}))
            return out
        http, status, prefix = ERRORS.get(code, ERRORS["internal_error"])
        out.append(_frame({"error": {"code": http, "message": prefix + message, "status": status}}))
        return out
    reason = FINISH_REASONS[script.final_stop_reason]
    last: dict[str, Any]
    if reason == "SAFETY":
        rating = {
            "category": "HARM_CATEGORY_DANGEROUS_CONTENT",
            "probability": "HIGH",
            "blocked": True,
        }
        last = {"finishReason": reason, "index": 0, "safetyRatings": [rating]}
    else:
        last = {
            "content": {"parts": [{"text": ""}], "role": "model"},
            "finishReason": reason,
            "index": 0,
        }
    out.append(chunk(last, final=True))
    return out
