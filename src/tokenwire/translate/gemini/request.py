"""A standard request -> ``POST {base}/v1beta/models/{model}:streamGenerateContent?alt=sse``.

The body's ``contents`` carry the history (system -> ``systemInstruction``,
assistant -> role ``model``, images/audio/documents -> ``inlineData``, tool
calls -> ``functionCall`` parts, tool results -> ``functionResponse`` parts
named after the matching assistant tool call), tools -> ``functionDeclarations``,
parameters -> ``generationConfig``. An assistant message's reasoning history
(``extensions["tokenwire:reasoning_history"]``, docs/extensions.md) puts each
``thoughtSignature`` back on the part it came with: thought parts first, the
signature of a tool call on that call's ``functionCall`` part, the answer's
on its last text part. Parts bound to another vendor are dropped: Gemini
cannot check their signatures. The extensions ``"vendor:google"`` then
``"vendor:gemini"`` are deep-merged into the body last.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Final
from urllib.parse import quote

import msgspec

from ...errors import InvalidRequest
from ...request import AudioPart, DocumentPart, ImagePart, Message, Request, TextPart
from .. import _extensions as x
from .._base import VendorRequest
from .._request import merge_extensions, reasoning_history, sse_headers

#: Extension keys merged into the body, in this order (§4.7).
EXTENSION_KEYS = ("vendor:google", "vendor:gemini")
#: Gemini's documented stand-in signature for a function call it did not sign.
UNSIGNED_CALL: Final = "skip_thought_signature_validator"

_encode = msgspec.json.Encoder().encode
_VENDOR = "gemini"


class _Reasoning:
    """What one assistant message carries back to Gemini (from its reasoning history)."""

    __slots__ = ("thoughts", "calls", "answer", "raw")

    def __init__(self) -> None:
        self.thoughts: list[dict[str, Any]] = []  # thought parts, in order
        self.calls: dict[str, str] = {}  # tool call id -> its thoughtSignature
        self.answer: str | None = None  # the answer text's thoughtSignature
        #: Server-tool parts (executableCode...), in order (``tokenwire:server_tool``
        #: or ``tokenwire:raw``: the part as Gemini sent it).
        self.raw: list[dict[str, Any]] = []


def _reasoning(req: Request) -> dict[int, _Reasoning]:
    """Message index -> what its reasoning history puts back (Gemini parts only).

    Raises ``InvalidRequest`` naming the malformed entry.
    """
    out: dict[int, _Reasoning] = {}
    for message, parts in reasoning_history(req):
        found = out.setdefault(message, _Reasoning())
        for part in parts:
            if part.get(x.VENDOR) != _VENDOR:
                continue  # bound to another vendor: Gemini cannot check it
            signature = part.get(x.SIGNATURE)
            signature = signature if isinstance(signature, str) and signature else None
            call_id, text = part.get(x.TOOL_CALL_ID), part.get("text")
            raw = part.get(x.SERVER_TOOL, part.get(x.RAW))
            if isinstance(raw, dict) and "groundingMetadata" in raw:
                continue  # candidate metadata, not a part: nothing to send back
            if isinstance(call_id, str):
                if signature is not None:
                    found.calls[call_id] = signature
            elif isinstance(raw, dict):
                found.raw.append(dict(raw))
            elif isinstance(text, str):
                thought: dict[str, Any] = {"text": text, "thought": True}
                if signature is not None:
                    thought["thoughtSignature"] = signature
                found.thoughts.append(thought)
            elif signature is not None:
                found.answer = signature
    return out


def _parts(message: Message, path: str) -> list[dict[str, Any]]:
    content = message.content
    if content is None:
        return []
    if isinstance(content, str):
        return [{"text": content}] if content else []
    parts: list[dict[str, Any]] = []
    for k, part in enumerate(content):
        if isinstance(part, TextPart):
            if part.text:
                parts.append({"text": part.text})
        elif isinstance(part, ImagePart | AudioPart | DocumentPart):
            parts.append({"inlineData": {"mimeType": part.media_type, "data": part.data}})
        else:  # pragma: no cover - the Part union is closed
            raise InvalidRequest("unsupported content part for gemini", path=f"{path}.content[{k}]")
    return parts


def _json_object(text: str) -> dict[str, Any] | None:
    try:
        value = msgspec.json.decode(text)
    except msgspec.DecodeError:
        return None
    return value if isinstance(value, dict) else None


def _model_parts(
    message: Message, path: str, names: dict[str, str], reasoning: _Reasoning | None
) -> list[dict[str, Any]]:
    """An assistant message's ``model`` parts: thoughts, text, server tools, calls."""
    parts = list(reasoning.thoughts) if reasoning else []
    text = _parts(message, path)
    if reasoning is not None and reasoning.answer is not None:
        # The answer's signature goes back on its last text part (an empty one
        # when the answer had no text, as Gemini sends it).
        last = next((p for p in reversed(text) if "text" in p), None)
        if last is None:
            text.append(last := {"text": ""})
        last["thoughtSignature"] = reasoning.answer
    parts += text
    if reasoning is not None:
        parts += reasoning.raw
    for j, call in enumerate(message.tool_calls or ()):
        args = _json_object(call.arguments) if call.arguments.strip() else {}
        if args is None:
            raise InvalidRequest(
                "tool call arguments must be a JSON object for gemini",
                path=f"{path}.tool_calls[{j}].arguments",
            )
        names[call.id] = call.name
        part: dict[str, Any] = {"functionCall": {"name": call.name, "args": args}}
        signature = reasoning.calls.get(call.id) if reasoning is not None else None
        if signature is not None:
            part["thoughtSignature"] = signature  # Gemini 3 refuses the turn without it
        parts.append(part)
    return parts


def _contents(
    messages: Iterable[Message], reasoning: dict[int, _Reasoning]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(systemInstruction parts, contents)`` for the history."""
    system: list[dict[str, Any]] = []
    contents: list[dict[str, Any]] = []
    names: dict[str, str] = {}  # tool call id -> function name, from assistant turns
    # Gemini pairs functionResponse parts with the turn's functionCall parts by
    # order, not id: each result's place is its call's place (a Chat client may
    # answer [Paris, Vienna] as [Vienna, Paris]).
    places: dict[int, int] = {}  # id(functionResponse part) -> its call's place
    calls: dict[str, int] = {}  # the last assistant turn's call ids -> their places
    for i, message in enumerate(messages):
        path = f"messages[{i}]"
        if message.role == "system":
            for part in _parts(message, path):
                if "text" not in part:
                    raise InvalidRequest(
                        "gemini system instructions carry text only", path=f"{path}.content"
                    )
                system.append(part)
        elif message.role == "user":
            contents.append({"role": "user", "parts": _parts(message, path) or [{"text": ""}]})
        elif message.role == "assistant":
            calls = {call.id: k for k, call in enumerate(message.tool_calls or ())}
            parts = _model_parts(message, path, names, reasoning.get(i))
            contents.append({"role": "model", "parts": parts or [{"text": ""}]})
        else:  # tool
            call_id = message.tool_call_id or ""
            name = names.get(call_id)
            if name is None:
                raise InvalidRequest(
                    "no earlier assistant tool call has this id (gemini needs the function name)",
                    path=f"{path}.tool_call_id",
                )
            text = message.text
            response = _json_object(text)
            part = {
                "functionResponse": {
                    "name": name,
                    "response": response if response is not None else {"result": text},
                }
            }
            places[id(part)] = calls.get(call_id, len(calls))
            last = contents[-1] if contents else None
            # Parallel results go back in one turn, as Gemini expects.
            if (
                last is not None
                and last["role"] == "user"
                and all("functionResponse" in p for p in last["parts"])
            ):
                last["parts"].append(part)
            else:
                contents.append({"role": "user", "parts": [part]})
    for content in contents:
        parts = content["parts"]
        if content["role"] == "user" and len(parts) > 1 and id(parts[0]) in places:
            parts.sort(key=lambda p: places.get(id(p), len(parts)))  # stable for equals
    return system, contents


def _endpoint(base_url: str, model: str) -> str:
    base = base_url.rstrip("/")
    if not re.search(r"/v1(beta\d*|alpha\d*)?$", base):
        base += "/v1beta"
    model = model.removeprefix("models/")
    return f"{base}/models/{quote(model, safe='.-_')}:streamGenerateContent?alt=sse"


def request_body(req: Request) -> dict[str, Any]:
    """The ``GenerateContentRequest`` JSON body for ``req`` (see ``build_request``)."""
    system, contents = _contents(req.messages, _reasoning(req))
    body: dict[str, Any] = {"contents": contents}
    if system:
        body["systemInstruction"] = {"parts": system}
    if req.tools:
        body["tools"] = [
            {
                "functionDeclarations": [
                    {"name": t.name, "description": t.description, "parameters": t.parameters}
                    for t in req.tools
                ]
            }
        ]
    params = req.parameters
    if params is not None:
        config: dict[str, Any] = {}
        if params.max_tokens is not None:
            config["maxOutputTokens"] = params.max_tokens
        if params.temperature is not None:
            config["temperature"] = params.temperature
        if params.top_p is not None:
            config["topP"] = params.top_p
        if params.stop_sequences:
            config["stopSequences"] = list(params.stop_sequences)
        if config:
            body["generationConfig"] = config
    merge_extensions(body, req, EXTENSION_KEYS, protected=())
    return body


# The signature is `_contract.RequestBuilder`, the same for every vendor.
def build_request(
    req: Request,
    *,
    base_url: str,
    api_key: str | None = None,
    upstream_model: str | None = None,
    headers: dict[str, str] | None = None,
) -> VendorRequest:
    """The Gemini ``streamGenerateContent?alt=sse`` request for ``req``.

    ``base_url`` is the API root (``https://generativelanguage.googleapis.com``);
    ``/v1beta`` is added unless it already ends with a version. ``upstream_model``
    replaces ``req.model``. Extensions ``"vendor:google"`` and ``"vendor:gemini"``
    are deep-merged into the body, in that order.

    Returns the ``VendorRequest``. Raises ``InvalidRequest`` (with ``.path``) for
    a tool result whose id matches no earlier assistant tool call, tool call
    arguments that are not a JSON object, a non-text system part, or a
    malformed reasoning history.
    """
    body = request_body(req)
    head = sse_headers({"x-goog-api-key": api_key} if api_key else {}, headers)
    return VendorRequest(
        url=_endpoint(base_url, upstream_model or req.model), headers=head, body=_encode(body)
    )
