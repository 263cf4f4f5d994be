"""The Gemini ingress (§7.3): ``POST /v1beta/models/{model}:streamGenerateContent``.

``request_from_vendor`` turns a ``GenerateContentRequest`` body (the route's
``model`` path parameter copied in as ``model``, as Google's REST mapping binds
it) into a standard ``Request``; ``EventEncoder`` turns standard events back
into Gemini's own ``alt=sse`` stream, so that the google-genai SDK can read any
upstream, thought parts, signatures, server tools and usage details included.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping
from typing import Any, Final

import msgspec

from ... import events as ev
from ... import request as rq
from ...errors import InvalidRequest
from .. import _extensions as x
from .._contract import EncodeEvent
from .._ingress import json_kind
from .errors import FINISH_ERRORS, FINISH_REASONS, RPC_STATUSES, VENDOR_ERRORS
from .schema import json_schema

_encode = msgspec.json.Encoder().encode
_VENDOR: Final = "gemini"

#: ``generationConfig`` fields with a standard home (§4.5); the rest go to
#: ``extensions["vendor:gemini"]``.
_PARAMETERS: Final = {
    "maxOutputTokens": "max_tokens",
    "temperature": "temperature",
    "topP": "top_p",
    "stopSequences": "stop_sequences",
}
#: Body fields with a standard home; the others go to ``vendor:gemini``.
_STANDARD_FIELDS: Final = frozenset(
    {"model", "contents", "systemInstruction", "tools", "generationConfig"}
)


def _want(obj: Mapping[str, Any], key: str, kind: type, path: str) -> Any:
    value = obj.get(key)
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        names: dict[type, str] = {str: "a string", dict: "an object", list: "an array"}
        raise InvalidRequest(
            f"required: {names.get(kind, kind.__name__)}, got {json_kind(value)}",
            path=f"{path}.{key}",
        )
    return value


#: Fields whose values are the caller's own JSON (arguments, results, schemas):
#: their keys are never respelled.
_OPAQUE: Final = frozenset(
    {
        "args",
        "response",
        "parameters",
        "parametersJsonSchema",
        "responseSchema",
        "responseJsonSchema",
        "labels",
        "metadata",
    }
)


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(word[:1].upper() + word[1:] for word in rest)


def camel_case(value: Any) -> Any:
    """``value`` with every field name in Gemini's lowerCamelCase spelling.

    Google's JSON parser takes a field by its proto name too (``include_thoughts``
    for ``includeThoughts``), and google-genai sends some that way; the values
    of ``_OPAQUE`` fields (the caller's own JSON) are kept as they are.
    """
    if isinstance(value, list):
        return [camel_case(item) for item in value]
    if not isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    for key, item in value.items():
        name = _camel(key) if "_" in key else key
        out[name] = item if name in _OPAQUE else camel_case(item)
    return out


def _media_part(data: Mapping[str, Any], path: str) -> dict[str, Any]:
    mime = _want(data, "mimeType", str, path)
    payload = _want(data, "data", str, path)
    major = mime.split("/", 1)[0]
    kind = {"image": "image", "audio": "audio"}.get(major, "document")
    return {"type": kind, "media_type": mime, "data": payload}


class _Turns:
    """Gemini ``contents`` -> standard messages and the reasoning history."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.history: list[dict[str, Any]] = []
        self._pending: list[tuple[str, str]] = []  # (call id, name) awaiting a response
        self._calls = 0

    def user(self, parts: list[Any], path: str) -> None:
        content: list[dict[str, Any]] = []
        for k, part in enumerate(parts):
            where = f"{path}.parts[{k}]"
            if not isinstance(part, dict):
                raise InvalidRequest(f"a part must be an object, got {json_kind(part)}", path=where)
            if isinstance(part.get("text"), str):
                if not part.get("thought"):
                    content.append({"type": "text", "text": part["text"]})
            elif isinstance(part.get("inlineData"), dict):
                content.append(_media_part(part["inlineData"], f"{where}.inlineData"))
            elif isinstance(part.get("functionResponse"), dict):
                self._flush_user(content)
                content = []
                self._tool_result(part["functionResponse"], f"{where}.functionResponse")
            else:
                kinds = ", ".join(sorted(part)) or "nothing"
                raise InvalidRequest(
                    f"a user part with {kinds} cannot be translated (text, inlineData "
                    "and functionResponse can)",
                    path=where,
                )
        self._flush_user(content)

    def _flush_user(self, content: list[dict[str, Any]]) -> None:
        if not content:
            return
        if len(content) == 1 and content[0]["type"] == "text":
            self.messages.append({"role": "user", "content": content[0]["text"]})
        else:
            self.messages.append({"role": "user", "content": content})

    def _tool_result(self, response: Mapping[str, Any], path: str) -> None:
        name = _want(response, "name", str, path)
        given = response.get("id")
        match = next(
            (
                i
                for i, (cid, cname) in enumerate(self._pending)
                if (cid == given if isinstance(given, str) else cname == name)
            ),
            None,
        )
        if match is None:
            raise InvalidRequest(
                f"no earlier functionCall {name!r} is waiting for this response", path=path
            )
        call_id, _ = self._pending.pop(match)
        result = response.get("response", {})
        text = _encode(result).decode() if not isinstance(result, str) else result
        self.messages.append({"role": "tool", "tool_call_id": call_id, "content": text})

    def model(self, parts: list[Any], path: str) -> None:
        """One merged ``model`` turn (the SDK's chat history has one content per chunk)."""
        texts: list[str] = []
        calls: list[dict[str, Any]] = []
        reasoning: list[dict[str, Any]] = []
        answer: str | None = None
        for k, part in enumerate(parts):
            where = f"{path}.parts[{k}]"
            if not isinstance(part, dict):
                raise InvalidRequest(f"a part must be an object, got {json_kind(part)}", path=where)
            signature = part.get("thoughtSignature")
            signature = signature if isinstance(signature, str) and signature else None
            call = part.get("functionCall")
            if isinstance(call, dict):
                args = call.get("args", {})
                if args is None:
                    args = {}
                if not isinstance(args, dict):
                    raise InvalidRequest(
                        f"must be an object, got {json_kind(args)}",
                        path=f"{where}.functionCall.args",
                    )
                given = call.get("id")
                call_id = given if isinstance(given, str) and given else f"call_{self._calls}"
                self._calls += 1
                name = _want(call, "name", str, f"{where}.functionCall")
                calls.append({"id": call_id, "name": name, "arguments": _encode(args).decode()})
                self._pending.append((call_id, name))
                if signature is not None:
                    reasoning.append(
                        {
                            "type": x.REASONING,
                            x.SIGNATURE: signature,
                            x.VENDOR: _VENDOR,
                            x.TOOL_CALL_ID: call_id,
                        }
                    )
            elif isinstance(part.get("text"), str):
                if part.get("thought"):
                    thought: dict[str, Any] = {"type": x.REASONING, "text": part["text"]}
                    if signature is not None:
                        thought[x.SIGNATURE] = signature
                    thought[x.VENDOR] = _VENDOR
                    reasoning.append(thought)
                else:
                    texts.append(part["text"])
                    if signature is not None:
                        answer = signature
            elif "executableCode" in part or "codeExecutionResult" in part:
                # A server tool's step: the next Gemini request carries it back as is.
                step = {"type": x.REASONING, x.SERVER_TOOL: dict(part), x.VENDOR: _VENDOR}
                reasoning.append(step)
            elif isinstance(part.get("inlineData"), dict):
                raise InvalidRequest("model-made media cannot be sent back", path=where)
            elif signature is not None and len(part) == 1:
                answer = signature
        if answer is not None:
            reasoning.append({"type": x.REASONING, x.SIGNATURE: answer, x.VENDOR: _VENDOR})
        message: dict[str, Any] = {"role": "assistant", "content": "".join(texts)}
        if calls:
            message["tool_calls"] = calls
            message["content"] = message["content"] or None
        self.messages.append(message)
        if reasoning:
            self.history.append({"message": len(self.messages) - 1, "parts": reasoning})


def _merged_contents(contents: list[Any]) -> list[tuple[str, list[Any], str]]:
    """``(role, parts, path)`` with consecutive contents of one role merged."""
    out: list[tuple[str, list[Any], str]] = []
    for i, content in enumerate(contents):
        path = f"contents[{i}]"
        if not isinstance(content, dict):
            raise InvalidRequest(
                f"a content must be an object, got {json_kind(content)}", path=path
            )
        role = content.get("role", "user")
        if role not in ("user", "model", "function"):
            raise InvalidRequest(f'must be "user" or "model", got {role!r}', path=f"{path}.role")
        role = "user" if role == "function" else role
        parts = content.get("parts", [])
        if not isinstance(parts, list):
            raise InvalidRequest(f"must be an array, got {json_kind(parts)}", path=f"{path}.parts")
        if out and out[-1][0] == role:
            out[-1][1].extend(parts)
        else:
            out.append((role, list(parts), path))
    return out


def _tools(tools: object) -> tuple[list[dict[str, Any]], bool]:
    """The function declarations as standard tools, and whether other tools were given."""
    if not isinstance(tools, list):
        raise InvalidRequest(f"must be an array, got {json_kind(tools)}", path="tools")
    out: list[dict[str, Any]] = []
    others = False
    for i, tool in enumerate(tools):
        path = f"tools[{i}]"
        if not isinstance(tool, dict):
            raise InvalidRequest(f"a tool must be an object, got {json_kind(tool)}", path=path)
        declarations = tool.get("functionDeclarations")
        others = others or any(k != "functionDeclarations" for k in tool)
        for j, decl in enumerate(declarations if isinstance(declarations, list) else ()):
            where = f"{path}.functionDeclarations[{j}]"
            if not isinstance(decl, dict):
                raise InvalidRequest(f"must be an object, got {json_kind(decl)}", path=where)
            schema = decl.get("parametersJsonSchema")
            if schema is None:  # Gemini's own Schema form (types.Schema): mapped
                schema = json_schema(decl.get("parameters"))
            description = decl.get("description", "")
            out.append(
                {
                    "name": _want(decl, "name", str, where),
                    "description": description if isinstance(description, str) else "",
                    "parameters": schema if isinstance(schema, dict) else {"type": "object"},
                }
            )
    return out, others


def _system(value: object) -> str:
    if isinstance(value, str):
        return value
    if not isinstance(value, dict):
        raise InvalidRequest(f"must be an object, got {json_kind(value)}", path="systemInstruction")
    parts = value.get("parts", [])
    if not isinstance(parts, list) or not all(
        isinstance(p, dict) and isinstance(p.get("text"), str) for p in parts
    ):
        raise InvalidRequest("takes text parts only", path="systemInstruction.parts")
    return "".join(p["text"] for p in parts)


def request_from_vendor(body: dict[str, Any]) -> rq.Request:
    """The standard request for a Gemini ``GenerateContentRequest`` body (§7.3 ingress).

    ``model`` is the route's path parameter (a ``models/`` prefix dropped).
    Consecutive contents of one role are merged (the SDK's chat history sends
    one model content per streamed chunk); ``functionResponse`` parts become
    ``tool`` messages paired with the earlier call by id, else by name and
    order; a model turn's thought parts and every ``thoughtSignature`` (a
    function call's with its generated id) go to
    ``extensions["tokenwire:reasoning_history"]``, so that ``build_request``
    puts each back on its part. ``generationConfig`` fields without a standard
    home (``thinkingConfig``...) and the other body fields (``safetySettings``,
    ``toolConfig``...) go to ``extensions["vendor:gemini"]``;
    ``thinkingConfig.includeThoughts`` also sets ``"tokenwire:reasoning": true``.
    Field names may come in either spelling (``include_thoughts``), as Google's
    parser allows; they are read, and passed on, in lowerCamelCase.

    Raises ``InvalidRequest`` whose ``.path`` names the value in the Gemini body.
    """
    body = camel_case(body)
    model = body.get("model")
    if not isinstance(model, str) or not model.removeprefix("models/").strip():
        raise InvalidRequest("the route names no model", path="model")
    model = model.removeprefix("models/")
    contents = body.get("contents")
    if not isinstance(contents, list) or not contents:
        raise InvalidRequest(
            f"required: a non-empty array of contents, got {json_kind(contents)}", path="contents"
        )
    turns = _Turns()
    if body.get("systemInstruction") is not None:
        text = _system(body["systemInstruction"])
        if text:
            turns.messages.append({"role": "system", "content": text})
    for role, parts, path in _merged_contents(contents):
        if role == "model":
            turns.model(parts, path)
        else:
            turns.user(parts, path)
    extras: dict[str, Any] = {k: v for k, v in body.items() if k not in _STANDARD_FIELDS}
    tools = None
    if body.get("tools") is not None:
        tools, others = _tools(body["tools"])
        if others:
            # googleSearch, codeExecution...: a Gemini upstream gets the tools as sent.
            extras["tools"] = body["tools"]
        tools = tools or None
    parameters: dict[str, Any] = {}
    config = body.get("generationConfig")
    extensions: dict[str, Any] = {}
    if config is not None:
        if not isinstance(config, dict):
            raise InvalidRequest(
                f"must be an object, got {json_kind(config)}", path="generationConfig"
            )
        rest = {}
        for key, value in config.items():
            if key in _PARAMETERS and value is not None:
                parameters[_PARAMETERS[key]] = value
            else:
                rest[key] = value
        if rest:
            extras["generationConfig"] = rest
        thinking = config.get("thinkingConfig")
        if isinstance(thinking, dict) and thinking.get("includeThoughts") is True:
            extensions["tokenwire:reasoning"] = True
    if extras:
        extensions["vendor:gemini"] = extras
    if turns.history:
        extensions[x.REASONING_HISTORY] = turns.history
    try:
        return rq.build(
            model=model,
            messages=turns.messages,
            tools=tools,
            parameters=parameters or None,
            extensions=extensions or None,
        )
    except InvalidRequest as exc:
        path = exc.path
        reverse = {v: k for k, v in _PARAMETERS.items()}
        if path.startswith("parameters."):
            name = path.removeprefix("parameters.").split("[", 1)[0]
            path = f"generationConfig.{reverse.get(name, name)}"
        raise InvalidRequest(exc.reason, path=path) from None


# --- reverse: standard events -> Gemini's SSE -----------------------------------------

#: When blocks stop for different reasons, the candidate's finishReason is the
#: most telling one.
_STOP_RANK: Final = {"end_turn": 0, "tool_use": 1, "max_tokens": 2, "content_filter": 3}
_UPSTREAM_STATUS: Final = re.compile(r"\bHTTP (4\d\d)\b")
#: The ids translators generate for calls that came without one (Gemini's own).
_GENERATED_ID: Final = re.compile(r"call_(?:.+_)?\d+_*")


def _frame(obj: dict[str, Any]) -> bytes:
    return b"data: " + _encode(obj) + b"\r\n\r\n"


#: Standard stop reason -> Gemini ``finishReason`` (other reasons: ``STOP``).
_FINISH: Final = {"max_tokens": "MAX_TOKENS", "content_filter": "SAFETY"}


class EventEncoder:
    """Standard events -> Gemini ``alt=sse`` chunks, event by event (candidate 0, or the
    candidate a ``tokenwire:choice`` mark puts a block on: ``candidateCount``).

    Text and reasoning deltas are parts of their own chunk (``thought: true``
    for reasoning); a ``tool.call`` is a ``functionCall`` part, held until the
    next event so that its signature (``tokenwire.block``) rides on it; another
    signature is an empty text part carrying ``thoughtSignature``. Server-tool
    and raw parts go out as they came; grounding metadata, citations, the finish
    reason (the raw one when it agrees with the mapped stop reason) and the
    ``usageMetadata`` (rebuilt with the ``tokenwire.usage`` details) are on the
    last chunk, written at ``stream.end``; a refused prompt is a
    ``promptFeedback`` chunk. An ``error`` is Gemini's in-stream error object:
    an upstream's own 4xx keeps its status, the rest map by code.
    """

    def __init__(self, *, model: str, id: str | None = None) -> None:
        self.model = model
        self.id = id or secrets.token_urlsafe(16)
        self._ended = False
        self._call: tuple[dict[str, Any], int] | None = None  # (functionCall part, block)
        self._stop: str | None = None
        self._usage: tuple[int, int] | None = None
        self._details: dict[str, Any] = {}
        self._raw_stop: str | None = None
        self._raw_detail: dict[str, Any] = {}
        self._grounding: dict[str, Any] | None = None
        self._url_context: dict[str, Any] | None = None  # 1.1: urlContextMetadata
        self._supports: list[dict[str, Any]] = []
        self._sources: list[dict[str, Any]] = []
        self._finish_error: str | None = None
        #: Block -> its candidate, for candidates > 0 (``tokenwire:choice``).
        self._choice_of: dict[int, int] = {}
        self._candidates: dict[int, str | None] = {}  # candidate > 0 -> its stop reason

    @property
    def ended(self) -> bool:
        """True once the last chunk or an error chunk has been written."""
        return self._ended

    def _chunk(self, parts: list[dict[str, Any]], block: int | None = None, **fields: Any) -> bytes:
        index = self._choice_of.get(block, 0) if block is not None and self._choice_of else 0
        if index:
            self._candidates.setdefault(index, None)
        candidate = {"content": {"parts": parts, "role": "model"}, "index": index, **fields}
        return _frame(
            {"candidates": [candidate], "modelVersion": self.model, "responseId": self.id}
        )

    def _flush_call(self) -> bytes:
        if self._call is None:
            return b""
        part, block = self._call
        self._call = None
        return self._chunk([part], block)

    def encode(self, event: ev.Event) -> bytes:
        """The Gemini SSE bytes for one standard event (``b""`` when none)."""
        if self._ended:
            return b""
        if isinstance(event, ev.UnknownEvent):
            return self._extension(event)
        out = self._flush_call()
        if isinstance(event, ev.ContentDelta):
            part: dict[str, Any] = {"text": event.delta.text}
            if event.reasoning:
                part["thought"] = True
            out += self._chunk([part], event.index)
        elif isinstance(event, ev.ToolCall):
            try:
                args = msgspec.json.decode(event.arguments) if event.arguments.strip() else {}
            except msgspec.DecodeError:
                args = {}
            call: dict[str, Any] = {"name": event.name, "args": args}
            if not _GENERATED_ID.fullmatch(event.id):
                call = {"id": event.id, **call}  # an id the upstream gave: kept
            self._call = ({"functionCall": call}, event.index)
        elif isinstance(event, ev.ContentStop):
            choice = self._choice_of.get(event.index) if self._choice_of else None
            if choice is not None:
                held = self._candidates.get(choice)
                if _STOP_RANK.get(event.stop_reason, 0) >= _STOP_RANK.get(held or "", -1):
                    self._candidates[choice] = event.stop_reason
            elif _STOP_RANK.get(event.stop_reason, 0) >= _STOP_RANK.get(self._stop or "", -1):
                self._stop = event.stop_reason
        elif isinstance(event, ev.Usage):
            self._usage = (event.input_tokens, event.output_tokens)
        elif isinstance(event, ev.ErrorEvent):
            if self._raw_stop in FINISH_ERRORS:
                # MALFORMED_FUNCTION_CALL...: Gemini says so with a finishReason.
                self._finish_error = self._raw_stop
            else:
                self._ended = True
                out += _frame({"error": self._error(event)})
        elif isinstance(event, ev.StreamEnd):
            self._ended = True
            out += self._last_chunk()
        return out

    def _error(self, event: ev.ErrorEvent) -> dict[str, Any]:
        status, rpc = VENDOR_ERRORS.get(event.code, (500, "INTERNAL"))
        upstream = _UPSTREAM_STATUS.search(event.message)
        if event.code == "internal_error" and upstream is not None:
            # The upstream refused the request itself: its client error stays one.
            status = int(upstream.group(1))
            rpc = RPC_STATUSES.get(status, "INVALID_ARGUMENT")
        return {"code": status, "message": event.message, "status": rpc}

    def _usage_metadata(self) -> dict[str, Any] | None:
        if self._usage is None:
            return None
        total_in, total_out = self._usage
        details = self._details
        tool = details.get(x.TOOL_USE_INPUT)
        thoughts = details.get(x.REASONING_TOKENS)
        cached = details.get(x.CACHE_READ)
        usage: dict[str, Any] = {
            "promptTokenCount": max(total_in - (tool or 0), 0),
            "candidatesTokenCount": max(total_out - (thoughts or 0), 0),
            "totalTokenCount": total_in + total_out,
        }
        usage["cachedContentTokenCount"] = cached
        usage["thoughtsTokenCount"] = thoughts
        usage["toolUsePromptTokenCount"] = tool
        # proto3 JSON, as Gemini writes it: zero counts are left out.
        return {k: v for k, v in usage.items() if v}

    def _last_chunk(self) -> bytes:
        usage = self._usage_metadata()
        feedback = self._raw_detail.get("promptFeedback")
        if isinstance(feedback, dict):
            chunk: dict[str, Any] = {"promptFeedback": feedback}
            if usage is not None:
                chunk["usageMetadata"] = usage
            chunk["modelVersion"] = self.model
            return _frame(chunk)
        # An empty text part, as Gemini sends it: the SDK's chat keeps a turn in its
        # history only when every chunk has content.
        candidate: dict[str, Any] = {
            "content": {"parts": [{"text": ""}], "role": "model"},
            "finishReason": self._finish_reason(),
            "index": 0,
        }
        for key in ("finishMessage", "safetyRatings"):
            if key in self._raw_detail:
                candidate[key] = self._raw_detail[key]
        if self._sources:
            candidate["citationMetadata"] = {"citationSources": self._sources}
        if self._grounding is not None:
            grounding = dict(self._grounding)
            if self._supports:
                grounding["groundingSupports"] = self._supports
            candidate["groundingMetadata"] = grounding
        if self._url_context is not None:
            candidate["urlContextMetadata"] = self._url_context
        others = [
            {
                "content": {"parts": [{"text": ""}], "role": "model"},
                "finishReason": _FINISH.get(stop or "", "STOP"),
                "index": index,
            }
            for index, stop in sorted(self._candidates.items())
        ]
        chunk = {"candidates": [candidate, *others]}
        if usage is not None:
            chunk["usageMetadata"] = usage
        chunk["modelVersion"] = self.model
        chunk["responseId"] = self.id
        return _frame(chunk)

    def _finish_reason(self) -> str:
        if self._finish_error is not None:
            return self._finish_error
        reason = self._stop or "end_turn"
        raw = self._raw_stop
        if raw is not None and raw in FINISH_REASONS:  # not another vendor's ("completed")
            mapped = FINISH_REASONS[raw]
            if mapped == reason or (raw == "STOP" and reason == "tool_use"):
                return raw  # the vendor's own value (tokenwire.stop)
        return _FINISH.get(reason, "STOP")

    # Each encoder renders the extension events in its own vendor's form; what they
    # share (reading the fields) is `_extensions.fields` already.
    def _extension(self, event: ev.UnknownEvent) -> bytes:
        """docs/extensions.md: the tokenwire extension events in Gemini's own form."""
        body = x.fields(event)
        if body is None:
            return b""
        kind = event.type
        if kind == x.USAGE:
            self._details = body
            return b""
        if kind == x.STOP:
            raw = body.get(x.RAW_STOP_REASON)
            self._raw_stop = raw if isinstance(raw, str) else None
            detail = body.get(x.RAW)
            self._raw_detail = detail if isinstance(detail, dict) else {}
            return b""
        if kind != x.BLOCK:
            return b""
        choice = body.get(x.CHOICE)
        if type(choice) is int and choice > 0 and isinstance(body.get("index"), int):
            self._choice_of[body["index"]] = choice
        citation = body.get(x.CITATION)
        if isinstance(citation, dict):
            rest = {k: v for k, v in citation.items() if k != "type"}
            if citation.get("type") == "grounding_support":
                self._supports.append(rest)
            elif citation.get("type") == "citation_source":
                self._sources.append(rest)
            return b""  # another vendor's citation has no Gemini form
        tokens = body.get(x.LOGPROBS)
        if isinstance(tokens, list):
            # 1.1: any vendor's logprobs as Gemini's logprobsResult, on a chunk of their own.
            chosen = [
                {"token": t.get("token"), "logProbability": t.get("logprob")}
                for t in tokens
                if isinstance(t, dict)
            ]
            top = [
                {
                    "candidates": [
                        {"token": a.get("token"), "logProbability": a.get("logprob")}
                        for a in t.get("top_logprobs") or ()
                        if isinstance(a, dict)
                    ]
                }
                for t in tokens
                if isinstance(t, dict)
            ]
            result = {"chosenCandidates": chosen, "topCandidates": top}
            return self._flush_call() + self._chunk([], logprobsResult=result)
        code = body.get(x.CODE)
        if isinstance(code, dict) and body.get(x.VENDOR) != _VENDOR:
            # 1.1, cross-vendor: another vendor's code execution (a Responses
            # code_interpreter_call) as Gemini's executableCode + codeExecutionResult.
            parts: list[dict[str, Any]] = []
            if isinstance(code.get("code"), str):
                language = str(code.get("language") or "python").upper()
                parts.append({"executableCode": {"language": language, "code": code["code"]}})
            if "output" in code:
                outcome = "OUTCOME_OK" if code.get("outcome", "ok") == "ok" else "OUTCOME_FAILED"
                result = {"outcome": outcome, "output": str(code.get("output") or "")}
                parts.append({"codeExecutionResult": result})
            return self._flush_call() + self._chunk(parts) if parts else b""
        if body.get(x.VENDOR) != _VENDOR:
            return b""  # bound to another vendor: Gemini cannot check it (dropped)
        signature = body.get(x.SIGNATURE)
        if isinstance(signature, str):
            if self._call is not None and self._call[1] == body.get("index"):
                part, _ = self._call
                part["thoughtSignature"] = signature
                return self._flush_call()
            out = self._flush_call()
            signed: dict[str, Any] = {"text": "", "thoughtSignature": signature}
            if body.get(x.REASONING) is True:
                signed = {"text": "", "thought": True, "thoughtSignature": signature}
            return out + self._chunk([signed])
        server = body.get(x.SERVER_TOOL)
        if isinstance(server, dict):
            grounding = server.get("groundingMetadata")
            if isinstance(grounding, dict):
                self._grounding = grounding
                self._supports = []
                return b""
            return self._flush_call() + self._chunk([dict(server)])
        raw = body.get(x.RAW)
        if isinstance(raw, dict) and isinstance(raw.get("urlContextMetadata"), dict):
            self._url_context = raw["urlContextMetadata"]  # a candidate field, not a part
            return b""
        if isinstance(raw, dict):
            return self._flush_call() + self._chunk([dict(raw)])
        return b""


def parse_ingress(body: dict[str, Any]) -> tuple[rq.Request, EncodeEvent]:
    """The Gemini ingress: the standard request and a fresh ``EventEncoder``."""
    request = request_from_vendor(body)
    return request, EventEncoder(model=request.model).encode
