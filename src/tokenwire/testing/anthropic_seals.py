"""What the fake Anthropic API signs and then checks on the next turn.

Thinking blocks carry a signature over their text, and the blocks the fake made
for compaction and pause_turn a digest of their content, so a turn that sends one
back altered is refused, as Anthropic refuses it. The renderer (``anthropic``)
signs what it answers with these, and its request check verifies what comes back.
"""

from __future__ import annotations

import base64
import hashlib
import re
from typing import Any, Final

import msgspec

from .upstream import Script

_encode = msgspec.json.Encoder().encode

# --- extended thinking: signed blocks, checked on the next turn -----------------

_SIGNING_KEY: Final = b"tokenwire-fake-anthropic"
#: ``toolu_fake0001_<digest>``: a call made in a turn whose reasoning was signed.
_SIGNED_CALL: Final = re.compile(r"toolu_fake\d{4}_([0-9a-f]{16})")


def signature(thinking: str) -> str:
    """The fake's signature of a thinking block's text (opaque, like Anthropic's)."""
    digest = hashlib.sha256(_SIGNING_KEY + thinking.encode("utf-8")).digest()
    return base64.b64encode(b"\x12\x01" + digest).decode("ascii")


def redacted_data(seed: str) -> str:
    """Opaque ``redacted_thinking`` data (what Anthropic encrypts)."""
    digest = hashlib.sha256(_SIGNING_KEY + b"redacted:" + seed.encode("utf-8")).digest()
    return base64.b64encode(b"\x0a\x02" + digest).decode("ascii")


def turn_digest(blocks: list[dict[str, Any]]) -> str:
    """A digest of a turn's reasoning blocks, in order (what the tool ids carry)."""
    h = hashlib.sha256(_SIGNING_KEY)
    for block in blocks:
        h.update(_encode([block.get("type"), block.get("signature"), block.get("data")]))
    return h.hexdigest()[:16]


def reasoning_blocks(script: Script) -> list[dict[str, Any]]:
    """The complete thinking / redacted_thinking blocks ``script`` answers with."""
    blocks: list[dict[str, Any]] = []
    if script.thinking:
        blocks.append(
            {
                "type": "thinking",
                "thinking": script.thinking,
                "signature": signature(script.thinking),
            }
        )
    if script.redacted_thinking:
        blocks.append({"type": "redacted_thinking", "data": redacted_data(script.thinking)})
    return blocks


def check_reasoning(messages: list[Any], *, thinking: bool = True) -> str | None:
    """Anthropic's next-turn rules for thinking blocks (see the module docstring): a
    signed call's turn must start with its thinking only while thinking is on."""
    for i, message in enumerate(messages):
        content = message.get("content")
        if message.get("role") != "assistant" or not isinstance(content, list):
            continue
        lead: list[dict[str, Any]] = []
        for k, block in enumerate(content):
            if not isinstance(block, dict):
                return f"messages.{i}.content.{k}: Input should be an object"
            kind = block.get("type")
            if kind == "thinking":
                text, sig = block.get("thinking"), block.get("signature")
                if not isinstance(text, str) or not isinstance(sig, str) or sig != signature(text):
                    return f"messages.{i}.content.{k}: Invalid `signature` in `thinking` block"
            if kind in ("thinking", "redacted_thinking") and len(lead) == k:
                lead.append(block)
        for block in content:
            if block.get("type") != "tool_use":
                continue
            match = _SIGNED_CALL.fullmatch(str(block.get("id", "")))
            if match is None:
                continue
            if not lead and not thinking:
                continue  # thinking off: earlier turns may go without it
            if not lead:
                found = content[0].get("type") if isinstance(content[0], dict) else None
                return (
                    f"messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, "
                    f"but found `{found}`. When `thinking` is enabled, a final `assistant` "
                    "message must start with a thinking block (preceeding the lastmost set of "
                    "`tool_use` and `tool_result` blocks). We recommend you include thinking "
                    "blocks from previous turns."
                )
            if turn_digest(lead) != match.group(1):
                return (
                    f"messages.{i}.content: thinking or redacted_thinking blocks in the latest "
                    "assistant message cannot be modified. These blocks must remain as they "
                    "were in the original response."
                )
    return None


# --- tokenwire extensions 1.1: compaction and pause_turn, checked on the next turn ----

#: ``toolu_fake0000_cmp<digest>``: a call made in a turn that compacted the context.
_COMPACTED_CALL: Final = re.compile(r"toolu_fake\d{4}_cmp([0-9a-f]{16})")
#: ``srvtoolu_fake_<digest>``: a server tool block the fake paused its turn on.
_PAUSED_TOOL: Final = re.compile(r"srvtoolu_fake_([0-9a-f]{16})")


def content_digest(*parts: Any) -> str:
    return hashlib.sha256(_SIGNING_KEY + _encode(list(parts))).hexdigest()[:16]


def compaction_block(summary: str) -> dict[str, Any]:
    """The fake's compaction block for ``summary``: its encrypted content signs the text."""
    sealed = base64.b64encode(b"\x1a\x03" + bytes.fromhex(content_digest("compaction", summary)))
    return {"type": "compaction", "content": summary, "encrypted_content": sealed.decode()}


def container_id(server_tool_id: str) -> str:
    """The container the fake ran a paused server tool in (its id names the tool)."""
    return f"container_fake_{content_digest('container', server_tool_id)}"


def sign_item(item: dict[str, Any]) -> dict[str, Any]:
    if item.get("type") == "compaction":
        return compaction_block(str(item.get("content", "")))
    if item.get("type") == "server_tool_use":
        tool_id = f"srvtoolu_fake_{content_digest(item.get('name'), item.get('input'))}"
        return {"id": tool_id, **item}
    return item


def check_lossless(body: dict[str, Any], messages: list[Any]) -> str | None:
    """Anthropic's next-turn rules for compaction and pause_turn (module docstring)."""
    paused: str | None = None
    for i, message in enumerate(messages):
        content = message.get("content")
        if message.get("role") != "assistant" or not isinstance(content, list):
            continue
        compactions: set[str] = set()
        for k, block in enumerate(content):
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "compaction":
                summary = block.get("content")
                if block != compaction_block(str(summary)):
                    return (
                        f"messages.{i}.content.{k}: the `compaction` block's `content` differs "
                        "from the text its `encrypted_content` recorded"
                    )
                compactions.add(content_digest("compaction", summary))
            elif kind == "tool_use":
                match = _COMPACTED_CALL.fullmatch(str(block.get("id", "")))
                if match and match[1] not in compactions:
                    return (
                        f"messages.{i}.content.{k}: `tool_use` block {block.get('id')} was made "
                        "after a `compaction` block that is missing from this assistant message"
                    )
            elif kind == "server_tool_use":
                match = _PAUSED_TOOL.fullmatch(str(block.get("id", "")))
                if match is None:
                    continue
                if content_digest(block.get("name"), block.get("input")) != match[1]:
                    return f"messages.{i}.content.{k}: `server_tool_use` block was modified"
                if i == len(messages) - 1:
                    paused = str(block["id"])
    container = body.get("container")
    if paused is not None and container != container_id(paused):
        return (
            "container: continuing a `pause_turn` requires the container of the paused turn"
            f" (got {container!r})"
        )
    if isinstance(container, str) and container.startswith("container_fake_") and paused is None:
        return "container: no paused turn to continue in this container"
    return None
