"""``response.steer``: what the gateway does with steering input, as pure decisions.

The gateway starts no automatic successors. Steering input for a response in
progress is accepted and waits for the response to end. When it ends with
client tool calls, the client owes their results anyway, so the input waits
for the client's ``response.create`` that continues it
(``response.steer.pending`` names the results owed), and goes into that
turn. Otherwise the input is handed back (``response.steer.failed``) for the
client to send in its next turn.
"""

from __future__ import annotations

from typing import Any, Final

__all__ = ["ANSWERS", "refusal", "required_input", "settle", "with_steering"]

#: Client tool items whose answer the client owes, and the item that answers each.
ANSWERS: Final = {
    "function_call": "function_call_output",
    "custom_tool_call": "custom_tool_call_output",
    "computer_call": "computer_call_output",
    "shell_call": "shell_call_output",
    "apply_patch_call": "apply_patch_call_output",
}
_ANSWER_TYPES: Final = frozenset(ANSWERS.values())


def refusal(
    target: str, *, in_progress: bool, completed: bool, queued: int, limit: int
) -> tuple[str, str] | None:
    """``(code, message)`` refusing steering for response ``target``; ``None``: queue it."""
    if in_progress:
        if queued >= limit:
            return (
                "too_many_pending_steers",
                f"at most {limit} steering inputs wait per response "
                "(responses_websocket.max_pending_steers)",
            )
        return None
    if completed:
        return (
            "response_already_completed",
            f"response {target!r} completed; send the input in the response.create "
            "that continues it",
        )
    return "response_not_found", f"no response {target!r} on this socket"


def required_input(output: list[Any]) -> list[dict[str, Any]]:
    """The stubs of the tool results the client owes for ``output`` (``required_input``)."""
    return [
        {"type": ANSWERS[item["type"]], "call_id": item["call_id"]}
        | ({"name": item["name"]} if item["type"] == "function_call" else {})
        for item in output
        if isinstance(item, dict) and item.get("type") in ANSWERS and "call_id" in item
    ]


def settle(output: list[Any], completed: bool) -> tuple[str, Any]:
    """What becomes of a response's accepted steering when it ends.

    ``("pending", required_input)``: it waits for the continuing turn;
    ``("failed", (code, message))``: it is handed back.
    """
    required = required_input(output) if completed else []
    if required:
        return "pending", required
    if completed:
        return "failed", (
            "successor_creation_failed",
            "the response completed without client tool calls and the gateway starts no "
            "automatic successor: send this input in a response.create with "
            "previous_response_id",
        )
    return "failed", ("response_not_active", "the response ended without completing")


def with_steering(items: list[Any], steered: list[Any]) -> list[Any]:
    """The turn's input with accepted steering in it, in the order it came.

    OpenAI puts steering first; the gateway puts it right after the answers
    to the previous response's tool calls, which every upstream requires to
    follow their calls (a Chat upstream refuses a user message between a
    call and its result), and before the rest of the turn's input.
    """
    if not steered:
        return items
    cut = 0
    while (
        cut < len(items)
        and isinstance(items[cut], dict)
        and items[cut].get("type") in _ANSWER_TYPES
    ):
        cut += 1
    return [*items[:cut], *steered, *items[cut:]]
