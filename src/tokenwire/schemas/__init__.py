"""The JSON Schemas (draft 2020-12) of LLM-Stream 1.0 and of tokenwire extensions 1.0.

Two documents ship in the package (docs/extensions.md):

* ``llm-stream-1.0.schema.json``: the seven standard events of §5.3, one
  ``$defs`` entry per type name;
* ``tokenwire-extensions-1.0.schema.json``: the extension events
  (``tokenwire.block``, ``tokenwire.usage``, ``tokenwire.stop``,
  ``tokenwire.tool_delta``) and the request's ``tokenwire:`` extensions.

``jsonschema`` is imported, and each validator compiled, on first use only:
the lifecycle validator's hot path (text deltas) never touches a schema.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any, Final

__all__ = [
    "EXTENSION_EVENTS",
    "EXTENSIONS_SCHEMA",
    "STANDARD_SCHEMA",
    "event_error",
    "extension_error",
    "load",
    "request_extensions_error",
]

STANDARD_SCHEMA: Final = "llm-stream-1.0.schema.json"
EXTENSIONS_SCHEMA: Final = "tokenwire-extensions-1.0.schema.json"

#: The extension event types tokenwire extensions 1.0 defines (and the validator checks).
EXTENSION_EVENTS: Final = frozenset(
    {"tokenwire.block", "tokenwire.usage", "tokenwire.stop", "tokenwire.tool_delta"}
)

_STANDARD_TYPES: Final = frozenset(
    {"stream.start", "content.delta", "content.stop", "tool.call", "usage", "error", "stream.end"}
)
_MAX_MESSAGE: Final = 200


@cache
def load(name: str) -> dict[str, Any]:
    """The schema document ``name`` (one of the two shipped), parsed."""
    text = resources.files(__package__).joinpath(name).read_text(encoding="utf-8")
    document: dict[str, Any] = json.loads(text)
    return document


@cache
def _validator(document: str, definition: str) -> Any:
    """The compiled validator of ``$defs[definition]`` in ``document`` (built once)."""
    from jsonschema import Draft202012Validator

    doc = load(document)
    schema = {"$schema": doc["$schema"], "$defs": doc["$defs"], "$ref": f"#/$defs/{definition}"}
    return Draft202012Validator(schema)


def _first_error(document: str, definition: str, instance: object) -> str | None:
    from jsonschema.exceptions import best_match

    error = best_match(_validator(document, definition).iter_errors(instance))
    if error is None:
        return None
    where = "".join(f"[{p!r}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    message = f"{where.lstrip('.') or '(the event)'}: {error.message}"
    return message if len(message) <= _MAX_MESSAGE else message[: _MAX_MESSAGE - 1] + "…"


def event_error(obj: dict[str, Any]) -> str | None:
    """Why ``obj`` is not a valid standard event of its ``type``, or ``None``."""
    kind = obj.get("type")
    if not isinstance(kind, str) or kind not in _STANDARD_TYPES:
        return f"type: {kind!r} is not a registered event type"
    return _first_error(STANDARD_SCHEMA, kind, obj)


def extension_error(kind: str, obj: dict[str, Any]) -> str | None:
    """Why ``obj`` is not a valid ``kind`` extension event, or ``None``.

    Types outside ``EXTENSION_EVENTS`` (a later 1.x) have nothing to check: ``None``.
    """
    if kind not in EXTENSION_EVENTS:
        return None
    return _first_error(EXTENSIONS_SCHEMA, kind, obj)


def request_extensions_error(extensions: dict[str, Any]) -> str | None:
    """Why the ``tokenwire:`` keys of a request's ``extensions`` are malformed, or ``None``."""
    return _first_error(EXTENSIONS_SCHEMA, "request", extensions)
