"""The equivalences the adaptation table maps with: reasoning effort and thinking
budgets, structured-output formats, tool choice and hosted search, per format.

Pure functions of JSON values; each returns ``None`` when the value has no
faithful form at the target (the table then drops or refuses it).
"""

from __future__ import annotations

from typing import Any, Final

__all__ = [
    "BUDGETS",
    "SEARCH_TOOLS",
    "budget_of",
    "effort_of",
    "schema_format",
    "search_tool",
    "tool_choice",
]

#: Reasoning effort -> a thinking budget in tokens (Anthropic ``budget_tokens``,
#: Gemini ``thinkingBudget``). The steps are OpenAI's; the budgets are the
#: thinking lengths each vendor documents as typical for them.
BUDGETS: Final[dict[str, int]] = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 24576}


def effort_of(budget: int | None) -> str:
    """A thinking budget as the nearest reasoning effort (``None``, dynamic: ``medium``)."""
    if budget is None or budget < 0:
        return "medium"
    for effort in ("low", "medium"):
        if budget <= BUDGETS[effort]:
            return effort
    return "high"


def budget_of(effort: str) -> int | None:
    """A reasoning effort as a thinking budget; ``None`` for ``none`` or an unknown word."""
    if effort in ("xhigh", "max"):
        return BUDGETS["high"]
    return BUDGETS.get(effort)


def schema_format(target: str, schema: dict[str, Any] | None, name: str = "output") -> Any:
    """A JSON answer format at ``target``: ``schema`` a JSON Schema, or ``None`` for
    "any JSON object". Returns ``(field path, value)`` pairs to set."""
    if target == "anthropic":
        return [("output_config.format", {"type": "json_schema", "schema": schema or _OBJECT})]
    if target == "openai":
        if schema is None:
            return [("response_format", {"type": "json_object"})]
        return [
            (
                "response_format",
                {"type": "json_schema", "json_schema": {"name": name, "schema": schema}},
            )
        ]
    if target == "openai-responses":
        if schema is None:
            return [("text.format", {"type": "json_object"})]
        return [("text.format", {"type": "json_schema", "name": name, "schema": schema})]
    if target == "gemini":
        out: list[tuple[str, Any]] = [("generationConfig.responseMimeType", "application/json")]
        if schema is not None:
            out.append(("generationConfig.responseJsonSchema", schema))
        return out
    return None


_OBJECT: Final = {"type": "object"}

#: The standard forms of a tool choice: ``auto``, ``none``, ``required`` (some
#: tool) or ``{"name": ...}`` (that tool).
ToolChoice = str | dict[str, str]


def tool_choice(target: str, choice: ToolChoice, parallel: bool | None) -> list[tuple[str, Any]]:
    """A standard tool choice (and whether parallel calls are allowed) at ``target``."""
    named = choice.get("name") if isinstance(choice, dict) else None
    if target == "anthropic":
        kind = {"auto": "auto", "none": "none", "required": "any"}.get(str(choice), "tool")
        value: dict[str, Any] = {"type": kind}
        if named is not None:
            value["name"] = named
        if parallel is False:
            value["disable_parallel_tool_use"] = True
        return [("tool_choice", value)]
    if target in ("openai", "openai-responses"):
        out: list[tuple[str, Any]] = []
        if named is not None:
            fn = {"name": named}
            out.append(
                (
                    "tool_choice",
                    {"type": "function", "function": fn}
                    if target == "openai"
                    else {"type": "function", **fn},
                )
            )
        else:
            out.append(("tool_choice", choice))
        if parallel is not None:
            out.append(("parallel_tool_calls", parallel))
        return out
    if target == "gemini":
        mode = {"auto": "AUTO", "none": "NONE", "required": "ANY"}.get(str(choice), "ANY")
        config: dict[str, Any] = {"mode": mode}
        if named is not None:
            config["allowedFunctionNames"] = [named]
        return [("toolConfig.functionCallingConfig", config)]
    return []


#: Hosted web search, per target (Chat Completions lists no hosted tools).
SEARCH_TOOLS: Final[dict[str, Any]] = {
    "anthropic": {"type": "web_search_20250305", "name": "web_search"},
    "openai-responses": {"type": "web_search"},
    "gemini": {"googleSearch": {}},
}


def search_tool(target: str) -> Any:
    """The target's hosted web search tool, or ``None``."""
    return SEARCH_TOOLS.get(target)
