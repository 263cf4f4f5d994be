"""The fake upstream's OpenAI Responses API format (``FakeUpstream("openai-responses")``).

Rendered like the recordings in ``vendor-fixtures/openai-responses/``: ``event:
<type>`` / ``data: <json>`` frames whose ``type`` equals the event name, with
``sequence_number`` counting from 0 and no ``[DONE]``: ``response.created``,
``response.in_progress``; the text as a ``message`` output item
(``output_item.added``, ``content_part.added``, one ``output_text.delta`` per
word with ``logprobs`` and ``obfuscation`` padding, ``output_text.done``,
``content_part.done``, ``output_item.done``); each tool call as a
``function_call`` item (``call_id``, ``name``, empty ``arguments``) with
``function_call_arguments.delta`` fragments cut at token boundaries,
``function_call_arguments.done`` and ``output_item.done``; then the terminal
event with the full ``response`` and its ``usage``.

Stop reasons: ``end_turn`` and ``tool_use`` -> ``response.completed``;
``max_tokens`` -> ``response.incomplete`` with ``incomplete_details.reason:
"max_output_tokens"``, ``content_filter`` -> ``"content_filter"``. A scripted
error becomes the nested ``error`` event real streams send (``ERRORS`` gives
its code) followed by ``response.failed``. SDK setup:
``openai.OpenAI(base_url=fake.url + "/v1", api_key="x")``.

Reasoning, as strict as OpenAI on the next turn: ``Script.thinking`` streams a
``reasoning`` item first (id ``rs_fake0001``, its summary word by word as
``reasoning_summary_text.delta``). When the request asks for
``include: ["reasoning.encrypted_content"]`` the item carries
``encrypted_content`` (``encrypted_content(id, text)``, HMAC-signed), and the
turn's function calls get ids that carry a digest of it
(``call_fake0000_<digest>``). A later request is refused with HTTP 400 and
OpenAI's error body (``check_request`` / ``refusal_body``) when a reasoning
item's encrypted content does not verify (altered), or when a signed
``function_call`` item comes without that reasoning item before it in the
same assistant turn (dropped or reordered).

tokenwire extensions 1.1 (``Script.items``, output items sent after the calls;
``check_items``): the fake gives a ``custom_tool_call`` or ``apply_patch_call``
a ``call_id``, and an ``mcp_approval_request`` or ``compaction`` item an ``id``,
that carries a digest of the item (``sign_item``). A later request is refused
when such an item comes back altered (or as another item type: a custom call
sent back as a ``function_call``), when a tool output has no call of its own
type before it (``custom_tool_call_output`` needs its ``custom_tool_call``), or
when an ``mcp_approval_response`` has no ``mcp_approval_request`` before it.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, Final

import msgspec

from . import openai as _chat
from .openai_responses_seals import (
    INCLUDE,
    REASONING_ID,
    check_items,
    check_reasoning,
    encrypted_content,
    reasoning_digest,
    sign_item,
)
from .upstream import (
    RecordedRequest,
    Script,
    count_answer,
    counted_tokens,
    json_object,
    split_words,
)

__all__ = [
    "COMPACT_FIELDS",
    "COUNT_FIELDS",
    "answer_other",
    "count_tokens",
    "CONTENT_TYPE",
    "ERRORS",
    "ITEM_TYPES",
    "TOOL_TYPES",
    "RESPONSE_HEADERS",
    "REASONING_ID",
    "argument_fragments",
    "check_request",
    "encrypted_content",
    "error_body",
    "refusal_body",
    "check_items",
    "render",
    "sign_item",
]

CONTENT_TYPE: Final = "text/event-stream; charset=utf-8"
RESPONSE_HEADERS: Final = {"x-request-id": "req_fake", "openai-processing-ms": "1"}

#: Draft error code -> the OpenAI error ``type`` and ``code`` the fake sends:
#: Chat Completions' table, but for ``overloaded``, which has its own code here.
ERRORS: Final[dict[str, tuple[str, str | None]]] = {
    **_chat.ERRORS,
    "overloaded": ("server_error", "server_is_overloaded"),
}


_encode = msgspec.json.Encoder().encode
_TOKENS: Final = re.compile(r"\s*(?:\w+|[^\w\s]+)")
#: Stand-ins for the random ``obfuscation`` padding of real deltas.
_PADDING: Final = ("VLMdSoETMf5", "SdSOtFre", "y5ScOEy3kpvfM", "WfxTBX")


def argument_fragments(arguments: dict[str, Any]) -> list[str]:
    """The arguments as compact JSON text, cut at token boundaries."""
    text = _encode(arguments).decode()
    return _TOKENS.findall(text) if text != "{}" else []


#: The Responses API answers HTTP errors with the Chat Completions body.
error_body = _chat.error_body


def refusal_body(problem: str) -> bytes:
    """OpenAI's 400 body, ``invalid_request_error`` with the problem as its message."""
    code = "invalid_encrypted_content" if "could not be verified" in problem else None
    error = {"message": problem, "type": "invalid_request_error", "param": "input", "code": code}
    return _encode({"error": error})


def check_request(request: RecordedRequest) -> str | None:
    """The problem with a Responses API request, or ``None`` when it looks right."""
    if not request.path.split("?", 1)[0].endswith("/responses"):
        return f"expected POST .../responses, got {request.path}"
    body = json_object(request)
    if isinstance(body, str):
        return body
    if not isinstance(body.get("input"), str | list) or not body["input"]:
        return "input: a string or a non-empty array is required"
    if body.get("stream") is not True:
        return "the fake only streams: stream must be true"
    problem = _check_agent(body)
    if problem is not None:
        return problem
    if isinstance(body["input"], list):
        return check_reasoning(body["input"]) or check_items(body["input"])
    return None


# --- hosted and custom tools, MCP approvals, apply_patch: their loops ----
#
# As strict as OpenAI's validation, per the openai SDK's types: each tool's
# ``type`` must be one the API knows, with its required fields; an input item's
# ``type`` too, and an output item (``custom_tool_call_output``,
# ``apply_patch_call_output``, ``mcp_approval_response``) must answer a call or
# request earlier in ``input`` with the same id. On each turn, the fake model:
# asks approval for the first MCP server's ``echo`` tool (``mcp_list_tools`` +
# ``mcp_approval_request``) unless ``require_approval`` is ``"never"``, and
# calls it (``mcp_call``) once approved or when no approval is needed; calls
# each custom tool (``custom_tool_call``, its input streamed) and ``apply_patch``
# (``apply_patch_call``) unless their output is already in ``input``.

#: Tool type -> its required string fields.
TOOL_TYPES: Final[dict[str, tuple[str, ...]]] = {
    "function": ("name",),
    "custom": ("name",),
    "mcp": ("server_label",),
    "apply_patch": (),
    "web_search": (),
    "web_search_preview": (),
    "file_search": (),
    "code_interpreter": (),
    "image_generation": (),
    "local_shell": (),
    "shell": (),
    "computer_use_preview": (),
    # A group of function tools under one name (Codex sends its sub-agent tools so).
    "namespace": ("name",),
}
#: Input item type -> (its required string fields, the id field an earlier item must have).
ITEM_TYPES: Final[dict[str, tuple[tuple[str, ...], tuple[str, str] | None]]] = {
    "message": ((), None),
    "reasoning": (("id",), None),
    "function_call": (("call_id", "name"), None),
    "function_call_output": (("call_id",), None),
    "custom_tool_call": (("call_id", "name", "input"), None),
    "custom_tool_call_output": (("call_id",), ("custom_tool_call", "call_id")),
    "mcp_list_tools": (("id", "server_label"), None),
    "mcp_approval_request": (("id", "server_label", "name", "arguments"), None),
    "mcp_approval_response": (("approval_request_id",), ("mcp_approval_request", "id")),
    "mcp_call": (("id", "server_label", "name", "arguments"), None),
    "apply_patch_call": (("call_id",), None),
    "apply_patch_call_output": (("call_id",), ("apply_patch_call", "call_id")),
    "web_search_call": (("id",), None),
    "file_search_call": (("id",), None),
    "item_reference": (("id",), None),
}
#: The key of each answer item that names what it answers.
_ANSWER_KEYS: Final = {
    "function_call_output": "call_id",
    "custom_tool_call_output": "call_id",
    "mcp_approval_response": "approval_request_id",
    "apply_patch_call_output": "call_id",
}
_OPERATIONS: Final = {
    "create_file": ("path", "diff"),
    "update_file": ("path", "diff"),
    "delete_file": ("path",),
}


def _bad_type(where: str, kind: object, known: Any) -> str:
    supported = ", ".join(f"'{k}'" for k in known)
    return f"Invalid value: '{kind}'. Supported values are: {supported}. (param: {where}.type)"


def _check_namespace(where: str, members: object) -> str | None:
    """A namespace holds a non-empty array of named function tools."""
    if not isinstance(members, list) or not members:
        return f"Missing required parameter: '{where}.tools'."
    for j, member in enumerate(members):
        kind = member.get("type") if isinstance(member, dict) else None
        if kind != "function":
            return _bad_type(f"{where}.tools[{j}]", kind, ("function",))
        if not isinstance(member.get("name"), str):
            return f"Missing required parameter: '{where}.tools[{j}].name'."
    return None


def _check_agent(body: dict[str, Any]) -> str | None:
    """The tool and item rules of the module section above."""
    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list):
            return "Invalid type for 'tools': expected an array"
        for i, tool in enumerate(tools):
            kind = tool.get("type") if isinstance(tool, dict) else None
            if kind not in TOOL_TYPES:
                return _bad_type(f"tools[{i}]", kind, TOOL_TYPES)
            for field in TOOL_TYPES[kind]:
                if not isinstance(tool.get(field), str):
                    return f"Missing required parameter: 'tools[{i}].{field}'."
            if kind == "mcp" and not isinstance(
                tool.get("server_url") or tool.get("connector_id"), str
            ):
                return f"Missing required parameter: 'tools[{i}].server_url'."
            if kind == "namespace":
                problem = _check_namespace(f"tools[{i}]", tool.get("tools"))
                if problem is not None:
                    return problem
    items = body["input"]
    if isinstance(items, str):
        return None
    seen: dict[str, set[str]] = {}
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            return f"input[{i}]: Input should be an object"
        kind = item.get("type", "message" if "role" in item else None)
        if kind not in ITEM_TYPES:
            return _bad_type(f"input[{i}]", kind, ITEM_TYPES)
        fields, answers = ITEM_TYPES[kind]
        for field in fields:
            if not isinstance(item.get(field), str):
                return f"Missing required parameter: 'input[{i}].{field}'."
        if kind == "mcp_approval_response" and not isinstance(item.get("approve"), bool):
            return f"Missing required parameter: 'input[{i}].approve'."
        if kind == "apply_patch_call":
            operation = item.get("operation")
            op = operation.get("type") if isinstance(operation, dict) else None
            if not isinstance(operation, dict) or op not in _OPERATIONS:
                return _bad_type(f"input[{i}].operation", op, _OPERATIONS)
            for field in _OPERATIONS[op]:
                if not isinstance(operation.get(field), str):
                    return f"Missing required parameter: 'input[{i}].operation.{field}'."
        if kind == "apply_patch_call_output" and item.get("status") not in ("completed", "failed"):
            return f"Invalid value for 'input[{i}].status': expected 'completed' or 'failed'."
        if answers is not None and body.get("previous_response_id") is None:
            # (With previous_response_id, what it answers is in the stored response.)
            target, key = answers
            wanted = item[_ANSWER_KEYS[kind]]
            if wanted not in seen.get(target, set()):
                return f"No {target} found for {kind} with {_ANSWER_KEYS[kind]} {wanted}."
        for key in ("id", "call_id"):
            if isinstance(item.get(key), str):
                seen.setdefault(kind, set()).add(item[key])
    return None


def _answered(items: list[Any], kind: str) -> set[str]:
    """The ids the ``kind`` items of ``input`` answer."""
    key = _ANSWER_KEYS[kind]
    return {i[key] for i in items if isinstance(i, dict) and i.get("type") == kind}


def _agent_items(body: _Body, sent: dict[str, Any], output: list[dict[str, Any]]) -> None:
    """Stream the fake's tool items for this turn (see the section above) into ``body``."""
    items: list[Any] = sent["input"] if isinstance(sent.get("input"), list) else []
    tools = [t for t in sent.get("tools") or [] if isinstance(t, dict)]

    def item(opened: dict[str, Any], done: dict[str, Any], between: Any = None) -> None:
        index = len(output)
        body.add("response.output_item.added", output_index=index, item=opened)
        if between is not None:
            between(index)
        body.add("response.output_item.done", output_index=index, item=done)
        output.append(done)

    approvals = {
        i["approval_request_id"]: i["approve"]
        for i in items
        if isinstance(i, dict) and i.get("type") == "mcp_approval_response"
    }
    for tool in tools:
        if tool.get("type") != "mcp":
            continue
        label = tool["server_label"]
        request_id = f"mcpr_fake_{label}"
        needs = tool.get("require_approval", "always") != "never"
        if needs and request_id not in approvals:
            listed = {
                "id": f"mcpl_fake_{label}",
                "type": "mcp_list_tools",
                "server_label": label,
                "tools": [{"name": "echo", "input_schema": {"type": "object"}}],
            }
            at = {"item_id": listed["id"]}

            def listing(index: int, at: dict[str, Any] = at) -> None:
                body.add("response.mcp_list_tools.in_progress", output_index=index, **at)
                body.add("response.mcp_list_tools.completed", output_index=index, **at)

            item({**listed, "tools": []}, listed, listing)
            ask = {
                "id": request_id,
                "type": "mcp_approval_request",
                "server_label": label,
                "name": "echo",
                "arguments": '{"text":"hello"}',
            }
            item(ask, ask)
            continue
        if needs and not approvals[request_id]:
            continue  # declined: the model goes on without the tool
        call_id = f"mcp_fake_{label}"
        arguments = '{"text":"hello"}'
        call = {
            "id": call_id,
            "type": "mcp_call",
            "server_label": label,
            "name": "echo",
            "arguments": "",
            "approval_request_id": request_id if needs else None,
            "error": None,
            "output": None,
            "status": "in_progress",
        }
        done = {**call, "arguments": arguments, "output": "hello", "status": "completed"}

        def calling(index: int, call_id: str = call_id, arguments: str = arguments) -> None:
            at = {"item_id": call_id, "output_index": index}
            body.add("response.mcp_call.in_progress", **at)
            body.add("response.mcp_call_arguments.delta", **at, delta=arguments)
            body.add("response.mcp_call_arguments.done", **at, arguments=arguments)
            body.add("response.mcp_call.completed", **at)

        item(call, done, calling)
    custom_done = _answered(items, "custom_tool_call_output")
    patched = _answered(items, "apply_patch_call_output")
    for n, tool in enumerate(tools):
        if tool.get("type") == "custom":
            call_id = f"call_custom{n:04d}"
            if call_id in custom_done:
                continue
            text = "print('hello')"
            opened = {
                "id": f"ctc_fake{n:04d}",
                "type": "custom_tool_call",
                "status": "in_progress",
                "call_id": call_id,
                "name": tool["name"],
                "input": "",
            }

            def typing(index: int, item_id: str = opened["id"], text: str = text) -> None:
                at = {"item_id": item_id, "output_index": index}
                for piece in _TOKENS.findall(text):
                    body.add("response.custom_tool_call_input.delta", **at, delta=piece)
                body.add("response.custom_tool_call_input.done", **at, input=text)

            item(opened, {**opened, "status": "completed", "input": text}, typing)
        elif tool.get("type") == "apply_patch":
            call_id = f"call_patch{n:04d}"
            if call_id in patched:
                continue
            patch = {
                "id": f"apc_fake{n:04d}",
                "type": "apply_patch_call",
                "status": "completed",
                "call_id": call_id,
                "operation": {
                    "type": "update_file",
                    "path": "README.md",
                    "diff": "@@\n-old\n+new\n",
                },
            }
            item({**patch, "status": "in_progress"}, patch)


class _Body:
    """The event list being built, stamping ``sequence_number``."""

    def __init__(self) -> None:
        self.frames: list[bytes] = []

    def add(self, kind: str, **fields: Any) -> None:
        obj = {"type": kind, "sequence_number": len(self.frames), **fields}
        self.frames.append(b"event: %s\ndata: %s\n\n" % (kind.encode(), _encode(obj)))


def _calls_so_far(request: RecordedRequest) -> int:
    """How many function calls the request's conversation holds (0 when unreadable)."""
    try:
        items = request.json().get("input")
    except (ValueError, AttributeError):
        return 0
    if not isinstance(items, list):
        return 0
    return sum(
        1 for item in items if isinstance(item, dict) and item.get("type") == "function_call"
    )


def render(script: Script, *, model: str, request: RecordedRequest) -> list[bytes]:
    """The Responses API stream for ``script``, one item per SSE frame."""
    # Each response has its own id, as OpenAI's do (a client chains turns by it);
    # derived from the request, so the same request renders the same bytes.
    response_id = "resp_" + hashlib.sha256(request.body).hexdigest()[:24]

    def response(status: str, output: list[Any], **fields: Any) -> dict[str, Any]:
        return {
            "id": response_id,
            "object": "response",
            "created_at": 1_700_000_000,
            "status": status,
            "background": False,
            "error": None,
            "incomplete_details": None,
            "instructions": None,
            "max_output_tokens": None,
            "model": model,
            "output": output,
            "parallel_tool_calls": True,
            "previous_response_id": None,
            "reasoning": {"effort": None, "summary": None},
            "store": True,
            "temperature": 1.0,
            "text": {"format": {"type": "text"}},
            "tool_choice": "auto",
            "tools": [],
            "top_p": 1.0,
            "truncation": "disabled",
            "usage": None,
            "user": None,
            "metadata": {},
            # The rest of what OpenAI's response object carries (and Open Responses requires).
            "completed_at": 1_700_000_001 if status == "completed" else None,
            "presence_penalty": 0.0,
            "frequency_penalty": 0.0,
            "top_logprobs": 0,
            "max_tool_calls": None,
            "service_tier": "default",
            "safety_identifier": None,
            "prompt_cache_key": None,
            **fields,
        }

    body = _Body()
    body.add("response.created", response=response("in_progress", []))
    body.add("response.in_progress", response=response("in_progress", []))
    output: list[dict[str, Any]] = []
    signed = ""  # the digest the call ids carry
    if script.thinking:
        try:
            sent = request.json()
        except ValueError:
            sent = {}
        include = sent.get("include") if isinstance(sent, dict) else None
        encrypted = (
            encrypted_content(REASONING_ID, script.thinking)
            if isinstance(include, list) and INCLUDE in include
            else None
        )
        if encrypted is not None:
            signed = reasoning_digest(REASONING_ID, encrypted)
        opened = {"id": REASONING_ID, "type": "reasoning", "summary": []}
        if encrypted is not None:
            opened["encrypted_content"] = encrypted
        body.add("response.output_item.added", output_index=0, item=opened)
        at = {"item_id": REASONING_ID, "output_index": 0, "summary_index": 0}
        summary = {"type": "summary_text", "text": ""}
        body.add("response.reasoning_summary_part.added", **at, part=summary)
        for k, piece in enumerate(split_words(script.thinking)):
            pad = _PADDING[k % len(_PADDING)]
            body.add("response.reasoning_summary_text.delta", **at, delta=piece, obfuscation=pad)
        body.add("response.reasoning_summary_text.done", **at, text=script.thinking)
        done = {"type": "summary_text", "text": script.thinking}
        body.add("response.reasoning_summary_part.done", **at, part=done)
        item = {**opened, "summary": [done]}
        body.add("response.output_item.done", output_index=0, item=item)
        output.append(item)
    sent_body = json_object(request)
    if isinstance(sent_body, dict) and not script.items:
        # A script with items of its own (the lossless loops) says the whole turn.
        _agent_items(body, sent_body, output)
    pieces = script.pieces
    if pieces:
        item_id = "msg_fake0001"
        index = len(output)
        part = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
        opened = {
            "id": item_id,
            "type": "message",
            "status": "in_progress",
            "content": [],
            "role": "assistant",
        }
        body.add("response.output_item.added", output_index=index, item=opened)
        at = {"item_id": item_id, "output_index": index, "content_index": 0}
        body.add("response.content_part.added", **at, part=part)
        for k, piece in enumerate(pieces):
            pad = _PADDING[k % len(_PADDING)]
            body.add("response.output_text.delta", **at, delta=piece, logprobs=[], obfuscation=pad)
        text = "".join(pieces)
        body.add("response.output_text.done", **at, text=text, logprobs=[])
        done_part = {**part, "text": text}
        body.add("response.content_part.done", **at, part=done_part)
        item = {**opened, "status": "completed", "content": [done_part]}
        body.add("response.output_item.done", output_index=index, item=item)
        output.append(item)
    # Call ids are unique in a conversation, as OpenAI's are: an unsigned one is
    # numbered by the calls the conversation holds so far (``t``: never 16 hex
    # digits, which _SIGNED_CALL reads as signed).
    turn = f"t{_calls_so_far(request):04d}"
    for i, call in enumerate(script.tool_calls):
        index = len(output)
        item_id = f"fc_fake{i:04d}"
        arguments = _encode(call.arguments).decode()
        opened = {
            "id": item_id,
            "type": "function_call",
            "status": "in_progress",
            "arguments": "",
            "call_id": call.id or (f"call_fake{i:04d}_{signed or turn}"),
            "name": call.name,
        }
        body.add("response.output_item.added", output_index=index, item=opened)
        for k, fragment in enumerate(argument_fragments(call.arguments)):
            pad = _PADDING[k % len(_PADDING)]
            body.add(
                "response.function_call_arguments.delta",
                item_id=item_id,
                output_index=index,
                delta=fragment,
                obfuscation=pad,
            )
        body.add(
            "response.function_call_arguments.done",
            item_id=item_id,
            output_index=index,
            arguments=arguments,
        )
        item = {**opened, "status": "completed", "arguments": arguments}
        body.add("response.output_item.done", output_index=index, item=item)
        output.append(item)
    for n, extra in enumerate(script.items):
        index = len(output)
        made: dict[str, Any] = sign_item(extra, n)
        if made.get("type") == "custom_tool_call":
            opened = {**made, "input": ""}
            body.add("response.output_item.added", output_index=index, item=opened)
            at = {"item_id": made["id"], "output_index": index}
            for piece in split_words(str(made.get("input", ""))):
                body.add("response.custom_tool_call_input.delta", **at, delta=piece)
            body.add("response.custom_tool_call_input.done", **at, input=made.get("input", ""))
        else:
            body.add("response.output_item.added", output_index=index, item=made)
        body.add("response.output_item.done", output_index=index, item=made)
        output.append(made)
    if script.error is not None:
        code, message = script.error
        etype, ecode = ERRORS.get(code, ERRORS["internal_error"])
        error = {"type": etype, "code": ecode, "message": message, "param": None}
        body.add("error", error=error)
        failed = response("failed", output, error={"code": ecode, "message": message})
        body.add("response.failed", response=failed)
        return body.frames
    output_tokens = script.usage_output_tokens
    usage = {
        "input_tokens": script.input_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": script.input_tokens + output_tokens,
    }
    stop = script.final_stop_reason
    if stop in ("max_tokens", "content_filter"):
        reason = "max_output_tokens" if stop == "max_tokens" else "content_filter"
        final = response("incomplete", output, usage=usage, incomplete_details={"reason": reason})
        body.add("response.incomplete", response=final)
    else:
        body.add("response.completed", response=response("completed", output, usage=usage))
    return body.frames


#: What ``POST /v1/responses/input_tokens`` takes (no ``stream``, ``store``, sampling).
#: The same list as the translator's own (translate/openai_responses/count.py), kept
#: apart on purpose: the fake is the API's stand-in, so it refuses by its own list.
COUNT_FIELDS: Final = frozenset(
    {
        "model",
        "input",
        "instructions",
        "tools",
        "tool_choice",
        "reasoning",
        "text",
        "truncation",
        "parallel_tool_calls",
        "previous_response_id",
        "conversation",
    }
)


def count_tokens(request: RecordedRequest) -> tuple[int, bytes] | None:
    """The answer of ``POST /v1/responses/input_tokens`` (``None``: another path)."""
    return count_answer(
        request,
        "/v1/responses/input_tokens",
        COUNT_FIELDS,
        ("model",),
        lambda n: {"object": "response.input_tokens", "input_tokens": n},
        refusal_body,
    )


#: The fields ``POST /v1/responses/compact`` takes (what shapes the conversation;
#: no ``stream``: a compaction is answered whole).
COMPACT_FIELDS: Final = frozenset(
    {
        "model",
        "input",
        "instructions",
        "previous_response_id",
        "tools",
        "parallel_tool_calls",
        "reasoning",
        "text",
        "prompt_cache_key",
    }
)


def answer_other(request: RecordedRequest) -> tuple[int, bytes] | None:
    """The answer of ``POST /v1/responses/compact`` (``None``: another path): the
    conversation as one signed ``compaction`` item, which a next turn sends back."""
    if not request.path.split("?", 1)[0].endswith("/v1/responses/compact"):
        return None
    body = json_object(request)
    if isinstance(body, str):
        return 400, refusal_body(body)
    extra = sorted(set(body) - COMPACT_FIELDS)
    if extra:
        return 400, refusal_body(f"Unknown parameter: '{extra[0]}'.")
    if not isinstance(body.get("input"), (str, list)):
        return 400, refusal_body("Missing required parameter: 'input'.")
    words = counted_tokens(body)
    summary = f"{words} words of conversation, compacted"
    item = sign_item(
        {"type": "compaction", "encrypted_content": encrypted_content("cmp", summary)}, 0
    )
    answer = {
        "id": "resp_fake_compact",
        "object": "response.compaction",
        "created_at": 1700000000,
        "output": [item],
        "usage": {
            "input_tokens": words,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 1,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": words + 1,
        },
    }
    return 200, msgspec.json.encode(answer)
