"""The ``/v1/chat/completions`` ingress (§7.3): a Chat Completions request body
-> the standard, and standard events -> ``chat.completion.chunk`` frames
(``ChunkEncoder``), so that the ingress answers in the caller's own format.
"""

from __future__ import annotations

import base64
import binascii
import re
import time
import uuid
from typing import Any, Final

import msgspec

from ... import events as ev
from ... import request as rq
from ...errors import InvalidRequest
from .. import _extensions as x
from .._contract import EncodeEvent
from .._ingress import tool_from_function, tool_objects, want
from .errors import ERROR_TYPES, STOP_TO_FINISH

_encode = msgspec.json.Encoder().encode

# --- Request side: OpenAI -> standard (§7.3 ingress) -------------------------------

#: Chat Completions fields ``request_from_vendor`` maps; the others travel on
#: in ``extensions["vendor:openai"]`` (so an OpenAI upstream still gets them).
#: Not shared with the Responses ingress's list: the two APIs name the same
#: settings apart (``messages``/``input``, ``max_tokens``/``max_output_tokens``,
#: ``stop`` only here), and each list is what its own parser reads.
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


def _from_data_url(url: Any, path: str) -> tuple[str, str]:
    want(url, str, path, "a string")
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
    want(part, dict, path, "a content part object")
    kind = part.get("type")
    if kind in ("text", "refusal"):
        text = part.get(kind)
        return {"type": "text", "text": want(text, str, f"{path}.{kind}", "a string")}
    if kind == "image_url":
        image = part.get("image_url")
        url = image.get("url") if isinstance(image, dict) else image
        media_type, data = _from_data_url(url, f"{path}.image_url.url")
        return {"type": "image", "media_type": media_type, "data": data}
    if kind == "input_audio":
        audio = want(part.get("input_audio"), dict, f"{path}.input_audio", "an object")
        data = want(audio.get("data"), str, f"{path}.input_audio.data", "a base64 string")
        fmt = want(audio.get("format"), str, f"{path}.input_audio.format", "a string")
        return {"type": "audio", "media_type": f"audio/{fmt}", "data": data}
    if kind == "file":
        file = want(part.get("file"), dict, f"{path}.file", "an object")
        if "file_data" not in file:
            raise InvalidRequest(
                "only inline file_data can be carried by the standard (§4.3.1)",
                path=f"{path}.file.file_data",
            )
        media_type, data = _from_data_url(file["file_data"], f"{path}.file.file_data")
        return {"type": "document", "media_type": media_type, "data": data}
    raise InvalidRequest(f"unsupported content part type {kind!r}", path=f"{path}.type")


def _message_from_openai(msg: Any, path: str) -> dict[str, Any]:
    want(msg, dict, path, "a message object")
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
        want(content, str, f"{path}.content", "a string, an array of parts or null")
    out: dict[str, Any] = {"role": role, "content": content}
    if isinstance(msg.get("name"), str) and role != "tool":
        out["name"] = msg["name"]
    if role == "tool":
        call_id = msg.get("tool_call_id")
        if msg.get("role") == "function":  # legacy: the function's name stands for the id
            call_id = call_id or msg.get("name")
        out["tool_call_id"] = want(call_id, str, f"{path}.tool_call_id", "a string")
        if content is None:
            out["content"] = ""
    calls = msg.get("tool_calls")
    if role == "assistant" and calls:
        want(calls, list, f"{path}.tool_calls", "an array")
        refs = []
        for j, call in enumerate(calls):
            cpath = f"{path}.tool_calls[{j}]"
            want(call, dict, cpath, "a tool call object")
            fn = want(call.get("function"), dict, f"{cpath}.function", "an object")
            args = fn.get("arguments", "{}")
            refs.append(
                {
                    "id": want(call.get("id"), str, f"{cpath}.id", "a string"),
                    "name": want(fn.get("name"), str, f"{cpath}.function.name", "a string"),
                    "arguments": want(args, str, f"{cpath}.function.arguments", "a JSON text"),
                }
            )
        out["tool_calls"] = refs
    elif role == "assistant" and content is None:
        out["content"] = ""
    return out


def _tools_from_openai(tools: Any) -> list[dict[str, Any]] | None:
    if tools is None:
        return None
    out = []
    for path, tool in tool_objects(tools):
        if tool.get("type", "function") != "function":
            raise InvalidRequest(f"unsupported tool type {tool.get('type')!r}", path=f"{path}.type")
        fn = want(tool.get("function"), dict, f"{path}.function", "an object")
        out.append(tool_from_function(fn, f"{path}.function"))
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
    want(body, dict, "$", "a JSON object")
    model = want(body.get("model"), str, "model", "a string")
    messages = want(body.get("messages"), list, "messages", "an array of messages")
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
    extensions: dict[str, Any] = {f"vendor:{vendor}": rest} if rest else {}
    if rest.get("reasoning_effort") is not None or isinstance(rest.get("reasoning"), dict):
        # The caller enabled reasoning at the vendor: carry it (docs/extensions.md).
        extensions[x.REASONING] = True
    # An assistant message's reasoning_content (DeepSeek, vLLM) goes back next turn.
    reasoning = [
        {"message": i, "parts": [{"type": x.REASONING, "text": m["reasoning_content"]}]}
        for i, m in enumerate(messages)
        if isinstance(m, dict)
        and m.get("role") == "assistant"
        and isinstance(m.get("reasoning_content"), str)
        and m["reasoning_content"]
    ]
    if reasoning:
        extensions[x.REASONING_HISTORY] = reasoning
    # 1.1: an assistant message's audio output is named by its id next turn.
    audio = [
        {"message": i, "parts": [{"type": x.AUDIO, x.AUDIO: {"id": m["audio"]["id"]}}]}
        for i, m in enumerate(messages)
        if isinstance(m, dict)
        and m.get("role") == "assistant"
        and isinstance(m.get("audio"), dict)
        and isinstance(m["audio"].get("id"), str)
    ]
    if audio:
        extensions[x.BLOCK_HISTORY] = audio
    try:
        return rq.build(
            model=model,
            messages=history,
            tools=_tools_from_openai(body.get("tools")),
            parameters=params or None,
            metadata=metadata if isinstance(metadata, dict) else None,
            extensions=extensions or None,
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


# --- Reverse stream side: standard events -> OpenAI chunks -------------------------

#: A text that stands for the delta's text while a frame template is built
#: (no JSON escapes, so its encoding appears once, verbatim, in the frame).
_MARK: Final = "\x00tokenwire-text\x00"
_ENCODED_MARK: Final = _encode(_MARK)
#: Raw finish reasons (``tokenwire.stop``) the encoder passes on as they are.
_FINISH_REASONS: Final = frozenset({"stop", "length", "tool_calls", "content_filter"})


class ChunkEncoder:
    """Standard events -> OpenAI ``chat.completion.chunk`` SSE frames (§7.3 ingress).

    Every block lands on choice 0 unless a ``tokenwire.block`` put it on
    another (``tokenwire:choice``, ``n`` > 1), each choice with its
    own tool-call indexes and finish reason. Text deltas go as ``delta.content`` (reasoning
    blocks as ``delta.reasoning_content``, blocks marked ``tokenwire:refusal``
    as ``delta.refusal``), ``tokenwire:citation`` as ``delta.annotations``,
    each ``tool.call`` as one whole ``delta.tool_calls`` entry with its own
    ``index``. ``stream.end`` sends the finish chunk (the raw
    ``tokenwire.stop`` value when it is a Chat finish reason, else
    ``tool_calls`` when any call was made, else the last stop reason), the
    usage chunk (``choices: []``, with ``prompt_tokens_details.cached_tokens``
    and ``completion_tokens_details.reasoning_tokens`` from ``tokenwire.usage``)
    when ``include_usage``, then ``data: [DONE]``. An ``error`` event becomes OpenAI's in-stream
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
        self._details: dict[str, int] = {}
        self._refusals: set[int] = set()
        self._raw_stop: str | None = None
        #: Per delta key, the frame's bytes before and after the encoded text.
        self._templates: dict[str, tuple[bytes, bytes]] = {}
        #: Block -> its choice, for blocks of choices > 0 (``tokenwire:choice``).
        self._choice_of: dict[int, int] = {}
        self._choices: dict[int, list[Any]] = {}  # choice > 0 -> [tool calls, stop reason]

    def _text_frame(self, key: str, text: str) -> bytes:
        """``_delta({key: text})``, from a template built once per key.

        The hot path (nearly every frame of a stream): the bytes around the
        text never change once ``created`` is known, so only the text is encoded.
        """
        template = self._templates.get(key)
        if template is None:
            if self.created is None:  # no stream.start yet: the clock decides each time
                return self._delta({key: text})
            frame = self._delta({key: _MARK})
            if frame.count(_ENCODED_MARK) != 1:  # the model or id holds the mark itself
                return self._delta({key: text})
            head, _, tail = frame.partition(_ENCODED_MARK)
            template = self._templates[key] = (head, tail)
        return template[0] + _encode(text) + template[1]

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

    def _delta(self, delta: dict[str, Any], finish: str | None = None, choice: int = 0) -> bytes:
        return self._chunk(
            [{"index": choice, "delta": delta, "logprobs": None, "finish_reason": finish}]
        )

    def _on_choice(self, choice: int, delta: dict[str, Any]) -> bytes:
        """A delta of choice ``choice`` > 0; its first one opens it as OpenAI does."""
        out = self._start()
        if choice not in self._choices:
            self._choices[choice] = [0, None]
            out += self._delta({"role": "assistant", "content": None}, choice=choice)
        return out + self._delta(delta, choice=choice)

    def _start(self) -> bytes:
        if self._started:
            return b""
        self._started = True
        # content null, as OpenAI opens a message: it may hold only a refusal or calls.
        return self._delta({"role": "assistant", "content": None})

    def encode(self, event: ev.Event) -> bytes:
        """The OpenAI bytes for ``event``; ``b""`` when it has none of its own."""
        if event.__class__ is ev.ContentDelta and self._started and not self._done:
            # The hot path: answer text (most events of every stream).
            delta = event
            if not delta.reasoning and delta.index not in self._refusals and not self._choice_of:
                template = self._templates.get("content")
                if template is not None:
                    return template[0] + _encode(delta.delta.text) + template[1]
        if self._done:
            return b""
        match event:
            case ev.StreamStart():
                if self.created is None:
                    self.created = event.created
                return self._start()
            case ev.ContentDelta():
                if event.reasoning:
                    key = "reasoning_content"
                elif event.index in self._refusals:
                    key = "refusal"
                else:
                    key = "content"
                choice = self._choice_of.get(event.index) if self._choice_of else None
                if choice is not None:
                    return self._on_choice(choice, {key: event.delta.text})
                if self._started:
                    return self._text_frame(key, event.delta.text)
                return self._start() + self._text_frame(key, event.delta.text)
            case ev.UnknownEvent():
                return self._extension(event)
            case ev.ToolCall():
                choice = self._choice_of.get(event.index) if self._choice_of else None
                if choice is not None:
                    calls = self._choices.setdefault(choice, [0, None])
                    whole = {
                        "index": calls[0],
                        "id": event.id,
                        "type": "function",
                        "function": {"name": event.name, "arguments": event.arguments},
                    }
                    calls[0] += 1
                    return self._on_choice(choice, {"tool_calls": [whole]})
                call = {
                    "index": self._calls,
                    "id": event.id,
                    "type": "function",
                    "function": {"name": event.name, "arguments": event.arguments},
                }
                self._calls += 1
                return self._start() + self._delta({"tool_calls": [call]})
            case ev.ContentStop():
                choice = self._choice_of.get(event.index) if self._choice_of else None
                if choice is not None:
                    state = self._choices.setdefault(choice, [0, None])
                    if event.stop_reason != "tool_use" or state[1] is None:
                        state[1] = event.stop_reason
                    return b""
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

    def _extension(self, event: ev.UnknownEvent) -> bytes:
        body = x.fields(event)
        if body is None:
            return b""
        if event.type == x.USAGE:
            self._details.update(
                (k, v) for k, v in body.items() if k.startswith("tokenwire:") and type(v) is int
            )
        elif event.type == x.STOP and isinstance(body.get(x.RAW_STOP_REASON), str):
            self._raw_stop = body[x.RAW_STOP_REASON]
        elif event.type == x.BLOCK and isinstance(body.get("index"), int):
            choice = body.get(x.CHOICE)
            if type(choice) is int and choice > 0:
                self._choice_of[body["index"]] = choice
            if body.get(x.REFUSAL) is True:
                self._refusals.add(body["index"])
            audio = body.get(x.AUDIO)
            if isinstance(audio, dict):
                return self._start() + self._delta({"audio": audio})
            tokens = body.get(x.LOGPROBS)
            if isinstance(tokens, list):
                # 1.1: on the chunk's choice, for the tokens just sent.
                key = "refusal" if body["index"] in self._refusals else "content"
                logprobs = {"content": None, "refusal": None, key: tokens}
                return self._start() + self._chunk(
                    [{"index": 0, "delta": {}, "logprobs": logprobs, "finish_reason": None}]
                )
            citation = body.get(x.CITATION)
            if isinstance(citation, dict) and citation.get("type") == "url_citation":
                if not isinstance(citation.get("url_citation"), dict):
                    # The Responses API's flat shape -> Chat's nested one.
                    inner = {k: v for k, v in citation.items() if k != "type"}
                    citation = {"type": "url_citation", "url_citation": inner}
                choice = self._choice_of.get(body["index"], 0)
                if choice:
                    return self._on_choice(choice, {"annotations": [citation]})
                return self._start() + self._delta({"annotations": [citation]})
        return b""

    def _end(self) -> bytes:
        self._done = True
        out = self._start()
        if not self._errored:
            finish = "tool_calls" if self._calls else STOP_TO_FINISH.get(self._stop or "", "stop")
            if self._raw_stop in _FINISH_REASONS:
                finish = self._raw_stop
            out += self._delta({}, finish)
            for choice, (calls, stop) in sorted(self._choices.items()):
                mapped = "tool_calls" if calls else STOP_TO_FINISH.get(stop or "", "stop")
                out += self._delta({}, mapped, choice=choice)
            if self.include_usage and self._usage is not None:
                i, o = self._usage
                usage: dict[str, Any] = {
                    "prompt_tokens": i,
                    "completion_tokens": o,
                    "total_tokens": i + o,
                }
                if x.CACHE_READ in self._details:
                    usage["prompt_tokens_details"] = {"cached_tokens": self._details[x.CACHE_READ]}
                if x.REASONING_TOKENS in self._details:
                    reasoning = self._details[x.REASONING_TOKENS]
                    usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
                out += self._chunk([], usage)
        return out + b"data: [DONE]\n\n"


def parse_ingress(
    body: dict[str, Any], *, vendor: str = "openai"
) -> tuple[rq.Request, EncodeEvent]:
    """The ``/v1/chat/completions`` ingress: the standard request and a fresh ``ChunkEncoder``.

    ``stream_options.include_usage`` decides whether the answer ends with a usage chunk.
    """
    request = request_from_vendor(body, vendor=vendor)
    options = body.get("stream_options")
    include_usage = isinstance(options, dict) and options.get("include_usage") is True
    return request, ChunkEncoder(model=request.model, include_usage=include_usage).encode
