"""tokenwire extension events (``docs/extensions.md``, "Event extensions").

What a vendor stream carries beyond the draft's seven events travels as
namespaced event types (§5.2, §9.2: a conforming parser ignores them; their
names take the dot, ``tokenwire.block``, because an event type name has no
colon, docs/conformance.md ruling 13; their fields take ``tokenwire:``, §4.7), so it
passes every layer unchanged: the ``Writer`` restamps an unregistered event
and keeps its JSON, the validator accepts it anywhere inside the stream, and
the clients hand it over as ``events.UnknownEvent``. Three types:

* ``tokenwire.block``: metadata of standard block ``index``: a reasoning
  block's opaque ``tokenwire:signature`` or a redacted reasoning block's
  ``tokenwire:redacted`` data (both with ``tokenwire:vendor``, the vendor they
  are bound to), a server-side tool block (``tokenwire:server_tool``, shown,
  never executed), a citation of a text block (``tokenwire:citation``);
* ``tokenwire.usage``: usage details next to the standard ``usage`` event
  (``tokenwire:cache_read_input_tokens``, ``tokenwire:cache_creation_input_tokens``);
* ``tokenwire.stop``: the vendor's raw stop reason (``tokenwire:raw_stop_reason``);
* ``tokenwire.tool_delta``: a fragment of a tool call's arguments, for live
  display only, when the request sets ``tokenwire:tool_deltas`` (emit it with
  ``Writer.tool_delta``; ``tool.call`` stays the one event to execute).

The JSON Schema of each is in ``tokenwire/schemas/`` and the lifecycle
validator checks them (docs/conformance.md ruling 19).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import msgspec

from .. import events as ev

__all__ = [
    "CHOICE",
    "BLOCK",
    "CACHE_CREATION",
    "CACHE_READ",
    "CITATION",
    "ENCRYPTED",
    "ESTIMATED",
    "ITEM_ID",
    "RAW",
    "TOOL_CALL_ID",
    "TOOL_USE_INPUT",
    "RAW_STOP_REASON",
    "REASONING",
    "REASONING_HISTORY",
    "REASONING_TOKENS",
    "REDACTED",
    "REFUSAL",
    "SERVER_TOOL",
    "SIGNATURE",
    "STOP",
    "TOOL_DELTA",
    "TOOL_DELTAS",
    "USAGE",
    "VENDOR",
    "APPROVAL",
    "APPROVALS",
    "AUDIO",
    "BLOCK_HISTORY",
    "CODE",
    "COMPACTION",
    "CONTAINER",
    "LOGPROBS",
    "MCP",
    "STATUS",
    "TOOL_KIND",
    "TOOLS",
    "URL_CONTEXT",
    "choice_mark",
    "extension",
    "fields",
]

BLOCK: Final = "tokenwire.block"
USAGE: Final = "tokenwire.usage"
STOP: Final = "tokenwire.stop"
TOOL_DELTA: Final = "tokenwire.tool_delta"

REASONING: Final = "tokenwire:reasoning"
SIGNATURE: Final = "tokenwire:signature"
REDACTED: Final = "tokenwire:redacted"
VENDOR: Final = "tokenwire:vendor"
SERVER_TOOL: Final = "tokenwire:server_tool"
CITATION: Final = "tokenwire:citation"
RAW_STOP_REASON: Final = "tokenwire:raw_stop_reason"
CACHE_READ: Final = "tokenwire:cache_read_input_tokens"
CACHE_CREATION: Final = "tokenwire:cache_creation_input_tokens"
#: ``tokenwire.usage``: the reasoning tokens inside ``output_tokens`` (OpenAI's
#: ``completion_tokens_details.reasoning_tokens``, Gemini's ``thoughtsTokenCount``).
REASONING_TOKENS: Final = "tokenwire:reasoning_tokens"
#: On ``usage`` (``events.Usage.estimated``) or ``tokenwire.usage``: counts the gateway estimated.
ESTIMATED: Final = "tokenwire:estimated"
#: ``tokenwire.block``: block ``index`` carries the model's refusal, not an answer.
REFUSAL: Final = "tokenwire:refusal"
#: On ``tokenwire.block`` / a reasoning part: encrypted reasoning (Responses ``encrypted_content``).
ENCRYPTED: Final = "tokenwire:encrypted_content"
#: ``tokenwire.block``: the vendor's id of the item block ``index`` came from (the
#: Responses API's reasoning item id ``rs_...``, which the next turn sends back).
ITEM_ID: Final = "tokenwire:id"

#: Request extension: ``true`` asks for ``tokenwire.tool_delta`` events.
TOOL_DELTAS: Final = "tokenwire:tool_deltas"
#: ``tokenwire.usage``: the server tools' prompt tokens inside ``input_tokens`` (Gemini).
TOOL_USE_INPUT: Final = "tokenwire:tool_use_input_tokens"
#: ``tokenwire.block`` / a reasoning part: the tool call a signature belongs to.
TOOL_CALL_ID: Final = "tokenwire:tool_call_id"
#: A vendor object kept as is because the standard has no field for it.
RAW: Final = "tokenwire:raw"
#: ``tokenwire.block``: block ``index`` belongs to choice (candidate) N > 0 of a
#: vendor answering several (OpenAI ``n``, Gemini ``candidateCount``); unmarked
#: blocks are choice 0.
CHOICE: Final = "tokenwire:choice"


def choice_mark(choice: int, index: int) -> ev.UnknownEvent | None:
    """The ``tokenwire.block`` that puts block ``index`` on ``choice`` (``None`` for choice 0)."""
    return extension(BLOCK, {"index": index, CHOICE: choice}) if choice else None


#: Request extension: ``[{"message": i, "parts": [reasoning part, ...]}, ...]``, the
#: reasoning parts (``{"type": "tokenwire:reasoning", ...}``) of assistant message ``i``.
REASONING_HISTORY: Final = "tokenwire:reasoning_history"

# --- tokenwire extensions 1.1 (docs/extensions.md, "New in 1.1") -------------------

#: ``tokenwire.block``: block ``index`` carries a ``tool.call`` of a client-run tool
#: that is not a JSON function: ``"custom"`` (free-form input, the call's
#: ``arguments`` are ``{"input": <raw text>}``) or ``"apply_patch"`` (the
#: ``arguments`` are the patch operation). Sent before the ``tool.call``.
TOOL_KIND: Final = "tokenwire:tool_kind"
#: ``tokenwire.block``: a request for the user's consent before a tool runs (an MCP
#: approval): ``{"id", "name", "arguments", "server_label"?}``. Never executed, never
#: a result: the answer goes in the next request's ``tokenwire:approvals``.
APPROVAL: Final = "tokenwire:approval"
#: ``tokenwire.block``: an MCP item the vendor ran: ``{"kind": "list_tools" | "call" |
#: "result", "id", "server_label", ...}``; a result names its call in ``call_id``.
MCP: Final = "tokenwire:mcp"
#: ``tokenwire.block``: a compaction of the context (summary and/or encrypted
#: content), to be sent back byte-identical on the next turn (with ``tokenwire:vendor``).
COMPACTION: Final = "tokenwire:compaction"
#: ``tokenwire.stop``: the container the turn ran in (``{"id", "expires_at"?}``),
#: which a ``pause_turn`` continuation must name; request extension: the same.
CONTAINER: Final = "tokenwire:container"
#: ``tokenwire.block``: the log probabilities of text block ``index``'s tokens.
LOGPROBS: Final = "tokenwire:logprobs"
#: ``tokenwire.block``: audio output of block ``index``: ``{"id"?, "data"?,
#: "transcript"?, "expires_at"?, "format"?}`` (data and transcript are fragments).
AUDIO: Final = "tokenwire:audio"
#: ``tokenwire.block``: the URLs the model retrieved, ``[{"url", "status"}]``.
URL_CONTEXT: Final = "tokenwire:url_context"
#: ``tokenwire.block``: code the vendor ran (``{"language", "code"}``) or its result
#: (``{"outcome", "output"}``): one shape for Gemini and Responses code execution.
CODE: Final = "tokenwire:code"
#: ``tokenwire.block``: the vendor's own status of the item block ``index`` came from.
STATUS: Final = "tokenwire:status"

#: Request extension: ``{tool name: {"kind": "custom", "format"?: {...}} |
#: {"kind": "apply_patch"}}``, the declared tools that are not JSON functions.
TOOLS: Final = "tokenwire:tools"
#: Request extension: ``[{"id": approval id, "approve": bool, "reason"?: str}]``.
APPROVALS: Final = "tokenwire:approvals"
#: Request extension: ``[{"message": i, "parts": [part, ...]}]``, the vendor-bound
#: blocks of assistant message ``i`` (compaction, MCP, approvals, tool kinds, audio,
#: server tools), sent back the way the vendor requires.
BLOCK_HISTORY: Final = "tokenwire:block_history"

_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder().decode


def extension(kind: str, body: Mapping[str, Any]) -> ev.UnknownEvent:
    """An unstamped extension event of type ``kind`` (``Writer.add`` stamps it)."""
    data = _encode({"type": kind, "v": ev.VERSION, "seq": 0, **body}).decode()
    return ev.UnknownEvent(type=kind, data=data, v=ev.VERSION, seq=0)


def fields(event: ev.Event, kind: str | None = None) -> dict[str, Any] | None:
    """The JSON object of a tokenwire extension event (of type ``kind``), else ``None``."""
    # Extension event types take the dot (docs/conformance.md ruling 13).
    if not isinstance(event, ev.UnknownEvent) or not event.type.startswith("tokenwire."):
        return None
    if kind is not None and event.type != kind:
        return None
    try:
        obj = _decode(event.data)
    except msgspec.DecodeError:
        return None
    return obj if isinstance(obj, dict) else None
