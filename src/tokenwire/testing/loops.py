"""What each vendor refuses in a tool loop's pairing, for the strict fakes: a result
without its call, calls left unanswered, results that do not match the calls, and
(Anthropic) a system role in mid-conversation without its beta.

The messages are the vendors' own, so a client sees what it would see from them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

__all__ = [
    "GEMINI_SKIP_SIGNATURES",
    "MID_SYSTEM_BETA",
    "anthropic_results",
    "anthropic_thinking",
    "anthropic_roles",
    "chat_results",
    "gemini_results",
]

#: The values Gemini documents for a function call it did not sign (one made by
#: another model, or whose signature was lost): its validator lets them pass.
GEMINI_SKIP_SIGNATURES: Final = frozenset(
    {"skip_thought_signature_validator", "context_engineering_is_the_way_to_go"}
)

#: The beta that lets ``messages`` hold ``role: "system"`` turns.
MID_SYSTEM_BETA: Final = "mid-conversation-system"


def anthropic_thinking(body: dict[str, Any]) -> bool:
    """Whether a Messages body turns thinking on."""
    thinking = body.get("thinking")
    return isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive")


def anthropic_roles(messages: list[Any], beta: str) -> str | None:
    """Each message is the user's or the assistant's; a system message in
    mid-conversation only with its beta (``anthropic-beta``; Claude Code sends it)."""
    roles = ("user", "assistant", "system") if MID_SYSTEM_BETA in beta else ("user", "assistant")
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in roles:
            return f"messages.{i}.role: must be user or assistant"
    return None


def anthropic_results(messages: list[Any]) -> str | None:
    """Each ``tool_result`` answers a ``tool_use`` of the assistant turn just before."""
    calls: set[Any] = set()
    for i, message in enumerate(messages):
        content = message.get("content")
        blocks = content if isinstance(content, list) else []
        if message.get("role") == "assistant":
            uses = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"]
            calls = {b.get("id") for b in uses}
            continue
        for k, block in enumerate(blocks):
            if isinstance(block, dict) and block.get("type") == "tool_result":
                if block.get("tool_use_id") not in calls:
                    return (
                        f"messages.{i}.content.{k}: unexpected `tool_use_id` found in "
                        f"`tool_result` blocks: {block.get('tool_use_id')}. Each `tool_result` "
                        "block must have a corresponding `tool_use` block in the previous message."
                    )
        if message.get("role") == "user":
            calls = set()
    return None


def chat_results(messages: list[Any]) -> str | None:
    """Each tool message answers a call of the assistant message before it, and every
    call is answered before the conversation goes on (OpenAI's own 400s)."""
    waiting: list[Any] = []
    for i, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in waiting:
                return (
                    f"Invalid parameter: messages[{i}]: messages with role 'tool' must be a "
                    "response to a preceeding message with 'tool_calls'."
                )
            waiting.remove(call_id)
            continue
        if waiting:
            return (
                "An assistant message with 'tool_calls' must be followed by tool messages "
                "responding to each 'tool_call_id'. The following tool_call_ids did not have "
                f"response messages: {', '.join(map(str, waiting))}"
            )
        calls = message.get("tool_calls") if role == "assistant" else None
        calls = calls if isinstance(calls, list) else []
        waiting = [c.get("id") for c in calls if isinstance(c, dict)]
    return None


#: A field of a Gemini object by either spelling (``functionCall``, ``function_call``).
Field = Callable[[Any, str], Any]


def _parts_with(content: Any, kind: str, field: Field) -> list[Any]:
    parts = field(content, "parts")
    if not isinstance(parts, list):
        return []
    return [p for p in parts if isinstance(p, dict) and field(p, kind) is not None]


def gemini_results(contents: list[Any], field: Field) -> str | None:
    """Gemini pairs a turn's functionResponse parts with the previous turn's
    functionCall parts by order: there must be as many."""
    for i, content in enumerate(contents):
        answers = _parts_with(content, "functionResponse", field)
        if not answers:
            continue
        calls = _parts_with(contents[i - 1], "functionCall", field) if i else []
        if len(answers) != len(calls):
            return (
                "Please ensure that the number of function response parts is equal to the "
                "number of function call parts of the function call turn."
            )
    return None
