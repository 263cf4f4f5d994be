"""tokenwire extensions 1.1 on the request side: what the next turn carries back.

docs/extensions.md, "New in 1.1". Pure functions over a standard ``Request``
that every request builder shares, each raising ``InvalidRequest`` whose
``path`` names the malformed value, and bounded (``MAX_ENTRIES`` entries,
``MAX_PARTS`` parts per entry):

* ``tool_kinds``: ``extensions["tokenwire:tools"]``, the declared tools that
  are not JSON functions (custom free-form tools, apply_patch). Each must be
  declared in ``tools`` too, so that §8.2 validates its calls: a custom tool's
  parameters are ``CUSTOM_PARAMETERS`` (its call's arguments are
  ``{"input": <raw text>}``), apply_patch's ``APPLY_PATCH_PARAMETERS``;
* ``approvals``: ``extensions["tokenwire:approvals"]``, the answers to
  approval requests (``tokenwire:approval`` blocks) of the previous turn;
* ``block_history``: ``extensions["tokenwire:block_history"]``, the
  vendor-bound blocks of each assistant message (compaction, MCP items,
  approval requests, tool kinds, audio ids, server tools), which the builder
  sends back byte-identical;
* ``container``: ``extensions["tokenwire:container"]``, the container a
  ``pause_turn`` continuation must name.

``block_parts`` is the other direction: the parts of one response's events
that its next turn must carry (``Response.follow_up`` adds them).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

import msgspec

from .. import events as ev
from ..errors import InvalidRequest
from ..request import Request
from . import _extensions as x
from ._request import assistant_entry

__all__ = [
    "APPLY_PATCH_PARAMETERS",
    "CUSTOM_PARAMETERS",
    "KINDS",
    "MAX_ENTRIES",
    "MAX_PARTS",
    "PART_KEYS",
    "approvals",
    "block_history",
    "block_parts",
    "container",
    "custom_arguments",
    "custom_input",
    "parts_of",
    "tool_kinds",
]

#: The kinds of client-run tools that are not JSON functions.
KINDS: Final = frozenset({"custom", "apply_patch"})
#: At most this many entries in a history or approvals list, and parts per entry.
MAX_ENTRIES: Final = 1024
MAX_PARTS: Final = 256

#: §8.2: the parameters a custom tool is declared with: its raw input, as a string.
CUSTOM_PARAMETERS: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {"input": {"type": "string"}},
    "required": ["input"],
    "additionalProperties": False,
}
#: §8.2: the parameters of apply_patch: one file operation (the Responses API's).
APPLY_PATCH_PARAMETERS: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "type": {"enum": ["create_file", "update_file", "delete_file"]},
        "path": {"type": "string"},
        "diff": {"type": "string"},
    },
    "required": ["type", "path"],
}
#: The ``tokenwire.block`` keys a history part keeps, by part type.
PART_KEYS: Final[dict[str, str]] = {
    x.COMPACTION: x.COMPACTION,
    x.MCP: x.MCP,
    x.APPROVAL: x.APPROVAL,
    x.TOOL_KIND: x.TOOL_KIND,
    x.AUDIO: x.AUDIO,
    x.SERVER_TOOL: x.SERVER_TOOL,
}

_encode = msgspec.json.Encoder().encode


def custom_arguments(raw: str) -> str:
    """A custom tool call's raw input as the ``tool.call`` arguments (a JSON object text)."""
    return _encode({"input": raw}).decode()


def custom_input(arguments: str) -> str:
    """The raw input of a custom tool call's arguments (``{"input": ...}``); else the text."""
    try:
        obj = msgspec.json.decode(arguments)
    except msgspec.DecodeError:
        return arguments
    value = obj.get("input") if isinstance(obj, dict) else None
    return value if isinstance(value, str) else arguments


def _where(key: str) -> str:
    return f'extensions["{key}"]'


def tool_kinds(req: Request) -> dict[str, dict[str, Any]]:
    """Tool name -> its declaration in ``tokenwire:tools`` (``{"kind": ..., ...}``)."""
    value = req.extension(x.TOOLS)
    if value is None:
        return {}
    where = _where(x.TOOLS)
    if not isinstance(value, dict):
        raise InvalidRequest("must be an object of tool name -> {kind}", path=where)
    if len(value) > MAX_ENTRIES:
        raise InvalidRequest(f"at most {MAX_ENTRIES} tools", path=where)
    out: dict[str, dict[str, Any]] = {}
    for name, spec in value.items():
        path = f"{where}[{name!r}]"
        if not isinstance(spec, dict) or spec.get("kind") not in KINDS:
            raise InvalidRequest(f"must be an object with kind one of {sorted(KINDS)}", path=path)
        fmt = spec.get("format")
        if fmt is not None and not isinstance(fmt, dict):
            raise InvalidRequest("must be an object", path=f"{path}.format")
        if req.tool(name) is None:
            # §8.2: a call is validated against the declared tool; it must exist.
            raise InvalidRequest(f"tool {name!r} is not declared in tools", path=path)
        out[name] = spec
    return out


def approvals(req: Request) -> list[dict[str, Any]]:
    """The answers in ``tokenwire:approvals``, each ``{"id", "approve", "reason"?}``."""
    value = req.extension(x.APPROVALS)
    if value is None:
        return []
    where = _where(x.APPROVALS)
    if not isinstance(value, list) or len(value) > MAX_ENTRIES:
        raise InvalidRequest(f"must be an array of at most {MAX_ENTRIES} answers", path=where)
    for i, answer in enumerate(value):
        path = f"{where}[{i}]"
        if not isinstance(answer, dict):
            raise InvalidRequest('must be {"id": ..., "approve": true|false}', path=path)
        if not isinstance(answer.get("id"), str) or not answer["id"]:
            raise InvalidRequest("must be the approval request's id", path=f"{path}.id")
        if not isinstance(answer.get("approve"), bool):
            raise InvalidRequest("must be true or false", path=f"{path}.approve")
        reason = answer.get("reason")
        if reason is not None and not isinstance(reason, str):
            raise InvalidRequest("must be a string", path=f"{path}.reason")
    return value


def block_history(req: Request) -> dict[int, list[dict[str, Any]]]:
    """Assistant message index -> the parts of ``tokenwire:block_history`` for it."""
    history = req.extension(x.BLOCK_HISTORY)
    if history is None:
        return {}
    where = _where(x.BLOCK_HISTORY)
    if not isinstance(history, list) or len(history) > MAX_ENTRIES:
        raise InvalidRequest(f"must be an array of at most {MAX_ENTRIES} entries", path=where)
    out: dict[int, list[dict[str, Any]]] = {}
    for i, entry in enumerate(history):
        path = f"{where}[{i}]"
        message, parts = assistant_entry(entry, req, path)
        if len(parts) > MAX_PARTS:
            raise InvalidRequest(f"at most {MAX_PARTS} parts", path=f"{path}.parts")
        for k, part in enumerate(parts):
            kind = part.get("type") if isinstance(part, dict) else None
            if kind not in PART_KEYS:
                raise InvalidRequest(
                    f"must be a part of type one of {sorted(PART_KEYS)}",
                    path=f"{path}.parts[{k}]",
                )
            if kind != x.TOOL_KIND and not isinstance(part.get(PART_KEYS[kind]), dict):
                raise InvalidRequest("must be an object", path=f"{path}.parts[{k}].{kind}")
        out.setdefault(message, []).extend(parts)
    return out


def container(req: Request) -> str | None:
    """The container id of ``tokenwire:container`` (``{"id": ...}`` or the id itself)."""
    value = req.extension(x.CONTAINER)
    if value is None:
        return None
    if isinstance(value, dict):
        value = value.get("id")
    if not isinstance(value, str) or not value:
        raise InvalidRequest('must be {"id": "<container id>"}', path=_where(x.CONTAINER))
    return value


def parts_of(parts: Iterable[dict[str, Any]], kind: str, vendor: str | None = None) -> list[Any]:
    """The payloads of the parts of type ``kind`` (bound to ``vendor`` when given)."""
    key = PART_KEYS[kind]
    return [
        p.get(key)
        for p in parts
        if p.get("type") == kind and (vendor is None or p.get(x.VENDOR) in (None, vendor))
    ]


def _resent(server_tool: Any) -> bool:
    """Whether a server tool block goes back next turn: Anthropic's do (a ``pause_turn``
    continuation needs them); the others' ride on the vendor's own state."""
    kind = server_tool.get("type") if isinstance(server_tool, dict) else None
    return isinstance(kind, str) and (kind == "server_tool_use" or kind.endswith("_tool_result"))


def block_parts(events: Iterable[ev.Event]) -> list[dict[str, Any]]:
    """The ``tokenwire:block_history`` parts of one response's events, in stream order.

    One part per ``tokenwire.block`` that carries what the next turn must send
    back (``PART_KEYS``); a tool kind part names its call
    (``tokenwire:tool_call_id``) and the vendor item id (``tokenwire:id``); a
    block kept whole in the vendor's shape carries it (``tokenwire:raw``).
    """
    parts: list[dict[str, Any]] = []
    for event in events:
        body = x.fields(event, x.BLOCK)
        if body is None:
            continue
        for kind, key in PART_KEYS.items():
            if key not in body:
                continue
            payload = body[key]
            if kind == x.AUDIO:
                # Only the id goes back (docs/extensions.md): never the audio data,
                # which may be megabytes, nor the fragments without an id.
                if not isinstance(payload, dict) or not isinstance(payload.get("id"), str):
                    continue
                payload = {"id": payload["id"]}
            elif kind == x.SERVER_TOOL and not _resent(payload):
                continue  # no builder sends it back (an image's data would only weigh)
            part: dict[str, Any] = {"type": kind, key: payload}
            for extra in (x.VENDOR, x.TOOL_CALL_ID, x.ITEM_ID, x.RAW):
                if extra in body:
                    part[extra] = body[extra]
            parts.append(part)
    return parts
