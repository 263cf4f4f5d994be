"""OpenAI Chat Completions <-> the standard (§7.1), both directions.

- ``build_request``: a standard request becomes ``POST {base_url}/chat/completions``.
- ``Translator``: a Chat Completions SSE body becomes standard events.
- ``request_from_vendor``: a Chat Completions request body becomes a standard
  request (the gateway's ``/v1/chat/completions`` ingress, §7.3).
- ``ChunkEncoder``: standard events become ``chat.completion.chunk`` frames, so
  that ingress can answer in the caller's own format.

The stream side's rules (which block index each thing gets, how stop reasons
and error codes map, what is dropped) are tabled in ``docs/translation.md``.
OpenAI-compatible vendors (Mistral, DeepSeek, Groq, Azure) share this code;
``translate.mistral`` only changes the request side.
"""

from __future__ import annotations

import base64
import binascii
import re
import time
import uuid
from collections.abc import Callable
from typing import Any, Final

import msgspec

from .. import events as ev
from .. import request as rq
from .. import sse
from ..errors import InvalidRequest, TranslationError
from ._base import SSETranslator, VendorRequest

__all__ = [
    "ERROR_TYPES",
    "FINISH_REASONS",
    "STOP_TO_FINISH",
    "ChunkEncoder",
    "Translator",
    "build_request",
    "error_code",
    "http_error",
    "request_from_vendor",
]

# --- Mapping tables (published in docs/translation.md) --------------------------

#: OpenAI-family ``finish_reason`` -> §5.3.3 stop reason. ``model_length`` is
#: Mistral's, ``tool_use``/``end_turn``/``eos`` come from compatible servers.
FINISH_REASONS: Final[dict[str, str]] = {
    "stop": "end_turn",
    "eos": "end_turn",
    "end_turn": "end_turn",
    "length": "max_tokens",
    "model_length": "max_tokens",
    "max_tokens": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "tool_use": "tool_use",
    "content_filter": "content_filter",
}

#: ``finish_reason`` values that mean the generation failed: -> §5.3.6 error code.
ERROR_FINISH_REASONS: Final[dict[str, str]] = {
    "error": "internal_error",  # Mistral
    "insufficient_system_resource": "overloaded",  # DeepSeek
}

#: §5.3.3 stop reason -> ``finish_reason`` (the ``ChunkEncoder`` direction).
STOP_TO_FINISH: Final[dict[str, str]] = {
    "end_turn": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "content_filter": "content_filter",
}

#: §5.3.6 error code -> OpenAI error ``type`` and ``code`` (the ``ChunkEncoder``
#: direction; ``error_code`` maps every one of them back).
ERROR_TYPES: Final[dict[str, tuple[str, str | None]]] = {
    "rate_limited": ("requests", "rate_limit_exceeded"),
    "context_length_exceeded": ("invalid_request_error", "context_length_exceeded"),
    "content_filtered": ("invalid_request_error", "content_filter"),
    "overloaded": ("server_error", "overloaded"),
    "internal_error": ("server_error", None),
}

# Substrings of an error's type or code, checked in this order.
_ERROR_HINTS: Final = (
    ("context_length", "context_length_exceeded"),
    ("rate_limit", "rate_limited"),
    ("quota", "rate_limited"),
    ("content_filter", "content_filtered"),
    ("content_policy", "content_filtered"),
    ("moderation", "content_filtered"),
    ("safety", "content_filtered"),
    ("overload", "overloaded"),
    ("capacity", "overloaded"),
    ("unavailable", "overloaded"),
    ("insufficient_system_resource", "overloaded"),
)
_TYPE_CODES: Final = {"requests": "rate_limited", "tokens": "rate_limited"}
_MESSAGE_HINTS: Final = (
    ("maximum context length", "context_length_exceeded"),
    ("context window", "context_length_exceeded"),
    ("rate limit", "rate_limited"),
    ("overloaded", "overloaded"),
)


def error_code(type_: str | None, code: str | int | None, message: str | None = None) -> str:
    """The §5.3.6 code for an OpenAI-family error's ``type``, ``code`` and ``message``.

    The type and code decide first (``rate_limit_exceeded`` -> ``rate_limited``,
    ``context_length_exceeded``, ``content_filter`` -> ``content_filtered``,
    ``overloaded``/capacity -> ``overloaded``); the message is the fallback
    (an OpenAI 503 only says "overloaded" in its text). Anything else is
    ``internal_error``.
    """
    keys = [str(k).lower() for k in (code, type_) if k is not None]
    for key in keys:
        for hint, mapped in _ERROR_HINTS:
            if hint in key:
                return mapped
        if key in _TYPE_CODES:
            return _TYPE_CODES[key]
    text = (message or "").lower()
    for hint, mapped in _MESSAGE_HINTS:
        if hint in text:
            return mapped
    return "internal_error"


class _HTTPError(msgspec.Struct, gc=False):
    message: str | None = None
    type: str | None = None
    code: str | int | None = None


class _HTTPErrorBody(msgspec.Struct):
    error: _HTTPError | str | None = None
    # Mistral's flat shape: {"object": "error", "message", "type", "code"}.
    message: str | None = None
    type: str | None = None
    code: str | int | None = None
    detail: Any = None


_decode_http_error = msgspec.json.Decoder(_HTTPErrorBody).decode

#: HTTP status -> §5.3.6 code when the body says nothing more precise.
_STATUS_CODES: Final = {429: "rate_limited", 503: "overloaded", 529: "overloaded"}


def http_error(status: int, body: bytes) -> tuple[str, str]:
    """The §5.3.6 ``(code, message)`` for an OpenAI-family HTTP error answer.

    For a provider whose upstream answered ``status`` (not 2xx) before any
    stream: the JSON error body decides the code when it is specific
    (``error_code``), else the status does (429 -> ``rate_limited``, 503/529 ->
    ``overloaded``, anything else ``internal_error``). Never raises.
    """
    message = f"upstream answered HTTP {status}"
    code = _STATUS_CODES.get(status, "internal_error")
    try:
        parsed = _decode_http_error(body)
    except msgspec.DecodeError:
        return code, message
    err = parsed.error
    if isinstance(err, str):
        return code, f"{message}: {err}"
    etype, ecode, emsg = (
        (err.type, err.code, err.message)
        if err is not None
        else (parsed.type, parsed.code, parsed.message)
    )
    mapped = error_code(etype, ecode, emsg)
    if mapped != "internal_error" or code == "internal_error":
        code = mapped
    return code, f"{message}: {emsg}" if emsg else message


# --- Request side: standard -> OpenAI ----------------------------------------------

_encode = msgspec.json.Encoder().encode

_AUDIO_FORMATS: Final = {
    "audio/wav": "wav",
    "audio/x-wav": "wav",
    "audio/wave": "wav",
    "audio/mpeg": "mp3",
    "audio/mp3": "mp3",
}


def _data_url(media_type: str, data: str) -> str:
    return f"data:{media_type};base64,{data}"


def _subtype(media_type: str) -> str:
    return media_type.rpartition("/")[2].split(";", 1)[0].strip() or "bin"


def _part_to_openai(part: rq.Part, k: int) -> dict[str, Any]:
    if isinstance(part, rq.TextPart):
        return {"type": "text", "text": part.text}
    if isinstance(part, rq.ImagePart):
        return {"type": "image_url", "image_url": {"url": _data_url(part.media_type, part.data)}}
    if isinstance(part, rq.AudioPart):
        fmt = _AUDIO_FORMATS.get(part.media_type.lower(), _subtype(part.media_type))
        return {"type": "input_audio", "input_audio": {"data": part.data, "format": fmt}}
    # DocumentPart: OpenAI's ``file`` part takes the document inline as a data URL.
    return {
        "type": "file",
        "file": {
            "filename": f"document-{k}.{_subtype(part.media_type)}",
            "file_data": _data_url(part.media_type, part.data),
        },
    }


PartConverter = Callable[[rq.Part, int], dict[str, Any]]


def _content(content: str | list[rq.Part] | None, convert: PartConverter) -> Any:
    if content is None or isinstance(content, str):
        return content
    return [convert(part, k) for k, part in enumerate(content)]


def _text_only(message: rq.Message) -> Any:
    """Content for roles that take text only (assistant, tool): a string or text parts."""
    content = message.content
    if content is None or isinstance(content, str):
        return content
    return message.text


def messages_to_openai(
    messages: list[rq.Message], convert: PartConverter = _part_to_openai
) -> list[dict[str, Any]]:
    """The standard history as Chat Completions ``messages`` (parts via ``convert``)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        item: dict[str, Any] = {"role": m.role}
        if m.role == "tool":
            item["tool_call_id"] = m.tool_call_id
            item["content"] = _text_only(m)
        elif m.role == "assistant":
            item["content"] = _text_only(m)
            if m.tool_calls:
                item["tool_calls"] = [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": call.arguments},
                    }
                    for call in m.tool_calls
                ]
        else:
            item["content"] = _content(m.content, convert)
        if m.name is not None and m.role != "tool":
            item["name"] = m.name
        out.append(item)
    return out


def tools_to_openai(tools: list[rq.Tool] | None) -> list[dict[str, Any]] | None:
    """§4.4 tools as Chat Completions function tools."""
    if not tools:
        return None
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.parameters,
            },
        }
        for tool in tools
    ]


def merge_extension(body: dict[str, Any], extension: Any, key: str) -> None:
    """Shallow-merge ``extensions[key]`` into ``body``; it may not turn streaming off.

    Raises ``InvalidRequest`` (path ``extensions["key"]``) when the value is not an object.
    """
    if extension is None:
        return
    if not isinstance(extension, dict):
        raise InvalidRequest(
            "must be an object of vendor request fields", path=f'extensions["{key}"]'
        )
    for name, value in extension.items():
        if name == "stream":  # the translator needs a stream
            continue
        if name == "stream_options" and isinstance(value, dict):
            merged = dict(body.get("stream_options") or {})
            merged.update(value)
            body[name] = merged
        else:
            body[name] = value


def http_headers(api_key: str | None, headers: dict[str, str] | None) -> dict[str, str]:
    """JSON in, SSE out, bearer auth when a key is given, then the caller's headers."""
    out = {"content-type": "application/json", "accept": "text/event-stream"}
    if api_key:
        out["authorization"] = f"Bearer {api_key}"
    if headers:
        out.update({k.lower(): v for k, v in headers.items()})
    return out


def build_request(
    req: rq.Request,
    *,
    base_url: str,
    api_key: str | None = None,
    upstream_model: str | None = None,
    headers: dict[str, str] | None = None,
) -> VendorRequest:
    """The ``POST {base_url}/chat/completions`` request for ``req``.

    ``base_url`` includes the version (``https://api.openai.com/v1``).
    Usage is always asked for (``stream_options.include_usage``), since §5.3.5
    wants a ``usage`` event and OpenAI only streams it on request.
    ``extensions["vendor:openai"]`` is merged into the body last (shallow),
    except ``stream``. Returns a ``VendorRequest``; raises ``InvalidRequest``
    for an extension that is not an object.
    """
    body: dict[str, Any] = {
        "model": upstream_model or req.model,
        "messages": messages_to_openai(req.messages),
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    tools = tools_to_openai(req.tools)
    if tools is not None:
        body["tools"] = tools
    p = req.parameters
    if p is not None:
        if p.max_tokens is not None:
            body["max_completion_tokens"] = p.max_tokens
        if p.temperature is not None:
            body["temperature"] = p.temperature
        if p.top_p is not None:
            body["top_p"] = p.top_p
        if p.stop_sequences is not None:
            body["stop"] = p.stop_sequences
    merge_extension(body, req.extension("vendor:openai"), "vendor:openai")
    return VendorRequest(
        url=base_url.rstrip("/") + "/chat/completions",
        headers=http_headers(api_key, headers),
        body=_encode(body),
    )


# --- Request side: OpenAI -> standard (§7.3 ingress) -------------------------------

#: Chat Completions fields ``request_from_vendor`` maps; the others travel on
#: in ``extensions["vendor:openai"]`` (so an OpenAI upstream still gets them).
_MAPPED_FIELDS: Final = frozenset(
    {
        "model",
        "messages",
        "tools",
        "max_tokens",
        "max_completion_tokens",
        "temperature",
        "top_p",
        "stop",
        "stream",
        "stream_options",
        "metadata",
    }
)
_DATA_URL: Final = re.compile(r"data:([^;,]+)((?:;[^;,]*)*);base64,(.*)", re.DOTALL)
_ROLES: Final = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
    "tool": "tool",
    "function": "tool",  # the deprecated function-calling API
}


def _want(value: Any, kind: type | tuple[type, ...], path: str, what: str) -> Any:
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise InvalidRequest(f"must be {what}", path=path)
    return value


def _from_data_url(url: Any, path: str) -> tuple[str, str]:
    _want(url, str, path, "a string")
    match = _DATA_URL.fullmatch(url)
    if match is None:
        raise InvalidRequest(
            "only base64 data: URLs can be carried by the standard (§4.3.1)", path=path
        )
    data = match[3]
    try:
        base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidRequest("the data: URL is not valid base64", path=path) from None
    return match[1], data


def _part_from_openai(part: Any, path: str) -> dict[str, Any]:
    _want(part, dict, path, "a content part object")
    kind = part.get("type")
    if kind in ("text", "refusal"):
        text = part.get(kind)
        return {"type": "text", "text": _want(text, str, f"{path}.{kind}", "a string")}
    if kind == "image_url":
        image = part.get("image_url")
        url = image.get("url") if isinstance(image, dict) else image
        media_type, data = _from_data_url(url, f"{path}.image_url.url")
        return {"type": "image", "media_type": media_type, "data": data}
    if kind == "input_audio":
        audio = _want(part.get("input_audio"), dict, f"{path}.input_audio", "an object")
        data = _want(audio.get("data"), str, f"{path}.input_audio.data", "a base64 string")
        fmt = _want(audio.get("format"), str, f"{path}.input_audio.format", "a string")
        return {"type": "audio", "media_type": f"audio/{fmt}", "data": data}
    if kind == "file":
        file = _want(part.get("file"), dict, f"{path}.file", "an object")
        if "file_data" not in file:
            raise InvalidRequest(
                "only inline file_data can be carried by the standard (§4.3.1)",
                path=f"{path}.file.file_data",
            )
        media_type, data = _from_data_url(file["file_data"], f"{path}.file.file_data")
        return {"type": "document", "media_type": media_type, "data": data}
    raise InvalidRequest(f"unsupported content part type {kind!r}", path=f"{path}.type")


def _message_from_openai(msg: Any, path: str) -> dict[str, Any]:
    _want(msg, dict, path, "a message object")
    raw_role = msg.get("role")
    # A list or object here is unhashable: not a role (found by tests/fuzz).
    role = _ROLES.get(raw_role) if isinstance(raw_role, str) else None
    if role is None:
        raise InvalidRequest(f"unsupported role {msg.get('role')!r}", path=f"{path}.role")
    content = msg.get("content")
    if isinstance(content, list):
        content = [_part_from_openai(p, f"{path}.content[{k}]") for k, p in enumerate(content)]
        if role in ("assistant", "tool", "system"):  # text-only roles: keep them simple
            if all(p["type"] == "text" for p in content):
                content = "".join(p["text"] for p in content)
    elif content is not None:
        _want(content, str, f"{path}.content", "a string, an array of parts or null")
    out: dict[str, Any] = {"role": role, "content": content}
    if isinstance(msg.get("name"), str) and role != "tool":
        out["name"] = msg["name"]
    if role == "tool":
        call_id = msg.get("tool_call_id")
        if msg.get("role") == "function":  # legacy: the function's name stands for the id
            call_id = call_id or msg.get("name")
        out["tool_call_id"] = _want(call_id, str, f"{path}.tool_call_id", "a string")
        if content is None:
            out["content"] = ""
    calls = msg.get("tool_calls")
    if role == "assistant" and calls:
        _want(calls, list, f"{path}.tool_calls", "an array")
        refs = []
        for j, call in enumerate(calls):
            cpath = f"{path}.tool_calls[{j}]"
            _want(call, dict, cpath, "a tool call object")
            fn = _want(call.get("function"), dict, f"{cpath}.function", "an object")
            args = fn.get("arguments", "{}")
            refs.append(
                {
                    "id": _want(call.get("id"), str, f"{cpath}.id", "a string"),
                    "name": _want(fn.get("name"), str, f"{cpath}.function.name", "a string"),
                    "arguments": _want(args, str, f"{cpath}.function.arguments", "a JSON text"),
                }
            )
        out["tool_calls"] = refs
    elif role == "assistant" and content is None:
        out["content"] = ""
    return out


def _tools_from_openai(tools: Any) -> list[dict[str, Any]] | None:
    if tools is None:
        return None
    _want(tools, list, "tools", "an array")
    out = []
    for i, tool in enumerate(tools):
        path = f"tools[{i}]"
        _want(tool, dict, path, "a tool object")
        if tool.get("type", "function") != "function":
            raise InvalidRequest(f"unsupported tool type {tool.get('type')!r}", path=f"{path}.type")
        fn = _want(tool.get("function"), dict, f"{path}.function", "an object")
        params = fn.get("parameters") or {"type": "object", "properties": {}}
        out.append(
            {
                "name": _want(fn.get("name"), str, f"{path}.function.name", "a string"),
                "description": _want(
                    fn.get("description") or "", str, f"{path}.function.description", "a string"
                ),
                "parameters": _want(params, dict, f"{path}.function.parameters", "an object"),
            }
        )
    return out


def request_from_vendor(body: Any, *, vendor: str = "openai") -> rq.Request:
    """A standard request from a Chat Completions request body (a decoded JSON object).

    ``developer`` messages become ``system``; images, audio and files must be
    inline base64 (``data:`` URLs). ``max_completion_tokens``/``max_tokens``,
    ``temperature``, ``top_p`` and ``stop`` become parameters; every other field
    (``n``, ``tool_choice``, ``response_format``...) is kept in
    ``extensions["vendor:<vendor>"]`` so an upstream of the same vendor still
    receives it. The result always streams. Raises ``InvalidRequest`` whose
    ``path`` names the offending field of ``body``.
    """
    _want(body, dict, "$", "a JSON object")
    model = _want(body.get("model"), str, "model", "a string")
    messages = _want(body.get("messages"), list, "messages", "an array of messages")
    history = [_message_from_openai(m, f"messages[{i}]") for i, m in enumerate(messages)]
    params: dict[str, Any] = {}
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    if max_tokens is not None:
        params["max_tokens"] = max_tokens
    for name in ("temperature", "top_p"):
        if body.get(name) is not None:
            params[name] = body[name]
    stop = body.get("stop")
    if stop is not None:
        params["stop_sequences"] = [stop] if isinstance(stop, str) else stop
    metadata = body.get("metadata")
    rest = {k: v for k, v in body.items() if k not in _MAPPED_FIELDS}
    try:
        return rq.build(
            model=model,
            messages=history,
            tools=_tools_from_openai(body.get("tools")),
            parameters=params or None,
            metadata=metadata if isinstance(metadata, dict) else None,
            extensions={f"vendor:{vendor}": rest} if rest else None,
        )
    except InvalidRequest as exc:
        # Name the field of the OpenAI body, not of the standard request.
        raise InvalidRequest(exc.reason, path=_vendor_path(exc.path, body)) from None


_STANDARD_PATHS: Final = (
    (re.compile(r"parameters\.max_tokens"), None),
    (re.compile(r"parameters\.stop_sequences"), "stop"),
    (re.compile(r"parameters\.(temperature|top_p)"), r"\1"),
    (re.compile(r"tools\[(\d+)\]\.(name|description|parameters)"), r"tools[\1].function.\2"),
)


def _vendor_path(path: str, body: dict[str, Any]) -> str:
    for pattern, replacement in _STANDARD_PATHS:
        if pattern.match(path):
            if replacement is None:  # whichever of the two the caller used
                replacement = (
                    "max_completion_tokens" if "max_completion_tokens" in body else "max_tokens"
                )
            return pattern.sub(replacement, path, count=1)
    return path


# --- Stream side: OpenAI chunks -> standard events -----------------------------------
# One typed decoder for the whole chunk: only the fields the translator reads
# are declared, so msgspec skips logprobs, obfuscation, content_filter_results,
# system_fingerprint and the rest without building them (issue 5: the per-chunk
# cost must stay within 2x the bare SSE decode). ``gc=False``: these values hold
# no cycles, and leaving them out of the garbage collector's books saves the
# collections a stream of short-lived chunks would otherwise trigger.


class _Function(msgspec.Struct, gc=False):
    name: str | None = None
    arguments: str | None = None


class _ToolFragment(msgspec.Struct, gc=False):
    index: int | None = None
    id: str | None = None
    function: _Function | None = None


class _ContentPart(msgspec.Struct, gc=False):
    """A Mistral content chunk: ``text``, or ``thinking`` holding text chunks."""

    type: str = "text"
    text: str | None = None
    thinking: list[_ContentPart] | None = None


class _Delta(msgspec.Struct, gc=False):
    content: str | list[_ContentPart] | None = None
    refusal: str | None = None
    tool_calls: list[_ToolFragment] | None = None
    function_call: _Function | None = None
    reasoning_content: str | None = None  # DeepSeek
    reasoning: str | None = None  # OpenRouter, vLLM


class _Choice(msgspec.Struct, gc=False):
    index: int = 0
    delta: _Delta | None = None
    finish_reason: str | None = None


class _Usage(msgspec.Struct, gc=False):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


class _Chunk(msgspec.Struct, gc=False):
    choices: list[_Choice] | None = None
    usage: _Usage | None = None
    error: _HTTPError | str | None = None
    # Mistral's flat error object: {"object": "error", "message", "type", "code"}.
    object: str | None = None
    message: str | None = None
    type: str | None = None
    code: str | int | None = None


_decode_chunk = msgspec.json.Decoder(_Chunk).decode
_LEGACY_CALL: Final = -1  # the deprecated ``delta.function_call``, kept apart


class _PendingCall:
    __slots__ = ("id", "name", "parts")

    def __init__(self, id: str) -> None:
        self.id = id
        self.name = ""
        self.parts: list[str] = []


class _ChoiceState:
    """What one choice has opened so far."""

    __slots__ = (
        "by_index",
        "calls",
        "finished",
        "index",
        "last",
        "reason_block",
        "refused",
        "text_block",
    )

    def __init__(self, index: int) -> None:
        self.index = index
        self.text_block: int | None = None
        self.reason_block: int | None = None
        self.refused = False
        self.finished = False
        self.calls: list[_PendingCall] = []
        self.by_index: dict[int, _PendingCall] = {}
        self.last: _PendingCall | None = None

    def fragment(self, index: int | None, id: str | None, fn: _Function | None) -> None:
        """Accumulate one tool-call fragment (keyed by ``index``; see docs/translation.md)."""
        call = self.by_index.get(index) if index is not None else self.last
        # A fragment with another id at a known index starts a new call: Mistral
        # sends whole calls without ``index`` (0 by default), one after another.
        if call is None or (id and call.id and id != call.id):
            call = _PendingCall(id or "")
            self.calls.append(call)
            if index is not None:
                self.by_index[index] = call
        elif id and not call.id:
            call.id = id
        self.last = call
        if fn is not None:
            if fn.name and not call.name:  # later fragments may say "name": ""
                call.name = fn.name
            if fn.arguments:
                call.parts.append(fn.arguments)


class Translator(SSETranslator):
    """An OpenAI Chat Completions SSE body -> standard events.

    Block indexes: choice ``c``'s text (``content`` and ``refusal``) is block
    ``c``; reasoning and each tool call get the next index above every index
    used or choice seen so far, except that a choice without text gives its
    own index ``c`` to its first tool call. Tool calls are emitted whole at the
    choice's ``finish_reason``, each followed by its ``content.stop``
    ``tool_use``. Usage is emitted once, the last totals reported, right before
    ``stream.end``. The end marker is ``data: [DONE]``.
    """

    name = "openai"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._choices: dict[int, _ChoiceState] = {}
        self._taken: set[int] = set()
        self._top = -1
        self._usage: tuple[int, int] | None = None
        self._tool_ids: set[str] = set()

    # -- messages ------------------------------------------------------------
    # Issue 5 budgets translation at 2x the bare SSE decode: each payload is
    # decoded by one typed msgspec decoder, and a plain text delta for an open
    # block (nearly every chunk of a stream) becomes its event without further calls.

    def _on_frame(self, frame: sse.Message) -> None:
        data = frame.data
        if data == "[DONE]":
            self._done()
            return
        try:
            chunk = _decode_chunk(data)
        except msgspec.DecodeError as exc:
            raise TranslationError(
                f"upstream sent a data line that is not a chunk: {exc}"
            ) from None
        choices = chunk.choices
        if (
            choices
            and len(choices) == 1
            and chunk.usage is None
            and chunk.error is None
            and chunk.object != "error"
        ):
            choice = choices[0]
            delta = choice.delta
            state = self._choices.get(choice.index)
            if (
                state is not None
                and delta is not None
                and choice.finish_reason is None
                and state.text_block is not None
                and type(delta.content) is str
                and delta.content
                and not state.finished
                and not delta.refusal
                and not delta.tool_calls
                and not delta.reasoning_content
                and not delta.reasoning
                and delta.function_call is None
            ):
                # More text for an open block: Writer.text's fast path.
                self.out += self.writer.text(delta.content, state.text_block)
                return
        self._on_chunk(chunk)

    def _on_chunk(self, chunk: _Chunk) -> None:
        if chunk.error is not None or chunk.object == "error":
            self._vendor_error(chunk)
            return
        usage = chunk.usage
        if usage is not None:
            # Reports are totals, not increments: keep the last one (§5.3.5).
            self._usage = (max(usage.prompt_tokens or 0, 0), max(usage.completion_tokens or 0, 0))
        for choice in chunk.choices or ():
            state = self._choices.get(choice.index) or self._choice(choice.index)
            if choice.delta is not None:
                self._on_delta(state, choice.delta)
            if choice.finish_reason is not None:
                self._finish(state, choice.finish_reason)
                if self.writer.ended:
                    return

    def _on_delta(self, state: _ChoiceState, delta: _Delta) -> None:
        if delta.reasoning_content:
            self._reasoning(state, delta.reasoning_content)
        if delta.reasoning:
            self._reasoning(state, delta.reasoning)
        content = delta.content
        if content:
            if isinstance(content, str):
                self._text(state, content)
            else:
                for part in content:
                    if part.type == "thinking":
                        for inner in part.thinking or ():
                            if inner.text:
                                self._reasoning(state, inner.text)
                    elif part.text:
                        self._text(state, part.text)
        if delta.refusal:
            state.refused = True
            self._text(state, delta.refusal)
        if delta.tool_calls:
            for fragment in delta.tool_calls:
                state.fragment(fragment.index, fragment.id, fragment.function)
        if delta.function_call is not None:
            state.fragment(_LEGACY_CALL, None, delta.function_call)

    # -- blocks ------------------------------------------------------------

    def _new_block(self) -> int:
        self._top += 1
        self._taken.add(self._top)
        return self._top

    def _choice(self, index: int) -> _ChoiceState:
        state = _ChoiceState(index)
        self._choices[index] = state
        if index > self._top:
            self._top = index
        return state

    def _text(self, state: _ChoiceState, text: str) -> None:
        if state.finished:
            raise TranslationError(f"choice {state.index} sent text after its finish_reason")
        index = state.text_block
        if index is None:
            index = state.index
            if index in self._taken:  # see the class docstring
                index = self._new_block()
            else:
                self._taken.add(index)
            state.text_block = index
        self.out += self.writer.text(text, index)

    def _reasoning(self, state: _ChoiceState, text: str) -> None:
        # Reasoning is not in the draft's registry: carried only when asked for,
        # on its own block, marked "tokenwire:reasoning" (docs/extensions.md).
        if not self.reasoning:
            return
        if state.finished:
            raise TranslationError(f"choice {state.index} sent reasoning after its finish_reason")
        if state.reason_block is None:
            state.reason_block = self._new_block()
        self.out += self.writer.text(text, state.reason_block, reasoning=True)

    def _finish(self, state: _ChoiceState, finish_reason: str | None) -> None:
        if state.finished:
            return
        state.finished = True
        if finish_reason in ERROR_FINISH_REASONS:
            code = ERROR_FINISH_REASONS[finish_reason]
            self._fail(code, f"upstream finished with finish_reason {finish_reason!r}")
            return
        if finish_reason is None:  # [DONE] came first: see docs/translation.md
            stop = "tool_use" if state.calls else "end_turn"
        else:
            stop = FINISH_REASONS.get(finish_reason, "end_turn")
        if state.refused:
            stop = "content_filter"
        # The reasoning ended before the answer, and the answer before the
        # calls (they are only complete now), so the blocks stop in that order.
        writer = self.writer
        if state.reason_block is not None:
            self.out += writer.stop(state.reason_block, "end_turn" if stop == "tool_use" else stop)
        if state.text_block is not None:
            self.out += writer.stop(state.text_block, stop)
        # A choice that wrote no text leaves its own index free: its first
        # tool call takes it (so a lone call is block 0, "0 for primary", §5.3.2).
        spare = state.index if state.text_block is None and state.index not in self._taken else None
        for call in state.calls:
            if self._emit_call(call, truncated=stop == "max_tokens", index=spare):
                spare = None

    def _emit_call(self, call: _PendingCall, *, truncated: bool, index: int | None) -> bool:
        """Emit one complete call (``tool.call`` + ``content.stop``); False if dropped."""
        arguments = "".join(call.parts)
        if not arguments.strip():
            arguments = "{}"  # a call without arguments
        try:
            parsed = msgspec.json.decode(arguments)
        except msgspec.DecodeError:
            parsed = None
        if not isinstance(parsed, dict):
            if truncated:  # cut off by max_tokens: the stop reason says so
                return False
            raise TranslationError(
                f"tool call {call.name!r} arguments are not a JSON object: {arguments[:80]!r}"
            )
        call_id = call.id or f"call_{len(self._tool_ids)}"
        while call_id in self._tool_ids:  # §5.3.4: ids are unique in a stream
            call_id += "_"
        self._tool_ids.add(call_id)
        if index is None:
            index = self._new_block()
        else:
            self._taken.add(index)
        self.out += self.writer.tool_call(
            id=call_id, name=call.name, arguments=arguments, index=index
        )
        self.out += self.writer.stop(index, "tool_use")
        return True

    # -- endings -------------------------------------------------------------

    def _vendor_error(self, chunk: _Chunk) -> None:
        err = chunk.error
        if isinstance(err, str):
            self._fail("internal_error", err)
            return
        if err is None:  # Mistral's flat shape
            err = _HTTPError(message=chunk.message, type=chunk.type, code=chunk.code)
        code = error_code(err.type, err.code, err.message)
        self._fail(code, err.message or f"upstream error ({err.type or err.code})")

    def _fail(self, code: str, message: str) -> None:
        """``error``, the usage reported so far (if any), ``stream.end``."""
        writer = self.writer
        if writer.ended:
            return
        if not writer.errored:
            self.out += writer.error(code, message)
        if self._usage is not None:
            self.out += writer.usage(*self._usage)
        self.out += writer.end()

    def _done(self) -> None:
        for state in list(self._choices.values()):
            self._finish(state, None)
            if self.writer.ended:
                return
        if self._usage is not None:
            self.out += self.writer.usage(*self._usage)
        self.out += self.writer.end()

    def _on_eof(self) -> None:
        finished = bool(self._choices) and all(s.finished for s in self._choices.values())
        where = "after its finish_reason" if finished else "mid-answer"
        self._fail(
            "internal_error", f"{self.name} stream ended {where} without data: [DONE] (truncated)"
        )


# --- Reverse stream side: standard events -> OpenAI chunks -------------------------


class ChunkEncoder:
    """Standard events -> OpenAI ``chat.completion.chunk`` SSE frames (§7.3 ingress).

    Everything lands on choice 0: text deltas as ``delta.content`` (reasoning
    blocks as ``delta.reasoning_content``), each ``tool.call`` as one whole
    ``delta.tool_calls`` entry with its own ``index``. ``stream.end`` sends the
    finish chunk (``tool_calls`` when any call was made, else the last stop
    reason), the usage chunk (``choices: []``) when ``include_usage``, then
    ``data: [DONE]``. An ``error`` event becomes OpenAI's in-stream
    ``data: {"error": {...}}``, followed by ``[DONE]`` at ``stream.end``.
    """

    def __init__(
        self,
        *,
        model: str,
        id: str | None = None,
        include_usage: bool = False,
        created: int | None = None,
    ) -> None:
        self.model = model
        self.id = id or f"chatcmpl-{uuid.uuid4().hex}"
        self.include_usage = include_usage
        self.created = created
        self._started = False
        self._errored = False
        self._done = False
        self._calls = 0
        self._stop: str | None = None
        self._usage: tuple[int, int] | None = None

    def _chunk(self, choices: list[dict[str, Any]], usage: Any = None) -> bytes:
        obj: dict[str, Any] = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created if self.created is not None else int(time.time()),
            "model": self.model,
            "choices": choices,
        }
        if self.include_usage:
            obj["usage"] = usage
        return b"data: " + _encode(obj) + b"\n\n"

    def _delta(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        return self._chunk(
            [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
        )

    def _start(self) -> bytes:
        if self._started:
            return b""
        self._started = True
        return self._delta({"role": "assistant", "content": ""})

    def encode(self, event: ev.Event) -> bytes:
        """The OpenAI bytes for ``event``; ``b""`` when it has none of its own."""
        if self._done:
            return b""
        match event:
            case ev.StreamStart():
                if self.created is None:
                    self.created = event.created
                return self._start()
            case ev.ContentDelta():
                key = "reasoning_content" if event.reasoning else "content"
                return self._start() + self._delta({key: event.delta.text})
            case ev.ToolCall():
                call = {
                    "index": self._calls,
                    "id": event.id,
                    "type": "function",
                    "function": {"name": event.name, "arguments": event.arguments},
                }
                self._calls += 1
                return self._start() + self._delta({"tool_calls": [call]})
            case ev.ContentStop():
                if event.stop_reason != "tool_use" or self._stop is None:
                    self._stop = event.stop_reason
                return b""
            case ev.Usage():
                self._usage = (event.input_tokens, event.output_tokens)
                return b""
            case ev.ErrorEvent():
                self._errored = True
                etype, ecode = ERROR_TYPES.get(event.code, ("server_error", event.code))
                err = {"message": event.message, "type": etype, "param": None, "code": ecode}
                return self._start() + b"data: " + _encode({"error": err}) + b"\n\n"
            case ev.StreamEnd():
                return self._end()
        return b""

    def _end(self) -> bytes:
        self._done = True
        out = self._start()
        if not self._errored:
            finish = "tool_calls" if self._calls else STOP_TO_FINISH.get(self._stop or "", "stop")
            out += self._delta({}, finish)
            if self.include_usage and self._usage is not None:
                i, o = self._usage
                usage = {"prompt_tokens": i, "completion_tokens": o, "total_tokens": i + o}
                out += self._chunk([], usage)
        return out + b"data: [DONE]\n\n"
