"""The chain of one socket: each response's input and output, so a turn can name its parent.

Pure state, the clock passed in. A turn that names ``previous_response_id``
is sent upstream with the whole history (every ancestor's input and output
items, oldest first) followed by its own input, so every upstream — stateless
Chat, Anthropic or Gemini included — sees what a stateful Responses API
would have. The chain lives in the socket's memory and ends with it, as the
Responses API's own connection-local cache does for ``store: false``.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ...errors import TokenwireError

__all__ = ["Chain", "ChainNode", "UnknownResponse"]

_encode = msgspec.json.encode


class UnknownResponse(TokenwireError, LookupError):
    """The socket has no usable response by that id; the message says why."""


class ChainNode(msgspec.Struct, frozen=True, kw_only=True):
    """One completed response: its parent, its turn's input items then its output items."""

    parent: str | None
    items: list[Any]
    size: int
    completed_at: float


class Chain:
    """The responses of one socket by id, bounded in bytes, each usable for ``ttl_s``."""

    def __init__(self, *, max_bytes: int, ttl_s: float) -> None:
        self.max_bytes = max_bytes
        self.ttl_s = ttl_s
        self.nodes: dict[str, ChainNode] = {}
        self.size = 0

    def history(self, response_id: str, now: float) -> list[Any]:
        """Every item up to and including ``response_id``'s output, oldest first.

        Raises ``UnknownResponse`` when the socket never completed that id or its
        time to live has passed.
        """
        node = self.nodes.get(response_id)
        if node is None:
            raise UnknownResponse(
                f"previous response {response_id!r} is not on this socket: the gateway keeps "
                "each socket's responses for that socket only; send the whole input instead"
            )
        if now - node.completed_at > self.ttl_s:
            raise UnknownResponse(
                f"previous response {response_id!r} expired ({self.ttl_s:g} s after it "
                "completed, chain_ttl_s); send the whole input instead"
            )
        parts: list[list[Any]] = []
        current: ChainNode | None = node
        while current is not None:
            parts.append(current.items)
            current = self.nodes.get(current.parent) if current.parent is not None else None
        return [item for part in reversed(parts) for item in part]

    def has_room(self, extra: int) -> bool:
        """Whether ``extra`` more bytes keep the chain within ``max_bytes``."""
        return self.size + extra <= self.max_bytes

    def record(
        self,
        response_id: str,
        parent: str | None,
        input_items: list[Any],
        output_items: list[Any],
        now: float,
    ) -> None:
        """Keep a completed response; expired responses no live one descends from go."""
        items = [*input_items, *output_items]
        size = len(_encode(items))
        old = self.nodes.pop(response_id, None)
        if old is not None:
            self.size -= old.size
        self.nodes[response_id] = ChainNode(parent=parent, items=items, size=size, completed_at=now)
        self.size += size
        self._forget_expired(now)

    def _forget_expired(self, now: float) -> None:
        needed: set[str] = set()
        for response_id, node in self.nodes.items():
            if now - node.completed_at <= self.ttl_s:
                current: str | None = response_id
                while current is not None and current not in needed:
                    needed.add(current)
                    parent = self.nodes.get(current)
                    current = parent.parent if parent is not None else None
        for response_id in [r for r in self.nodes if r not in needed]:
            self.size -= self.nodes.pop(response_id).size
