"""The JSON Schemas (draft 2020-12) of LLM-Stream 1.0 and of tokenwire extensions 1.1.

Three documents ship in the package (docs/extensions.md):

* ``llm-stream-1.0.schema.json``: the seven standard events of §5.3, one
  ``$defs`` entry per type name;
* ``tokenwire-extensions-1.1.schema.json``: the extension events
  (``tokenwire.block``, ``tokenwire.usage``, ``tokenwire.stop``,
  ``tokenwire.tool_delta``) and the request's ``tokenwire:`` extensions, the
  one the validator uses (``EXTENSIONS_SCHEMA``);
* ``tokenwire-extensions-1.0.schema.json``: the same as 1.0 defined them (1.1
  only adds names), kept for readers pinned to it (``EXTENSIONS_SCHEMA_1_0``).

``jsonschema`` is imported, and each validator compiled, on first use only:
the lifecycle validator's hot path (text deltas) never touches a schema.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import cache
from importlib import resources
from typing import Any, Final

__all__ = [
    "EXTENSION_EVENTS",
    "EXTENSIONS_SCHEMA",
    "EXTENSIONS_SCHEMA_1_0",
    "STANDARD_SCHEMA",
    "event_error",
    "extension_error",
    "load",
    "request_extensions_error",
]

STANDARD_SCHEMA: Final = "llm-stream-1.0.schema.json"
EXTENSIONS_SCHEMA: Final = "tokenwire-extensions-1.1.schema.json"
EXTENSIONS_SCHEMA_1_0: Final = "tokenwire-extensions-1.0.schema.json"

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
    """The schema document ``name`` (one of those shipped), parsed."""
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
    A valid event is recognised by a direct check of the few keywords the
    definitions use (``_fast_check``, about a microsecond); ``jsonschema`` runs
    only to explain an event that fails it.
    """
    if kind not in EXTENSION_EVENTS:
        return None
    fast = _fast_check(EXTENSIONS_SCHEMA, kind)
    if fast is not None and fast(obj):
        return None
    return _first_error(EXTENSIONS_SCHEMA, kind, obj)


# -- the fast path: the keywords the extension definitions use, checked directly ----

Check = Callable[[object], bool]
_SUPPORTED: Final = frozenset(
    {
        "description",
        "type",
        "const",
        "enum",
        "minimum",
        "minLength",
        "properties",
        "required",
        "minProperties",
        "dependentRequired",
        "allOf",
        "$ref",
    }
)
_TYPES: Final[dict[str, Check]] = {
    "object": lambda v: type(v) is dict,
    "string": lambda v: type(v) is str,
    "boolean": lambda v: type(v) is bool,
    "integer": lambda v: type(v) is int or (type(v) is float and v.is_integer()),
    "array": lambda v: type(v) is list,
}


def _const(const: str | bool) -> Check:
    return lambda v: type(v) is type(const) and v == const


def _minimum(low: float) -> Check:
    # Bools are not numbers to JSON Schema: minimum does not apply to them.
    return lambda v: type(v) not in (int, float) or v >= low  # type: ignore[operator]


def _min_length(n: int) -> Check:
    # JSON Schema counts code points, as len() does.
    return lambda v: type(v) is not str or len(v) >= n


def _compile(schema: dict[str, Any], defs: dict[str, Any]) -> Check | None:
    """A predicate equivalent to ``schema``, or ``None`` when it uses another keyword."""
    if not set(schema) <= _SUPPORTED:
        return None
    checks: list[Check] = []
    for sub in [
        *schema.get("allOf", ()),
        *([{"$ref": schema["$ref"]}] if "$ref" in schema else []),
    ]:
        ref = sub.get("$ref") if len(sub) == 1 else None
        target = defs.get(ref.removeprefix("#/$defs/")) if isinstance(ref, str) else sub
        inner = _compile(target, defs) if isinstance(target, dict) else None
        if inner is None:
            return None
        checks.append(inner)
    if "type" in schema:
        if schema["type"] not in _TYPES:
            return None
        checks.append(_TYPES[schema["type"]])
    if "const" in schema:
        const = schema["const"]
        if type(const) not in (str, bool):  # JSON equality of numbers is not Python's
            return None
        checks.append(_const(const))
    if "enum" in schema:
        values = schema["enum"]
        if not all(type(v) in (str, bool) for v in values):
            return None  # JSON equality of numbers is not Python's
        options = tuple((type(v), v) for v in values)
        checks.append(lambda v: (type(v), v) in options)
    if "minimum" in schema:
        checks.append(_minimum(schema["minimum"]))
    if "minLength" in schema:
        checks.append(_min_length(schema["minLength"]))
    props: dict[str, Check] = {}
    for name, sub in schema.get("properties", {}).items():
        inner = _compile(sub, defs)
        if inner is None:
            return None
        props[name] = inner
    required = tuple(schema.get("required", ()))
    least = schema.get("minProperties", 0)
    dependent = tuple(schema.get("dependentRequired", {}).items())

    def check_object(v: object) -> bool:
        if type(v) is not dict:
            return True  # object keywords apply to objects only
        if len(v) < least or any(k not in v for k in required):
            return False
        if any(k in v and any(d not in v for d in deps) for k, deps in dependent):
            return False
        return all(k not in v or c(v[k]) for k, c in props.items())

    if props or required or least or dependent:
        checks.append(check_object)
    return lambda v: all(c(v) for c in checks)


@cache
def _fast_check(document: str, definition: str) -> Check | None:
    defs = load(document)["$defs"]
    return _compile(defs[definition], defs)


def request_extensions_error(extensions: dict[str, Any]) -> str | None:
    """Why the ``tokenwire:`` keys of a request's ``extensions`` are malformed, or ``None``."""
    return _first_error(EXTENSIONS_SCHEMA, "request", extensions)
