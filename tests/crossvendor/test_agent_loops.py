"""Two tool rounds and a final answer, through the gateway, with each client format
on an upstream of another format (the strict fakes check every turn as their vendor
would: thinking signatures, results paired with their calls, system roles).

Bodies carry what the coding agents send: Claude Code's ``context_management``,
``output_config``, ``cache_control``, ``metadata.user_id``, mid-conversation system
messages and thinking; Codex's ``namespace`` and ``web_search`` tools, ``store``,
``include`` and ``reasoning``. Each answer names what was adapted in the
``tokenwire-adapted`` header, and each turn's request log line too.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
import httpx
import openai
import pytest
from tests.crossvendor.conftest import FINAL, READ_RESULT, RUN_RESULT, Served

from tokenwire.translate.adapt.signatures import PREFIX

TOOLS: Any = [
    {"name": "read", "description": "Read a file", "input_schema": {"type": "object"},
     "cache_control": {"type": "ephemeral"}},
    {"name": "run", "description": "Run a command", "input_schema": {"type": "object"}},
]  # fmt: skip
RESULTS = {"read": READ_RESULT, "run": RUN_RESULT}
EPHEMERAL: Any = {"type": "ephemeral"}
OBJECT: Any = {"type": "object"}


def _claude_code_turn(
    client: anthropic.Anthropic, model: str, messages: list[Any]
) -> tuple[Any, httpx.Headers]:
    with client.messages.stream(
        model=model,
        max_tokens=16000,
        system=[
            {"type": "text", "text": "You are an agent.", "cache_control": {"type": "ephemeral"}}
        ],
        messages=messages,
        tools=TOOLS,
        thinking={"type": "enabled", "budget_tokens": 4000},
        metadata={"user_id": "user_42"},
        extra_body={
            "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
            "output_config": {"effort": "medium"},
        },
    ) as stream:
        return stream.get_final_message(), stream.response.headers


def _claude_code_loop(served: Served, model: str) -> list[tuple[Any, httpx.Headers]]:
    messages: list[Any] = [
        {"role": "user", "content": "Read a.txt, then list the files."},
        {"role": "system", "content": "The user is in plan mode."},  # mid-conversation
    ]
    turns = []
    with anthropic.Anthropic(base_url=served.url, api_key="unused", max_retries=0) as client:
        for _ in range(3):
            message, headers = _claude_code_turn(client, model, messages)
            turns.append((message, headers))
            if message.stop_reason != "tool_use":
                break
            messages.append(
                {"role": "assistant", "content": [b.model_dump() for b in message.content]}
            )
            results = [
                {"type": "tool_result", "tool_use_id": b.id, "content": RESULTS[b.name]}
                for b in message.content
                if b.type == "tool_use"
            ]
            messages.append({"role": "user", "content": results})
    return turns


@pytest.mark.parametrize("model", ["chat", "gem", "resp"])
def test_claude_code_loop_on_another_vendor(served: Served, model: str) -> None:
    before = len(served.fakes[model].requests)
    turns = _claude_code_loop(served, model)
    assert [m.stop_reason for m, _ in turns] == ["tool_use", "tool_use", "end_turn"]
    assert "".join(b.text for b in turns[-1][0].content if b.type == "text") == FINAL
    calls = [b for m, _ in turns for b in m.content if b.type == "tool_use"]
    assert [c.name for c in calls] == ["read", "run"]
    assert len({c.id for c in calls}) == 2  # unique across the conversation
    for message, headers in turns:
        adapted = headers["tokenwire-adapted"]
        assert "context_management=drop" in adapted and "thinking=map" in adapted
        assert "tools[0].cache_control=drop" in adapted
        thinking = [b for b in message.content if b.type == "thinking"]
        assert thinking and all(b.signature.startswith(PREFIX) for b in thinking)
    bodies = served.bodies(model)[before:]
    assert len(bodies) == 3
    assert all("context_management" not in b and "metadata" not in b for b in bodies)
    if model == "chat":
        assert {b["reasoning_effort"] for b in bodies} == {"medium"}
        assert bodies[0]["user"] == "user_42"
        # Earlier turns' reasoning goes back as reasoning_content, as such servers read it.
        assistant = [m for m in bodies[2]["messages"] if m["role"] == "assistant"]
        assert [m["reasoning_content"] for m in assistant] == [
            "Round 1: deciding what to do next.",
            "Round 2: deciding what to do next.",
        ]
        assert bodies[0]["messages"][0] == {"role": "system", "content": "You are an agent."}
        assert bodies[0]["messages"][2] == {
            "role": "system",
            "content": "The user is in plan mode.",
        }
    if model == "gem":
        assert "generationConfig" in bodies[0] and "thinkingConfig" in bodies[0]["generationConfig"]
        # Gemini's instruction is one: the mid-conversation system message joined it.
        system = bodies[0]["systemInstruction"]["parts"]
        assert [p["text"] for p in system] == ["You are an agent.", "The user is in plan mode."]
    if model == "resp":
        assert bodies[0]["reasoning"]["effort"] == "medium"
        assert bodies[0]["safety_identifier"] == "user_42"


def _codex_turn(client: openai.OpenAI, model: str, items: list[Any]) -> tuple[Any, httpx.Headers]:
    tools: Any = [
        {"type": "function", "name": "run", "parameters": {"type": "object"}},
        {"type": "namespace", "name": "mcp__files__", "description": "file tools",
         "tools": [{"type": "function", "name": "read", "parameters": {"type": "object"}}]},
        {"type": "web_search"},
    ]  # fmt: skip
    with client.responses.with_streaming_response.create(
        model=model,
        instructions="You are Codex.",
        input=items,
        tools=tools,
        store=False,
        stream=True,
        include=["reasoning.encrypted_content"],
        reasoning={"effort": "high", "summary": "auto"},
        prompt_cache_key="thread-1",
        parallel_tool_calls=False,
    ) as raw:
        final = None
        for event in raw.parse():
            if event.type == "response.completed":
                final = event.response
        return final, raw.headers


@pytest.mark.parametrize("model", ["chat", "claude", "gem"])
def test_codex_loop_on_another_vendor(served: Served, model: str) -> None:
    before = len(served.fakes[model].requests)
    items: list[Any] = [{"role": "user", "content": "Read a.txt, then list the files."}]
    outputs = []
    with openai.OpenAI(base_url=f"{served.url}/v1", api_key="unused", max_retries=0) as client:
        for _ in range(3):
            response, headers = _codex_turn(client, model, items)
            outputs.append(response)
            adapted = headers["tokenwire-adapted"]
            assert "store=drop" in adapted and "tools[1]=map" in adapted
            calls = [o for o in response.output if o.type == "function_call"]
            if not calls:
                break
            items += [o.model_dump(exclude_none=True) for o in response.output]
            for call in calls:
                result = READ_RESULT if call.name == "read" else RUN_RESULT
                items.append(
                    {"type": "function_call_output", "call_id": call.call_id, "output": result}
                )
    assert outputs[-1].output_text == FINAL
    calls = [o for r in outputs for o in r.output if o.type == "function_call"]
    # The namespaced tool comes back under its own name and namespace.
    assert [(c.name, getattr(c, "namespace", None)) for c in calls] == [
        ("read", "mcp__files__"),
        ("run", None),
    ]
    assert len({c.call_id for c in calls}) == 2
    reasoning = [o for r in outputs for o in r.output if o.type == "reasoning"]
    assert reasoning and all((o.encrypted_content or "").startswith(PREFIX) for o in reasoning)
    bodies = served.bodies(model)[before:]
    assert len(bodies) == 3
    if model == "claude":
        # Thinking on every turn: the earlier turns' signed thinking came back whole.
        assert all(b["thinking"]["type"] == "enabled" for b in bodies)
        assert bodies[2]["messages"][1]["content"][0]["type"] == "thinking"
    tools = str(bodies[0]["tools"])
    assert "mcp__files__read" in tools
    # Hosted search where the target has one; dropped (and said so) where not.
    searched = {"chat": False, "claude": True, "gem": False}[model]
    assert ("web_search_20250305" in tools or "googleSearch" in tools) is searched
    assert ("tools[2]=map" if searched else "tools[2]=drop") in headers["tokenwire-adapted"]


def test_parallel_results_reach_gemini_in_the_order_of_their_calls(served: Served) -> None:
    before = len(served.fakes["gem"].requests)
    messages: list[Any] = [{"role": "user", "content": "weather in Paris and Vienna?"}]
    tool: Any = {
        "type": "function",
        "function": {"name": "weather", "parameters": {"type": "object"}},
    }
    with openai.OpenAI(base_url=f"{served.url}/v1", api_key="unused", max_retries=0) as client:
        first = client.chat.completions.create(model="gem", messages=messages, tools=[tool])
        calls = first.choices[0].message.tool_calls or []
        assert [json.loads(c.function.arguments) for c in calls] == [
            {"city": "Paris"},
            {"city": "Vienna"},
        ]
        messages.append(first.choices[0].message.model_dump(exclude_none=True))
        for call in reversed(calls):  # answered in the other order: Chat pairs them by id
            city = "Paris" if "Paris" in call.function.arguments else "Vienna"
            messages.append({"role": "tool", "tool_call_id": call.id, "content": f"{city}: sunny"})
        second = client.chat.completions.create(model="gem", messages=messages, tools=[tool])
    assert second.choices[0].message.content == "Reported."
    parts = served.bodies("gem")[before:][1]["contents"][-1]["parts"]
    assert [p["functionResponse"]["response"]["result"] for p in parts] == [
        "Paris: sunny",
        "Vienna: sunny",
    ]


def test_adaptations_are_on_the_log_line_and_the_metrics(served: Served) -> None:
    with anthropic.Anthropic(base_url=served.url, api_key="unused", max_retries=0) as client:
        message, headers = _claude_code_turn(client, "chat", [{"role": "user", "content": "hi"}])
    assert message.stop_reason == "tool_use"
    line = next(
        line
        for line in reversed(served.log_lines())
        if line.get("model") == "chat" and line.get("adapted")
    )
    assert "context_management=drop@openai" in line["adapted"]
    metrics = httpx.get(f"{served.url}/metrics").text
    assert (
        'tokenwire_adaptations_total{outcome="drop",source="anthropic",target="openai"}' in metrics
    )


def test_strict_refuses_what_it_would_adapt(served: Served) -> None:
    with anthropic.Anthropic(base_url=served.url, api_key="unused", max_retries=0) as client:
        with pytest.raises(anthropic.BadRequestError) as caught:
            _claude_code_turn(client, "strict-chat", [{"role": "user", "content": "hi"}])
    assert "thinking" in str(caught.value) and "strict" in str(caught.value)


def _gemini_config() -> Any:
    from google.genai import types

    declarations = [
        types.FunctionDeclaration(
            name=name, description=name, parameters_json_schema={"type": "object"}
        )
        for name in ("read", "run")
    ]
    return types.GenerateContentConfig(
        system_instruction="You are Gemini CLI.",
        tools=[types.Tool(function_declarations=declarations)],
        thinking_config=types.ThinkingConfig(include_thoughts=True, thinking_budget=4096),
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
    )


@pytest.mark.parametrize("model", ["claude", "chat", "resp"])
def test_gemini_cli_loop_on_another_vendor(served: Served, model: str) -> None:
    from google import genai
    from google.genai import types

    before = len(served.fakes[model].requests)
    options = types.HttpOptions(base_url=served.url)
    client = genai.Client(api_key="unused", http_options=options)
    chat = client.chats.create(model=model, config=_gemini_config())
    message: Any = "Read a.txt, then list the files."
    names = []
    text = ""
    for _ in range(3):
        parts = [
            part
            for chunk in chat.send_message_stream(message)
            for candidate in chunk.candidates or ()
            for part in (candidate.content.parts if candidate.content else None) or ()
        ]
        calls = [p.function_call for p in parts if p.function_call is not None]
        if not calls:
            text = "".join(p.text or "" for p in parts if not p.thought)
            break
        names += [c.name for c in calls]
        message = [
            types.Part.from_function_response(name=c.name, response={"result": RESULTS[c.name]})
            for c in calls
        ]
    client.close()
    assert names == ["read", "run"] and text == FINAL
    bodies = served.bodies(model)[before:]
    assert len(bodies) == 3 and served.fakes[model].errors == []
    if model == "claude":
        # Anthropic's own signed thinking went back, exactly (the fake checks each one).
        first = bodies[2]["messages"][1]["content"][0]
        assert (
            first["type"] == "thinking"
            and first["thinking"] == "Round 1: deciding what to do next."
        )
    elif model == "chat":
        assistant = [m for m in bodies[2]["messages"] if m["role"] == "assistant"]
        assert [m.get("reasoning_content") for m in assistant] == [
            "Round 1: deciding what to do next.",
            "Round 2: deciding what to do next.",
        ]
    else:
        # The Responses upstream's own reasoning items went back, before their calls.
        kinds = [item.get("type") for item in bodies[2]["input"]]
        assert kinds.count("reasoning") == 2
        assert kinds.index("reasoning") < kinds.index("function_call")


@pytest.mark.parametrize("model", ["claude", "resp", "gem"])
def test_chat_client_loop_on_another_vendor(served: Served, model: str) -> None:
    before = len(served.fakes[model].requests)
    tools: Any = [
        {"type": "function", "function": {"name": name, "parameters": OBJECT}}
        for name in ("read", "run")
    ]
    messages: list[Any] = [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "Read a.txt, then list the files."},
    ]
    answers = []
    with openai.OpenAI(base_url=f"{served.url}/v1", api_key="unused", max_retries=0) as client:
        for _ in range(3):
            raw = client.chat.completions.with_raw_response.create(
                model=model, messages=messages, tools=tools, reasoning_effort="low", user="u-1"
            )
            assert "reasoning_effort=" in raw.headers["tokenwire-adapted"]
            answer = raw.parse().choices[0]
            answers.append(answer)
            calls = answer.message.tool_calls or []
            if not calls:
                break
            messages.append(answer.message.model_dump(exclude_none=True))
            for call in calls:
                name = call.function.name  # type: ignore[union-attr]
                messages.append({"role": "tool", "tool_call_id": call.id, "content": RESULTS[name]})
    assert [a.finish_reason for a in answers] == ["tool_calls", "tool_calls", "stop"]
    assert answers[-1].message.content == FINAL
    bodies = served.bodies(model)[before:]
    assert len(bodies) == 3 and served.fakes[model].errors == []
    if model == "gem":
        # A Chat client keeps no thought signature: Gemini's documented stand-in goes.
        calls = [p for c in bodies[2]["contents"] for p in c["parts"] if "functionCall" in p]
        assert {p["thoughtSignature"] for p in calls} == {"skip_thought_signature_validator"}
    if model == "claude":
        # Thinking on the first turn; in the loop a Chat client has no signed
        # thinking to send back, so it is off (and said so), as Anthropic requires.
        assert bodies[0]["thinking"]["type"] == "enabled"
        assert "thinking" not in bodies[1] and "thinking" not in bodies[2]
