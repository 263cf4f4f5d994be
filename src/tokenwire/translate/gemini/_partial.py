"""Vertex's streamed function-call arguments (``partialArgs`` / ``willContinue``)."""

from __future__ import annotations

import re
from typing import Any, Final

import msgspec

from ...errors import TranslationError

_encode = msgspec.json.Encoder().encode


class PartialArg(msgspec.Struct, frozen=True, gc=False, forbid_unknown_fields=True):
    """One ``functionCall.partialArgs`` item."""

    jsonPath: str = "$"
    stringValue: str | None = None
    numberValue: int | float | None = None
    boolValue: bool | None = None
    nullValue: str | None = None
    willContinue: bool = False


_PATH_TOKEN: Final = re.compile(
    r"\.([^.\[\]]+)|\[(\d+)\]|\[\s*'((?:[^'\\]|\\.)*)'\s*\]|\[\s*\"((?:[^\"\\]|\\.)*)\"\s*\]"
)


def _path_steps(path: str) -> list[str | int]:
    """``$.a.b[0]['c d']`` -> ``["a", "b", 0, "c d"]`` (RFC 9535 normalized paths)."""
    if not path.startswith("$"):
        raise TranslationError(f"gemini: partialArgs jsonPath {path!r} does not start with $")
    steps: list[str | int] = []
    pos = 1
    while pos < len(path):
        match = _PATH_TOKEN.match(path, pos)
        if match is None:
            raise TranslationError(f"gemini: cannot read partialArgs jsonPath {path!r}")
        name, number, single, double = match.groups()
        if number is not None:
            steps.append(int(number))
        else:
            steps.append(name if name is not None else single if single is not None else double)
        pos = match.end()
    return steps


class StreamedCall:
    """A Vertex ``functionCall`` streamed as ``partialArgs`` until ``willContinue`` is false."""

    def __init__(self, call_id: str | None, name: str) -> None:
        self.id = call_id
        self.name = name
        self.args: dict[str, Any] = {}
        # The jsonPath of a string still being continued, and its pieces so far.
        self._open_path: str | None = None
        self._pieces: list[str] = []

    def add(self, arg: PartialArg) -> None:
        if arg.stringValue is not None:
            if self._open_path != arg.jsonPath:
                self._flush()
                self._open_path = arg.jsonPath
            self._pieces.append(arg.stringValue)
            if not arg.willContinue:
                self._flush()
            return
        self._flush()
        value: Any
        if arg.numberValue is not None:
            value = arg.numberValue
        elif arg.boolValue is not None:
            value = arg.boolValue
        else:
            value = None
        self._set(arg.jsonPath, value)

    def _flush(self) -> None:
        if self._open_path is not None:
            self._set(self._open_path, "".join(self._pieces))
        self._open_path = None
        self._pieces = []

    def _set(self, path: str, value: Any) -> None:
        steps = _path_steps(path)
        if not steps:
            raise TranslationError("gemini: partialArgs jsonPath $ cannot hold a value")
        node: Any = self.args
        for step, nxt in zip(steps, steps[1:], strict=False):
            node = _child(node, step, [] if isinstance(nxt, int) else {})
        _assign(node, steps[-1], value)

    def arguments(self) -> str:
        self._flush()
        return _encode(self.args).decode()


def _child(node: Any, step: str | int, empty: Any) -> Any:
    if isinstance(step, int):
        if not isinstance(node, list):
            raise TranslationError("gemini: partialArgs index into a non-array")
        while len(node) <= step:
            node.append(None)
        if node[step] is None:
            node[step] = empty
        return node[step]
    if not isinstance(node, dict):
        raise TranslationError("gemini: partialArgs field of a non-object")
    return node.setdefault(step, empty)


def _assign(node: Any, step: str | int, value: Any) -> None:
    if isinstance(step, int):
        _child(node, step, None)
        node[step] = value
    elif isinstance(node, dict):
        node[step] = value
    else:
        raise TranslationError("gemini: partialArgs field of a non-object")
