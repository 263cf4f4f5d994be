"""The Responses API's response object as Open Responses requires it.

Every ``ResponseResource`` field a request sets echoes it; the others carry the API's
defaults (tests/vectors/gateway/open-responses-resource.json holds the required fields,
derived from the published schema).
"""

from __future__ import annotations

from typing import Any, Final

__all__ = ["response_fields"]


#: Open Responses ``ResponseResource`` fields a request sets, and their values when it
#: does not (the API's defaults). ``store`` is false: the gateway keeps no response
#: to retrieve later (tests/vectors/gateway/open-responses-resource.json).
_RESPONSE_DEFAULTS: Final[dict[str, Any]] = {
    "previous_response_id": None,
    "instructions": None,
    "tools": [],
    "tool_choice": "auto",
    "truncation": "disabled",
    "parallel_tool_calls": True,
    "text": {"format": {"type": "text"}, "verbosity": "medium"},
    "top_p": 1.0,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
    "top_logprobs": 0,
    "temperature": 1.0,
    "reasoning": {"effort": None, "summary": None},
    "max_output_tokens": None,
    "max_tool_calls": None,
    "store": False,
    "background": False,
    "service_tier": "default",
    "metadata": {},
    "safety_identifier": None,
    "prompt_cache_key": None,
}


def response_fields(body: dict[str, Any]) -> dict[str, Any]:
    """The response object's fields that echo the request (Open Responses
    ``ResponseResource``): the request's value where it gave one, else the default."""
    out = dict(_RESPONSE_DEFAULTS)
    for key, default in _RESPONSE_DEFAULTS.items():
        value = body.get(key)
        if value is None or key == "store":
            continue
        if isinstance(default, dict) and isinstance(value, dict):
            value = {**default, **value}
        if type(default) is float and type(value) is int:
            value = float(value)
        if default is None or type(value) is type(default):
            out[key] = value
    if isinstance(out["tools"], list):
        out["tools"] = [_echo_tool(tool) for tool in out["tools"]]
    instructions = body.get("instructions")
    if isinstance(instructions, list):  # an array of input items is allowed too
        out["instructions"] = instructions
    return out


#: A function tool's fields Open Responses requires in the echo (``FunctionTool``), with
#: the API's values when the request left them out: no description or parameters,
#: and strict mode, the Responses API's default for function tools.
_FUNCTION_TOOL_DEFAULTS: Final[dict[str, Any]] = {
    "description": None,
    "parameters": None,
    "strict": True,
}


def _echo_tool(tool: Any) -> Any:
    """A request's tool as the response object lists it (function tools made whole)."""
    if not isinstance(tool, dict) or tool.get("type") != "function":
        return tool
    echoed = {**_FUNCTION_TOOL_DEFAULTS, **tool}
    for key, default in _FUNCTION_TOOL_DEFAULTS.items():
        if echoed[key] is None:
            echoed[key] = default
    return echoed
