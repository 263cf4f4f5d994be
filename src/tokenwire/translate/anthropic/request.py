"""A standard request -> ``POST {base_url}/v1/messages`` (§7.1)."""

from __future__ import annotations

import base64
import binascii
from typing import Any, Final

import msgspec

from ... import request as rq
from ...errors import InvalidRequest
from .. import _extensions as x
from .. import _lossless
from .._base import VendorRequest
from .._request import reasoning_history, vendor_parameters, versioned_url

_decode_any = msgspec.json.Decoder().decode
_encode = msgspec.json.Encoder().encode


#: The ``anthropic-version`` header sent upstream.
ANTHROPIC_VERSION: Final = "2023-06-01"

#: Anthropic requires ``max_tokens``; used when the standard request has none (§4.5).
DEFAULT_MAX_TOKENS: Final = 4096


# --- request side -----------------------------------------------------------------


def _source(part: rq.ImagePart | rq.DocumentPart, path: str) -> dict[str, Any]:
    if isinstance(part, rq.DocumentPart) and part.media_type.split(";")[0].strip() == "text/plain":
        # Anthropic takes base64 documents as PDF only; plain text goes as text.
        try:
            text = base64.b64decode(part.data, validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            raise InvalidRequest(
                "a text/plain document must be base64 of UTF-8 text", path=f"{path}.data"
            ) from None
        return {"type": "text", "media_type": "text/plain", "data": text}
    return {"type": "base64", "media_type": part.media_type, "data": part.data}


def _part(part: rq.Part, path: str) -> dict[str, Any] | None:
    """One standard part as an Anthropic content block (``None``: nothing to send)."""
    if isinstance(part, rq.TextPart):
        # Anthropic rejects empty text blocks.
        return {"type": "text", "text": part.text} if part.text else None
    if isinstance(part, rq.ImagePart):
        return {"type": "image", "source": _source(part, path)}
    if isinstance(part, rq.DocumentPart):
        return {"type": "document", "source": _source(part, path)}
    raise InvalidRequest("audio parts are not supported by Anthropic Messages", path=path)


def _blocks(content: str | list[rq.Part] | None, path: str) -> list[dict[str, Any]]:
    if content is None or content == "":
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    blocks = (_part(part, f"{path}.content[{k}]") for k, part in enumerate(content))
    return [b for b in blocks if b is not None]


def _tool_input(arguments: str, path: str) -> dict[str, Any]:
    if not arguments.strip():
        return {}
    try:
        value = _decode_any(arguments)
    except msgspec.DecodeError:
        raise InvalidRequest("tool call arguments are not valid JSON", path=path) from None
    if not isinstance(value, dict):
        raise InvalidRequest("tool call arguments must be a JSON object", path=path)
    return value


def _system_text(message: rq.Message, path: str) -> str:
    if isinstance(message.content, list):
        for k, part in enumerate(message.content):
            if not isinstance(part, rq.TextPart):
                raise InvalidRequest(
                    "Anthropic's system prompt takes text only", path=f"{path}.content[{k}]"
                )
    return message.text


def _reasoning_blocks(req: rq.Request) -> dict[int, list[dict[str, Any]]]:
    """Message index -> the thinking / redacted_thinking blocks to send back first.

    From ``extensions["tokenwire:reasoning_history"]`` (docs/extensions.md). Parts
    bound to another vendor are dropped: Anthropic cannot check their signatures.
    Raises ``InvalidRequest`` naming the malformed entry.
    """
    out: dict[int, list[dict[str, Any]]] = {}
    for message, parts in reasoning_history(req):
        blocks = out.setdefault(message, [])
        for part in parts:
            if part.get(x.VENDOR, "anthropic") != "anthropic":
                continue
            redacted, signature = part.get(x.REDACTED), part.get(x.SIGNATURE)
            if isinstance(redacted, str):
                blocks.append({"type": "redacted_thinking", "data": redacted})
            elif isinstance(signature, str) and isinstance(part.get("text"), str):
                blocks.append(
                    {"type": "thinking", "thinking": part["text"], "signature": signature}
                )
            # else: reasoning without a signature; Anthropic refuses unsigned thinking.
    return out


def _history_blocks(
    req: rq.Request,
) -> dict[int, tuple[list[dict[str, Any]], list[dict[str, Any]]]]:
    """1.1: message index -> (blocks before its reasoning, blocks after it).

    From ``extensions["tokenwire:block_history"]``: this vendor's compaction
    blocks go first (they stand for the context before them), then server tool
    blocks (a ``pause_turn`` continuation sends them back as they came) and MCP
    blocks, byte-identical. Other vendors' blocks are dropped (docs/translation.md).
    """
    out: dict[int, tuple[list[dict[str, Any]], list[dict[str, Any]]]] = {}
    for message, parts in _lossless.block_history(req).items():
        first: list[dict[str, Any]] = []
        rest: list[dict[str, Any]] = []
        for part in parts:
            kind = part.get("type")
            if kind == x.COMPACTION and part.get(x.VENDOR) == "anthropic":
                first.append({"type": "compaction", **part[x.COMPACTION]})
            elif kind == x.SERVER_TOOL:
                block = part[x.SERVER_TOOL]
                btype = block.get("type")
                if isinstance(btype, str) and (
                    btype == "server_tool_use" or btype.endswith("_tool_result")
                ):
                    rest.append(block)
            elif kind == x.MCP and part.get(x.VENDOR) == "anthropic":
                raw = part.get(x.RAW)
                if isinstance(raw, dict):
                    rest.append(raw)
        out[message] = (first, rest)
    return out


def _turns(
    messages: list[rq.Message],
    reasoning: dict[int, list[dict[str, Any]]] | None = None,
    history: dict[int, tuple[list[dict[str, Any]], list[dict[str, Any]]]] | None = None,
) -> tuple[list[str], list[dict[str, Any]]]:
    """System texts, and user/assistant turns with same-role neighbours merged.

    ``reasoning`` (message index -> blocks) goes first in its assistant message.
    """
    system: list[str] = []
    turns: list[tuple[str, list[dict[str, Any]]]] = []
    for i, message in enumerate(messages):
        path = f"messages[{i}]"
        role: str = message.role
        if role == "system":
            # Anthropic has no system role in messages: every system message,
            # wherever it stands, goes to the top-level system prompt.
            text = _system_text(message, path)
            if text:
                system.append(text)
            continue
        if role == "tool":
            result: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.tool_call_id}
            content = message.content
            if isinstance(content, list):
                result["content"] = _blocks(content, path)
            elif content:
                result["content"] = content
            role, blocks = "user", [result]
        else:
            # Anthropic: thinking and redacted blocks first, exactly as they came
            # (1.1: after a compaction block, and before server tool / MCP blocks).
            first, rest = history.get(i, ([], [])) if history else ([], [])
            blocks = [*first, *(reasoning.get(i, ()) if reasoning else ()), *rest]
            blocks += _blocks(message.content, path)
            for k, call in enumerate(message.tool_calls or ()):
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": call.id,
                        "name": call.name,
                        "input": _tool_input(call.arguments, f"{path}.tool_calls[{k}].arguments"),
                    }
                )
        if not blocks:
            continue
        if turns and turns[-1][0] == role:
            turns[-1][1].extend(blocks)  # Anthropic wants user/assistant alternating
        else:
            turns.append((role, blocks))
    out: list[dict[str, Any]] = []
    for role, blocks in turns:
        if role == "user":
            # Anthropic wants a user turn's tool_result blocks before its other blocks.
            blocks.sort(key=lambda b: b["type"] != "tool_result")
        if len(blocks) == 1 and blocks[0]["type"] == "text":
            out.append({"role": role, "content": blocks[0]["text"]})
        else:
            out.append({"role": role, "content": blocks})
    return system, out


#: Standard parameter -> Anthropic field (``max_tokens`` has a default: see below).
_PARAMETERS: Final = {
    "temperature": "temperature",
    "top_p": "top_p",
    "stop_sequences": "stop_sequences",
}


def request_body(req: rq.Request, *, upstream_model: str | None = None) -> dict[str, Any]:
    """The Anthropic Messages JSON body for the standard request ``req``.

    Returns a dict ready to encode. Raises ``InvalidRequest`` (``.path`` in the
    standard request) for what Anthropic cannot take: an audio part, tool
    call arguments that are not a JSON object, a non-text system part, a
    ``vendor:anthropic`` extension that is not an object.
    """
    system, messages = _turns(req.messages, _reasoning_blocks(req), _history_blocks(req))
    body: dict[str, Any] = {"model": upstream_model or req.model}
    params = req.parameters or rq.Parameters()
    body["max_tokens"] = params.max_tokens or DEFAULT_MAX_TOKENS
    if system:
        body["system"] = "\n\n".join(system)
    body["messages"] = messages
    if req.tools:
        tools = []
        for tool in req.tools:
            entry: dict[str, Any] = {"name": tool.name}
            if tool.description:
                entry["description"] = tool.description
            entry["input_schema"] = tool.parameters
            tools.append(entry)
        body["tools"] = tools
    body.update(vendor_parameters(params, _PARAMETERS))
    container = _lossless.container(req)
    if container is not None:
        body["container"] = container  # 1.1: a pause_turn continuation names it
    extension = req.extension("vendor:anthropic")
    if extension is not None:
        if not isinstance(extension, dict):
            raise InvalidRequest("must be an object", path='extensions["vendor:anthropic"]')
        body.update(extension)  # §4.7: vendor fields (thinking, tool_choice, top_k...)
    body["stream"] = True
    return body


# The signature is `_contract.RequestBuilder`, the same for every vendor.
def build_request(
    req: rq.Request,
    *,
    base_url: str,
    api_key: str | None = None,
    upstream_model: str | None = None,
    headers: dict[str, str] | None = None,
) -> VendorRequest:
    """The ``POST {base_url}/v1/messages`` request for the standard request ``req``.

    ``upstream_model`` replaces ``req.model``; ``headers`` are added last (they
    win). Raises ``InvalidRequest`` as ``request_body`` does.
    """
    body = request_body(req, upstream_model=upstream_model)
    out = {
        "content-type": "application/json",
        "accept": "text/event-stream",
        "anthropic-version": ANTHROPIC_VERSION,
    }
    if api_key:
        out["x-api-key"] = api_key
    if headers:
        out.update(headers)
    return VendorRequest(
        url=versioned_url(base_url, "v1", "messages"), headers=out, body=_encode(body)
    )


def thinking_enabled(req: rq.Request) -> bool:
    """Whether ``extensions["vendor:anthropic"]`` switches extended thinking on."""
    extension = req.extension("vendor:anthropic")
    thinking = extension.get("thinking") if isinstance(extension, dict) else None
    return isinstance(thinking, dict) and thinking.get("type") not in (None, "disabled")
