"""Gemini's own schema form (``types.Schema``, an OpenAPI 3.0 subset) -> JSON Schema.

google-genai sends a function's ``parameters`` in that form: upper-case
``type`` names (``OBJECT``, ``STRING``...), ``nullable``, ``propertyOrdering``.
The standard's tools carry JSON Schema (§4.4), so the ingress maps it:
``type`` lower-cased (``TYPE_UNSPECIFIED`` dropped), ``nullable: true`` as
``"null"`` added to ``type`` (or to ``anyOf``), ``propertyOrdering`` and
``example`` dropped (no JSON Schema meaning); the JSON Schema keywords
Gemini shares (``properties``, ``items``, ``required``, ``enum``, ``anyOf``,
``format``, bounds, ``pattern``, ``title``, ``description``, ``default``) kept.
A ``parametersJsonSchema`` is JSON Schema already and is not passed here.
"""

from __future__ import annotations

from typing import Any, Final

__all__ = ["MAX_SCHEMA_DEPTH", "json_schema"]

#: Deeper than this, the rest of a schema is kept as it came (the request's
#: own depth limit has bounded the body already).
MAX_SCHEMA_DEPTH: Final = 64

_DROPPED: Final = frozenset({"propertyOrdering", "example", "nullable"})


def _type(value: Any) -> Any:
    if isinstance(value, str):
        lowered = value.lower()
        return None if lowered == "type_unspecified" else lowered
    return value


def json_schema(schema: Any, depth: int = 0) -> Any:
    """``schema`` in Gemini's form, as JSON Schema (anything not an object as it is)."""
    if not isinstance(schema, dict) or depth > MAX_SCHEMA_DEPTH:
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _DROPPED:
            continue
        if key == "type":
            mapped = _type(value)
            if mapped is not None:
                out["type"] = mapped
        elif key == "properties" and isinstance(value, dict):
            out[key] = {name: json_schema(sub, depth + 1) for name, sub in value.items()}
        elif key == "items":
            out[key] = json_schema(value, depth + 1)
        elif key == "anyOf" and isinstance(value, list):
            out[key] = [json_schema(sub, depth + 1) for sub in value]
        else:
            out[key] = value  # google-genai's camelCase names are JSON Schema's own
    if schema.get("nullable") is True:
        kind = out.get("type")
        if isinstance(kind, str):
            out["type"] = [kind, "null"]
        elif isinstance(out.get("anyOf"), list):
            out["anyOf"] = [*out["anyOf"], {"type": "null"}]
    return out
