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
    _BILLING,
    _CACHE,
    _RESPONSES_CLIENT_TOOLS,
    _SAMPLING,
    CARRY,
    _anthropic_cache_control,
    _anthropic_choice,
    _anthropic_format,
    _cells,
    _chat_choice,
    _chat_format,
    _choice_cells,
    _drop,
    _format_cells,
    _from_effort,
    _from_gemini_thinking,
    _from_responses_reasoning,
    _from_thinking,
    _gemini_choice,
    _gemini_format,
    _hosted,
    _is_default,
    _late_system_rule,
    _refuse,
    _responses_format,
    _search_cells,
    _serial_cells,
    _set,
    _strip,
    _strip_all,
    _strip_tools,
    _sub,
    _thinking_cells,
    _tools,
    _top,
    _user_cells,
)
from .shapes import Action, Rule

__all__ = ["CARRIED", "RULES"]

# --- the rows ------------------------------------------------------------------------

_ANTHROPIC: Final = (
    Rule(
        "anthropic",
        "thinking",
        _top("thinking", lambda v: isinstance(v, dict) and v.get("type") == "disabled"),
        _thinking_cells("anthropic", _from_thinking),
        _strip,
    ),
    Rule(
        "anthropic",
        "output_config.effort",
        _sub("output_config", "effort"),
        _thinking_cells("anthropic", _from_effort),
        _strip,
    ),
    Rule(
        "anthropic",
        "output_config.format",
        _sub("output_config", "format"),
        _format_cells("anthropic", _anthropic_format),
        _strip,
    ),
    Rule(
        "anthropic",
        "context_management",
        _top("context_management"),
        _cells(
            "anthropic",
            _drop("context edits of Anthropic thinking, which the target never receives"),
        ),
        _strip,
    ),
    Rule(
        "anthropic",
        "metadata.user_id",
        _sub("metadata", "user_id"),
        _cells(
            "anthropic",
            _drop("no end-user field there"),
            **{k: v for k, v in _user_cells("anthropic").items() if k != "standard"},
            standard=CARRY,
        ),
    ),
    Rule(
        "anthropic",
        "tool_choice",
        _top("tool_choice", lambda v: v == {"type": "auto"}),
        _choice_cells("anthropic", _anthropic_choice),
        _strip,
    ),
    Rule(
        "anthropic",
        "top_k",
        _top("top_k"),
        _cells(
            "anthropic",
            _SAMPLING,
            gemini=Action("map", "generationConfig.topK", _set("generationConfig.topK")),
        ),
        _strip,
    ),
    Rule("anthropic", "service_tier", _top("service_tier"), _cells("anthropic", _BILLING), _strip),
    Rule(
        "anthropic", "inference_geo", _top("inference_geo"), _cells("anthropic", _BILLING), _strip
    ),
    Rule(
        "anthropic",
        "container",
        _top("container"),
        _cells("anthropic", _refuse("a code-execution container only Anthropic holds")),
    ),
    Rule(
        "anthropic",
        "mcp_servers",
        _top("mcp_servers"),
        _cells("anthropic", _refuse("MCP servers only Anthropic's API connects to")),
    ),
    Rule(
        "anthropic",
        "tools[*] (web_search server tool)",
        _tools(_hosted(["web_search_"])),
        _search_cells("anthropic"),
        _strip_tools,
    ),
    Rule(
        "anthropic",
        "tools[*] (other server tools)",
        _tools(
            lambda t: (
                t.get("type", "custom") != "custom"
                and not str(t.get("type")).startswith("web_search_")
            )
        ),
        _cells("anthropic", _refuse("a server tool only Anthropic runs")),
    ),
    Rule("anthropic", "cache_control", _anthropic_cache_control, _cells("anthropic", _CACHE)),
    _late_system_rule("anthropic", "messages", ("system",)),
)

_CHAT: Final = (
    Rule(
        "openai",
        "reasoning_effort",
        _top("reasoning_effort"),
        _thinking_cells("openai", _from_effort),
        _strip,
    ),
    Rule(
        "openai",
        "response_format",
        _top("response_format", lambda v: isinstance(v, dict) and v.get("type") == "text"),
        _format_cells("openai", _chat_format),
        _strip,
    ),
    Rule(
        "openai",
        "tool_choice",
        _top("tool_choice", _is_default("auto")),
        _choice_cells("openai", _chat_choice),
        _strip,
    ),
    Rule(
        "openai",
        "parallel_tool_calls",
        _top("parallel_tool_calls", _is_default(True)),
        _serial_cells("openai"),
        _strip,
    ),
    Rule("openai", "user", _top("user"), _user_cells("openai"), _strip),
    Rule("openai", "safety_identifier", _top("safety_identifier"), _user_cells("openai"), _strip),
    Rule(
        "openai",
        "prompt_cache_key",
        _top("prompt_cache_key"),
        _cells(
            "openai",
            _CACHE,
            openai_responses=Action("map", "prompt_cache_key", _set("prompt_cache_key")),
        ),
        _strip,
    ),
    Rule("openai", "store", _top("store"), _cells("openai", _BILLING), _strip),
    Rule("openai", "service_tier", _top("service_tier"), _cells("openai", _BILLING), _strip),
    Rule(
        "openai",
        "seed",
        _top("seed"),
        _cells(
            "openai",
            _SAMPLING,
            gemini=Action("map", "generationConfig.seed", _set("generationConfig.seed")),
        ),
        _strip,
    ),
    Rule(
        "openai",
        "frequency_penalty",
        _top("frequency_penalty", _is_default(0)),
        _cells(
            "openai",
            _SAMPLING,
            gemini=Action(
                "map",
                "generationConfig.frequencyPenalty",
                _set("generationConfig.frequencyPenalty"),
            ),
        ),
        _strip,
    ),
    Rule(
        "openai",
        "presence_penalty",
        _top("presence_penalty", _is_default(0)),
        _cells(
            "openai",
            _SAMPLING,
            gemini=Action(
                "map", "generationConfig.presencePenalty", _set("generationConfig.presencePenalty")
            ),
        ),
        _strip,
    ),
    Rule(
        "openai",
        "logit_bias",
        _top("logit_bias", _is_default({})),
        _cells("openai", _SAMPLING),
        _strip,
    ),
    Rule(
        "openai",
        "logprobs",
        _top("logprobs", _is_default(False)),
        _cells("openai", _drop("log probabilities are never carried in the answer")),
        _strip_all("logprobs", "top_logprobs"),
    ),
    Rule(
        "openai",
        "top_logprobs",
        _top("top_logprobs"),
        _cells("openai", _drop("log probabilities are never carried in the answer")),
        _strip,
    ),
    Rule(
        "openai",
        "verbosity",
        _top("verbosity"),
        _cells(
            "openai",
            _drop("an answer-length hint the target does not have"),
            openai_responses=Action("map", "text.verbosity", _set("text.verbosity")),
        ),
        _strip,
    ),
    Rule(
        "openai",
        "prediction",
        _top("prediction"),
        _cells("openai", _drop("a latency hint (predicted output)")),
        _strip,
    ),
    Rule(
        "openai", "web_search_options", _top("web_search_options"), _search_cells("openai"), _strip
    ),
    Rule(
        "openai",
        "n",
        _top("n", _is_default(1)),
        _cells("openai", _refuse("several choices in one answer")),
    ),
    Rule(
        "openai",
        "modalities",
        _top("modalities", lambda v: v == ["text"]),
        _cells("openai", _refuse("audio output only Chat Completions streams")),
    ),
    Rule(
        "openai",
        "audio",
        _top("audio"),
        _cells("openai", _refuse("audio output only Chat Completions streams")),
    ),
    _late_system_rule("openai", "messages", ("system", "developer")),
)

#: A Responses body's own fields stay in it (the response object echoes them);
#: only a Responses upstream reads its ``vendor:openai-responses`` extension.
_RESPONSES: Final = (
    Rule(
        "openai-responses",
        "reasoning",
        _top("reasoning"),
        _thinking_cells("openai-responses", _from_responses_reasoning),
    ),
    Rule(
        "openai-responses",
        "include",
        _top("include", _is_default([])),
        _cells(
            "openai-responses",
            _drop("encrypted reasoning and hosted-tool extras only a Responses upstream returns"),
        ),
    ),
    Rule("openai-responses", "store", _top("store"), _cells("openai-responses", _BILLING)),
    Rule(
        "openai-responses",
        "service_tier",
        _top("service_tier"),
        _cells("openai-responses", _BILLING),
    ),
    Rule(
        "openai-responses",
        "prompt_cache_key",
        _top("prompt_cache_key"),
        _cells(
            "openai-responses",
            _CACHE,
            openai=Action("map", "prompt_cache_key", _set("prompt_cache_key")),
        ),
    ),
    Rule(
        "openai-responses",
        "text.format",
        _sub("text", "format", lambda v: isinstance(v, dict) and v.get("type") == "text"),
        _format_cells("openai-responses", _responses_format),
    ),
    Rule(
        "openai-responses",
        "text.verbosity",
        _sub("text", "verbosity"),
        _cells(
            "openai-responses",
            _drop("an answer-length hint the target does not have"),
            openai=Action("map", "verbosity", _set("verbosity")),
        ),
    ),
    Rule(
        "openai-responses",
        "tool_choice",
        _top("tool_choice", _is_default("auto")),
        _choice_cells("openai-responses", _chat_choice),
    ),
    Rule(
        "openai-responses",
        "parallel_tool_calls",
        _top("parallel_tool_calls", _is_default(True)),
        _serial_cells("openai-responses"),
    ),
    Rule(
        "openai-responses",
        "safety_identifier",
        _top("safety_identifier"),
        _user_cells("openai-responses"),
    ),
    Rule("openai-responses", "user", _top("user"), _user_cells("openai-responses")),
    Rule(
        "openai-responses",
        "truncation",
        _top("truncation", _is_default("disabled")),
        _cells(
            "openai-responses", _drop("the target answers an over-long input with an error instead")
        ),
    ),
    Rule(
        "openai-responses",
        "top_logprobs",
        _top("top_logprobs"),
        _cells("openai-responses", _drop("log probabilities are never carried in the answer")),
    ),
    Rule(
        "openai-responses",
        "stream_options",
        _top("stream_options"),
        _cells("openai-responses", _drop("Responses stream options (obfuscation padding)")),
    ),
    Rule(
        "openai-responses",
        "client_metadata",
        _top("client_metadata"),
        _cells("openai-responses", _drop("client bookkeeping the model never sees")),
    ),
    Rule(
        "openai-responses",
        "previous_response_id",
        _top("previous_response_id"),
        _cells(
            "openai-responses",
            _refuse("a conversation OpenAI stores; send the whole input instead"),
        ),
    ),
    Rule(
        "openai-responses",
        "conversation",
        _top("conversation"),
        _cells(
            "openai-responses",
            _refuse("a conversation OpenAI stores; send the whole input instead"),
        ),
    ),
    Rule(
        "openai-responses",
        "background",
        _top("background", _is_default(False)),
        _cells("openai-responses", _refuse("a background response OpenAI runs and stores")),
    ),
    Rule(
        "openai-responses",
        "prompt",
        _top("prompt"),
        _cells("openai-responses", _refuse("a prompt template OpenAI stores")),
    ),
    Rule(
        "openai-responses",
        "max_tool_calls",
        _top("max_tool_calls"),
        _cells("openai-responses", _refuse("a bound on tool calls the target cannot enforce")),
    ),
    Rule(
        "openai-responses",
        "tools[*] (namespace)",
        _tools(lambda t: t.get("type") == "namespace"),
        _cells(
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
        _tools(_hosted(["web_search"])),
        _search_cells("openai-responses"),
    ),
    Rule(
        "openai-responses",
        "tools[*] (other hosted tools)",
        _tools(
            lambda t: (
                t.get("type") not in _RESPONSES_CLIENT_TOOLS
                and not str(t.get("type")).startswith("web_search")
            )
        ),
        _cells("openai-responses", _refuse("a hosted tool only OpenAI runs")),
    ),
    _late_system_rule("openai-responses", "input", ("system", "developer")),
)

_GEMINI: Final = (
    Rule(
        "gemini",
        "generationConfig.thinkingConfig",
        _sub("generationConfig", "thinkingConfig"),
        _thinking_cells("gemini", _from_gemini_thinking),
        _strip,
    ),
    Rule(
        "gemini",
        "generationConfig.responseMimeType",
        _sub("generationConfig", "responseMimeType", lambda v: v != "application/json"),
        _format_cells("gemini", _gemini_format),
        lambda body, hits: _strip(
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
        _sub("generationConfig", "topK"),
        _cells("gemini", _SAMPLING, anthropic=Action("map", "top_k", _set("top_k"))),
        _strip,
    ),
    Rule(
        "gemini",
        "generationConfig.seed",
        _sub("generationConfig", "seed"),
        _cells("gemini", _SAMPLING, openai=Action("map", "seed", _set("seed"))),
        _strip,
    ),
    Rule(
        "gemini",
        "generationConfig.presencePenalty",
        _sub("generationConfig", "presencePenalty", _is_default(0)),
        _cells(
            "gemini", _SAMPLING, openai=Action("map", "presence_penalty", _set("presence_penalty"))
        ),
        _strip,
    ),
    Rule(
        "gemini",
        "generationConfig.frequencyPenalty",
        _sub("generationConfig", "frequencyPenalty", _is_default(0)),
        _cells(
            "gemini",
            _SAMPLING,
            openai=Action("map", "frequency_penalty", _set("frequency_penalty")),
        ),
        _strip,
    ),
    Rule(
        "gemini",
        "generationConfig.candidateCount",
        _sub("generationConfig", "candidateCount", _is_default(1)),
        _cells("gemini", _refuse("several candidates in one answer")),
    ),
    Rule(
        "gemini",
        "generationConfig.responseModalities",
        _sub("generationConfig", "responseModalities", lambda v: v in (["TEXT"], ["text"])),
        _cells("gemini", _refuse("image or audio output only Gemini streams")),
    ),
    Rule(
        "gemini", "toolConfig", _top("toolConfig"), _choice_cells("gemini", _gemini_choice), _strip
    ),
    Rule(
        "gemini",
        "safetySettings",
        _top("safetySettings"),
        _cells("gemini", _drop("Gemini's safety thresholds; the target applies its own")),
        _strip,
    ),
    Rule("gemini", "labels", _top("labels"), _cells("gemini", _BILLING), _strip),
    Rule(
        "gemini",
        "cachedContent",
        _top("cachedContent"),
        _cells("gemini", _refuse("a context cache only Google holds")),
    ),
    Rule(
        "gemini",
        "tools[*] (googleSearch)",
        _tools(lambda t: "googleSearch" in t or "googleSearchRetrieval" in t),
        _search_cells("gemini"),
        _strip_tools,
    ),
    Rule(
        "gemini",
        "tools[*] (other built-in tools)",
        _tools(
            lambda t: any(
                k not in ("functionDeclarations", "googleSearch", "googleSearchRetrieval")
                for k in t
            )
        ),
        _cells("gemini", _refuse("a built-in tool only Gemini runs")),
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
