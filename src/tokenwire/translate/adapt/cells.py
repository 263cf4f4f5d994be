"""The parts the adaptation table's rows are made of: finders (where a thing is
in a body), strippers, mappings (``Action.apply``) and the cells shared by rows.
Pure functions of JSON values."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Final

from .. import _extensions as x
from .maps import budget_of, effort_of, schema_format, search_tool, tool_choice
from .shapes import Action, Out, Rule

__all__ = [
    "deferred_tools",
    "BILLING",
    "CACHE",
    "CARRY",
    "RESPONSES_CLIENT_TOOLS",
    "SAMPLING",
    "SYSTEM_MAP",
    "anthropic_cache_control",
    "anthropic_choice",
    "anthropic_format",
    "chat_choice",
    "chat_format",
    "choice_cells",
    "drop",
    "format_cells",
    "from_effort",
    "from_gemini_thinking",
    "from_responses_reasoning",
    "from_thinking",
    "gemini_choice",
    "gemini_format",
    "inner",
    "late_system_rule",
    "refuse",
    "responses_format",
    "row",
    "search_cells",
    "serial_cells",
    "set_field",
    "strip",
    "strip_tools",
    "thinking_cells",
    "tools_where",
    "top",
    "type_prefix",
    "unless",
    "user_cells",
]

Hits = list[tuple[str, Any]]

# --- finders and strippers ---------------------------------------------------------


def top(
    key: str, skip: Callable[[Any], bool] = lambda v: False
) -> Callable[[dict[str, Any]], Hits]:
    def find(body: dict[str, Any]) -> Hits:
        value = body.get(key)
        return [] if value is None or skip(value) else [(key, value)]

    return find


def inner(
    parent: str, key: str, skip: Callable[[Any], bool] = lambda v: False
) -> Callable[[dict[str, Any]], Hits]:
    def find(body: dict[str, Any]) -> Hits:
        node = body.get(parent)
        value = node.get(key) if isinstance(node, dict) else None
        return [] if value is None or skip(value) else [(f"{parent}.{key}", value)]

    return find


def strip(body: dict[str, Any], hits: Hits) -> None:
    """Remove each hit (a top-level field or one inside a top-level object)."""
    for path, _value in hits:
        parent, _, key = path.partition(".")
        if not key:
            body.pop(parent, None)
            continue
        node = body.get(parent)
        if isinstance(node, dict):
            node = {k: v for k, v in node.items() if k != key}
            if node:
                body[parent] = node
            else:
                body.pop(parent)


def tools_where(pred: Callable[[dict[str, Any]], bool]) -> Callable[[dict[str, Any]], Hits]:
    def find(body: dict[str, Any]) -> Hits:
        tools = body.get("tools")
        return [
            (f"tools[{i}]", tool)
            for i, tool in enumerate(tools if isinstance(tools, list) else ())
            if isinstance(tool, dict) and pred(tool)
        ]

    return find


def deferred_tools(body: dict[str, Any]) -> Hits:
    """Anthropic tools declared for tool search only (``defer_loading``)."""
    tools = body.get("tools")
    return [
        (f"tools[{i}].defer_loading", tool["defer_loading"])
        for i, tool in enumerate(tools if isinstance(tools, list) else ())
        if isinstance(tool, dict) and tool.get("defer_loading")
    ]


def strip_tools(body: dict[str, Any], hits: Hits) -> None:
    drop = {id(tool) for _path, tool in hits}
    tools = body.get("tools")
    if isinstance(tools, list):
        kept = [tool for tool in tools if id(tool) not in drop]
        if kept:
            body["tools"] = kept
        else:
            body.pop("tools")


def _late_system(key: str, roles: frozenset[str]) -> Callable[[dict[str, Any]], Hits]:
    """System/developer messages after the first message of another role."""

    def find(body: dict[str, Any]) -> Hits:
        items = body.get(key)
        hits: Hits = []
        talked = False
        for i, item in enumerate(items if isinstance(items, list) else ()):
            role = item.get("role") if isinstance(item, dict) else None
            if role in roles:
                if talked:
                    hits.append((f"{key}[{i}].role", role))
            elif item is not None:
                talked = True
        return hits

    return find


def anthropic_cache_control(body: dict[str, Any]) -> Hits:
    hits: Hits = []
    if body.get("cache_control") is not None:
        hits.append(("cache_control", body["cache_control"]))
    for key in ("system", "tools"):
        items = body.get(key)
        for i, item in enumerate(items if isinstance(items, list) else ()):
            if isinstance(item, dict) and item.get("cache_control") is not None:
                hits.append((f"{key}[{i}].cache_control", item["cache_control"]))
    messages = body.get("messages")
    for i, message in enumerate(messages if isinstance(messages, list) else ()):
        content = message.get("content") if isinstance(message, dict) else None
        for k, block in enumerate(content if isinstance(content, list) else ()):
            if isinstance(block, dict) and block.get("cache_control") is not None:
                hits.append((f"messages[{i}].content[{k}].cache_control", block["cache_control"]))
    return hits


# --- mappings (``Action.apply``) -----------------------------------------------------


def _reasoning_on(out: Out) -> None:
    out.extensions[x.REASONING] = True


def _reason(budget: int | None, effort: str | None) -> Callable[[Out], str | None]:
    """Thinking at the target from a budget or an effort (one of them given)."""

    def apply(out: Out) -> str | None:
        word = effort if effort is not None else effort_of(budget)
        tokens = budget if budget is not None else budget_of(word)
        _reasoning_on(out)
        if out.target == "openai":
            out.set("reasoning_effort", word)
        elif out.target == "openai-responses":
            out.set("reasoning", {"effort": word, "summary": "auto"})
            # Stateless: the reasoning comes back sealed, to be sent back next turn.
            out.set("include", ["reasoning.encrypted_content"])
        elif out.target == "gemini":
            out.set(
                "generationConfig.thinkingConfig",
                {"thinkingBudget": -1 if tokens is None else tokens, "includeThoughts": True},
            )
        elif out.target == "anthropic":
            if tokens is None:
                return "drop"
            out.set("thinking", {"type": "enabled", "budget_tokens": tokens})
        return None

    return apply


def from_thinking(value: Any, body: dict[str, Any], out: Out) -> str | None:
    budget = value.get("budget_tokens") if isinstance(value, dict) else None
    return _reason(budget if isinstance(budget, int) else None, None)(out)


def from_effort(value: Any, body: dict[str, Any], out: Out) -> str | None:
    if not isinstance(value, str) or value == "none":
        return "drop"
    return _reason(None, "high" if value in ("xhigh", "max") else value)(out)


def from_responses_reasoning(value: Any, body: dict[str, Any], out: Out) -> str | None:
    effort = value.get("effort") if isinstance(value, dict) else None
    if effort == "none":
        return "drop"
    return _reason(None, effort if isinstance(effort, str) else "medium")(out)


def from_gemini_thinking(value: Any, body: dict[str, Any], out: Out) -> str | None:
    budget = value.get("thinkingBudget") if isinstance(value, dict) else None
    level = value.get("thinkingLevel") if isinstance(value, dict) else None
    if budget == 0:
        return "drop"
    if isinstance(level, str):
        return _reason(None, level.lower())(out)
    return _reason(budget if isinstance(budget, int) and budget > 0 else None, None)(out)


def _schema(target: str, schema: Any, name: Any, out: Out) -> str | None:
    pairs = schema_format(
        target,
        schema if isinstance(schema, dict) else None,
        name if isinstance(name, str) else "output",
    )
    return None if out.set_all(pairs) else "drop"


def anthropic_format(value: Any, body: dict[str, Any], out: Out) -> str | None:
    schema = value.get("schema") if isinstance(value, dict) else None
    return _schema(out.target, schema, None, out)


def chat_format(value: Any, body: dict[str, Any], out: Out) -> str | None:
    spec = value.get("json_schema") if isinstance(value, dict) else None
    spec = spec if isinstance(spec, dict) else {}
    return _schema(out.target, spec.get("schema"), spec.get("name"), out)


def responses_format(value: Any, body: dict[str, Any], out: Out) -> str | None:
    value = value if isinstance(value, dict) else {}
    return _schema(out.target, value.get("schema"), value.get("name"), out)


def gemini_format(value: Any, body: dict[str, Any], out: Out) -> str | None:
    from ..gemini.schema import json_schema

    config = body.get("generationConfig") or {}
    schema = config.get("responseJsonSchema")
    if schema is None and config.get("responseSchema") is not None:
        schema = json_schema(config["responseSchema"])
    return _schema(out.target, schema, None, out)


def set_field(field: str, convert: Callable[[Any], Any] = lambda v: v) -> Callable[..., None]:
    def apply(value: Any, body: dict[str, Any], out: Out) -> None:
        out.set(field, convert(value))

    return apply


def _choice_apply(standard: Callable[[Any], Any]) -> Callable[..., str | None]:
    def apply(value: Any, body: dict[str, Any], out: Out) -> str | None:
        choice = standard(value)
        if choice is None:
            return "drop"
        return None if out.set_all(tool_choice(out.target, choice, None)) else "drop"

    return apply


def anthropic_choice(value: Any) -> Any:
    kind = value.get("type") if isinstance(value, dict) else None
    if kind == "tool":
        return {"name": value.get("name")}
    return {"auto": "auto", "any": "required", "none": "none"}.get(str(kind))


def chat_choice(value: Any) -> Any:
    if isinstance(value, str):
        return value if value in ("auto", "none", "required") else None
    fn = value.get("function") if isinstance(value, dict) else None
    name = (
        fn.get("name")
        if isinstance(fn, dict)
        else value.get("name")
        if isinstance(value, dict)
        else None
    )
    return {"name": name} if isinstance(name, str) else None


def gemini_choice(value: Any) -> Any:
    config = value.get("functionCallingConfig") if isinstance(value, dict) else None
    if not isinstance(config, dict):
        return None
    mode = str(config.get("mode", "AUTO")).upper()
    names = config.get("allowedFunctionNames")
    if mode in ("ANY", "VALIDATED") and isinstance(names, list) and len(names) == 1:
        return {"name": names[0]}
    return {"AUTO": "auto", "ANY": "required", "NONE": "none"}.get(mode)


def _serial(value: Any, body: dict[str, Any], out: Out) -> str | None:
    """``parallel_tool_calls: false``."""
    if out.target == "anthropic":
        out.set("tool_choice", {"type": "auto", "disable_parallel_tool_use": True})
        return None
    if out.target in ("openai", "openai-responses"):
        out.set("parallel_tool_calls", False)
        return None
    return "drop"


def _search(value: Any, body: dict[str, Any], out: Out) -> str | None:
    tool = search_tool(out.target)
    if tool is None:
        return "drop"
    if out.target == "gemini" and _has_functions(body):
        # Gemini 2.x refuses search beside function declarations.
        return "drop"
    out.hosted.append(tool)
    return None


def _has_functions(body: dict[str, Any]) -> bool:
    tools = body.get("tools")
    for tool in tools if isinstance(tools, list) else ():
        if not isinstance(tool, dict):
            continue
        if tool.get("type", "function") in ("function", "custom", "namespace"):
            if "googleSearch" not in tool and "google_search" not in tool:
                return True
        if tool.get("functionDeclarations"):
            return True
    return False


def _user_id(value: Any, body: dict[str, Any], out: Out) -> str | None:
    user = value if isinstance(value, str) else None
    if user is None:
        return "drop"
    field = {
        "anthropic": "metadata.user_id",
        "openai": "user",
        "openai-responses": "safety_identifier",
    }.get(out.target)
    if field is None:
        return "drop"
    out.set(field, user)
    return None


# --- cells ---------------------------------------------------------------------------

CARRY: Final = Action("carry", "the standard carries it")


def row(source: str, default: Action, **cells: Action) -> dict[str, Action]:
    out = {}
    for target in ("anthropic", "openai", "openai-responses", "gemini", "standard"):
        if target != source:
            out[target] = cells.get(target.replace("-", "_"), cells.get(target, default))
    return out


def drop(why: str) -> Action:
    return Action("drop", why)


def refuse(why: str) -> Action:
    return Action("refuse", why)


CACHE = drop("a prompt-cache hint; the target caches by its own rules")
SAMPLING = drop("a sampling knob the target does not have")
BILLING = drop("a billing or storage setting of the client's vendor")
_SYSTEM = Action("map", "into the top-level system instruction, in order")
#: Where a mid-conversation system or developer message goes, per target.
SYSTEM_MAP: Final = {
    "anthropic": _SYSTEM,
    "gemini": Action("map", "into systemInstruction, in order"),
    "openai": CARRY,
    "openai_responses": CARRY,
    "standard": CARRY,
}


def thinking_cells(source: str, apply: Callable[..., str | None]) -> dict[str, Action]:
    return row(
        source,
        drop("the standard has no thinking budget; reasoning is still asked for"),
        anthropic=Action("map", "thinking.budget_tokens", apply),
        openai=Action("map", "reasoning_effort", apply),
        openai_responses=Action("map", "reasoning.effort; encrypted reasoning included", apply),
        gemini=Action("map", "generationConfig.thinkingConfig", apply),
        standard=Action(
            "drop", "the standard has no thinking budget; reasoning is asked for", apply
        ),
    )


def format_cells(source: str, apply: Callable[..., str | None]) -> dict[str, Action]:
    return row(
        source,
        refuse("a JSON answer format the standard cannot ask for"),
        anthropic=Action("map", "output_config.format", apply),
        openai=Action("map", "response_format", apply),
        openai_responses=Action("map", "text.format", apply),
        gemini=Action("map", "responseMimeType and responseJsonSchema", apply),
    )


def choice_cells(source: str, standard: Callable[[Any], Any]) -> dict[str, Action]:
    apply = _choice_apply(standard)
    return row(
        source,
        refuse("a tool choice the standard cannot express"),
        anthropic=Action("map", "tool_choice", apply),
        openai=Action("map", "tool_choice", apply),
        openai_responses=Action("map", "tool_choice", apply),
        gemini=Action("map", "toolConfig.functionCallingConfig", apply),
    )


def serial_cells(source: str) -> dict[str, Action]:
    return row(
        source,
        drop("the target has no switch for parallel calls; the client runs each call"),
        anthropic=Action("map", "tool_choice.disable_parallel_tool_use", _serial),
        openai=Action("map", "parallel_tool_calls", _serial),
        openai_responses=Action("map", "parallel_tool_calls", _serial),
    )


def search_cells(source: str) -> dict[str, Action]:
    return row(
        source,
        drop("no hosted search there: the model answers without searching"),
        anthropic=Action("map", "the web_search server tool", _search),
        openai_responses=Action("map", "the web_search tool", _search),
        gemini=Action("map", "googleSearch (dropped beside function tools)", _search),
    )


def user_cells(source: str) -> dict[str, Action]:
    return row(
        source,
        drop("an end-user id for abuse tracking; the target has no field for it"),
        anthropic=Action("map", "metadata.user_id", _user_id),
        openai=Action("map", "user", _user_id),
        openai_responses=Action("map", "safety_identifier", _user_id),
    )


def late_system_rule(source: str, key: str, roles: Iterable[str]) -> Rule:
    return Rule(
        source,
        f"{key}[*].role (system or developer after the conversation began)",
        _late_system(key, frozenset(roles)),
        row(
            source,
            CARRY,
            **{k: v for k, v in SYSTEM_MAP.items() if k.replace("_", "-") != source},
        ),
    )


def unless(*defaults: Any) -> Callable[[Any], bool]:
    return lambda value: value in defaults


def type_prefix(kinds: Iterable[str]) -> Callable[[dict[str, Any]], bool]:
    names = tuple(kinds)
    return lambda tool: str(tool.get("type", "")).startswith(names)


RESPONSES_CLIENT_TOOLS: Final = ("function", "custom", "apply_patch", "namespace")
