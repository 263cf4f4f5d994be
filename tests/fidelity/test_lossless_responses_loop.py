"""Issue 24: two-turn loops through the standard route against the strict Responses fake.

``tokenwire.Client`` -> ``/v1/stream`` -> ``FakeUpstream("openai-responses")``,
for the client-run tools that are not JSON functions (custom, apply_patch) and
MCP approvals (tokenwire extensions 1.1). Turn 1's item comes back as a
``tool.call`` (or a ``tokenwire:approval`` block); turn 2 is ``follow_up``,
which carries the item back through ``tokenwire:block_history``. The fake
signs each item it makes and refuses a next turn whose item was dropped or
altered, so each loop is also run with the item dropped and with it altered.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import msgspec
import pytest
from tests.gateway.gateway_procs import Gateway

import tokenwire
from tokenwire.testing.upstream import FakeUpstream, RecordedRequest, Script
from tokenwire.translate import _extensions as x
from tokenwire.translate import _lossless

PATCH = {"type": "update_file", "path": "app.py", "diff": "@@\n-print(1)\n+print(2)\n"}
SCRIPTS = {
    "custom": Script(
        text="Running it.",
        items=[{"type": "custom_tool_call", "name": "exec_sql", "input": "SELECT 1;\n"}],
    ),
    "apply_patch": Script(text="", items=[{"type": "apply_patch_call", "operation": PATCH}]),
    "approval": Script(
        text="",
        items=[
            {
                "type": "mcp_approval_request",
                "server_label": "deepwiki",
                "name": "ask_question",
                "arguments": '{"question":"What is tokenwire?"}',
            }
        ],
    ),
}
DONE = Script(text="Done.")
TOOLS: Any = [
    {"name": "exec_sql", "description": "Run SQL.", "parameters": _lossless.CUSTOM_PARAMETERS},
    {
        "name": "apply_patch",
        "description": "Patch a file.",
        "parameters": _lossless.APPLY_PATCH_PARAMETERS,
    },
]
KINDS = {"exec_sql": {"kind": "custom"}, "apply_patch": {"kind": "apply_patch"}}
ANSWERS = ("custom_tool_call_output", "apply_patch_call_output", "mcp_approval_response")


def script_for(request: RecordedRequest) -> Script:
    body = request.json()
    if any(i.get("type") in ANSWERS for i in body["input"] if isinstance(i, dict)):
        return DONE
    return SCRIPTS[body["metadata"]["case"]]


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Gateway, FakeUpstream]]:
    with FakeUpstream("openai-responses", script_for) as fake:
        config = (
            f'[[models]]\nname = "codex"\nprovider = "openai-responses"\nbase_url = "{fake.url}"\n'
        )
        with Gateway(tmp_path_factory.mktemp("lossless-responses"), config=config) as gw:
            yield gw, fake


def first_request(case: str) -> tokenwire.request.Request:
    return tokenwire.request.build(
        model="codex",
        messages="Do it.",
        tools=TOOLS,
        extensions={
            x.TOOLS: KINDS,
            # metadata travels to the upstream: the fake picks its script by it.
            "vendor:openai-responses": {"metadata": {"case": case}},
        },
    )


def with_history(
    request: tokenwire.request.Request, change: Callable[[list[dict[str, Any]]], None]
) -> tokenwire.request.Request:
    extensions = msgspec.json.decode(msgspec.json.encode(request.extensions))
    change(extensions[x.BLOCK_HISTORY][0]["parts"])
    return msgspec.structs.replace(request, extensions=extensions)


def drop(parts: list[dict[str, Any]]) -> None:
    parts.clear()


def alter_tool_call(request: tokenwire.request.Request) -> tokenwire.request.Request:
    """The assistant's call with other arguments than the model sent."""
    messages = list(request.messages)
    for i, message in enumerate(messages):
        if message.tool_calls:
            call = message.tool_calls[0]
            args = msgspec.json.decode(call.arguments)
            key = "input" if "input" in args else "path"
            args[key] = args[key] + "x"
            changed = msgspec.structs.replace(call, arguments=msgspec.json.encode(args).decode())
            messages[i] = msgspec.structs.replace(message, tool_calls=[changed])
    return msgspec.structs.replace(request, messages=messages)


@pytest.mark.parametrize("case", ["custom", "apply_patch"])
def test_a_client_run_tool_loop_is_accepted_and_refused_when_altered(
    gateway: tuple[Gateway, FakeUpstream], case: str
) -> None:
    gw, fake = gateway
    request = first_request(case)
    with tokenwire.Client(gw.url) as client:
        first = client.create(request)
        assert first.error is None, first.error
        # A tool.call the client may execute (validated against the declared tool, §8.2).
        [call] = first.tool_calls
        expected = {"input": "SELECT 1;\n"} if case == "custom" else PATCH
        assert (call.name, call.arguments) == (
            "exec_sql" if case == "custom" else "apply_patch",
            expected,
        )
        assert not first.rejected_tool_calls
        follow = first.follow_up(request, {call.id: "ok"})
        second = client.create(follow)
        assert second.error is None and second.text == "Done.", second.error
        sent = msgspec.json.decode(fake.requests[-1].body)
        kinds = [i["type"] for i in sent["input"]]
        item = "custom_tool_call" if case == "custom" else "apply_patch_call"
        # The custom turn had text ("Running it."), the patch turn none.
        text = ["message"] if case == "custom" else []
        assert kinds == ["message", *text, item, f"{item}_output"]
        assert [t["type"] for t in sent["tools"]] == ["custom", "apply_patch"]
        # Altered: the fake refuses the item it signed.
        altered = client.create(alter_tool_call(follow))
        # Dropped: without tokenwire:tools the call goes back as a function_call,
        # not the item the model made, and the fake refuses it.
        plain = {k: v for k, v in (follow.extensions or {}).items() if k != x.TOOLS}
        dropped = client.create(msgspec.structs.replace(follow, extensions=plain))
    assert altered.error is not None and "was modified" in altered.error.message
    assert dropped.error is not None and "of type 'function_call' was modified" in (
        dropped.error.message
    )


def test_an_mcp_approval_loop_is_accepted_and_refused_when_dropped_or_altered(
    gateway: tuple[Gateway, FakeUpstream],
) -> None:
    gw, fake = gateway
    request = first_request("approval")
    with tokenwire.Client(gw.url) as client:
        first = client.create(request)
        assert first.error is None, first.error
        assert first.tool_calls == []  # an approval is never a call to run
        approvals = [b for e in first.events if (b := x.fields(e, x.BLOCK)) and x.APPROVAL in b]
        [block] = approvals
        approval = block[x.APPROVAL]
        assert approval["name"] == "ask_question" and approval["server_label"] == "deepwiki"
        assert x.SERVER_TOOL not in block  # marked apart from server-run results
        follow = first.follow_up(request, {})
        answered = msgspec.structs.replace(
            follow,
            extensions={
                **(follow.extensions or {}),
                x.APPROVALS: [{"id": approval["id"], "approve": True}],
            },
        )
        second = client.create(answered)
        assert second.error is None and second.text == "Done.", second.error
        sent = msgspec.json.decode(fake.requests[-1].body)
        assert [i["type"] for i in sent["input"]] == [
            "message",
            "mcp_approval_request",
            "mcp_approval_response",
        ]
        assert sent["input"][2] == {
            "type": "mcp_approval_response",
            "approval_request_id": approval["id"],
            "approve": True,
        }
        dropped = client.create(with_history(answered, drop))

        def alter(parts: list[dict[str, Any]]) -> None:
            parts[0][x.APPROVAL]["arguments"] = '{"question":"Something else?"}'

        altered = client.create(with_history(answered, alter))
    assert dropped.error is not None and "No mcp_approval_request found" in dropped.error.message
    assert altered.error is not None and "was modified" in altered.error.message
