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

Thinking (a request with ``generationConfig.thinkingConfig``) makes the fake a
Gemini 3 model: ``script.thinking`` is streamed first as a ``thought: true``
part when ``includeThoughts`` is set, the first ``functionCall`` part of the
answer carries a ``thoughtSignature`` (HMAC-signed over the call, ``signature``)
and so does the last, empty text part of a text answer (over the text);
``thoughtsTokenCount`` reports the thinking. On the next turn it refuses, as
Gemini 3 does, with HTTP 400 ``INVALID_ARGUMENT`` (``refusal_body``), a request
whose current turn has a model step whose first ``functionCall`` part lacks its
signature or carries one that does not sign that call (altered call or signature).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from typing import Any, Final

from . import loops
from .upstream import (
    RecordedRequest,
    Script,
    choice_count,
    choice_text,
    count_answer,
    json_object,
    split_words,
)

__all__ = [
    "COUNT_FIELDS",
    "count_tokens",
    "CONTENT_TYPE",
    "ERRORS",
    "FINISH_REASONS",
    "check_request",
    "error_body",
    "refusal_body",
    "render",
    "signature",
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


# --- Gemini 3 thought signatures: issued with thinking, checked on the next turn -------

_SIGNING_KEY: Final = b"tokenwire-fake-gemini"


def signature(kind: str, value: Any) -> str:
    """The fake's ``thoughtSignature`` of a part: ``kind`` ``"call"`` (value:
    ``{"name", "args"}``) or ``"text"`` (value: the answer text). Opaque, like Gemini's."""
    canonical = json.dumps([kind, value], sort_keys=True, separators=(",", ":"))
    digest = hmac.new(_SIGNING_KEY, canonical.encode("utf-8"), hashlib.sha256).digest()
    return base64.b64encode(b"\x12\x02" + digest).decode("ascii")


def _signature_bytes(value: object) -> bytes | None:
    """A ``bytes`` field's value: Google's JSON parser takes standard and URL-safe base64
    (google-genai sends the latter)."""
    if not isinstance(value, str):
        return None
    try:
        return base64.b64decode(value.replace("-", "+").replace("_", "/"), validate=True)
    except ValueError:
        return None


def _call_signature(call: dict[str, Any]) -> str:
    return signature("call", {"name": call.get("name"), "args": call.get("args") or {}})


def _field(obj: Any, name: str) -> Any:
    """``obj[name]``, by its lowerCamelCase name or its proto name (Google takes both)."""
    if not isinstance(obj, dict):
        return None
    if name in obj:
        return obj[name]
    return obj.get("".join("_" + c.lower() if c.isupper() else c for c in name))


def _thinking(body: dict[str, Any]) -> dict[str, Any] | None:
    thinking = _field(_field(body, "generationConfig"), "thinkingConfig")
    if not isinstance(thinking, dict):
        return None
    return {"includeThoughts": _field(thinking, "includeThoughts")}


def refusal_body(problem: str) -> bytes:
    """Gemini's 400 body: ``INVALID_ARGUMENT`` with the problem as its message."""
    body = {"error": {"code": 400, "message": problem, "status": "INVALID_ARGUMENT"}}
    return json.dumps(body, indent=2).encode() + b"\n"


def _check_signatures(contents: list[Any]) -> str | None:
    """Gemini 3: in the current turn, each model step's first functionCall part is signed."""
    start = 0
    for i, content in enumerate(contents):
        parts = content.get("parts") if isinstance(content, dict) else None
        if content.get("role", "user") == "user" and isinstance(parts, list):
            if any(isinstance(p, dict) and "text" in p for p in parts):
                start = i  # a user message (not only function responses) starts a turn
    first_call: tuple[int, int, dict[str, Any]] | None = None
    stepping = False
    for i in range(start, len(contents)):
        content = contents[i]
        if not isinstance(content, dict) or content.get("role") != "model":
            stepping = False
            continue
        if not stepping:
            first_call, stepping = None, True  # a new step (consecutive model contents merge)
        for k, part in enumerate(content.get("parts") or ()):
            call = _field(part, "functionCall")
            if first_call is None and call is not None:
                first_call = (i, k, part)
                name = call.get("name") if isinstance(call, dict) else None
                sig = _field(part, "thoughtSignature")
                if sig is None:
                    return (
                        "Function call is missing a thought_signature in functionCall parts. "
                        "This is required for tools to work correctly, and missing "
                        "thought_signature may lead to degraded model performance. Additional "
                        f"data, function call `default_api:{name}` , position {k + 1}. Please "
                        "refer to https://ai.google.dev/gemini-api/docs/thought-signatures for "
                        "more details."
                    )
                expected = (
                    _signature_bytes(_call_signature(call)) if isinstance(call, dict) else b""
                )
                if sig not in loops.GEMINI_SKIP_SIGNATURES and _signature_bytes(sig) != expected:
                    return (
                        f"Corrupted thought signature in contents[{i}].parts[{k}] "
                        f"(function call `{name}`)."
                    )
    return None


def check_request(request: RecordedRequest) -> str | None:
    """The problem with a ``streamGenerateContent`` request, or ``None``."""
    path, _, query = request.path.partition("?")
    if ":streamGenerateContent" not in path or "/models/" not in path:
        return f"expected POST .../models/{{model}}:streamGenerateContent, got {request.path}"
    if "alt=sse" not in query.split("&"):
        return "the fake speaks the SSE form only: add ?alt=sse"
    body = json_object(request, model=False)
    if isinstance(body, str):
        return body
    contents = body.get("contents")
    if not isinstance(contents, list) or not contents:
        return "contents: a non-empty array is required"
    problem = loops.gemini_results(contents, _field)
    if problem is not None:
        return problem
    if _thinking(body) is not None:
        return _check_signatures(contents)
    return None


def render(script: Script, *, model: str, request: RecordedRequest) -> list[bytes]:
    """The Gemini SSE body for ``script``, one item per chunk (CRLF framing)."""
    pieces = script.pieces
    output_tokens = script.usage_output_tokens
    # Gemini names each response anew; the fake takes its name from the request, so a
    # conversation's turns get different ones and a replay gets the same.
    response_id = "fake" + hashlib.sha256(request.body).hexdigest()[:20]
    try:
        body = request.json()
    except ValueError:
        body = None
    thinking = _thinking(body) if isinstance(body, dict) else None
    thoughts = len(split_words(script.thinking)) if thinking is not None else 0
    show_thoughts = bool(thinking and thinking.get("includeThoughts") and script.thinking)
    steps = len(pieces) + len(script.tool_calls) + 1  # content chunks + the finish chunk
    step = 0

    def usage(final: bool = False) -> dict[str, Any]:
        # A running total (never an increment) that reaches the script's count.
        nonlocal step
        step += 1
        done = output_tokens if final else output_tokens * step // steps
        usage = {
            "promptTokenCount": script.input_tokens,
            "candidatesTokenCount": done,
            "totalTokenCount": script.input_tokens + done + thoughts,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": script.input_tokens}],
        }
        if thoughts:
            usage["thoughtsTokenCount"] = thoughts
        return usage

    def chunk(candidate: dict[str, Any], final: bool = False) -> bytes:
        return _frame(
            {
                "candidates": [candidate],
                "usageMetadata": usage(final),
                "modelVersion": model,
                "responseId": response_id,
            }
        )

    out = []
    if show_thoughts:
        thought = {"text": script.thinking, "thought": True}
        out.append(chunk({"content": {"parts": [thought], "role": "model"}, "index": 0}))
    out += [
        chunk({"content": {"parts": [{"text": piece}], "role": "model"}, "index": 0})
        for piece in pieces
    ]
    for n, call in enumerate(script.tool_calls):
        function_call: dict[str, Any] = {"name": call.name, "args": call.arguments}
        if call.id is not None:
            function_call = {"id": call.id, **function_call}
        part: dict[str, Any] = {"functionCall": function_call}
        if thinking is not None and n == 0:
            # Gemini 3 signs the first function call of a step.
            part["thoughtSignature"] = _call_signature(function_call)
        out.append(chunk({"content": {"parts": [part], "role": "model"}, "index": 0}))
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
        empty: dict[str, Any] = {"text": ""}
        if thinking is not None and not script.tool_calls:
            empty["thoughtSignature"] = signature("text", script.text)
        last = {
            "content": {"parts": [empty], "role": "model"},
            "finishReason": reason,
            "index": 0,
        }
    config = body.get("generationConfig") if isinstance(body, dict) else None
    count = choice_count(config.get("candidateCount") if isinstance(config, dict) else None)
    for c in range(1, count):  # candidateCount > 1: each further candidate in turn, text only
        for piece in split_words(choice_text(script, c)):
            out.append(
                chunk({"content": {"parts": [{"text": piece}], "role": "model"}, "index": c})
            )
    if count > 1:
        finals = [last] + [
            {
                "content": {"parts": [{"text": ""}], "role": "model"},
                "finishReason": "STOP",
                "index": c,
            }
            for c in range(1, count)
        ]
        out.append(
            _frame(
                {
                    "candidates": finals,
                    "usageMetadata": usage(True),
                    "modelVersion": model,
                    "responseId": response_id,
                }
            )
        )
        return out
    out.append(chunk(last, final=True))
    return out


#: What ``:countTokens`` takes: ``contents``, or the whole ``generateContentRequest``.
COUNT_FIELDS: Final = frozenset({"contents", "generateContentRequest"})


def count_tokens(request: RecordedRequest) -> tuple[int, bytes] | None:
    """The answer of ``POST .../models/{model}:countTokens`` (``None``: another path)."""
    answer = count_answer(
        request, ":countTokens", COUNT_FIELDS, (), lambda n: {"totalTokens": n}, refusal_body
    )
    if answer is None or answer[0] != 200:
        return answer
    body = request.json()
    if ("contents" in body) == ("generateContentRequest" in body):
        return 400, refusal_body("exactly one of contents and generateContentRequest is required")
    inner = body.get("generateContentRequest")
    if inner is not None and not str(inner.get("model", "")).startswith("models/"):
        return 400, refusal_body("generateContentRequest.model: required, as models/{model}")
    return answer
