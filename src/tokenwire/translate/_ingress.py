"""Checks the ingress parsers share (§7.3: a vendor request body -> the standard)."""

from __future__ import annotations

from typing import Any

from ..errors import InvalidRequest

__all__ = ["json_kind", "want"]


def json_kind(value: object) -> str:
    """The JSON kind of a decoded value, with its article: "a string", "null"."""
    if value is None:
        return "null"
    for types, name in (
        (bool, "a boolean"),
        ((int, float), "a number"),
        (str, "a string"),
        (list, "an array"),
        (dict, "an object"),
    ):
        if isinstance(value, types):
            return name
    return type(value).__name__  # pragma: no cover - JSON values only


def want(value: Any, kind: type | tuple[type, ...], path: str, what: str) -> Any:
    """``value`` if it is a ``kind`` (a bool is no number), else ``InvalidRequest`` at ``path``."""
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise InvalidRequest(f"must be {what}", path=path)
    return value
