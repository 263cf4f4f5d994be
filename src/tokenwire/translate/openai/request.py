"""A standard request -> ``POST {base_url}/chat/completions`` (§7.1)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import msgspec

from ... import request as rq
from ...errors import InvalidRequest
from .. import _extensions as x
from .. import _lossless
from .._base import VendorRequest
from .._request import function_call, function_tool, reasoning_history, vendor_parameters

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


def reasoning_texts(req: rq.Request, vendor: str = "openai") -> dict[int, str]:
    """Message index -> the reasoning text to send back as ``reasoning_content``.

    From ``extensions["tokenwire:reasoning_history"]``: the text of the parts
    not bound to another vendor (a part with ``tokenwire:vendor`` other than
    ``vendor`` carries a signature or encrypted content only that vendor
    checks: dropped). Raises ``InvalidRequest`` naming a malformed entry.
    """
    out: dict[int, str] = {}
    for message, parts in reasoning_history(req):
        texts = []
        for part in parts:
            if part.get(x.VENDOR, vendor) != vendor:
                continue
            if isinstance(part.get("text"), str) and part["text"]:
                texts.append(part["text"])
        if texts:
            out[message] = out.get(message, "") + "".join(texts)
    return out


def messages_to_openai(
    messages: list[rq.Message],
    convert: PartConverter = _part_to_openai,
    *,
    reasoning: dict[int, str] | None = None,
    audio: dict[int, str] | None = None,
) -> list[dict[str, Any]]:
    """The standard history as Chat Completions ``messages`` (parts via ``convert``).

    ``reasoning`` (message index -> text) goes in the assistant message's
    ``reasoning_content`` (DeepSeek, vLLM and other compatible servers take it);
    ``audio`` (message index -> audio id, 1.1) in its ``audio``.
    """
    out: list[dict[str, Any]] = []
    for i, m in enumerate(messages):
        item: dict[str, Any] = {"role": m.role}
        if m.role == "tool":
            item["tool_call_id"] = m.tool_call_id
            item["content"] = _text_only(m)
        elif m.role == "assistant":
            item["content"] = _text_only(m)
            if reasoning and i in reasoning:
                item["reasoning_content"] = reasoning[i]
            if audio and i in audio:
                item["audio"] = {"id": audio[i]}
            if m.tool_calls:
                item["tool_calls"] = [function_call(call) for call in m.tool_calls]
        else:
            item["content"] = _content(m.content, convert)
        if m.name is not None and m.role != "tool":
            item["name"] = m.name
        out.append(item)
    return out


def audio_ids(req: rq.Request) -> dict[int, str]:
    """1.1: message index -> the id of its audio output (``tokenwire:block_history``)."""
    out: dict[int, str] = {}
    for message, parts in _lossless.block_history(req).items():
        for audio in _lossless.parts_of(parts, x.AUDIO):
            if isinstance(audio.get("id"), str):
                out[message] = audio["id"]
    return out


def tools_to_openai(tools: list[rq.Tool] | None) -> list[dict[str, Any]] | None:
    """§4.4 tools as Chat Completions function tools."""
    if not tools:
        return None
    return [function_tool(tool) for tool in tools]


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


#: Standard parameter -> Chat Completions field.
PARAMETERS: Final = {
    "max_tokens": "max_completion_tokens",
    "temperature": "temperature",
    "top_p": "top_p",
    "stop_sequences": "stop",
}


# The signature is `_contract.RequestBuilder`, the same for every vendor.
def build_request(
    req: rq.Request,
    *,
    base_url: str,
    api_key: str | None = None,
    upstream_model: str | None = None,
    headers: dict[str, str] | None = None,
    send_reasoning: bool = False,
) -> VendorRequest:
    """The ``POST {base_url}/chat/completions`` request for ``req``.

    ``send_reasoning=True`` sends the reasoning of earlier assistant turns
    (``tokenwire:reasoning_history``) back as ``reasoning_content``, for the
    compatible servers that take it (DeepSeek, vLLM); off by default, since
    api.openai.com's Chat Completions takes no such field.

    ``base_url`` includes the version (``https://api.openai.com/v1``).
    Usage is always asked for (``stream_options.include_usage``), since §5.3.5
    wants a ``usage`` event and OpenAI only streams it on request.
    ``extensions["vendor:openai"]`` is merged into the body last (shallow),
    except ``stream``. Returns a ``VendorRequest``; raises ``InvalidRequest``
    for an extension that is not an object.
    """
    body: dict[str, Any] = {
        "model": upstream_model or req.model,
        "messages": messages_to_openai(
            req.messages,
            reasoning=reasoning_texts(req) if send_reasoning else None,
            audio=audio_ids(req),
        ),
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    tools = tools_to_openai(req.tools)
    if tools is not None:
        body["tools"] = tools
    body.update(vendor_parameters(req.parameters, PARAMETERS, keep_empty=True))
    merge_extension(body, req.extension("vendor:openai"), "vendor:openai")
    return VendorRequest(
        url=base_url.rstrip("/") + "/chat/completions",
        headers=http_headers(api_key, headers),
        body=_encode(body),
    )
