"""Checks the ingress parsers share (§7.3: a vendor request body -> the standard)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..errors import InvalidRequest

__all__ = ["json_kind", "tool_from_function", "tool_objects", "want"]


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


def tool_from_function(fn: dict[str, Any], path: str) -> dict[str, Any]:
    """A §4.4 tool from an OpenAI-style function object at ``path`` (``name``,
    ``description``, ``parameters``: an empty object schema when absent)."""
    params = fn.get("parameters") or {"type": "object", "properties": {}}
    return {
        "name": want(fn.get("name"), str, f"{path}.name", "a string"),
        "description": want(fn.get("description") or "", str, f"{path}.description", "a string"),
        "parameters": want(params, dict, f"{path}.parameters", "an object"),
    }


def tool_objects(tools: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(path, tool)`` for each entry of an OpenAI-style ``tools`` array, checked: an
    ``InvalidRequest`` naming ``tools`` (not an array) or ``tools[i]`` (not an object)."""
    want(tools, list, "tools", "an array")
    for i, tool in enumerate(tools):
        path = f"tools[{i}]"
        yield path, want(tool, dict, path, "a tool object")


def want(value: Any, kind: type | tuple[type, ...], path: str, what: str) -> Any:
    """``value`` if it is a ``kind`` (a bool is no number), else ``InvalidRequest`` at ``path``."""
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise InvalidRequest(f"must be {what}", path=path)
    return value
