"""A whole Responses ``response`` from standard events: ``ResponsesEncoder``, inverted.

The Responses stream already ends with the whole object: the events go
through the ingress's ``ResponsesEncoder``, and the ``response`` of its
``response.completed`` (or ``response.incomplete``) is the answer, every
output item, the usage with its details and the Open Responses fields
included, as the openai SDK's ``ResponseStreamState`` takes it. A
``response.failed`` becomes the error answer in OpenAI's error shape.
"""

from __future__ import annotations

from typing import Any

from ... import request as rq
from .. import _aggregate
from ..openai.errors import error_answer
from .ingress import ResponsesEncoder
from .resource import response_fields

__all__ = ["ResponseAggregator", "aggregate_ingress"]

_FINAL = frozenset({"response.completed", "response.incomplete", "response.failed"})


class ResponseAggregator(_aggregate.FrameAggregator):
    """Standard events -> one Responses ``response`` object (``result()``)."""

    def __init__(
        self, *, model: str, id: str | None = None, fields: dict[str, Any] | None = None
    ) -> None:
        encoder = ResponsesEncoder(model=model, id=id, fields=fields)
        super().__init__(encoder.encode)
        self._encoder = encoder
        self._final: dict[str, Any] | None = None
        self._error: dict[str, Any] | None = None

    def frame(self, name: str, obj: dict[str, Any]) -> None:
        kind = obj.get("type")
        if kind in _FINAL and isinstance(obj.get("response"), dict):
            self._final = obj["response"]
        elif kind == "error" and isinstance(obj.get("error"), dict):
            error = obj["error"]
            self._error = {"error": {k: error.get(k) for k in ("message", "type", "param", "code")}}

    def result(self) -> tuple[int, dict[str, Any]]:
        if self.failure is not None:
            return error_answer(*self.failure, body=self._error)
        if self._final is None:  # a stream that never ended: the last snapshot
            return error_answer("internal_error", "the stream ended before the response did")
        return 200, self._final


def aggregate_ingress(body: dict[str, Any], request: rq.Request) -> ResponseAggregator:
    """The ingress's non-streaming answer for ``body``: a fresh ``ResponseAggregator``."""
    return ResponseAggregator(model=request.model, fields=response_fields(body))
