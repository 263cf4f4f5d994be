"""A standard request -> ``POST {base}/v1/responses`` (§7.1).

``input`` items: message items with ``input_text``/``input_image``/``input_file``
content, assistant tool calls as ``function_call`` items, tool results as
``function_call_output`` items, and, before an assistant message's items, the
reasoning items it came with (``extensions["tokenwire:reasoning_history"]``
parts bound to ``openai-responses``: ``tokenwire:id`` and the encrypted
content, ``tokenwire:redacted``), so that a reasoning model's next turn is
accepted. ``instructions`` from the system messages, flat function tools
(``strict: false``, since the standard's schemas are not written for strict
mode), ``max_output_tokens``, ``temperature``, ``top_p`` and ``stream: true``.
The extensions ``"vendor:openai"`` and ``"vendor:openai-responses"`` are
deep-merged into the body last.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from ...errors import InvalidRequest
from ...request import AudioPart, DocumentPart, ImagePart, Message, Request, TextPart, Tool
from .. import _extensions as x
from .. import _lossless
from .._base import VendorRequest
from .._request import merge_extensions, reasoning_history, sse_headers, versioned_url

__all__ = ["EXTENSION_KEYS", "VENDOR", "build_request", "reasoning_items"]

VENDOR: Final = "openai-responses"
#: Extension keys merged into the body, in this order (§4.7).
EXTENSION_KEYS: Final = ("vendor:openai", "vendor:openai-responses")

_encode = msgspec.json.Encoder().encode
_EXTENSIONS: Final[dict[str, str]] = {
    "application/pdf": "pdf",
    "text/plain": "txt",
    "text/markdown": "md",
    "text/csv": "csv",
    "application/json": "json",
}


def _user_content(message: Message, path: str) -> list[dict[str, Any]]:
    content = message.content
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "input_text", "text": content}]
    items: list[dict[str, Any]] = []
    for k, part in enumerate(content):
        if isinstance(part, TextPart):
            items.append({"type": "input_text", "text": part.text})
        elif isinstance(part, ImagePart):
            url = f"data:{part.media_type};base64,{part.data}"
            items.append({"type": "input_image", "image_url": url, "detail": "auto"})
        elif isinstance(part, DocumentPart):
            ext = _EXTENSIONS.get(part.media_type, "bin")
            items.append(
                {
                    "type": "input_file",
                    "filename": f"document-{k}.{ext}",
                    "file_data": f"data:{part.media_type};base64,{part.data}",
                }
            )
        else:
            kind = "audio" if isinstance(part, AudioPart) else type(part).__name__
            raise InvalidRequest(
                f"the Responses API cannot take {kind} parts", path=f"{path}.content[{k}]"
            )
    return items


def reasoning_items(req: Request) -> dict[int, list[dict[str, Any]]]:
    """Message index -> the reasoning items to send before that assistant message's items.

    From ``extensions["tokenwire:reasoning_history"]``. A part becomes a
    ``reasoning`` item when it is bound to ``openai-responses`` and has its id;
    its text is the item's summary. Parts bound to another vendor, and parts
    without an id, are dropped: the Responses API checks its own encrypted
    content only. Raises ``InvalidRequest`` naming a malformed entry.
    """
    out: dict[int, list[dict[str, Any]]] = {}
    for message, parts in reasoning_history(req):
        items = out.setdefault(message, [])
        for part in parts:
            item_id = part.get(x.ITEM_ID)
            if part.get(x.VENDOR) != VENDOR or not isinstance(item_id, str):
                continue  # bound to another vendor (or not an item of this one)
            text = part.get("text")
            summary = (
                [{"type": "summary_text", "text": text}] if isinstance(text, str) and text else []
            )
            item: dict[str, Any] = {"type": "reasoning", "id": item_id, "summary": summary}
            encrypted = part.get(x.REDACTED)
            if isinstance(encrypted, str):
                item["encrypted_content"] = encrypted
            items.append(item)
    return out


def _history_items(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """1.1: the items of ``tokenwire:block_history`` parts, byte-identical (approval
    requests, MCP items, this vendor's compaction items), in their order."""
    items: list[dict[str, Any]] = []
    for part in parts:
        kind = part.get("type")
        if kind == x.APPROVAL:
            items.append({"type": "mcp_approval_request", **part[x.APPROVAL]})
        elif kind == x.MCP and part.get(x.VENDOR) in (None, VENDOR):
            mcp = part[x.MCP]
            if mcp.get("kind") in ("list_tools", "call"):
                item = "mcp_list_tools" if mcp["kind"] == "list_tools" else "mcp_call"
                items.append(
                    {"type": item, **{k: v for k, v in mcp.items() if k not in ("kind", "call_id")}}
                )
        elif kind == x.COMPACTION and part.get(x.VENDOR) == VENDOR:
            items.append({"type": "compaction", **part[x.COMPACTION]})
    return items


def _call_item(call: Any, kind: dict[str, Any] | None, item_ids: dict[str, str]) -> dict[str, Any]:
    """An assistant's tool call as the item it was: a function, custom or apply_patch call."""
    if kind is None:
        return {
            "type": "function_call",
            "call_id": call.id,
            "name": call.name,
            "arguments": call.arguments,
        }
    item: dict[str, Any]
    if kind["kind"] == "custom":
        raw = _lossless.custom_input(call.arguments)
        item = {"type": "custom_tool_call", "call_id": call.id, "name": call.name, "input": raw}
    else:
        operation = msgspec.json.decode(call.arguments)
        item = {
            "type": "apply_patch_call",
            "call_id": call.id,
            "operation": operation,
            "status": "completed",
        }
    if call.id in item_ids:
        item["id"] = item_ids[call.id]
    return item


def _input(req: Request) -> tuple[list[str], list[dict[str, Any]]]:
    """``(instructions, input items)`` for the history."""
    instructions: list[str] = []
    items: list[dict[str, Any]] = []
    reasoning = reasoning_items(req)
    kinds = _lossless.tool_kinds(req)
    blocks = _lossless.block_history(req)
    # The item ids of custom / apply_patch calls (sent back with them), by call id.
    item_ids = {
        p[x.TOOL_CALL_ID]: p[x.ITEM_ID]
        for parts in blocks.values()
        for p in parts
        if p.get("type") == x.TOOL_KIND
        and p.get(x.VENDOR) in (None, VENDOR)
        and isinstance(p.get(x.TOOL_CALL_ID), str)
        and isinstance(p.get(x.ITEM_ID), str)
    }
    call_kinds: dict[str, str] = {}  # call id -> its tool kind, for the tool results
    for i, message in enumerate(req.messages):
        path = f"messages[{i}]"
        if message.role == "system":
            if isinstance(message.content, list) and not all(
                isinstance(p, TextPart) for p in message.content
            ):
                raise InvalidRequest(
                    "Responses instructions carry text only", path=f"{path}.content"
                )
            instructions.append(message.text)
        elif message.role == "user":
            items.append(
                {"type": "message", "role": "user", "content": _user_content(message, path)}
            )
        elif message.role == "assistant":
            if isinstance(message.content, list) and not all(
                isinstance(p, TextPart) for p in message.content
            ):
                raise InvalidRequest(
                    "assistant messages carry text only in the Responses API",
                    path=f"{path}.content",
                )
            # The reasoning items first: they preceded the answer and the calls.
            items.extend(reasoning.get(i, ()))
            items.extend(_history_items(blocks.get(i, [])))
            text = message.text
            if text:
                items.append(
                    {
                        "type": "message",
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": text, "annotations": []}],
                    }
                )
            for call in message.tool_calls or ():
                kind = kinds.get(call.name)
                items.append(_call_item(call, kind, item_ids))
                if kind is not None:
                    call_kinds[call.id] = kind["kind"]
        else:  # tool
            output = {
                "custom": "custom_tool_call_output",
                "apply_patch": "apply_patch_call_output",
            }.get(call_kinds.get(message.tool_call_id or "", ""), "function_call_output")
            item = {"type": output, "call_id": message.tool_call_id, "output": message.text}
            if output == "apply_patch_call_output":
                item["status"] = "completed"
            items.append(item)
    # 1.1: the answers to the previous turn's approval requests, after them.
    for answer in _lossless.approvals(req):
        response: dict[str, Any] = {
            "type": "mcp_approval_response",
            "approval_request_id": answer["id"],
            "approve": answer["approve"],
        }
        if answer.get("reason") is not None:
            response["reason"] = answer["reason"]
        items.append(response)
    return instructions, items


def _tool(tool: Tool, kind: dict[str, Any] | None) -> dict[str, Any]:
    """A declared tool: a function, or (1.1, ``tokenwire:tools``) custom or apply_patch."""
    if kind is None:
        return {
            "type": "function",
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
            "strict": False,
        }
    if kind["kind"] == "apply_patch":
        return {"type": "apply_patch"}
    out: dict[str, Any] = {"type": "custom", "name": tool.name, "description": tool.description}
    if kind.get("format") is not None:
        out["format"] = kind["format"]
    return out


# The signature is `_contract.RequestBuilder`, the same for every vendor.
def build_request(
    req: Request,
    *,
    base_url: str,
    api_key: str | None = None,
    upstream_model: str | None = None,
    headers: dict[str, str] | None = None,
) -> VendorRequest:
    """The Responses API ``/v1/responses`` streaming request for ``req``.

    ``base_url`` is the API root (``https://api.openai.com``); ``/v1`` is added
    unless it already ends with it. ``upstream_model`` replaces ``req.model``.
    ``stop_sequences`` is not sent: the Responses API has no stop parameter.
    The extensions ``"vendor:openai"`` and ``"vendor:openai-responses"`` are
    deep-merged into the body last.

    Returns the ``VendorRequest``. Raises ``InvalidRequest`` (with ``.path``)
    for audio parts, for non-text system or assistant parts and for a
    malformed ``tokenwire:reasoning_history``.
    """
    instructions, items = _input(req)
    body: dict[str, Any] = {"model": upstream_model or req.model, "input": items, "stream": True}
    if instructions:
        body["instructions"] = "\n\n".join(instructions)
    if req.tools:
        kinds = _lossless.tool_kinds(req)
        body["tools"] = [_tool(t, kinds.get(t.name)) for t in req.tools]
    params = req.parameters
    if params is not None:
        if params.max_tokens is not None:
            body["max_output_tokens"] = params.max_tokens
        if params.temperature is not None:
            body["temperature"] = params.temperature
        if params.top_p is not None:
            body["top_p"] = params.top_p
    merge_extensions(body, req, EXTENSION_KEYS)
    head = sse_headers({"authorization": f"Bearer {api_key}"} if api_key else {}, headers)
    return VendorRequest(
        url=versioned_url(base_url, "v1", "responses"), headers=head, body=_encode(body)
    )
