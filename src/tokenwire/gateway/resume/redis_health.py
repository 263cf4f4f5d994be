"""Which Redis nodes answer: the Redis store's health, kept per node.

On Redis Cluster one primary dying must not stop the streams stored on the
others, so a failure marks only the node that failed, with the hash slots it
failed for. A node is healthy again as soon as a command for one of those slots
succeeds, on that node or on the one serving the slot now (a promoted replica):
the two log lines, ``resume_store_unavailable`` and ``resume_store_available``,
come in pairs per node. One Redis is one node (its URL) holding one slot.

After a failure, calls to that node fail fast for ``retry_s`` instead of each
waiting on a dead connection: a stream start must not pay a connect timeout.
The state is a table of the nodes that are down; the clock is a parameter.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from .store import StoreUnavailable, log

__all__ = ["Health"]


@dataclass
class _Down:
    """A node that stopped answering: since when, until when calls to it fail fast."""

    since: float
    retry_at: float
    error: str
    slots: set[int] = field(default_factory=set)


class Health:
    """The nodes of the Redis at ``where`` that are down (see module doc)."""

    def __init__(
        self, where: str, retry_s: float = 1.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.where = where
        self.retry_s = retry_s
        self.clock = clock
        self.down: dict[str, _Down] = {}

    @property
    def available(self) -> bool:
        """Whether every node answered its last command."""
        return not self.down

    def due(self, node: str) -> bool:
        """Whether ``node`` may be tried now: it is up, or its fail-fast pause is over."""
        down = self.down.get(node)
        return down is None or self.clock() >= down.retry_at

    def check(self, node: str) -> None:
        """Raise ``StoreUnavailable`` while ``node`` is down and its pause not over."""
        if not self.due(node):
            raise self._unavailable(node, self.down[node].error)

    def failed(self, node: str, exc: BaseException, slots: Iterable[int] = ()) -> StoreUnavailable:
        """Mark ``node`` down (logged when it was up); the error to raise."""
        now = self.clock()
        error = f"{type(exc).__name__}: {exc}"
        down = self.down.get(node)
        if down is None:
            down = self.down[node] = _Down(since=now, retry_at=now, error=error)
            log(
                logging.WARNING,
                "resume_store_unavailable",
                backend="redis",
                url=self.where,
                node=node,
                error=error,
                effect=(
                    "streams stored on this node are served live; their resume is off "
                    "until it, or a replica taking over from it, answers"
                ),
            )
        down.retry_at = now + self.retry_s
        down.error = error
        down.slots.update(slots)
        return self._unavailable(node, error)

    def ok(self, node: str, slots: Iterable[int] = ()) -> None:
        """``node`` answered a command for ``slots``: it is up, and so is any node that
        had failed for one of those slots (its slots are served again)."""
        if not self.down:
            return
        served = set(slots)
        for name, down in list(self.down.items()):
            if name == node or down.slots & served:
                del self.down[name]
                fields = {"served_by": node} if name != node else {}
                log(
                    logging.WARNING,
                    "resume_store_available",
                    backend="redis",
                    url=self.where,
                    node=name,
                    **fields,
                    down_s=round(self.clock() - down.since, 3),
                )

    def _unavailable(self, node: str, error: str) -> StoreUnavailable:
        where = self.where if node == self.where else f"{self.where} (node {node})"
        return StoreUnavailable(f"redis at {where} is unavailable: {error}")
