"""The fake upstream's Anthropic Messages wire format (``FakeUpstream("anthropic")``).

Rendered like the recordings in ``vendor-fixtures/anthropic/``: every event is
``event: <type>`` + ``data: <json>`` (the SDK dispatches on the ``event:``
line); ``message_start`` carries the input tokens (and a placeholder
``output_tokens: 1``); a ``ping`` follows the first ``content_block_start`` and
sits between blocks; text streams as one ``text_delta`` per word; each tool
call is a ``tool_use`` block whose input arrives as an empty ``input_json_delta``
and then fragments cut mid-token; ``message_delta`` carries the stop reason and
the cumulative ``output_tokens``; ``message_stop`` ends the body. A scripted
error becomes ``event: error`` after the blocks, with no ``message_stop``
(what Anthropic does on a mid-stream ``overloaded_error``). SDK base URL:
``fake.url`` (the SDK appends ``/v1/messages``).

Extended thinking, as strict as Anthropic on the next turn: ``Script.thinking``
streams a ``thinking`` block first (``thinking_delta`` per word, then a
``signature_delta``) and ``Script.redacted_thinking`` a ``redacted_thinking``
block. The signature signs the block's exact text, and the ids of the tool calls
made in that turn carry a digest of the turn's signed blocks. A later request is
refused with HTTP 400 and Anthropic's ``invalid_request_error`` body when an
assistant turn that made such a call does not start with the very same
thinking / redacted blocks, in order, or when any thinking block's signature
does not match its text: dropped, reordered or altered reasoning fails the way
it fails against the real API.

tokenwire extensions 1.1: ``Script.items`` are content blocks sent before the
text. A ``compaction`` item is streamed as Anthropic does (``compaction_delta``)
with an ``encrypted_content`` that signs its summary (``compaction_block``), and
the calls of that turn carry its digest; a later request is refused when a
compaction block's summary differs from what it signed, or when such a call
comes without its compaction block. A ``server_tool_use`` item with
``Script.container`` set pauses the turn (``pause_turn``, the container in
``message_delta``, ``container_id``); the continuation is refused when the
paused block was altered or the request's ``container`` is not that container.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any, Final

import msgspec

from ..translate.anthropic import ERROR_TYPES, VENDOR_STOP_REASONS
from . import loops
from .anthropic_seals import (
    check_lossless,
    check_reasoning,
    compaction_block,
    container_id,
    content_digest,
    reasoning_blocks,
    redacted_data,
    sign_item,
    signature,
    turn_digest,
)
from .upstream import (
    RecordedRequest,
    Script,
    count_answer,
    cut_text,
    json_object,
    padding,
    split_words,
)

__all__ = [
    "COUNT_FIELDS",
    "count_tokens",
    "CONTENT_TYPE",
    "RESPONSE_HEADERS",
    "MCP_BETA",
    "SERVER_TOOLS",
    "STATUS_ERRORS",
    "agent_blocks",
    "argument_fragments",
    "bad_event",
    "check_request",
    "compaction_block",
    "container_id",
    "reasoning_blocks",
    "redacted_data",
    "refusal_body",
    "signature",
    "error_body",
    "error_event",
    "huge_event",
    "render",
]

CONTENT_TYPE: Final = "text/event-stream"
RESPONSE_HEADERS: Final = {"request-id": "req_fake0001", "anthropic-organization-id": "org_fake"}

#: HTTP status -> the Anthropic error ``type`` and message of its JSON error body.
STATUS_ERRORS: Final[dict[int, tuple[str, str]]] = {
    400: ("invalid_request_error", "Invalid request."),
    401: ("authentication_error", "invalid x-api-key"),
    403: ("permission_error", "Your API key does not have permission to use this resource."),
    404: ("not_found_error", "The requested resource could not be found."),
    405: ("invalid_request_error", "Method not allowed."),
    413: ("request_too_large", "Request exceeds the maximum allowed number of bytes."),
    429: ("rate_limit_error", "Number of requests has exceeded your rate limit."),
    500: ("api_error", "Internal server error"),
    504: ("timeout_error", "Request timed out."),
    529: ("overloaded_error", "Overloaded"),
}

_encode = msgspec.json.Encoder().encode
#: Fragment lengths cycled through: Anthropic cuts tool input anywhere.
_FRAGMENTS: Final = (7, 2, 5, 11, 3)


def _frame(payload: dict[str, Any]) -> bytes:
    return b"event: %s\ndata: %s\n\n" % (payload["type"].encode(), _encode(payload))


def error_event(code: str, message: str) -> bytes:
    """The in-stream ``event: error`` for a draft error code.

    ``context_length_exceeded`` is phrased the way Anthropic phrases it
    ("prompt is too long: ..."), so that a translator reading it back can tell.
    """
    if code == "context_length_exceeded" and "too long" not in message.lower():
        message = f"prompt is too long: {message}"
    error = {"type": ERROR_TYPES.get(code, "api_error"), "message": message}
    return _frame({"type": "error", "error": error})


def error_body(status: int) -> bytes:
    """Anthropic's JSON body for an HTTP error ``status``."""
    etype, message = STATUS_ERRORS.get(status, ("api_error", f"Upstream error {status}."))
    return _encode(
        {
            "type": "error",
            "error": {"type": etype, "message": message},
            "request_id": "req_fake0001",
        }
    )


def refusal_body(problem: str) -> bytes:
    """Anthropic's 400 body, ``invalid_request_error`` with the problem as its message."""
    return _encode(
        {
            "type": "error",
            "error": {"type": "invalid_request_error", "message": problem},
            "request_id": "req_fake0001",
        }
    )


# --- server tools, MCP, containers and their follow-up turns ----------
#
# As strict as Anthropic's request validation, per the anthropic SDK's types:
# a server tool is declared by its versioned ``type`` with its fixed ``name``;
# an assistant turn may carry the server's own blocks back (``server_tool_use``
# and its ``*_tool_result``, ``mcp_tool_use``/``mcp_tool_result``,
# ``compaction``, ``container_upload``), each result after the use it answers.
# When a turn ends with a user message, the fake model uses each declared
# server tool once (and the first MCP server's ``echo`` tool), before its text.

#: Server tool type prefix -> the name Anthropic requires with it.
SERVER_TOOLS: Final[dict[str, str]] = {
    "web_search": "web_search",
    "web_fetch": "web_fetch",
    "code_execution": "code_execution",
    "tool_search_tool_regex": "tool_search_tool_regex",
    "tool_search_tool_bm25": "tool_search_tool_bm25",
    "bash": "bash",
    "text_editor": "str_replace_based_edit_tool",
    "computer": "computer",
    "memory": "memory",
}
_SERVER_TOOL_TYPE: Final = re.compile(r"([a-z_]+?)_(\d{8})")
#: Block types of each role (the SDK's ``*BlockParam`` unions).
_USER_BLOCKS: Final = frozenset(
    {"text", "image", "document", "search_result", "tool_result", "container_upload"}
)
_ASSISTANT_BLOCKS: Final = frozenset(
    {
        "text",
        "thinking",
        "redacted_thinking",
        "tool_use",
        "server_tool_use",
        "web_search_tool_result",
        "web_fetch_tool_result",
        "code_execution_tool_result",
        "bash_code_execution_tool_result",
        "text_editor_code_execution_tool_result",
        "tool_search_tool_result",
        "mcp_tool_use",
        "mcp_tool_result",
        "compaction",
        "container_upload",
    }
)
#: Result block type -> the use block type it answers.
_RESULTS: Final = {
    "web_search_tool_result": "server_tool_use",
    "web_fetch_tool_result": "server_tool_use",
    "code_execution_tool_result": "server_tool_use",
    "bash_code_execution_tool_result": "server_tool_use",
    "text_editor_code_execution_tool_result": "server_tool_use",
    "tool_search_tool_result": "server_tool_use",
    "mcp_tool_result": "mcp_tool_use",
}
_USE_IDS: Final = {
    "server_tool_use": re.compile(r"srvtoolu_\w+"),
    "mcp_tool_use": re.compile(r"mcptoolu_\w+"),
}
MCP_BETA: Final = "mcp-client-2025-04-04"


def _tag_error(where: str, tag: object, expected: list[str]) -> str:
    tags = ", ".join(f"'{t}'" for t in expected)
    return (
        f"{where}: Input tag '{tag}' found using 'type' does not match any of the "
        f"expected tags: {tags}"
    )


def _check_tools(tools: object) -> str | None:
    if tools is None:
        return None
    if not isinstance(tools, list):
        return "tools: Input should be a valid list"
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict):
            return f"tools.{i}: Input should be an object"
        kind = tool.get("type", "custom")
        if kind == "custom":
            if not isinstance(tool.get("name"), str) or not isinstance(
                tool.get("input_schema"), dict
            ):
                return f"tools.{i}: a custom tool needs a name and an input_schema object"
            continue
        if kind == "mcp_toolset":
            if not isinstance(tool.get("mcp_server_name"), str):
                return f"tools.{i}.mcp_server_name: Field required"
            continue
        match = _SERVER_TOOL_TYPE.fullmatch(kind) if isinstance(kind, str) else None
        if match is None or match.group(1) not in SERVER_TOOLS:
            expected = ["custom", "mcp_toolset", *(f"{t}_YYYYMMDD" for t in SERVER_TOOLS)]
            return _tag_error(f"tools.{i}", kind, expected)
        name = SERVER_TOOLS[match.group(1)]
        if tool.get("name") != name:
            return f"tools.{i}.name: Input should be '{name}'"
    return None


def _check_block(role: str, block: dict[str, Any], where: str, uses: dict[str, str]) -> str | None:
    kind = block.get("type")
    allowed = _ASSISTANT_BLOCKS if role == "assistant" else _USER_BLOCKS
    if kind not in allowed:
        return _tag_error(f"{where}.type", kind, sorted(allowed))
    if kind in _USE_IDS:
        block_id = block.get("id")
        if not isinstance(block_id, str) or _USE_IDS[kind].fullmatch(block_id) is None:
            return f"{where}.id: String should match pattern '^{_USE_IDS[kind].pattern}$'"
        if not isinstance(block.get("name"), str) or not isinstance(block.get("input"), dict):
            return f"{where}: a {kind} block needs a name and an input object"
        if kind == "mcp_tool_use" and not isinstance(block.get("server_name"), str):
            return f"{where}.server_name: Field required"
        uses[block_id] = kind
    elif kind in _RESULTS:
        use = block.get("tool_use_id")
        if not isinstance(use, str) or uses.get(use) != _RESULTS[kind]:
            return (
                f"{where}: `{kind}` block with tool_use_id `{use}` must come after "
                f"the `{_RESULTS[kind]}` block with that id"
            )
        if "content" not in block:
            return f"{where}.content: Field required"
    elif kind == "compaction":
        if not isinstance(block.get("content"), str | None):
            return f"{where}.content: Input should be a valid string"
    elif kind == "container_upload":
        if not isinstance(block.get("file_id"), str):
            return f"{where}.file_id: Field required"
    return None


def _check_agent_fields(body: dict[str, Any], headers: dict[str, str]) -> str | None:
    """The server-tool, MCP, container and context-management rules (see above)."""
    problem = _check_tools(body.get("tools"))
    if problem is not None:
        return problem
    for i, message in enumerate(body["messages"]):
        content = message.get("content")
        if isinstance(content, str):
            continue
        if not isinstance(content, list):
            return f"messages.{i}.content: Input should be a valid string or list"
        uses: dict[str, str] = {}
        for k, block in enumerate(content):
            if not isinstance(block, dict):
                return f"messages.{i}.content.{k}: Input should be an object"
            problem = _check_block(message["role"], block, f"messages.{i}.content.{k}", uses)
            if problem is not None:
                return problem
    container = body.get("container")
    if container is not None and not isinstance(container, str | dict):
        return "container: Input should be a valid string or object"
    servers = body.get("mcp_servers")
    if servers is not None:
        if MCP_BETA not in headers.get("anthropic-beta", ""):
            return f"mcp_servers: requires the anthropic-beta header {MCP_BETA!r}"
        if not isinstance(servers, list):
            return "mcp_servers: Input should be a valid list"
        for j, server in enumerate(servers):
            if (
                not isinstance(server, dict)
                or server.get("type") != "url"
                or not isinstance(server.get("url"), str)
                or not isinstance(server.get("name"), str)
            ):
                return f"mcp_servers.{j}: a server is {{type: 'url', url, name}}"
    management = body.get("context_management")
    if management is not None:
        edits = management.get("edits") if isinstance(management, dict) else None
        if not isinstance(edits, list) or not all(
            isinstance(e, dict) and isinstance(e.get("type"), str) for e in edits
        ):
            return "context_management.edits: Input should be a list of edits with a type"
    return None


def _last_user_text(body: dict[str, Any]) -> str | None:
    """The text of the last message when it is a user's (a fresh turn), else ``None``."""
    last = body["messages"][-1]
    if last.get("role") != "user":
        return None
    content = last.get("content")
    if isinstance(content, str):
        return content
    texts = [b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"]
    return " ".join(texts) if texts else None


def _server_use(kind: str, question: str, n: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """The (input, result block) of the fake's use of server tool ``kind``."""
    use_id = f"srvtoolu_fake{n:04d}"
    if kind == "web_search":
        result = [
            {
                "type": "web_search_result",
                "url": "https://example.com/answer",
                "title": "The answer",
                "encrypted_content": redacted_data("web_search:" + question),
                "page_age": "April 1, 2026",
            }
        ]
        return {"query": question}, {
            "type": "web_search_tool_result",
            "tool_use_id": use_id,
            "content": result,
        }
    if kind == "web_fetch":
        fetched = {
            "type": "web_fetch_result",
            "url": "https://example.com/page",
            "retrieved_at": "2026-04-01T00:00:00Z",
            "content": {
                "type": "document",
                "source": {"type": "text", "media_type": "text/plain", "data": "Fetched text."},
                "title": "Page",
            },
        }
        return {"url": "https://example.com/page"}, {
            "type": "web_fetch_tool_result",
            "tool_use_id": use_id,
            "content": fetched,
        }
    if kind.startswith("tool_search"):
        found = {"type": "tool_search_tool_search_result", "tool_references": []}
        return {"query": question}, {
            "type": "tool_search_tool_result",
            "tool_use_id": use_id,
            "content": found,
        }
    ran = {
        "type": "code_execution_result",
        "stdout": "42\n",
        "stderr": "",
        "return_code": 0,
        "content": [],
    }
    return {"code": "print(6 * 7)"}, {
        "type": "code_execution_tool_result",
        "tool_use_id": use_id,
        "content": ran,
    }


def agent_blocks(body: dict[str, Any]) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """The server's blocks before the text, as ``(content_block_start, deltas)``:
    one use and result per declared server tool (and MCP server), on a fresh turn."""
    question = _last_user_text(body)
    if question is None:
        return []
    out: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
    n = 0
    for tool in body.get("tools") or []:
        kind = tool.get("type", "custom")
        match = _SERVER_TOOL_TYPE.fullmatch(kind) if kind not in ("custom", "mcp_toolset") else None
        if match is None or match.group(1) not in (
            "web_search",
            "web_fetch",
            "code_execution",
            "tool_search_tool_regex",
            "tool_search_tool_bm25",
        ):
            continue
        n += 1
        tool_input, result = _server_use(match.group(1), question, n)
        start = {
            "type": "server_tool_use",
            "id": f"srvtoolu_fake{n:04d}",
            "name": tool["name"],
            "input": {},
        }
        fragments = argument_fragments(tool_input)
        out.append((start, [{"type": "input_json_delta", "partial_json": f} for f in fragments]))
        out.append((result, []))
    for j, server in enumerate(body.get("mcp_servers") or []):
        use_id = f"mcptoolu_fake{j + 1:04d}"
        start = {
            "type": "mcp_tool_use",
            "id": use_id,
            "name": "echo",
            "server_name": server["name"],
            "input": {},
        }
        fragments = argument_fragments({"text": question})
        out.append((start, [{"type": "input_json_delta", "partial_json": f} for f in fragments]))
        result = {
            "type": "mcp_tool_result",
            "tool_use_id": use_id,
            "is_error": False,
            "content": [{"type": "text", "text": question}],
        }
        out.append((result, []))
    return out


def _server_usage(blocks: list[tuple[dict[str, Any], list[dict[str, Any]]]]) -> dict[str, int]:
    counts = {"web_search_requests": 0, "web_fetch_requests": 0}
    for start, _ in blocks:
        if start["type"] == "server_tool_use" and start["name"] in ("web_search", "web_fetch"):
            counts[f"{start['name']}_requests"] += 1
    return counts


def check_request(request: RecordedRequest) -> str | None:
    """The problem with a Messages request, or ``None`` when Anthropic would take it."""
    if not request.path.split("?", 1)[0].endswith("/v1/messages"):
        return f"expected POST .../v1/messages, got {request.path}"
    if "anthropic-version" not in request.headers:
        return "the anthropic-version header is required"
    body = json_object(request)
    if isinstance(body, str):
        return body
    max_tokens = body.get("max_tokens")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        return "max_tokens: required, an integer >= 1"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: a non-empty array is required"
    beta = request.headers.get("anthropic-beta", "")
    problem = loops.anthropic_roles(messages, beta) or loops.anthropic_results(messages)
    if problem is not None:
        return problem
    if body.get("stream") is not True:
        return "the fake only streams: stream must be true"
    return (
        _check_agent_fields(body, request.headers)
        or check_reasoning(messages, thinking=loops.anthropic_thinking(body))
        or check_lossless(body, messages)
    )


def argument_fragments(arguments: dict[str, Any]) -> list[str]:
    """Tool input as JSON text cut into ``input_json_delta`` fragments (mid-token).

    The first fragment is ``""``, as Anthropic sends it.
    """
    return ["", *cut_text(json.dumps(arguments), _FRAGMENTS)]


def bad_event(event: bytes) -> bytes:
    """One event with its JSON broken (the framing and ``event:`` line kept)."""
    i = event.find(b"data: ")
    if i < 0:
        return event + b"data: {\n\n"
    return event[: i + 6] + b"{" + event[i + 6 :]


def huge_event(size: int) -> Iterator[bytes]:
    """One ``ping`` of about ``size`` bytes (padded), in pieces of 1 MiB."""
    head, tail = b'event: ping\ndata: {"type":"ping","pad":"', b'"}\n\n'
    yield head
    yield from padding(size - len(head) - len(tail))
    yield tail


_PING: Final = _frame({"type": "ping"})


def render(script: Script, *, model: str, request: RecordedRequest) -> list[bytes]:
    """The Anthropic Messages stream for ``script``, one item per SSE event."""
    # The API's message object, written here apart from the translator's aggregator
    # (translate/anthropic/aggregate.py) on purpose: the fake is the API's stand-in.
    message: dict[str, Any] = {
        # Unique per turn as Anthropic's are: Claude Code merges the blocks of
        # streamed messages that share an id into one assistant message.
        "id": f"msg_fake_{content_digest('message', request.body.decode('utf-8', 'replace'))}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {
            "input_tokens": script.input_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": 1,
            "service_tier": "standard",
        },
    }
    out = [_frame({"type": "message_start", "message": message})]
    index = 0

    def block(content_block: dict[str, Any], deltas: list[dict[str, Any]]) -> None:
        nonlocal index
        out.append(
            _frame({"type": "content_block_start", "index": index, "content_block": content_block})
        )
        if index == 0:
            out.append(_PING)
        for delta in deltas:
            out.append(_frame({"type": "content_block_delta", "index": index, "delta": delta}))
        out.append(_frame({"type": "content_block_stop", "index": index}))
        index += 1

    signed = reasoning_blocks(script)
    for signed_block in signed:
        if signed_block["type"] == "thinking":
            deltas: list[dict[str, Any]] = [
                {"type": "thinking_delta", "thinking": p} for p in split_words(script.thinking)
            ]
            deltas.append({"type": "signature_delta", "signature": signed_block["signature"]})
            block({"type": "thinking", "thinking": "", "signature": ""}, deltas)
        else:
            block(signed_block, [])
    digest = f"_{turn_digest(signed)}" if signed else ""
    sent = json_object(request)
    # A script with items of its own (the lossless loops) says the whole turn.
    agent = (
        agent_blocks(sent)
        if not script.items
        and isinstance(sent, dict)
        and isinstance(sent.get("messages"), list)
        and sent["messages"]
        else []
    )
    for start, agent_deltas in agent:
        block(start, agent_deltas)
    # tokenwire extensions 1.1: compaction / server tool blocks (signed), before the text.
    for item in map(sign_item, script.items):
        if item["type"] == "compaction":
            deltas = [
                {
                    "type": "compaction_delta",
                    "content": item["content"],
                    "encrypted_content": item["encrypted_content"],
                }
            ]
            block({"type": "compaction", "content": None}, deltas)
            digest = digest or f"_cmp{content_digest('compaction', item['content'])}"
        elif item["type"] == "server_tool_use":
            fragments = argument_fragments(item.get("input", {}))
            block(
                {**item, "input": {}},
                [{"type": "input_json_delta", "partial_json": f} for f in fragments],
            )
        else:
            block(item, [])
    pieces = script.pieces
    if pieces:
        block({"type": "text", "text": ""}, [{"type": "text_delta", "text": p} for p in pieces])
    for i, call in enumerate(script.tool_calls):
        if index:
            out.append(_PING)
        fragments = argument_fragments(call.arguments)
        block(
            {
                "type": "tool_use",
                "id": call.id or f"toolu_fake{i:04d}{digest}",
                "name": call.name,
                "input": {},
            },
            [{"type": "input_json_delta", "partial_json": f} for f in fragments],
        )
    if script.error is not None:
        out.append(error_event(*script.error))
        return out
    delta: dict[str, Any] = {
        "stop_reason": VENDOR_STOP_REASONS.get(script.final_stop_reason, "end_turn"),
        "stop_sequence": None,
    }
    final_usage: dict[str, Any] = {"output_tokens": script.usage_output_tokens}
    if agent:
        final_usage["server_tool_use"] = _server_usage(agent)
        if any(start.get("name") == "code_execution" for start, _ in agent):
            delta["container"] = {"id": "container_fake0001", "expires_at": "2026-12-31T00:00:00Z"}
    paused = [i for i in map(sign_item, script.items) if i.get("type") == "server_tool_use"]
    if script.container is not None and paused:
        # The turn pauses on its (long-running) server tool, in a container.
        delta["stop_reason"] = "pause_turn"
        delta["container"] = {
            "id": container_id(paused[-1]["id"]),
            "expires_at": "2026-12-01T00:00:00Z",
        }
    out.append(_frame({"type": "message_delta", "delta": delta, "usage": final_usage}))
    out.append(_frame({"type": "message_stop"}))
    return out


#: What ``POST /v1/messages/count_tokens`` takes (Anthropic refuses the rest).
COUNT_FIELDS: Final = frozenset(
    {"model", "messages", "system", "tools", "tool_choice", "thinking", "mcp_servers"}
)


def count_tokens(request: RecordedRequest) -> tuple[int, bytes] | None:
    """The answer of ``POST /v1/messages/count_tokens`` (``None``: another path)."""
    return count_answer(
        request,
        "/v1/messages/count_tokens",
        COUNT_FIELDS,
        ("model", "messages"),
        lambda n: {"input_tokens": n},
        refusal_body,
    )
