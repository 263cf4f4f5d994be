"""The adaptation table: per source format, each thing the standard does not carry,
and its outcome at each target format (see the package docstring).

The rows are data: a finder, a stripper and one ``Action`` per target. The
general rules behind the cells:

- a **hint** that shapes cost or caching, not the answer (``cache_control``,
  ``prompt_cache_key`` toward a format without it, ``store``, ``service_tier``,
  ``include`` of encrypted reasoning) is dropped;
- a **sampling knob** without an equivalent (``top_k``, ``seed``, penalties) is
  dropped: it shapes the choice of tokens, not what the model does or which
  tools it may call;
- a **capability offer** the target runs itself (hosted web search) is mapped to
  the target's own search, else dropped: the model answers without searching and
  the client executes nothing it did not know;
- **state held by the vendor** (``previous_response_id``, ``container``,
  ``cachedContent``) and **tools only that vendor runs** (code execution, file
  search, MCP servers) are refused: without them the answer would rest on
  something else;
- **output shape** (JSON schemas, tool choice, several candidates) is mapped, or
  refused where there is no equivalent.
"""

from __future__ import annotations

from typing import Final

from .cells import (
    BILLING,
    CACHE,
    CARRY,
    RESPONSES_CLIENT_TOOLS,
    SAMPLING,
    anthropic_cache_control,
    anthropic_choice,
    anthropic_format,
    chat_choice,
    chat_format,
    choice_cells,
    deferred_tools,
    drop,
    format_cells,
    from_effort,
    from_gemini_thinking,
    from_responses_reasoning,
    from_thinking,
    gemini_choice,
    gemini_format,
    inner,
    late_system_rule,
    refuse,
    responses_format,
    row,
    search_cells,
    serial_cells,
    set_field,
    strip,
    strip_tools,
    thinking_cells,
    tools_where,
    top,
    type_prefix,
    unless,
    user_cells,
)
from .shapes import Action, Rule

__all__ = ["CARRIED", "RULES"]

# --- the rows ------------------------------------------------------------------------

_ANTHROPIC: Final = (
    Rule(
        "anthropic",
        "thinking",
        top("thinking", lambda v: isinstance(v, dict) and v.get("type") == "disabled"),
        thinking_cells("anthropic", from_thinking),
        strip,
    ),
    Rule(
        "anthropic",
        "output_config.effort",
        inner("output_config", "effort"),
        thinking_cells("anthropic", from_effort),
        strip,
    ),
    Rule(
        "anthropic",
        "output_config.format",
        inner("output_config", "format"),
        format_cells("anthropic", anthropic_format),
        strip,
    ),
    Rule(
        "anthropic",
        "context_management",
        top("context_management"),
        row(
            "anthropic",
            drop("context edits of Anthropic thinking, which the target never receives"),
        ),
        strip,
    ),
    Rule(
        "anthropic",
        "metadata.user_id",
        inner("metadata", "user_id"),
        row(
            "anthropic",
            drop("no end-user field there"),
            **{k: v for k, v in user_cells("anthropic").items() if k != "standard"},
            standard=CARRY,
        ),
    ),
    Rule(
        "anthropic",
        "tool_choice",
        top("tool_choice", lambda v: v == {"type": "auto"}),
        choice_cells("anthropic", anthropic_choice),
        strip,
    ),
    Rule(
        "anthropic",
        "top_k",
        top("top_k"),
        row(
            "anthropic",
            SAMPLING,
            gemini=Action("map", "generationConfig.topK", set_field("generationConfig.topK")),
        ),
        strip,
    ),
    Rule("anthropic", "service_tier", top("service_tier"), row("anthropic", BILLING), strip),
    Rule("anthropic", "inference_geo", top("inference_geo"), row("anthropic", BILLING), strip),
    Rule(
        "anthropic",
        "container",
        top("container"),
        row("anthropic", refuse("a code-execution container only Anthropic holds")),
    ),
    Rule(
        "anthropic",
        "mcp_servers",
        top("mcp_servers"),
        row("anthropic", refuse("MCP servers only Anthropic's API connects to")),
    ),
    Rule(
        "anthropic",
        "tools[*] (web_search server tool)",
        tools_where(type_prefix(["web_search_"])),
        search_cells("anthropic"),
        strip_tools,
    ),
    Rule(
        "anthropic",
        "tools[*] (tool search server tool)",
        tools_where(type_prefix(["tool_search_tool_"])),
        row("anthropic", drop("a search over deferred tools; the target gets every tool declared")),
        strip_tools,
    ),
    Rule(
        "anthropic",
        "tools[*].defer_loading",
        deferred_tools,
        row("anthropic", drop("the tool is declared to the target like any other")),
    ),
    Rule(
        "anthropic",
        "tools[*] (other server tools)",
        tools_where(
            lambda t: (
                t.get("type", "custom") != "custom"
                and not str(t.get("type")).startswith(("web_search_", "tool_search_tool_"))
            )
        ),
        row("anthropic", refuse("a server tool only Anthropic runs")),
    ),
    Rule("anthropic", "cache_control", anthropic_cache_control, row("anthropic", CACHE)),
    late_system_rule("anthropic", "messages", ("system",)),
)

_CHAT: Final = (
    Rule(
        "openai",
        "reasoning_effort",
        top("reasoning_effort"),
        thinking_cells("openai", from_effort),
        strip,
    ),
    Rule(
        "openai",
        "response_format",
        top("response_format", lambda v: isinstance(v, dict) and v.get("type") == "text"),
        format_cells("openai", chat_format),
        strip,
    ),
    Rule(
        "openai",
        "tool_choice",
        top("tool_choice", unless("auto")),
        choice_cells("openai", chat_choice),
        strip,
    ),
    Rule(
        "openai",
        "parallel_tool_calls",
        top("parallel_tool_calls", unless(True)),
        serial_cells("openai"),
        strip,
    ),
    Rule("openai", "user", top("user"), user_cells("openai"), strip),
    Rule("openai", "safety_identifier", top("safety_identifier"), user_cells("openai"), strip),
    Rule(
        "openai",
        "prompt_cache_key",
        top("prompt_cache_key"),
        row(
            "openai",
            CACHE,
            openai_responses=Action("map", "prompt_cache_key", set_field("prompt_cache_key")),
        ),
        strip,
    ),
    Rule("openai", "store", top("store"), row("openai", BILLING), strip),
    Rule("openai", "service_tier", top("service_tier"), row("openai", BILLING), strip),
    Rule(
        "openai",
        "seed",
        top("seed"),
        row(
            "openai",
            SAMPLING,
            gemini=Action("map", "generationConfig.seed", set_field("generationConfig.seed")),
        ),
        strip,
    ),
    Rule(
        "openai",
        "frequency_penalty",
        top("frequency_penalty", unless(0)),
        row(
            "openai",
            SAMPLING,
            gemini=Action(
                "map",
                "generationConfig.frequencyPenalty",
                set_field("generationConfig.frequencyPenalty"),
            ),
        ),
        strip,
    ),
    Rule(
        "openai",
        "presence_penalty",
        top("presence_penalty", unless(0)),
        row(
            "openai",
            SAMPLING,
            gemini=Action(
                "map",
                "generationConfig.presencePenalty",
                set_field("generationConfig.presencePenalty"),
            ),
        ),
        strip,
    ),
    Rule(
        "openai",
        "logit_bias",
        top("logit_bias", unless({})),
        row("openai", SAMPLING),
        strip,
    ),
    Rule(
        "openai",
        "logprobs",
        top("logprobs", unless(False)),
        row("openai", drop("log probabilities are never carried in the answer")),
        strip,
    ),
    Rule(
        "openai",
        "top_logprobs",
        top("top_logprobs"),
        row("openai", drop("log probabilities are never carried in the answer")),
        strip,
    ),
    Rule(
        "openai",
        "verbosity",
        top("verbosity"),
        row(
            "openai",
            drop("an answer-length hint the target does not have"),
            openai_responses=Action("map", "text.verbosity", set_field("text.verbosity")),
        ),
        strip,
    ),
    Rule(
        "openai",
        "prediction",
        top("prediction"),
        row("openai", drop("a latency hint (predicted output)")),
        strip,
    ),
    Rule("openai", "web_search_options", top("web_search_options"), search_cells("openai"), strip),
    Rule(
        "openai",
        "n",
        top("n", unless(1)),
        row("openai", refuse("several choices in one answer")),
    ),
    Rule(
        "openai",
        "modalities",
        top("modalities", lambda v: v == ["text"]),
        row("openai", refuse("audio output only Chat Completions streams")),
    ),
    Rule(
        "openai",
        "audio",
        top("audio"),
        row("openai", refuse("audio output only Chat Completions streams")),
    ),
    late_system_rule("openai", "messages", ("system", "developer")),
)

#: A Responses body's own fields stay in it (the response object echoes them);
#: only a Responses upstream reads its ``vendor:openai-responses`` extension.
_RESPONSES: Final = (
    Rule(
        "openai-responses",
        "reasoning",
        top("reasoning"),
        thinking_cells("openai-responses", from_responses_reasoning),
    ),
    Rule(
        "openai-responses",
        "include",
        top("include", unless([])),
        row(
            "openai-responses",
            drop("encrypted reasoning and hosted-tool extras only a Responses upstream returns"),
        ),
    ),
    Rule("openai-responses", "store", top("store"), row("openai-responses", BILLING)),
    Rule(
        "openai-responses",
        "service_tier",
        top("service_tier"),
        row("openai-responses", BILLING),
    ),
    Rule(
        "openai-responses",
        "prompt_cache_key",
        top("prompt_cache_key"),
        row(
            "openai-responses",
            CACHE,
            openai=Action("map", "prompt_cache_key", set_field("prompt_cache_key")),
        ),
    ),
    Rule(
        "openai-responses",
        "text.format",
        inner("text", "format", lambda v: isinstance(v, dict) and v.get("type") == "text"),
        format_cells("openai-responses", responses_format),
    ),
    Rule(
        "openai-responses",
        "text.verbosity",
        inner("text", "verbosity"),
        row(
            "openai-responses",
            drop("an answer-length hint the target does not have"),
            openai=Action("map", "verbosity", set_field("verbosity")),
        ),
    ),
    Rule(
        "openai-responses",
        "tool_choice",
        top("tool_choice", unless("auto")),
        choice_cells("openai-responses", chat_choice),
    ),
    Rule(
        "openai-responses",
        "parallel_tool_calls",
        top("parallel_tool_calls", unless(True)),
        serial_cells("openai-responses"),
    ),
    Rule(
        "openai-responses",
        "safety_identifier",
        top("safety_identifier"),
        user_cells("openai-responses"),
    ),
    Rule("openai-responses", "user", top("user"), user_cells("openai-responses")),
    Rule(
        "openai-responses",
        "truncation",
        top("truncation", unless("disabled")),
        row(
            "openai-responses", drop("the target answers an over-long input with an error instead")
        ),
    ),
    Rule(
        "openai-responses",
        "top_logprobs",
        top("top_logprobs"),
        row("openai-responses", drop("log probabilities are never carried in the answer")),
    ),
    Rule(
        "openai-responses",
        "stream_options",
        top("stream_options"),
        row("openai-responses", drop("Responses stream options (obfuscation padding)")),
    ),
    Rule(
        "openai-responses",
        "client_metadata",
        top("client_metadata"),
        row("openai-responses", drop("client bookkeeping the model never sees")),
    ),
    Rule(
        "openai-responses",
        "previous_response_id",
        top("previous_response_id"),
        row(
            "openai-responses",
            refuse("a conversation OpenAI stores; send the whole input instead"),
        ),
    ),
    Rule(
        "openai-responses",
        "conversation",
        top("conversation"),
        row(
            "openai-responses",
            refuse("a conversation OpenAI stores; send the whole input instead"),
        ),
    ),
    Rule(
        "openai-responses",
        "background",
        top("background", unless(False)),
        row("openai-responses", refuse("a background response OpenAI runs and stores")),
    ),
    Rule(
        "openai-responses",
        "prompt",
        top("prompt"),
        row("openai-responses", refuse("a prompt template OpenAI stores")),
    ),
    Rule(
        "openai-responses",
        "max_tool_calls",
        top("max_tool_calls"),
        row("openai-responses", refuse("a bound on tool calls the target cannot enforce")),
    ),
    Rule(
        "openai-responses",
        "tools[*] (namespace)",
        tools_where(lambda t: t.get("type") == "namespace"),
        row(
            "openai-responses",
            Action(
                "map",
                "each function becomes a tool named <namespace>__<name>; "
                "calls come back under the namespace",
            ),
        ),
    ),
    Rule(
        "openai-responses",
        "tools[*] (web_search)",
        tools_where(type_prefix(["web_search"])),
        search_cells("openai-responses"),
    ),
    Rule(
        "openai-responses",
        "tools[*] (other hosted tools)",
        tools_where(
            lambda t: (
                t.get("type") not in RESPONSES_CLIENT_TOOLS
                and not str(t.get("type")).startswith("web_search")
            )
        ),
        row("openai-responses", refuse("a hosted tool only OpenAI runs")),
    ),
    late_system_rule("openai-responses", "input", ("system", "developer")),
)

_GEMINI: Final = (
    Rule(
        "gemini",
        "generationConfig.thinkingConfig",
        inner("generationConfig", "thinkingConfig"),
        thinking_cells("gemini", from_gemini_thinking),
        strip,
    ),
    Rule(
        "gemini",
        "generationConfig.responseMimeType",
        inner("generationConfig", "responseMimeType", lambda v: v != "application/json"),
        format_cells("gemini", gemini_format),
        lambda body, hits: strip(
            body,
            [
                ("generationConfig.responseMimeType", None),
                ("generationConfig.responseSchema", None),
                ("generationConfig.responseJsonSchema", None),
            ],
        ),
    ),
    Rule(
        "gemini",
        "generationConfig.topK",
        inner("generationConfig", "topK"),
        row("gemini", SAMPLING, anthropic=Action("map", "top_k", set_field("top_k"))),
        strip,
    ),
    Rule(
        "gemini",
        "generationConfig.seed",
        inner("generationConfig", "seed"),
        row("gemini", SAMPLING, openai=Action("map", "seed", set_field("seed"))),
        strip,
    ),
    Rule(
        "gemini",
        "generationConfig.presencePenalty",
        inner("generationConfig", "presencePenalty", unless(0)),
        row(
            "gemini",
            SAMPLING,
            openai=Action("map", "presence_penalty", set_field("presence_penalty")),
        ),
        strip,
    ),
    Rule(
        "gemini",
        "generationConfig.frequencyPenalty",
        inner("generationConfig", "frequencyPenalty", unless(0)),
        row(
            "gemini",
            SAMPLING,
            openai=Action("map", "frequency_penalty", set_field("frequency_penalty")),
        ),
        strip,
    ),
    Rule(
        "gemini",
        "generationConfig.candidateCount",
        inner("generationConfig", "candidateCount", unless(1)),
        row("gemini", refuse("several candidates in one answer")),
    ),
    Rule(
        "gemini",
        "generationConfig.responseModalities",
        inner("generationConfig", "responseModalities", lambda v: v in (["TEXT"], ["text"])),
        row("gemini", refuse("image or audio output only Gemini streams")),
    ),
    Rule(
        "gemini",
        "toolConfig",
        top("toolConfig", lambda v: gemini_choice(v) == "auto"),
        choice_cells("gemini", gemini_choice),
        strip,
    ),
    Rule(
        "gemini",
        "safetySettings",
        top("safetySettings"),
        row("gemini", drop("Gemini's safety thresholds; the target applies its own")),
        strip,
    ),
    Rule("gemini", "labels", top("labels"), row("gemini", BILLING), strip),
    Rule(
        "gemini",
        "cachedContent",
        top("cachedContent"),
        row("gemini", refuse("a context cache only Google holds")),
    ),
    Rule(
        "gemini",
        "tools[*] (googleSearch)",
        tools_where(lambda t: "googleSearch" in t or "googleSearchRetrieval" in t),
        search_cells("gemini"),
        strip_tools,
    ),
    Rule(
        "gemini",
        "tools[*] (other built-in tools)",
        tools_where(
            lambda t: any(
                k not in ("functionDeclarations", "googleSearch", "googleSearchRetrieval")
                for k in t
            )
        ),
        row("gemini", refuse("a built-in tool only Gemini runs")),
    ),
)

#: Per source format, its rows, in the order they are applied and documented.
RULES: Final[dict[str, tuple[Rule, ...]]] = {
    "anthropic": _ANTHROPIC,
    "openai": _CHAT,
    "openai-responses": _RESPONSES,
    "gemini": _GEMINI,
}


def _carried() -> dict[str, frozenset[str]]:
    """Per source, the fields its ingress parser maps to the standard (dotted: inside
    an object), which no rule needs to name."""
    from ..anthropic.ingress import _STANDARD_FIELDS as ANTHROPIC
    from ..gemini.ingress import _PARAMETERS as GEMINI_PARAMETERS
    from ..openai.ingress import _MAPPED_FIELDS as CHAT
    from ..openai_responses.ingress import _MAPPED_FIELDS as RESPONSES

    gemini = {"model", "contents", "systemInstruction", "tools"}
    gemini |= {f"generationConfig.{key}" for key in GEMINI_PARAMETERS}
    return {
        "anthropic": frozenset(ANTHROPIC),
        "openai": frozenset(CHAT),
        "openai-responses": frozenset(RESPONSES),
        "gemini": frozenset(gemini),
    }


#: Per source format, the top-level fields (and ``object.field`` inside one) that
#: the standard carries.
CARRIED: Final = _carried()
