"""A whole ``chat.completion`` from standard events: ``ChunkEncoder``, inverted.

The events go through the ingress's ``ChunkEncoder`` (with the usage chunk),
and its ``chat.completion.chunk`` frames are accumulated as the openai SDK's
``ChatCompletionStreamState`` does: per choice ``index``, ``content``,
``refusal`` and ``reasoning_content`` are concatenated, ``tool_calls`` are
merged by their ``index`` (arguments concatenated), ``annotations`` appended,
the last ``finish_reason`` kept; the usage chunk gives ``usage``. An in-stream
``{"error": ...}`` becomes the error answer, with the status the openai SDK
maps to the right exception.
"""

from __future__ import annotations

from typing import Any

from ... import request as rq
from .. import _aggregate
from .errors import error_answer
from .ingress import ChunkEncoder

__all__ = ["ChatAggregator", "aggregate_ingress"]


class _Choice:
    __slots__ = ("content", "refusal", "reasoning", "calls", "annotations", "finish", "seen")

    def __init__(self) -> None:
        self.content: list[str] = []
        self.refusal: list[str] = []
        self.reasoning: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.annotations: list[Any] = []
        self.finish: str | None = None
        self.seen = False

    def add(self, delta: dict[str, Any]) -> None:
        for key, into in (
            ("content", self.content),
            ("refusal", self.refusal),
            ("reasoning_content", self.reasoning),
        ):
            text = delta.get(key)
            if isinstance(text, str):
                into.append(text)
        annotations = delta.get("annotations")
        if isinstance(annotations, list):
            self.annotations.extend(annotations)
        for call in delta.get("tool_calls") or ():
            if not isinstance(call, dict):
                continue
            index = call.get("index", len(self.calls))
            fn = call.get("function") or {}
            whole = self.calls.get(index)
            if whole is None:
                whole = self.calls[index] = {
                    "id": call.get("id"),
                    "type": call.get("type", "function"),
                    "function": {"name": fn.get("name") or "", "arguments": ""},
                }
            elif call.get("id"):
                whole["id"] = call["id"]
            whole["function"]["arguments"] += fn.get("arguments") or ""

    def message(self) -> dict[str, Any]:
        message: dict[str, Any] = {
            "role": "assistant",
            # null, as OpenAI writes a message that is only tool calls or a refusal.
            "content": "".join(self.content) if self.content else None,
            "refusal": "".join(self.refusal) if self.refusal else None,
            "annotations": self.annotations,
        }
        if self.reasoning:
            message["reasoning_content"] = "".join(self.reasoning)
        if self.calls:
            message["tool_calls"] = [self.calls[i] for i in sorted(self.calls)]
        return message


class ChatAggregator(_aggregate.FrameAggregator):
    """Standard events -> one ``chat.completion`` object (``result()``)."""

    def __init__(self, *, model: str, id: str | None = None) -> None:
        encoder = ChunkEncoder(model=model, id=id, include_usage=True)
        super().__init__(encoder.encode)
        self._encoder = encoder
        # choice 0 always: an answer with no event of its own still has a message.
        self._choices: dict[int, _Choice] = {0: _Choice()}
        self._usage: Any = None
        self._error: dict[str, Any] | None = None
        self._created: int | None = None

    def frame(self, name: str, obj: dict[str, Any]) -> None:
        if "error" in obj:
            self._error = obj
            return
        if self._created is None and isinstance(obj.get("created"), int):
            self._created = obj["created"]
        if obj.get("usage") is not None:
            self._usage = obj["usage"]
        for choice in obj.get("choices") or ():
            index = choice.get("index", 0)
            into = self._choices.get(index)
            if into is None:
                into = self._choices[index] = _Choice()
            into.seen = True
            delta = choice.get("delta")
            if isinstance(delta, dict):
                into.add(delta)
            if choice.get("finish_reason") is not None:
                into.finish = choice["finish_reason"]

    def result(self) -> tuple[int, dict[str, Any]]:
        if self.failure is not None:
            return error_answer(*self.failure, body=self._error)
        choices = [
            {
                "index": index,
                "message": choice.message(),
                "logprobs": None,
                "finish_reason": choice.finish or "stop",
            }
            for index, choice in sorted(self._choices.items())
        ]
        return 200, {
            "id": self._encoder.id,
            "object": "chat.completion",
            "created": self._created or 0,
            "model": self._encoder.model,
            "choices": choices,
            "usage": self._usage,
            "system_fingerprint": None,
        }


def aggregate_ingress(body: dict[str, Any], request: rq.Request) -> ChatAggregator:
    """The ingress's non-streaming answer for ``body``: a fresh ``ChatAggregator``."""
    return ChatAggregator(model=request.model)
