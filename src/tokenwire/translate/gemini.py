"""Google Gemini ``streamGenerateContent?alt=sse`` <-> the standard (§7.1).

Request side: ``build_request`` turns a standard request into
``POST {base}/v1beta/models/{model}:streamGenerateContent?alt=sse`` with
``x-goog-api-key``; the body's ``contents`` carry the history (system ->
``systemInstruction``, assistant -> role ``model``, images/audio/documents ->
``inlineData``, tool calls -> ``functionCall`` parts, tool results ->
``functionResponse`` parts named after the matching assistant tool call), tools
-> ``functionDeclarations``, parameters -> ``generationConfig``. The extensions
``"vendor:google"`` then ``"vendor:gemini"`` are deep-merged into the body last.

Stream side: ``Translator`` reads ``data: <GenerateContentResponse>`` frames
(CRLF-separated on the real wire). Gemini has no end marker: the body simply
ends after the chunk carrying ``finishReason``, so the stream is finished at
``close()``; a body that ends before every candidate has a ``finishReason`` is
an error. The mapping decisions (published in ``docs/translation.md``):

* text: ``candidates[c].content.parts[].text``, one block per candidate;
  ``thought: true`` parts are reasoning, dropped unless ``reasoning=True``
  (then on their own block, marked ``tokenwire:reasoning``);
* ``functionCall`` parts are whole calls (``args`` absent -> ``{}``); the
  Vertex ``partialArgs``/``willContinue`` form is accumulated until the closing
  part. Gemini gives no id, so one is generated: ``call_{n}`` (``n`` counts
  calls in the stream), prefixed by the request id when there is one;
* ``finishReason`` ``STOP`` becomes ``tool_use`` when the candidate called a
  tool; see ``FINISH_REASONS`` and ``FINISH_ERRORS`` for the rest;
* ``usageMetadata`` is a running total repeated on many chunks: the last one
  wins, never a sum. ``input = promptTokenCount + toolUsePromptTokenCount``,
  ``output = candidatesTokenCount + thoughtsTokenCount`` (thinking is billed
  as output, as in ``totalTokenCount``);
* a prompt block (``promptFeedback.blockReason`` and no candidates) is an
  ``error`` with code ``content_filtered``; an ``{"error": {...}}`` chunk is an
  ``error`` with the code its status maps to (``ERROR_STATUSES``);
* after any ``error`` (those above, ``FINISH_ERRORS``, an unreadable chunk, a
  truncated body) the usage reported so far follows (§5.4 allows it), then
  ``stream.end``; on a clean finish the usage comes after the ``content.stop``
  events, right before ``stream.end``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, ClassVar, Final
from urllib.parse import quote

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
    "ERROR_STATUSES",
    "EXTENSION_KEYS",
    "FINISH_ERRORS",
    "FINISH_REASONS",
    "Translator",
    "build_request",
    "error_code",
    "http_error",
]

#: Extension keys merged into the body, in this order (§4.7).
EXTENSION_KEYS: Final = ("vendor:google", "vendor:gemini")

#: ``finishReason`` -> standard stop reason (§5.3.3). ``STOP`` on a candidate
#: that called a tool becomes ``tool_use``. Anything not listed here or in
#: ``FINISH_ERRORS`` (``OTHER``, ``FINISH_REASON_UNSPECIFIED``, a future
#: value) is taken as ``end_turn``.
FINISH_REASONS: Final[dict[str, str]] = {
    "STOP": "end_turn",
    "MAX_TOKENS": "max_tokens",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
    "LANGUAGE": "content_filter",
    "BLOCKLIST": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "SPII": "content_filter",
    "IMAGE_SAFETY": "content_filter",
    "IMAGE_PROHIBITED_CONTENT": "content_filter",
    "IMAGE_RECITATION": "content_filter",
}

#: ``finishReason`` values that mean the model's output is unusable: an
#: ``error`` event with this code (§5.3.6), not a stop reason. The model
#: produced a call that cannot be executed, which no stop reason describes.
FINISH_ERRORS: Final[dict[str, str]] = {
    "MALFORMED_FUNCTION_CALL": "internal_error",
    "UNEXPECTED_TOOL_CALL": "internal_error",
    "TOO_MANY_TOOL_CALLS": "internal_error",
}

#: Google RPC ``status`` of an error object -> §5.3.6 code. ``INVALID_ARGUMENT``
#: about the input's token count is ``context_length_exceeded`` (see ``error_code``).
ERROR_STATUSES: Final[dict[str, str]] = {
    "RESOURCE_EXHAUSTED": "rate_limited",
    "UNAVAILABLE": "overloaded",
    "DEADLINE_EXCEEDED": "overloaded",
    "INTERNAL": "internal_error",
}

_HTTP_CODES: Final[dict[int, str]] = {
    429: "rate_limited",
    503: "overloaded",
    504: "overloaded",
    529: "overloaded",
}
_TOO_LONG: Final = re.compile(r"token.*exceed|exceed.*token|too long|context", re.IGNORECASE)


def error_code(status: str | None, http_code: int | None = None, message: str = "") -> str:
    """The §5.3.6 code for a Gemini error object (``status``, ``code``, ``message``)."""
    if status == "INVALID_ARGUMENT" and _TOO_LONG.search(message):
        return "context_length_exceeded"
    if status in ERROR_STATUSES:
        return ERROR_STATUSES[status]
    return _HTTP_CODES.get(http_code or 0, "internal_error")


# --- Wire types: only the fields the translator reads (msgspec skips the rest) ----
# (gc=False: decoded values never form cycles, and untracked structs decode faster.)


class _PartialArg(msgspec.Struct, frozen=True, gc=False):
    jsonPath: str = "$"
    stringValue: str | None = None
    numberValue: int | float | None = None
    boolValue: bool | None = None
    nullValue: str | None = None
    willContinue: bool = False


class _FunctionCall(msgspec.Struct, frozen=True, gc=False):
    id: str | None = None
    name: str | None = None
    # Kept as raw JSON: it becomes the tool.call's arguments text as is.
    args: msgspec.Raw = msgspec.Raw()
    partialArgs: list[_PartialArg] | None = None
    willContinue: bool = False


class _Part(msgspec.Struct, frozen=True, gc=False):
    text: str | None = None
    thought: bool = False
    functionCall: _FunctionCall | None = None


class _Content(msgspec.Struct, frozen=True, gc=False):
    parts: list[_Part] = []


class _Candidate(msgspec.Struct, frozen=True, gc=False):
    content: _Content | None = None
    finishReason: str | None = None
    finishMessage: str | None = None
    index: int = 0


class _UsageMetadata(msgspec.Struct, frozen=True, gc=False):
    promptTokenCount: int = 0
    candidatesTokenCount: int = 0
    thoughtsTokenCount: int = 0
    toolUsePromptTokenCount: int = 0


class _PromptFeedback(msgspec.Struct, frozen=True, gc=False):
    blockReason: str | None = None
    blockReasonMessage: str | None = None


class _Error(msgspec.Struct, frozen=True, gc=False):
    code: int | None = None
    message: str = ""
    status: str | None = None


class _Chunk(msgspec.Struct, frozen=True, gc=False):
    candidates: list[_Candidate] = []
    usageMetadata: _UsageMetadata | None = None
    promptFeedback: _PromptFeedback | None = None
    error: _Error | None = None


class _ErrorBody(msgspec.Struct, frozen=True, gc=False):
    error: _Error | None = None


_decode_chunk = msgspec.json.Decoder(_Chunk).decode
# The non-SSE form wraps the body in an array; an error answer may come either way.
_decode_http_error = msgspec.json.Decoder(_ErrorBody | list[_ErrorBody]).decode


def http_error(status: int, body: bytes) -> tuple[str, str]:
    """The §5.3.6 ``(code, message)`` for a Gemini HTTP error answer (before any stream).

    The error object's ``status`` decides the code when it is specific
    (``error_code``), else the HTTP status does. Never raises.
    """
    message = f"upstream answered HTTP {status}"
    fallback = _HTTP_CODES.get(status, "internal_error")
    try:
        parsed = _decode_http_error(body)
    except msgspec.DecodeError:
        return fallback, message
    if isinstance(parsed, list):
        parsed = parsed[0] if parsed else _ErrorBody()
    err = parsed.error
    if err is None:
        return fallback, message
    code = error_code(err.status, err.code or status, err.message)
    return code, f"{message}: {err.message}" if err.message else message


_encode = msgspec.json.Encoder().encode


# --- Streamed arguments (Vertex partialArgs) -------------------------------------

_PATH_TOKEN: Final = re.compile(
    r"\.([^.\[\]]+)|\[(\d+)\]|\[\s*'((?:[^'\\]|\\.)*)'\s*\]|\[\s*\"((?:[^\"\\]|\\.)*)\"\s*\]"
)


def _path_steps(path: str) -> list[str | int]:
    """``$.a.b[0]['c d']`` -> ``["a", "b", 0, "c d"]`` (RFC 9535 normalized paths)."""
    if not path.startswith("$"):
        raise TranslationError(f"gemini: partialArgs jsonPath {path!r} does not start with $")
    steps: list[str | int] = []
    pos = 1
    while pos < len(path):
        match = _PATH_TOKEN.match(path, pos)
        if match is None:
            raise TranslationError(f"gemini: cannot read partialArgs jsonPath {path!r}")
        name, number, single, double = match.groups()
        if number is not None:
            steps.append(int(number))
        else:
            steps.append(name if name is not None else single if single is not None else double)
        pos = match.end()
    return steps


class _StreamedCall:
    """A Vertex ``functionCall`` streamed as ``partialArgs`` until ``willContinue`` is false."""

    def __init__(self, call_id: str | None, name: str) -> None:
        self.id = call_id
        self.name = name
        self.args: dict[str, Any] = {}
        # The jsonPath of a string still being continued, and its pieces so far.
        self._open_path: str | None = None
        self._pieces: list[str] = []

    def add(self, arg: _PartialArg) -> None:
        if arg.stringValue is not None:
            if self._open_path != arg.jsonPath:
                self._flush()
                self._open_path = arg.jsonPath
            self._pieces.append(arg.stringValue)
            if not arg.willContinue:
                self._flush()
            return
        self._flush()
        value: Any
        if arg.numberValue is not None:
            value = arg.numberValue
        elif arg.boolValue is not None:
            value = arg.boolValue
        else:
            value = None
        self._set(arg.jsonPath, value)

    def _flush(self) -> None:
        if self._open_path is not None:
            self._set(self._open_path, "".join(self._pieces))
        self._open_path = None
        self._pieces = []

    def _set(self, path: str, value: Any) -> None:
        steps = _path_steps(path)
        if not steps:
            raise TranslationError("gemini: partialArgs jsonPath $ cannot hold a value")
        node: Any = self.args
        for step, nxt in zip(steps, steps[1:], strict=False):
            node = _child(node, step, [] if isinstance(nxt, int) else {})
        _assign(node, steps[-1], value)

    def arguments(self) -> str:
        self._flush()
        return _encode(self.args).decode()


def _child(node: Any, step: str | int, empty: Any) -> Any:
    if isinstance(step, int):
        if not isinstance(node, list):
            raise TranslationError("gemini: partialArgs index into a non-array")
        while len(node) <= step:
            node.append(None)
        if node[step] is None:
            node[step] = empty
        return node[step]
    if not isinstance(node, dict):
        raise TranslationError("gemini: partialArgs field of a non-object")
    return node.setdefault(step, empty)


def _assign(node: Any, step: str | int, value: Any) -> None:
    if isinstance(step, int):
        _child(node, step, None)
        node[step] = value
    elif isinstance(node, dict):
        node[step] = value
    else:
        raise TranslationError("gemini: partialArgs field of a non-object")


# --- Stream side ---------------------------------------------------------------------


class Translator(SSETranslator):
    """Gemini ``alt=sse`` body -> standard events. See the module docstring."""

    name: ClassVar[str] = "gemini"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._next_block = 0
        self._blocks: dict[tuple[int, bool], int] = {}  # (candidate, reasoning) -> block
        self._finish: dict[int, str] = {}  # candidate -> standard stop reason
        self._seen: set[int] = set()  # candidates seen
        self._called: set[int] = set()  # candidates that called a tool
        self._streamed: dict[int, _StreamedCall] = {}  # candidate -> call in progress
        self._calls = 0
        self._ids: set[str] = set()
        self._usage: _UsageMetadata | None = None

    # -- helpers -------------------------------------------------------------

    def _block(self, candidate: int, reasoning: bool) -> int:
        key = (candidate, reasoning)
        index = self._blocks.get(key)
        if index is None:
            index = self._blocks[key] = self._next_block
            self._next_block += 1
        return index

    def _call_id(self, given: str | None) -> str:
        # Gemini gives no id (§5.3.4 requires one): generate a stable one.
        n = self._calls
        self._calls += 1
        if given and given not in self._ids:
            call_id = given
        else:
            rid = self.writer.request_id
            call_id = f"call_{rid}_{n}" if rid else f"call_{n}"
            while call_id in self._ids:
                call_id += "_"
        self._ids.add(call_id)
        return call_id

    def _emit_call(self, candidate: int, call_id: str | None, name: str, arguments: str) -> None:
        # §5.3.4: a tool.call is whole; its block stops right away with tool_use (§4.8).
        index = self._next_block
        self._next_block += 1
        self.out += self.writer.tool_call(
            id=self._call_id(call_id), name=name, arguments=arguments, index=index
        )
        self.out += self.writer.stop(index, "tool_use")
        self._called.add(candidate)

    def _fail(self, code: str, message: str) -> None:
        """``error``, the usage reported so far (§5.4 allows it after an error), ``stream.end``."""
        if self.writer.ended:
            return
        if not self.writer.errored:
            self.out += self.writer.error(code, message)
        self.out += self._usage_events() + self.writer.end()

    def _usage_events(self) -> list[ev.Event]:
        u = self._usage
        if u is None:
            return []
        return self.writer.usage(
            u.promptTokenCount + u.toolUsePromptTokenCount,
            u.candidatesTokenCount + u.thoughtsTokenCount,
        )

    # -- one chunk -------------------------------------------------------------

    def _on_frame(self, frame: sse.Message) -> None:
        data = frame.data
        try:
            chunk = _decode_chunk(data)
        except msgspec.DecodeError as exc:
            if not data.strip():
                return
            raise TranslationError(
                f"gemini: upstream chunk is not a GenerateContentResponse: {exc}"
            ) from None
        if chunk.error is not None:
            err = chunk.error
            code = error_code(err.status, err.code, err.message)
            self._fail(code, f"gemini: {err.status or err.code}: {err.message}")
            return
        if chunk.usageMetadata is not None:
            self._usage = chunk.usageMetadata  # §5.3.5: a running total; the last one wins
        feedback = chunk.promptFeedback
        if not chunk.candidates and feedback is not None and feedback.blockReason:
            detail = f": {feedback.blockReasonMessage}" if feedback.blockReasonMessage else ""
            message = f"gemini: prompt blocked ({feedback.blockReason}){detail}"
            self._fail("content_filtered", message)
            return
        for cand in chunk.candidates:
            self._on_candidate(cand)
            if self.writer.ended:
                return

    def _on_candidate(self, cand: _Candidate) -> None:
        c = cand.index
        self._seen.add(c)
        writer = self.writer
        if cand.content is not None:
            for part in cand.content.parts:
                call = part.functionCall
                if call is not None:
                    self._on_function_call(c, call)
                elif part.text:
                    if c in self._streamed:
                        raise TranslationError("gemini: text inside a streamed function call")
                    if not part.thought:
                        self.out += writer.text(part.text, self._block(c, False))
                    elif self.reasoning:
                        self.out += writer.text(part.text, self._block(c, True), reasoning=True)
        reason = cand.finishReason
        if reason is None:
            return
        if c in self._streamed:
            raise TranslationError("gemini: stream finished inside a streamed function call")
        if reason in FINISH_ERRORS:
            detail = f": {cand.finishMessage}" if cand.finishMessage else ""
            self._fail(FINISH_ERRORS[reason], f"gemini: {reason}{detail}")
            return
        stop = FINISH_REASONS.get(reason, "end_turn")
        if stop == "end_turn" and c in self._called:
            stop = "tool_use"  # Gemini says STOP while calling tools
        self._finish[c] = stop

    def _on_function_call(self, c: int, call: _FunctionCall) -> None:
        pending = self._streamed.get(c)
        if pending is not None and call.name:
            # A new call while one is still streaming: the first one is complete.
            del self._streamed[c]
            self._emit_call(c, pending.id, pending.name, pending.arguments())
            pending = None
        if pending is None:
            if not call.name:
                raise TranslationError("gemini: functionCall without a name")
            if not call.willContinue and not call.partialArgs:
                args = bytes(call.args)
                arguments = "{}" if not args or args == b"null" else args.decode()
                self._emit_call(c, call.id, call.name, arguments)
                return
            pending = self._streamed[c] = _StreamedCall(call.id, call.name)
            if len(call.args) and bytes(call.args) != b"null":
                decoded = msgspec.json.decode(call.args)
                if isinstance(decoded, dict):
                    pending.args.update(decoded)
        for arg in call.partialArgs or ():
            pending.add(arg)
        if not call.willContinue:
            del self._streamed[c]
            self._emit_call(c, pending.id, pending.name, pending.arguments())

    # -- end of body -------------------------------------------------------------

    def _on_eof(self) -> None:
        # Gemini's end marker is a finishReason on every candidate, then EOF.
        if not self._seen or any(c not in self._finish for c in self._seen):
            # §5.3.5: whatever usage the vendor reported still goes out.
            self._fail(
                "internal_error", f"{self.name} stream ended before its end marker (truncated)"
            )
            return
        out = self.out
        for (c, _reasoning), index in sorted(self._blocks.items(), key=lambda kv: kv[1]):
            if index in self.writer.open_blocks:
                out += self.writer.stop(index, self._finish[c])
        out += self._usage_events() + self.writer.end()


# --- Request side ------------------------------------------------------------------


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


def _contents(messages: Iterable[Message]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(systemInstruction parts, contents)`` for the history."""
    system: list[dict[str, Any]] = []
    contents: list[dict[str, Any]] = []
    names: dict[str, str] = {}  # tool call id -> function name, from assistant turns
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
            parts = _parts(message, path)
            for j, call in enumerate(message.tool_calls or ()):
                args = _json_object(call.arguments) if call.arguments.strip() else {}
                if args is None:
                    raise InvalidRequest(
                        "tool call arguments must be a JSON object for gemini",
                        path=f"{path}.tool_calls[{j}].arguments",
                    )
                names[call.id] = call.name
                parts.append({"functionCall": {"name": call.name, "args": args}})
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
    return system, contents


#: Standard parameter -> Gemini ``generationConfig`` field.
_PARAMETERS: Final = {
    "max_tokens": "maxOutputTokens",
    "temperature": "temperature",
    "top_p": "topP",
    "stop_sequences": "stopSequences",
}


def _endpoint(base_url: str, model: str) -> str:
    base = base_url.rstrip("/")
    if not re.search(r"/v1(beta\d*|alpha\d*)?$", base):
        base += "/v1beta"
    model = model.removeprefix("models/")
    return f"{base}/models/{quote(model, safe='.-_')}:streamGenerateContent?alt=sse"


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
    arguments that are not a JSON object, or a non-text system part.
    """
    system, contents = _contents(req.messages)
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
    config = vendor_parameters(req.parameters, _PARAMETERS)
    if config:
        body["generationConfig"] = config
    merge_extensions(body, req, EXTENSION_KEYS, protected=())
    head = sse_headers({"x-goog-api-key": api_key} if api_key else {}, headers)
    return VendorRequest(
        url=_endpoint(base_url, upstream_model or req.model), headers=head, body=_encode(body)
    )


#: The Google Gemini vendor format.
FORMAT = VendorFormat(
    name="gemini",
    title="Google Gemini",
    transport="http-sse",
    media_type="text/event-stream",
    translator=Translator,
    build_request=build_request,
    http_error=http_error,
    endpoint="POST {base_url}/v1beta/models/{model}:streamGenerateContent?alt=sse",
    fake="tokenwire.testing.gemini",
)
