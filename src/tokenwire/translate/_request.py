"""Request-side helpers the vendor modules share."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import InvalidRequest
from ..request import Parameters, Request, Tool, ToolCallRef
from . import _extensions as x

__all__ = [
    "assistant_entry",
    "deep_merge",
    "function_call",
    "function_tool",
    "merge_extensions",
    "reasoning_history",
    "sse_headers",
    "versioned_url",
    "vendor_parameters",
]


def deep_merge(base: dict[str, Any], extra: Mapping[str, Any]) -> None:
    """Deep-merge ``extra`` into ``base``: objects merge, anything else replaces."""
    for key, value in extra.items():
        current = base.get(key)
        if isinstance(current, dict) and isinstance(value, Mapping):
            deep_merge(current, value)
        else:
            base[key] = value


def function_tool(tool: Tool) -> dict[str, Any]:
    """A tool as the ``{"type": "function", "function": {...}}`` object of Chat
    Completions, which Cohere v2 and the OpenAI-compatible vendors take too."""
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        },
    }


def function_call(call: ToolCallRef) -> dict[str, Any]:
    """An assistant's tool call as a Chat Completions (and Cohere v2) ``tool_calls`` item."""
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments},
    }


def merge_extensions(
    body: dict[str, Any],
    req: Request,
    keys: Iterable[str],
    *,
    protected: Iterable[str] = ("stream",),
) -> None:
    """§4.7: deep-merge the request's extensions ``keys`` into ``body``, in order.

    Fields in ``protected`` (the translator needs a stream) are never changed.
    Raises ``InvalidRequest`` (path ``extensions["key"]``) for a value that is
    not an object.
    """
    keep = frozenset(protected)
    for key in keys:
        extra = req.extension(key)
        if extra is None:
            continue
        if not isinstance(extra, Mapping):
            raise InvalidRequest(
                "must be an object of vendor request fields", path=f'extensions["{key}"]'
            )
        deep_merge(body, {k: v for k, v in extra.items() if k not in keep})


def sse_headers(auth: dict[str, str], headers: dict[str, str] | None) -> dict[str, str]:
    """JSON in, SSE out, the vendor's auth header, then the caller's headers (lower-cased)."""
    out = {"content-type": "application/json", "accept": "text/event-stream", **auth}
    out.update({k.lower(): v for k, v in (headers or {}).items()})
    return out


def versioned_url(base_url: str, version: str, path: str) -> str:
    """``{base_url}/{version}/{path}``, without a second ``/{version}`` when
    ``base_url`` already ends with it (SDKs take the API root; a pasted base URL
    often carries the version)."""
    base = base_url.rstrip("/")
    return f"{base}/{path}" if base.endswith(f"/{version}") else f"{base}/{version}/{path}"


def vendor_parameters(
    params: Parameters | None, names: Mapping[str, str], *, keep_empty: bool = False
) -> dict[str, Any]:
    """§4.5 parameters under the vendor's names, in the order of ``names``.

    ``names`` maps a standard parameter (``max_tokens``, ``temperature``,
    ``top_p``, ``stop_sequences``) to the vendor's field. Unset parameters are
    left out, and so is an empty ``stop_sequences`` unless ``keep_empty``.
    """
    if params is None:
        return {}
    out: dict[str, Any] = {}
    for name, field in names.items():
        value = getattr(params, name)
        if value is None or (value == [] and not keep_empty):
            continue
        out[field] = value
    return out


def reasoning_history(req: Request) -> list[tuple[int, list[dict[str, Any]]]]:
    """``(assistant message index, its reasoning parts)`` per history entry, in order.

    From ``extensions["tokenwire:reasoning_history"]`` (docs/extensions.md),
    checked but not filtered: which parts a vendor sends back (those bound to
    it) is the builder's choice. Raises ``InvalidRequest`` naming the malformed
    entry or part.
    """
    history = req.extension(x.REASONING_HISTORY)
    if history is None:
        return []
    where = f'extensions["{x.REASONING_HISTORY}"]'
    if not isinstance(history, list):
        raise InvalidRequest("must be an array", path=where)
    out: list[tuple[int, list[dict[str, Any]]]] = []
    for i, entry in enumerate(history):
        path = f"{where}[{i}]"
        message, parts = assistant_entry(entry, req, path)
        for k, part in enumerate(parts):
            if not isinstance(part, dict) or part.get("type") != x.REASONING:
                raise InvalidRequest(f'must be a "{x.REASONING}" part', path=f"{path}.parts[{k}]")
        out.append((message, parts))
    return out


def assistant_entry(entry: Any, req: Request, path: str) -> tuple[int, list[Any]]:
    """An extension's ``{"message": <index>, "parts": [...]}`` entry, checked: the index
    of an assistant message of ``req`` and its parts. Raises ``InvalidRequest`` at ``path``."""
    message = entry.get("message") if isinstance(entry, dict) else None
    parts = entry.get("parts") if isinstance(entry, dict) else None
    if isinstance(message, bool) or not isinstance(message, int) or not isinstance(parts, list):
        raise InvalidRequest('must be {"message": <index>, "parts": [...]}', path=path)
    if not 0 <= message < len(req.messages) or req.messages[message].role != "assistant":
        raise InvalidRequest("must name an assistant message", path=f"{path}.message")
    return message, parts
