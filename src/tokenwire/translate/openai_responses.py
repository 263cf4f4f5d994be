"""OpenAI Responses API streaming <-> the standard (§7.1).

Request side: ``build_request`` turns a standard request into ``POST
{base}/v1/responses`` with ``Authorization: Bearer``: ``input`` items (message
items with ``input_text``/``input_image``/``input_file`` content, assistant
tool calls as ``function_call`` items, tool results as ``function_call_output``
items), ``instructions`` from the system messages, flat function tools
(``strict: false``, since the standard's schemas are not written for strict
mode), ``max_output_tokens``, ``temperature``, ``top_p`` and ``stream: true``.
The extension ``"vendor:openai"`` is deep-merged into the body last.

Stream side: ``Translator`` reads ``event: <type>`` / ``data: <json>`` frames and
dispatches on the JSON ``type``. The mapping decisions (published in
``docs/translation.md``):

* ``response.output_text.delta`` is text, one block per output item;
  ``response.refusal.delta`` (the model declining) is text too, and the
  stream then stops with ``content_filter`` instead of ``end_turn`` (as the
  OpenAI Chat translator reads ``delta.refusal``);
* ``response.reasoning_summary_text.delta`` / ``response.reasoning_text.delta``
  are reasoning: dropped unless ``reasoning=True``, then on their own block
  marked ``tokenwire:reasoning``;
* a ``function_call`` item is keyed by its ``output_index`` (GitHub Copilot
  changes ``item_id`` on every event); its ``function_call_arguments.delta``
  fragments are accumulated and the call is emitted once, at
  ``function_call_arguments.done`` or ``output_item.done``, with the item's
  ``call_id`` as its id (empty arguments -> ``{}``);
* the terminal event ends the stream: ``response.completed`` (``tool_use`` when
  a call was made, else ``end_turn``), ``response.incomplete``
  (``INCOMPLETE_REASONS``), ``response.failed`` or ``error`` (an ``error``
  event whose code maps through ``ERROR_CODES``; a null code is
  ``internal_error``). Usage is ``response.usage`` (``input_tokens``,
  ``output_tokens``; reasoning tokens are part of the output), emitted after
  the ``content.stop`` events (or the error), right before ``stream.end``;
* a body that holds several responses back to back (an agent loop captured
  whole) is read up to the first terminal event; the rest is ignored, since
  one standard stream is one model turn;
* a body without a terminal event is an error.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar, Final

import msgspec

from .. import events as ev
from .. import sse
from ..errors import InvalidRequest, TranslationError
from ..request import AudioPart, DocumentPart, ImagePart, Message, Request, TextPart
from ._base import SSETranslator, VendorRequest
from ._contract import VendorFormat
from ._request import merge_extensions, sse_headers, vendor_parameters

__all__ = [
    "FORMAT",
    "ERROR_CODES",
    "EXTENSION_KEYS",
    "INCOMPLETE_REASONS",
    "Translator",
    "build_request",
    "error_code",
    "http_error",
]

#: Extension keys merged into the body, in this order (§4.7).
EXTENSION_KEYS: Final = ("vendor:openai",)

#: ``incomplete_details.reason`` -> standard stop reason (§5.3.3). Others: ``max_tokens``.
INCOMPLETE_REASONS: Final[dict[str, str]] = {
    "max_output_tokens": "max_tokens",
    "content_filter": "content_filter",
}

#: OpenAI error ``code`` (or ``type`` when the code is null) -> §5.3.6 code.
#: Anything else, and a null code, is ``internal_error``.
ERROR_CODES: Final[dict[str, str]] = {
    "rate_limit_exceeded": "rate_limited",
    "insufficient_quota": "rate_limited",
    "rate_limit_error": "rate_limited",
    "requests": "rate_limited",
    "tokens": "rate_limited",
    "context_length_exceeded": "context_length_exceeded",
    "string_above_max_length": "context_length_exceeded",
    "content_filter": "content_filtered",
    "content_policy_violation": "content_filtered",
    "invalid_prompt": "content_filtered",
    "overloaded": "overloaded",
    "server_is_overloaded": "overloaded",
    "slow_down": "overloaded",
    "engine_overloaded": "overloaded",
    "server_error": "internal_error",
}


def error_code(code: str | None, kind: str | None = None) -> str:
    """The §5.3.6 code for an OpenAI error ``code`` (falling back on its ``type``)."""
    for key in (code, kind):
        if key and key in ERROR_CODES:
            return ERROR_CODES[key]
    return "internal_error"


# --- Wire types: only the fields the translator reads ------------------------------
# (gc=False: decoded values never form cycles, and untracked structs decode faster.)


class _Item(msgspec.Struct, frozen=True, gc=False):
    type: str = ""
    call_id: str | None = None
    name: str | None = None
    arguments: str | None = None


class _ErrorBody(msgspec.Struct, frozen=True, gc=False):
    code: str | None = None
    message: str | None = None
    type: str | None = None


class _Usage(msgspec.Struct, frozen=True, gc=False):
    input_tokens: int = 0
    output_tokens: int = 0


class _Incomplete(msgspec.Struct, frozen=True, gc=False):
    reason: str | None = None


class _Response(msgspec.Struct, frozen=True, gc=False):
    status: str | None = None
    usage: _Usage | None = None
    incomplete_details: _Incomplete | None = None
    error: _ErrorBody | None = None


class _Event(msgspec.Struct, frozen=True, gc=False):
    type: str = ""
    output_index: int = 0
    delta: str | None = None
    arguments: str | None = None
    name: str | None = None
    item: _Item | None = None
    response: _Response | None = None
    # The ``error`` event: nested on the wire, flat in the SDK's types.
    error: _ErrorBody | None = None
    code: str | None = None
    message: str | None = None


class _Kind(msgspec.Struct, frozen=True, gc=False):
    type: str = ""


class _HTTPError(msgspec.Struct, frozen=True, gc=False):
    error: _ErrorBody | None = None


_decode_event = msgspec.json.Decoder(_Event).decode
_decode_http_error = msgspec.json.Decoder(_HTTPError).decode
_STATUS_CODES: Final[dict[int, str]] = {429: "rate_limited", 503: "overloaded", 529: "overloaded"}


def http_error(status: int, body: bytes) -> tuple[str, str]:
    """The §5.3.6 ``(code, message)`` for an OpenAI HTTP error answer (before any stream).

    The error's ``code``/``type`` decide when they are specific
    (``error_code``), else the HTTP status does. Never raises.
    """
    text = f"upstream answered HTTP {status}"
    code = _STATUS_CODES.get(status, "internal_error")
    try:
        err = _decode_http_error(body).error
    except msgspec.DecodeError:
        return code, text
    if err is None:
        return code, text
    mapped = error_code(err.code, err.type)
    if mapped != "internal_error":
        code = mapped
    return code, f"{text}: {err.message}" if err.message else text


_decode_kind = msgspec.json.Decoder(_Kind).decode
_encode = msgspec.json.Encoder().encode


#: The event types this translator reads; any other type is skipped.
_TRANSLATED: Final = frozenset(
    {
        "response.output_text.delta",
        "response.refusal.delta",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.reasoning_summary_text.delta",
        "response.reasoning_text.delta",
        "response.output_item.added",
        "response.output_item.done",
        "response.completed",
        "response.incomplete",
        "response.failed",
        "error",
    }
)


class _Call:
    """A function_call item being streamed, keyed by its output_index."""

    __slots__ = ("call_id", "done", "name", "pieces")

    def __init__(self, call_id: str | None, name: str | None) -> None:
        self.call_id = call_id
        self.name = name
        self.pieces: list[str] = []
        self.done = False


class Translator(SSETranslator):
    """Responses API stream -> standard events. See the module docstring."""

    name: ClassVar[str] = "openai-responses"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._next_block = 0
        self._blocks: dict[tuple[int, bool], int] = {}  # (output_index, reasoning) -> block
        self._text_blocks: dict[int, int] = {}  # output_index -> its text block
        self._calls: dict[int, _Call] = {}
        self._called = False
        self._refused = False  # the model sent refusal text

    def _block(self, output_index: int, reasoning: bool) -> int:
        key = (output_index, reasoning)
        block = self._blocks.get(key)
        if block is None:
            block = self._blocks[key] = self._next_block
            self._next_block += 1
        return block

    def _on_frame(self, frame: sse.Message) -> None:
        data = frame.data
        try:
            event = _decode_event(data)
        except msgspec.DecodeError as exc:
            self._undecodable(data, exc)
            return
        kind = event.type
        out = self.out
        if kind == "response.output_text.delta" or kind == "response.refusal.delta":
            # The hot path: one fragment of answer text.
            if not event.delta:
                return
            if kind == "response.refusal.delta":
                self._refused = True
            block = self._text_blocks.get(event.output_index)
            if block is None:
                block = self._block(event.output_index, False)
                self._text_blocks[event.output_index] = block
            out += self.writer.text(event.delta, block)
        elif kind == "response.function_call_arguments.delta":
            call = self._calls.get(event.output_index)
            if call is None:
                call = self._calls[event.output_index] = _Call(None, None)
            if event.delta:
                call.pieces.append(event.delta)
        elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            if event.delta and self.reasoning:
                block = self._block(event.output_index, True)
                out += self.writer.text(event.delta, block, reasoning=True)
        elif kind == "response.output_item.added":
            item = event.item
            if item is not None and item.type == "function_call":
                call = self._calls.setdefault(event.output_index, _Call(None, None))
                call.call_id = call.call_id or item.call_id
                call.name = call.name or item.name
        elif kind == "response.function_call_arguments.done":
            self._finish_call(event.output_index, event.arguments, event.name, None)
        elif kind == "response.output_item.done":
            item = event.item
            if item is not None and item.type == "function_call":
                self._finish_call(event.output_index, item.arguments, item.name, item.call_id)
        elif kind == "response.completed" or kind == "response.incomplete":
            self._on_terminal(event.response, kind)
        elif kind == "response.failed":
            response = event.response
            err = response.error if response is not None else None
            code = error_code(err.code, err.type) if err is not None else "internal_error"
            text = (err.message if err is not None else None) or "response failed"
            out += self.writer.error(code, f"openai-responses: {text}")
            out += self._usage(response) + self.writer.end()
        elif kind == "error":
            err = event.error or _ErrorBody(code=event.code, message=event.message)
            text = err.message or err.code or "error"
            out += self.writer.fail(error_code(err.code, err.type), f"openai-responses: {text}")
        # Anything else (created, in_progress, queued, content_part.*, *.done,
        # annotations, hosted tool progress, future types): nothing to translate.

    def _undecodable(self, data: str, exc: msgspec.DecodeError) -> None:
        if not data.strip() or data == "[DONE]":
            return  # not a Responses end marker; only a terminal event ends the stream
        # Forward compatibility: an event type we do not translate may carry
        # fields of other shapes; only the types we read must decode.
        try:
            kind = _decode_kind(data).type
        except msgspec.DecodeError:
            kind = ""
        if kind and kind not in _TRANSLATED:
            return
        raise TranslationError(f"openai-responses: upstream event is not valid: {exc}")

    def _finish_call(
        self, output_index: int, arguments: str | None, name: str | None, call_id: str | None
    ) -> None:
        call = self._calls.get(output_index)
        if call is None:
            call = self._calls[output_index] = _Call(call_id, name)
        if call.done:
            return
        call.call_id = call.call_id or call_id
        call.name = call.name or name
        if not call.name:
            raise TranslationError(f"openai-responses: function call {output_index} has no name")
        # The done events repeat the whole text; the fragments are the fallback.
        text = (arguments if arguments is not None else "".join(call.pieces)).strip() or "{}"
        call.done = True
        # §5.3.4 / §4.8: the call is whole; its block stops with tool_use right away.
        index = self._next_block
        self._next_block += 1
        call_id = call.call_id or f"call_{output_index}"
        self.out += self.writer.tool_call(id=call_id, name=call.name, arguments=text, index=index)
        self.out += self.writer.stop(index, "tool_use")
        self._called = True

    def _usage(self, response: _Response | None) -> list[ev.Event]:
        usage = response.usage if response is not None else None
        if usage is None:
            return []
        return self.writer.usage(usage.input_tokens, usage.output_tokens)

    def _on_terminal(self, response: _Response | None, kind: str) -> None:
        # Calls whose done events never came are complete now.
        for index in sorted(self._calls):
            call = self._calls[index]
            if not call.done and call.name:
                self._finish_call(index, None, None, None)
        if kind == "response.incomplete":
            details = response.incomplete_details if response is not None else None
            reason = details.reason if details is not None else None
            stop = INCOMPLETE_REASONS.get(reason or "", "max_tokens")
        else:
            stop = "tool_use" if self._called else "end_turn"
        if stop == "end_turn" and self._refused:
            stop = "content_filter"  # the model declined (as the OpenAI Chat translator reads it)
        out = self.out
        for index in sorted(self.writer.open_blocks):
            out += self.writer.stop(index, stop)
        # §5.3.5: the usage last, after the stops, before stream.end.
        out += self._usage(response) + self.writer.end()


# --- Request side ------------------------------------------------------------------


_EXTENSIONS: Final[dict[str, str]] = {
    "application/pdf": "pdf",
    "text/plain": "txt",
    "text/markdown": "md",
    "text/csv": "csv",
    "application/json": "json",
}


def _user_content(message: Message, path: str) -> list[dict[str, Any]]:
    content = message.content
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "input_text", "text": content}]
    items: list[dict[str, Any]] = []
    for k, part in enumerate(content):
        if isinstance(part, TextPart):
            items.append({"type": "input_text", "text": part.text})
        elif isinstance(part, ImagePart):
            url = f"data:{part.media_type};base64,{part.data}"
            items.append({"type": "input_image", "image_url": url, "detail": "auto"})
        elif isinstance(part, DocumentPart):
            ext = _EXTENSIONS.get(part.media_type, "bin")
            items.append(
                {
                    "type": "input_file",
                    "filename": f"document-{k}.{ext}",
                    "file_data": f"data:{part.media_type};base64,{part.data}",
                }
            )
        else:
            kind = "audio" if isinstance(part, AudioPart) else type(part).__name__
            raise InvalidRequest(
                f"the Responses API cannot take {kind} parts", path=f"{path}.content[{k}]"
            )
    return items


def _input(req: Request) -> tuple[list[str], list[dict[str, Any]]]:
    """``(instructions, input items)`` for the history."""
    instructions: list[str] = []
    items: list[dict[str, Any]] = []
    for i, message in enumerate(req.messages):
        path = f"messages[{i}]"
        if message.role == "system":
            if isinstance(message.content, list) and not all(
                isinstance(p, TextPart) for p in message.content
            ):
                raise InvalidRequest(
                    "Responses instructions carry text only", path=f"{path}.content"
                )
            instructions.append(message.text)
        elif message.role == "user":
            items.append(
                {"type": "message", "role": "user", "content": _user_content(message, path)}
            )
        elif message.role == "assistant":
            if isinstance(message.content, list) and not all(
                isinstance(p, TextPart) for p in message.content
            ):
                raise InvalidRequest(
                    "assistant messages carry text only in the Responses API",
                    path=f"{path}.content",
                )
            text = message.text
            if text:
                items.append(
                    {
                        "type": "message",
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": text, "annotations": []}],
                    }
                )
            for call in message.tool_calls or ():
                items.append(
                    {
                        "type": "function_call",
                        "call_id": call.id,
                        "name": call.name,
                        "arguments": call.arguments,
                    }
                )
        else:  # tool
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": message.tool_call_id,
                    "output": message.text,
                }
            )
    return instructions, items


#: Standard parameter -> Responses API field.
_PARAMETERS: Final = {
    "max_tokens": "max_output_tokens",
    "temperature": "temperature",
    "top_p": "top_p",
}


def _endpoint(base_url: str) -> str:
    base = base_url.rstrip("/")
    return f"{base}/responses" if re.search(r"/v1$", base) else f"{base}/v1/responses"


def build_request(
    req: Request,
    *,
    base_url: str,
    api_key: str | None = None,
    upstream_model: str | None = None,
    headers: dict[str, str] | None = None,
) -> VendorRequest:
    """The Responses API ``/v1/responses`` streaming request for ``req``.

    ``base_url`` is the API root (``https://api.openai.com``); ``/v1`` is added
    unless it already ends with it. ``upstream_model`` replaces ``req.model``.
    ``stop_sequences`` is not sent: the Responses API has no stop parameter.
    The extension ``"vendor:openai"`` is deep-merged into the body last.

    Returns the ``VendorRequest``. Raises ``InvalidRequest`` (with ``.path``)
    for audio parts and for non-text system or assistant parts.
    """
    instructions, items = _input(req)
    body: dict[str, Any] = {"model": upstream_model or req.model, "input": items, "stream": True}
    if instructions:
        body["instructions"] = "\n\n".join(instructions)
    if req.tools:
        body["tools"] = [
            {
                "type": "function",
                "name": t.name,
                "description": t.description,
                "parameters": t.parameters,
                "strict": False,
            }
            for t in req.tools
        ]
    # The Responses API has no stop parameter.
    body.update(vendor_parameters(req.parameters, _PARAMETERS))
    merge_extensions(body, req, EXTENSION_KEYS)
    head = sse_headers({"authorization": f"Bearer {api_key}"} if api_key else {}, headers)
    return VendorRequest(url=_endpoint(base_url), headers=head, body=_encode(body))


#: The OpenAI Responses vendor format.
FORMAT = VendorFormat(
    name="openai-responses",
    title="OpenAI Responses",
    transport="http-sse",
    media_type="text/event-stream",
    translator=Translator,
    build_request=build_request,
    http_error=http_error,
    endpoint="POST {base_url}/v1/responses",
    fake="tokenwire.testing.openai_responses",
)
