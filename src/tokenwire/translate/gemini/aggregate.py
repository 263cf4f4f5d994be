"""A whole ``GenerateContentResponse`` from standard events: ``EventEncoder``, inverted.

The events go through the ingress's ``EventEncoder`` and its ``alt=sse``
chunks are merged as Gemini's own non-streaming answer reads: per candidate
``index``, the parts in order (consecutive text parts of one kind, thought
or not, joined; the empty text part the last chunk carries dropped unless it
holds a ``thoughtSignature``), the candidate's other fields (``finishReason``,
``citationMetadata``, ``groundingMetadata``, ``safetyRatings``...) from the
chunk that last gave them; ``usageMetadata``, ``promptFeedback``,
``modelVersion`` and ``responseId`` likewise. An ``{"error": ...}`` chunk
becomes the error answer with its own ``code`` as the HTTP status.
"""

from __future__ import annotations

from typing import Any

from ... import request as rq
from .. import _aggregate
from .errors import error_answer
from .ingress import EventEncoder

__all__ = ["ContentAggregator", "aggregate_ingress"]

#: Part keys that make a text part more than text: it is kept whole, never joined.
_SPECIAL = ("thoughtSignature", "functionCall", "executableCode", "codeExecutionResult")


class _Candidate:
    __slots__ = ("parts", "fields", "role")

    def __init__(self) -> None:
        self.parts: list[dict[str, Any]] = []
        self.fields: dict[str, Any] = {}
        self.role = "model"

    def add(self, part: dict[str, Any]) -> None:
        text = part.get("text")
        if isinstance(text, str) and not any(k in part for k in _SPECIAL):
            if not text:
                return
            last = self.parts[-1] if self.parts else None
            if (
                last is not None
                and isinstance(last.get("text"), str)
                and not any(k in last for k in _SPECIAL)
                and last.get("thought", False) == part.get("thought", False)
            ):
                last["text"] += text
                return
        self.parts.append(dict(part))

    def whole(self, index: int) -> dict[str, Any]:
        return {"content": {"parts": self.parts, "role": self.role}, **self.fields, "index": index}


class ContentAggregator(_aggregate.FrameAggregator):
    """Standard events -> one Gemini ``GenerateContentResponse`` (``result()``)."""

    def __init__(self, *, model: str, id: str | None = None) -> None:
        encoder = EventEncoder(model=model, id=id)
        super().__init__(encoder.encode)
        self._candidates: dict[int, _Candidate] = {}
        self._top: dict[str, Any] = {}
        self._error: dict[str, Any] | None = None

    def frame(self, name: str, obj: dict[str, Any]) -> None:
        if isinstance(obj.get("error"), dict):
            self._error = obj
            return
        for candidate in obj.get("candidates") or ():
            if not isinstance(candidate, dict):
                continue
            index = candidate.get("index", 0)
            into = self._candidates.get(index)
            if into is None:
                into = self._candidates[index] = _Candidate()
            content = candidate.get("content")
            if isinstance(content, dict):
                into.role = content.get("role", into.role)
                for part in content.get("parts") or ():
                    if isinstance(part, dict):
                        into.add(part)
            rest = ((k, v) for k, v in candidate.items() if k not in ("content", "index"))
            into.fields.update(rest)
        self._top.update((k, v) for k, v in obj.items() if k != "candidates")

    def result(self) -> tuple[int, dict[str, Any]]:
        if self.failure is not None:
            return error_answer(*self.failure, body=self._error)
        answer: dict[str, Any] = {}
        if self._candidates:
            answer["candidates"] = [c.whole(i) for i, c in sorted(self._candidates.items())]
        answer.update(self._top)
        return 200, answer


def aggregate_ingress(body: dict[str, Any], request: rq.Request) -> ContentAggregator:
    """The ingress's non-streaming answer for ``body``: a fresh ``ContentAggregator``."""
    return ContentAggregator(model=request.model)
