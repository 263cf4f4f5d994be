"""The Responses API's tokenwire extensions 1.1 items on the ingress side (§7.3).

What ``request_from_vendor`` keeps of a Responses request that the standard carries
as 1.1 extensions (docs/extensions.md, "New in 1.1"): custom and apply_patch tools
(standard tools with their §8.2 parameters, their kind in ``tokenwire:tools``), their
calls (``tool_calls`` and a ``tokenwire:tool_kind`` part), and the items kept whole in
``tokenwire:block_history`` (approval requests, MCP items, compaction items).
"""

from __future__ import annotations

import hashlib
from typing import Any, Final

import msgspec

from ...errors import InvalidRequest
from .. import _extensions as x
from .. import _lossless
from .._ingress import tool_from_function, want
from .request import VENDOR

__all__ = [
    "CLIENT_CALLS",
    "CLIENT_TOOLS",
    "KEPT_ITEMS",
    "client_call",
    "flat_name",
    "kept_part",
    "namespaces",
    "tools_11",
]

_encode = msgspec.json.Encoder().encode

#: 1.1: input items kept whole in ``tokenwire:block_history`` (part type, key).
KEPT_ITEMS: Final = {
    "mcp_approval_request": x.APPROVAL,
    "mcp_list_tools": x.MCP,
    "mcp_call": x.MCP,
    "compaction": x.COMPACTION,
}


def kept_part(item: dict[str, Any], path: str) -> dict[str, Any]:
    kind = item["type"]
    key = KEPT_ITEMS[kind]
    want(item.get("id"), str, f"{path}.id", "a string")
    fields = {k: v for k, v in item.items() if k != "type"}
    if key == x.APPROVAL:
        return {"type": key, key: fields}
    if key == x.MCP:
        fields = {"kind": "list_tools" if kind == "mcp_list_tools" else "call", **fields}
    return {"type": key, key: fields, x.VENDOR: VENDOR}


def client_call(item: dict[str, Any], path: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """1.1: a custom / apply_patch call item -> ``(tool call, its tool kind part)``."""
    call_id = want(item.get("call_id"), str, f"{path}.call_id", "a string")
    if item["type"] == "custom_tool_call":
        name = want(item.get("name"), str, f"{path}.name", "a string")
        raw = want(item.get("input"), str, f"{path}.input", "a string")
        call = {"id": call_id, "name": name, "arguments": _lossless.custom_arguments(raw)}
        kind = "custom"
    else:
        operation = want(item.get("operation"), dict, f"{path}.operation", "an object")
        call = {"id": call_id, "name": "apply_patch", "arguments": _encode(operation).decode()}
        kind = "apply_patch"
    part: dict[str, Any] = {"type": x.TOOL_KIND, x.TOOL_KIND: kind, x.TOOL_CALL_ID: call_id}
    if isinstance(item.get("id"), str):
        part[x.ITEM_ID] = item["id"]
    part[x.VENDOR] = VENDOR
    return call, part


#: The longest tool name every vendor takes (OpenAI, Anthropic: 64 characters).
_MAX_NAME: Final = 64


def flat_name(namespace: str, name: str) -> str:
    """The one tool name a namespace's function is declared under to another format:
    ``<namespace>__<name>`` (no second ``__`` after a namespace ending in ``_``),
    shortened with a hash of the whole when it is over 64 characters."""
    flat = f"{namespace}{'' if namespace.endswith('_') else '__'}{name}"
    if len(flat) <= _MAX_NAME:
        return flat
    digest = hashlib.sha256(flat.encode()).hexdigest()[:10]
    return f"{flat[: _MAX_NAME - 11]}_{digest}"


def namespaces(tools: Any) -> dict[str, tuple[str, str]]:
    """Flat tool name -> ``(namespace, function name)`` for a Responses ``tools`` list's
    ``namespace`` tools (Codex groups MCP tools so); ``{}`` when there are none."""
    out: dict[str, tuple[str, str]] = {}
    for tool in tools if isinstance(tools, list) else ():
        if not isinstance(tool, dict) or tool.get("type") != "namespace":
            continue
        namespace = tool.get("name")
        children = tool.get("tools")
        if not isinstance(namespace, str):
            continue
        for child in children if isinstance(children, list) else ():
            name = child.get("name") if isinstance(child, dict) else None
            if isinstance(name, str):
                out[flat_name(namespace, name)] = (namespace, name)
    return out


CLIENT_CALLS: Final = ("custom_tool_call", "apply_patch_call")
#: 1.1: the tool types a client runs: JSON functions, custom tools and apply_patch.
CLIENT_TOOLS: Final = frozenset({"function", "custom", "apply_patch"})


def tools_11(tools: Any) -> tuple[list[dict[str, Any]] | None, dict[str, Any]]:
    """``(standard tools, tokenwire:tools)``: custom and apply_patch tools are declared
    with their §8.2 parameters, and their kind in the extension."""
    if tools is None:
        return None, {}
    want(tools, list, "tools", "an array")
    out = []
    kinds: dict[str, Any] = {}
    for i, tool in enumerate(tools):
        path = f"tools[{i}]"
        want(tool, dict, path, "a tool object")
        kind = tool.get("type")
        if kind == "custom":
            name = want(tool.get("name"), str, f"{path}.name", "a string")
            description = tool.get("description")
            out.append(
                {
                    "name": name,
                    "description": description if isinstance(description, str) else "",
                    "parameters": _lossless.CUSTOM_PARAMETERS,
                }
            )
            spec: dict[str, Any] = {"kind": "custom"}
            if tool.get("format") is not None:
                spec["format"] = want(tool["format"], dict, f"{path}.format", "an object")
            kinds[name] = spec
        elif kind == "apply_patch":
            out.append(
                {
                    "name": "apply_patch",
                    "description": "Create, update or delete a file with a diff.",
                    "parameters": _lossless.APPLY_PATCH_PARAMETERS,
                }
            )
            kinds["apply_patch"] = {"kind": "apply_patch"}
        elif kind == "function":
            out.append(tool_from_function(tool, path))
        elif kind == "namespace":
            out.extend(_namespace_tools(tool, path))
        # else: a hosted tool, see request_from_vendor
    return out, kinds


def _namespace_tools(tool: dict[str, Any], path: str) -> list[dict[str, Any]]:
    """A ``namespace`` tool's functions as standard tools under their flat names:
    only a Responses upstream knows namespaces (the encoder names calls back)."""
    namespace = want(tool.get("name"), str, f"{path}.name", "a string")
    children = want(tool.get("tools"), list, f"{path}.tools", "an array of function tools")
    out = []
    for k, child in enumerate(children):
        where = f"{path}.tools[{k}]"
        want(child, dict, where, "a tool object")
        if child.get("type", "function") != "function":
            raise InvalidRequest(
                f"a namespace's {child.get('type')!r} tool cannot be declared to another "
                "vendor format: only its function tools can",
                path=f"{where}.type",
            )
        declared = tool_from_function(child, where)
        declared["name"] = flat_name(namespace, declared["name"])
        out.append(declared)
    return out
