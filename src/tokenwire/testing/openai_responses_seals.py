"""What the fake Responses API seals and then checks on the next turn.

Encrypted reasoning (``reasoning.encrypted_content``) and the items the fake
made (tool calls, MCP approvals, compactions) carry a MAC or a digest of their
content, so a turn that sends one back altered is refused, as OpenAI refuses it.
The renderer (``openai_responses``) seals what it answers with these, and its
request check verifies what comes back.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from typing import Any, Final

import msgspec

_encode = msgspec.json.Encoder().encode

# --- reasoning: encrypted content, checked on the next turn ---------------------

_SIGNING_KEY: Final = b"tokenwire-fake-openai-responses"
#: The id of the reasoning item the fake answers with.
REASONING_ID: Final = "rs_fake0001"
#: ``call_fake0000_<digest>``: a call made in a turn whose reasoning was encrypted.
_SIGNED_CALL: Final = re.compile(r"call_fake\d{4}_([0-9a-f]{16})")
INCLUDE: Final = "reasoning.encrypted_content"


def _mac(data: bytes) -> bytes:
    return hmac.new(_SIGNING_KEY, data, hashlib.sha256).digest()


def encrypted_content(item_id: str, text: str) -> str:
    """The fake's encrypted content of reasoning item ``item_id`` (opaque, like OpenAI's)."""
    payload = base64.urlsafe_b64encode(_encode([item_id, text]))
    return "gAAAAA" + payload.decode() + "." + base64.urlsafe_b64encode(_mac(payload)).decode()


def _verifies(item_id: Any, content: Any) -> bool:
    if not isinstance(item_id, str) or not isinstance(content, str):
        return False
    if not content.startswith("gAAAAA") or "." not in content:
        return False
    payload, _, mac = content[6:].rpartition(".")
    try:
        ok = hmac.compare_digest(base64.urlsafe_b64decode(mac), _mac(payload.encode()))
        owner = msgspec.json.decode(base64.urlsafe_b64decode(payload))[0] if ok else None
    except (ValueError, msgspec.DecodeError, IndexError, TypeError):
        return False
    return bool(ok and owner == item_id)


def reasoning_digest(item_id: str, content: str) -> str:
    """What a signed call id carries: a digest of the reasoning item it followed."""
    return _mac(f"{item_id}\0{content}".encode()).hex()[:16]


def check_reasoning(items: list[Any]) -> str | None:
    """OpenAI's next-turn rules for reasoning items (see the module docstring)."""
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            return f"input[{i}]: Input should be an object"
        if item.get("type") == "reasoning" and "encrypted_content" in item:
            if not _verifies(item.get("id"), item.get("encrypted_content")):
                return f"The encrypted content for item {item.get('id')} could not be verified."
    for i, item in enumerate(items):
        if item.get("type") != "function_call":
            continue
        match = _SIGNED_CALL.fullmatch(str(item.get("call_id", "")))
        if match is None:
            continue
        # The reasoning item must come before the call, in the same assistant turn.
        found = False
        for earlier in reversed(items[:i]):
            kind = earlier.get("type", "message")
            if kind == "reasoning":
                content = earlier.get("encrypted_content")
                if (
                    isinstance(content, str)
                    and reasoning_digest(str(earlier.get("id")), content) == match[1]
                ):
                    found = True
                    break
            elif kind not in ("function_call",) and not (
                kind == "message" and earlier.get("role") == "assistant"
            ):
                break
        if not found:
            name = item.get("id") or item.get("call_id")
            return (
                f"Item '{name}' of type 'function_call' was provided without its required "
                f"'reasoning' item: '{REASONING_ID}'."
            )
    return None


# --- tokenwire extensions 1.1: items the next turn must send back unchanged ----------

#: ``call_fake_<digest>`` / ``mcpr_fake_<digest>``: ids of items the fake made, each
#: carrying a digest of the item's content, so an altered item is caught.
_SIGNED_ITEM: Final = re.compile(r"(?:call|mcpr|cmp)_fake_([0-9a-f]{16})")
_OUTPUTS: Final = {
    "function_call_output": ("function_call", "function call output"),
    "custom_tool_call_output": ("custom_tool_call", "custom tool call output"),
    "apply_patch_call_output": ("apply_patch_call", "apply patch call output"),
}


def _item_digest(item: dict[str, Any]) -> str:
    """The digest a signed item's id carries: of the fields that must come back as sent."""
    kind = item.get("type")
    if kind == "custom_tool_call":
        signed: Any = [kind, item.get("name"), item.get("input")]
    elif kind == "apply_patch_call":
        signed = [kind, item.get("operation")]
    elif kind == "mcp_approval_request":
        signed = [kind, item.get("server_label"), item.get("name"), item.get("arguments")]
    else:  # compaction
        signed = [kind, item.get("encrypted_content")]
    return _mac(msgspec.json.encode(signed, order="sorted")).hex()[:16]


def sign_item(item: dict[str, Any], n: int) -> dict[str, Any]:
    """``item`` with the ids the fake gives it: ``call_id`` (a client-run call) or ``id``."""
    kind = item.get("type")
    digest = _item_digest(item)
    if kind in ("custom_tool_call", "apply_patch_call"):
        prefix = "ctc" if kind == "custom_tool_call" else "apc"
        return {"id": f"{prefix}_fake{n:04d}", "call_id": f"call_fake_{digest}", **item}
    if kind == "mcp_approval_request":
        return {"id": f"mcpr_fake_{digest}", **item}
    if kind == "compaction":
        return {"id": f"cmp_fake_{digest}", **item}
    return {"id": f"item_fake{n:04d}", **item}


def check_items(items: list[Any]) -> str | None:
    """OpenAI's next-turn rules for 1.1 items, as the fake enforces them.

    A tool output needs its call, of its own type, earlier in ``input``; an
    ``mcp_approval_response`` needs its ``mcp_approval_request``; an item the
    fake signed must come back unaltered.
    """
    calls: dict[str, str] = {}  # call_id -> item type
    approvals: set[str] = set()
    for i, item in enumerate(items):
        kind = item.get("type", "message")
        for key in ("call_id", "id"):
            match = _SIGNED_ITEM.fullmatch(str(item.get(key, "")))
            # Any item with a signed id (outputs only name it): one sent back as
            # another type is altered too.
            if match and kind not in _OUTPUTS and _item_digest(item) != match[1]:
                return f"input[{i}]: item '{item.get(key)}' of type '{kind}' was modified."
        if kind in ("function_call", "custom_tool_call", "apply_patch_call"):
            calls[str(item.get("call_id"))] = kind
        elif kind == "mcp_approval_request":
            approvals.add(str(item.get("id")))
        elif kind in _OUTPUTS:
            want, words = _OUTPUTS[kind]
            if calls.get(str(item.get("call_id"))) != want:
                return f"No tool call found for {words} with call_id {item.get('call_id')}."
        elif kind == "mcp_approval_response":
            if str(item.get("approval_request_id")) not in approvals:
                return (
                    "No mcp_approval_request found for mcp_approval_response with "
                    f"approval_request_id {item.get('approval_request_id')}."
                )
    return None
