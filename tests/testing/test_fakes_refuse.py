"""The strict fakes refuse what their vendor refuses in an agent loop: a tool result
without its call, calls left unanswered, a mid-conversation system role at Anthropic
without its beta, Gemini results that do not match the calls in number."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from tokenwire.testing import anthropic, gemini, openai
from tokenwire.testing.upstream import RecordedRequest

USE = {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {}}


def _anthropic(messages: list[Any], beta: str | None = None) -> str | None:
    headers = {"anthropic-version": "2023-06-01"}
    if beta is not None:
        headers["anthropic-beta"] = beta
    body = {"model": "m", "max_tokens": 10, "stream": True, "messages": messages}
    return anthropic.check_request(
        RecordedRequest("POST", "/v1/messages", headers, msgspec.json.encode(body))
    )


def _result(tool_use_id: str) -> dict[str, Any]:
    return {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": tool_use_id, "content": "A"}
    ]}  # fmt: skip


def test_anthropic_pairs_each_result_with_a_call_of_the_turn_before() -> None:
    ask = {"role": "user", "content": "read"}
    assert _anthropic([ask, {"role": "assistant", "content": [USE]}, _result("toolu_1")]) is None
    problem = _anthropic([ask, {"role": "assistant", "content": [USE]}, _result("toolu_2")])
    assert problem is not None and "unexpected `tool_use_id`" in problem
    assert _anthropic([ask, _result("toolu_1")]) is not None


def test_anthropic_takes_a_mid_conversation_system_role_only_with_its_beta() -> None:
    messages = [{"role": "user", "content": "hi"}, {"role": "system", "content": "be brief"}]
    assert _anthropic(messages) == "messages.1.role: must be user or assistant"
    assert _anthropic(messages, beta="mid-conversation-system-2025-01-01") is None


@pytest.mark.parametrize(
    ("messages", "refused"),
    [
        ([{"role": "tool", "tool_call_id": "c1", "content": "x"}], "must be a response"),
        (
            [
                {"role": "assistant", "content": None, "tool_calls": [{"id": "c1"}, {"id": "c2"}]},
                {"role": "tool", "tool_call_id": "c2", "content": "x"},
                {"role": "user", "content": "and?"},
            ],
            "did not have response messages: c1",
        ),
        (
            [
                {"role": "assistant", "content": None, "tool_calls": [{"id": "c1"}, {"id": "c2"}]},
                {"role": "tool", "tool_call_id": "c2", "content": "x"},
                {"role": "tool", "tool_call_id": "c1", "content": "y"},
            ],
            None,  # any order: Chat pairs results by id
        ),
    ],
)
def test_chat_pairs_tool_messages_with_calls(messages: list[Any], refused: str | None) -> None:
    body = msgspec.json.encode(
        {"model": "m", "messages": [{"role": "user", "content": "q"}, *messages]}
    )
    problem = openai.check_request(RecordedRequest("POST", "/v1/chat/completions", {}, body))
    assert (problem is None) if refused is None else (problem is not None and refused in problem)


def test_gemini_wants_as_many_responses_as_calls() -> None:
    call = {"functionCall": {"name": "w", "args": {}}}
    answer = {"functionResponse": {"name": "w", "response": {}}}
    contents = [
        {"role": "user", "parts": [{"text": "q"}]},
        {"role": "model", "parts": [call, call]},
        {"role": "user", "parts": [answer]},
    ]
    path = "/v1beta/models/g:streamGenerateContent?alt=sse"
    problem = gemini.check_request(
        RecordedRequest("POST", path, {}, msgspec.json.encode({"contents": contents}))
    )
    assert problem is not None and "number of function response parts" in problem
    contents[2]["parts"] = [answer, answer]
    body = msgspec.json.encode({"contents": contents})
    assert gemini.check_request(RecordedRequest("POST", path, {}, body)) is None


def test_gemini_takes_its_documented_stand_in_for_an_unsigned_call() -> None:
    call = {"functionCall": {"name": "w", "args": {}}}
    contents: list[Any] = [
        {"role": "user", "parts": [{"text": "q"}]},
        {"role": "model", "parts": [call]},
        {"role": "user", "parts": [{"functionResponse": {"name": "w", "response": {}}}]},
    ]
    body = {"contents": contents, "generationConfig": {"thinkingConfig": {"includeThoughts": True}}}
    path = "/v1beta/models/g:streamGenerateContent?alt=sse"

    def check() -> str | None:
        return gemini.check_request(RecordedRequest("POST", path, {}, msgspec.json.encode(body)))

    assert "missing a thought_signature" in (check() or "")
    contents[1]["parts"] = [{**call, "thoughtSignature": "skip_thought_signature_validator"}]
    assert check() is None
    contents[1]["parts"] = [{**call, "thoughtSignature": "AAAA"}]
    assert "Corrupted thought signature" in (check() or "")
