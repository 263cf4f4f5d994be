"""The shapes of the adaptation table: a row (``Rule``), a cell (``Action``), what
the rows write for one target (``Out``) and what ``adapt`` returns."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from .._request import deep_merge

__all__ = ["OUTCOMES", "Action", "Adaptation", "Adapted", "Out", "Outcome", "Rule"]

Outcome = Literal["carry", "map", "drop", "refuse"]
OUTCOMES: Final = ("carry", "map", "drop", "refuse")


class Out:
    """What the rules write for one target: its own body fields, standard
    extensions, and hosted tools to declare beside the function tools."""

    __slots__ = ("target", "fields", "extensions", "hosted")

    def __init__(self, target: str) -> None:
        self.target = target
        self.fields: dict[str, Any] = {}
        self.extensions: dict[str, Any] = {}
        self.hosted: list[Any] = []

    def set(self, path: str, value: Any) -> None:
        """Set the target's body field at the dotted ``path`` (objects merge)."""
        *parents, last = path.split(".")
        node = self.fields
        for name in parents:
            node = node.setdefault(name, {})
        current = node.get(last)
        if isinstance(current, dict) and isinstance(value, dict):
            deep_merge(current, value)
        else:
            node[last] = value

    def set_all(self, pairs: Iterable[tuple[str, Any]] | None) -> bool:
        """Set each ``(path, value)``; whether there was one (``None``: no equivalent)."""
        done = False
        for path, value in pairs or ():
            self.set(path, value)
            done = True
        return done


#: A rule's mapping: the value found, the whole body, the target's ``Out``;
#: returns the outcome when it differs from the table's (``drop`` when the
#: value had no faithful form after all).
Apply = Any


@dataclass(frozen=True)
class Action:
    """One cell of the table: the outcome at a target, and how (or why) in a few words."""

    outcome: Outcome
    how: str
    apply: Apply = None


@dataclass(frozen=True)
class Rule:
    """One row: a thing a ``source`` client may send, found at ``path``.

    ``find(body)`` returns ``(JSON path, value)`` per occurrence with an effect
    (a default value is no occurrence); ``strip(body, hits)`` removes them from
    the body before the ingress parses it (``None``: the parser ignores them or
    adapts them itself); ``actions`` has one cell per target but the source.
    """

    source: str
    path: str
    find: Any
    actions: Mapping[str, Action]
    strip: Any = None


@dataclass(frozen=True)
class Adaptation:
    """One reported adaptation: the JSON path in the client's body, the target and the outcome."""

    path: str
    target: str
    outcome: Outcome
    how: str


@dataclass
class Adapted:
    """The body to parse, what each target gets, and the report.

    ``kept``: the client's own fields taken out of ``body``, for an upstream of
    the client's format among the model's (a fallback of another format):
    ``None`` when no upstream speaks it.
    """

    body: dict[str, Any]
    source: str = ""
    outs: dict[str, Out] = field(default_factory=dict)
    report: list[Adaptation] = field(default_factory=list)
    kept: dict[str, Any] | None = None
