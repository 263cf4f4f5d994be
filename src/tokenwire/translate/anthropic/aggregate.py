"""A whole Anthropic ``message`` from standard events: ``EventEncoder``, inverted.

The events go through the ingress's ``EventEncoder`` and its Messages events
are accumulated as the anthropic SDK's ``accumulate_event`` does:
``message_start`` gives the message, ``content_block_start`` appends a block,
``text_delta``/``thinking_delta``/``signature_delta``/``citations_delta``
grow it, ``input_json_delta`` pieces become the tool's ``input`` at
``content_block_stop``, ``message_delta`` sets the stop reason and the usage.
An ``error`` event becomes the error answer (``{"type": "error", ...}``) with
the status the anthropic SDK maps to the right exception.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ... import request as rq
from .. import _aggregate
from .errors import error_answer
from .ingress import EventEncoder

__all__ = ["MessageAggregator", "aggregate_ingress"]

_decode = msgspec.json.Decoder().decode


class MessageAggregator(_aggregate.FrameAggregator):
    """Standard events -> one Anthropic ``message`` object (``result()``)."""

    def __init__(self, *, model: str, id: str | None = None) -> None:
        encoder = EventEncoder(model=model, id=id)
        super().__init__(encoder.encode)
        # Anthropic's message object; the fake upstream writes its own
        # (testing/anthropic.py) on purpose, as an oracle apart from this code.
        self._message: dict[str, Any] = {
            "id": encoder.id,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 0},
        }
        self._json: dict[int, list[str]] = {}  # tool block -> its input_json pieces
        self._error: dict[str, Any] | None = None

    def frame(self, name: str, obj: dict[str, Any]) -> None:
        kind = obj.get("type")
        content: list[dict[str, Any]] = self._message["content"]
        if kind == "message_start":
            self._message = {**obj["message"], "content": []}
        elif kind == "content_block_start":
            block = dict(obj["content_block"])
            if block.get("type") in ("tool_use", "server_tool_use"):
                self._json[len(content)] = []
            content.append(block)
        elif kind == "content_block_delta":
            index = obj.get("index", len(content) - 1)
            if not 0 <= index < len(content):
                return
            block, delta = content[index], obj.get("delta") or {}
            dtype = delta.get("type")
            if dtype == "text_delta":
                block["text"] = block.get("text", "") + delta.get("text", "")
            elif dtype == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + delta.get("thinking", "")
            elif dtype == "signature_delta":
                block["signature"] = delta.get("signature", "")
            elif dtype == "citations_delta":
                block.setdefault("citations", []).append(delta.get("citation"))
            elif dtype == "input_json_delta" and index in self._json:
                self._json[index].append(delta.get("partial_json", ""))
        elif kind == "content_block_stop":
            index = obj.get("index", -1)
            pieces = self._json.pop(index, None)
            if pieces is not None and 0 <= index < len(content):
                text = "".join(pieces)
                try:
                    content[index]["input"] = _decode(text) if text.strip() else {}
                except msgspec.DecodeError:
                    content[index]["input"] = {}
        elif kind == "message_delta":
            delta = obj.get("delta") or {}
            self._message["stop_reason"] = delta.get("stop_reason")
            self._message["stop_sequence"] = delta.get("stop_sequence")
            usage = obj.get("usage")
            if isinstance(usage, dict):
                self._message["usage"] = {**self._message.get("usage", {}), **usage}
        elif kind == "error":
            self._error = obj

    def result(self) -> tuple[int, dict[str, Any]]:
        if self.failure is not None:
            return error_answer(*self.failure, body=self._error)
        return 200, self._message


def aggregate_ingress(body: dict[str, Any], request: rq.Request) -> MessageAggregator:
    """The ingress's non-streaming answer for ``body``: a fresh ``MessageAggregator``."""
    return MessageAggregator(model=request.model)
