"""A Gemini ``streamGenerateContent?alt=sse`` body -> the standard (§7.1).

``Translator`` reads ``data: <GenerateContentResponse>`` frames (CRLF-separated
on the real wire). Gemini has no end marker: the body simply ends after the
chunk carrying ``finishReason``, so the stream is finished at ``close()``; a
body that ends before every candidate has a ``finishReason`` is an error. The
mapping decisions (published in ``docs/translation.md``, "Gemini"):

* text: ``candidates[c].content.parts[].text``, one block per candidate;
  ``thought: true`` parts are reasoning, dropped unless ``reasoning=True``
  (then on the candidate's reasoning block, marked ``tokenwire:reasoning``);
* ``thoughtSignature`` (on any part) -> ``tokenwire.block`` with
  ``tokenwire:signature`` and ``tokenwire:vendor: "gemini"`` for the block the
  part went to, sent at once so that a cut stream keeps it. A function call's
  signature names the call's block and its id (``tokenwire:tool_call_id``)
  and comes between the ``tool.call`` and its ``content.stop``. Signatures of
  answer text and function calls are always kept (Gemini 3 signs them without
  ``includeThoughts`` and refuses a function-call turn that lacks them); a
  thought part's signature follows the thought (dropped without ``reasoning``);
* ``functionCall`` parts are whole calls (``args`` absent -> ``{}``); the
  Vertex ``partialArgs``/``willContinue`` form is accumulated until the closing
  part. Gemini gives no id, so one is generated: ``call_{rid}_{n}`` (``n``
  counts calls in the stream, ``rid`` is the request id, or a random token
  when there is none: a client keeps ids across the turns of a conversation,
  and a second turn's first call must not reuse the first turn's id);
* server-side tools, shown but never executed: ``executableCode`` and
  ``codeExecutionResult`` parts, and a candidate's ``groundingMetadata``
  (without its supports), are ``tokenwire.block`` events with
  ``tokenwire:server_tool`` (the vendor object as is) on a block of their own;
  each grounding support and each ``citationMetadata`` source is a
  ``tokenwire:citation`` of the candidate's text block;
* other output parts (``inlineData`` images...) and parts of unknown types go
  whole into a ``tokenwire.block`` with ``tokenwire:raw``; every field or part
  type the translator does not know is counted in ``unknown_types``;
* ``finishReason`` -> ``tokenwire.stop`` (``tokenwire:raw_stop_reason``, and
  ``tokenwire:refusal`` for the safety reasons); ``STOP`` becomes ``tool_use``
  when the candidate called a tool (``errors.FINISH_REASONS``, ``FINISH_ERRORS``);
* ``usageMetadata`` is a running total repeated on many chunks: the last one
  wins, never a sum. ``input = promptTokenCount + toolUsePromptTokenCount``,
  ``output = candidatesTokenCount + thoughtsTokenCount``; the details go in
  ``tokenwire.usage`` (cache read, reasoning and tool-use prompt tokens);
* a prompt block (``promptFeedback.blockReason`` and no candidates) is a
  refusal: ``tokenwire.stop`` (the block reason, ``tokenwire:refusal``, the raw
  ``promptFeedback``) and ``content.stop`` ``content_filter`` on block 0; an
  ``{"error": {...}}`` chunk is an ``error`` with the code its status maps to;
* after any ``error`` (an error chunk, ``FINISH_ERRORS``, an unreadable chunk,
  a truncated body) the usage reported so far follows (§5.4 allows it), then
  ``stream.end``; ``tokenwire.usage`` goes before the ``error``.
"""

from __future__ import annotations

import secrets
from collections import Counter
from typing import Any, ClassVar, Final

import msgspec

from ... import sse
from ...errors import TranslationError
from .. import _extensions as x
from .._base import BlockNumbers, SSETranslator
from ._partial import PartialArg, StreamedCall
from .errors import (
    FINISH_ERRORS,
    FINISH_REASONS,
    KNOWN_FINISH_REASONS,
    REFUSAL_REASONS,
    UNNAMED_STOP,
    error_code,
)

VENDOR: Final = "gemini"

# --- Wire types: every documented field, so that an unknown one is noticed ------------
# (gc=False: decoded values never form cycles. forbid_unknown_fields: a field
# the API added later fails the fast decode and takes the slow path, which
# counts it; fields the translator does not read are Raw, never decoded.)

_RAW: Final = msgspec.Raw()


class _FunctionCall(msgspec.Struct, frozen=True, gc=False, forbid_unknown_fields=True):
    id: str | None = None
    name: str | None = None
    # Kept as raw JSON: it becomes the tool.call's arguments text as is.
    args: msgspec.Raw = _RAW
    partialArgs: list[PartialArg] | None = None
    willContinue: bool = False


class _Part(msgspec.Struct, frozen=True, gc=False, forbid_unknown_fields=True):
    text: str | None = None
    thought: bool = False
    thoughtSignature: str | None = None
    functionCall: _FunctionCall | None = None
    executableCode: msgspec.Raw = _RAW
    codeExecutionResult: msgspec.Raw = _RAW
    inlineData: msgspec.Raw = _RAW
    fileData: msgspec.Raw = _RAW
    functionResponse: msgspec.Raw = _RAW
    videoMetadata: msgspec.Raw = _RAW
    partMetadata: msgspec.Raw = _RAW
    mediaResolution: msgspec.Raw = _RAW


class _Content(msgspec.Struct, frozen=True, gc=False, forbid_unknown_fields=True):
    parts: list[_Part] = []
    role: str | None = None


class _Candidate(msgspec.Struct, frozen=True, gc=False, forbid_unknown_fields=True):
    content: _Content | None = None
    finishReason: str | None = None
    finishMessage: str | None = None
    index: int = 0
    safetyRatings: msgspec.Raw = _RAW
    citationMetadata: msgspec.Raw = _RAW
    groundingMetadata: msgspec.Raw = _RAW
    urlContextMetadata: msgspec.Raw = _RAW
    groundingAttributions: msgspec.Raw = _RAW
    avgLogprobs: msgspec.Raw = _RAW
    logprobsResult: msgspec.Raw = _RAW
    tokenCount: msgspec.Raw = _RAW


class _UsageMetadata(msgspec.Struct, frozen=True, gc=False, forbid_unknown_fields=True):
    promptTokenCount: int = 0
    candidatesTokenCount: int = 0
    totalTokenCount: int = 0
    thoughtsTokenCount: int | None = None
    cachedContentTokenCount: int | None = None
    toolUsePromptTokenCount: int | None = None
    promptTokensDetails: msgspec.Raw = _RAW
    candidatesTokensDetails: msgspec.Raw = _RAW
    cacheTokensDetails: msgspec.Raw = _RAW
    toolUsePromptTokensDetails: msgspec.Raw = _RAW
    trafficType: msgspec.Raw = _RAW
    serviceTier: msgspec.Raw = _RAW
    responseTokenCount: msgspec.Raw = _RAW


class _PromptFeedback(msgspec.Struct, frozen=True, gc=False, forbid_unknown_fields=True):
    blockReason: str | None = None
    blockReasonMessage: str | None = None
    safetyRatings: msgspec.Raw = _RAW


class _Error(msgspec.Struct, frozen=True, gc=False):
    code: int | None = None
    message: str = ""
    status: str | None = None


class _Chunk(msgspec.Struct, frozen=True, gc=False, forbid_unknown_fields=True):
    candidates: list[_Candidate] = []
    # Decoded once, at the end: only the last running total counts.
    usageMetadata: msgspec.Raw = _RAW
    promptFeedback: _PromptFeedback | None = None
    error: _Error | None = None
    modelVersion: str | None = None
    responseId: str | None = None
    createTime: msgspec.Raw = _RAW
    modelStatus: msgspec.Raw = _RAW


def _fields(struct: type[msgspec.Struct]) -> frozenset[str]:
    return frozenset(struct.__struct_fields__)


_CHUNK_FIELDS: Final = _fields(_Chunk)
_CANDIDATE_FIELDS: Final = _fields(_Candidate)
_CONTENT_FIELDS: Final = _fields(_Content)
_PART_FIELDS: Final = _fields(_Part)
_CALL_FIELDS: Final = _fields(_FunctionCall)
_PARTIAL_FIELDS: Final = _fields(PartialArg)
_USAGE_FIELDS: Final = _fields(_UsageMetadata)
_FEEDBACK_FIELDS: Final = _fields(_PromptFeedback)
#: The part fields that say what a part is (the rest are metadata of one).
_PART_KINDS: Final = frozenset(
    {
        "text",
        "functionCall",
        "executableCode",
        "codeExecutionResult",
        "inlineData",
        "fileData",
        "functionResponse",
    }
)
#: Output part fields with no standard home: kept whole in ``tokenwire:raw``.
_UNMAPPED_PART_FIELDS: Final = (
    "inlineData",
    "fileData",
    "functionResponse",
    "videoMetadata",
    "partMetadata",
    "mediaResolution",
)

_decode_chunk = msgspec.json.Decoder(_Chunk).decode
_decode_usage = msgspec.json.Decoder(_UsageMetadata).decode
_decode_any = msgspec.json.Decoder().decode
_encode = msgspec.json.Encoder().encode


# --- Stream side ---------------------------------------------------------------------


def _code(name: str, value: Any) -> dict[str, Any] | None:
    """1.1 ``tokenwire:code`` of an ``executableCode`` / ``codeExecutionResult`` part."""
    if not isinstance(value, dict):
        return None
    if name == "executableCode":
        return {"language": str(value.get("language", "PYTHON")).lower(), "code": value.get("code")}
    outcome = "ok" if value.get("outcome") == "OUTCOME_OK" else "error"
    return {"outcome": outcome, "output": value.get("output", "")}


class Translator(SSETranslator):
    """Gemini ``alt=sse`` body -> standard events. See the module docstring.

    ``unknown_types`` counts what the translator met and has no mapping for:
    ``"part.<field>"``, ``"candidate.<field>"``, ``"chunk.<field>"``...,
    ``"finishReason.<value>"`` (docs/translation.md, "Gemini").
    """

    name: ClassVar[str] = "gemini"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.unknown_types: Counter[str] = Counter()
        self._blocks: BlockNumbers[tuple[int, bool]] = BlockNumbers()  # (candidate, reasoning)
        self._text_blocks: dict[int, int] = {}  # candidate -> its answer block (a cache)
        self._finish: dict[int, str] = {}  # candidate -> standard stop reason
        self._seen: set[int] = set()  # candidates seen
        self._called: set[int] = set()  # candidates that called a tool
        self._streamed: dict[int, StreamedCall] = {}  # candidate -> call in progress
        self._streamed_signature: dict[int, str] = {}  # candidate -> its call's signature
        self._calls = 0
        self._ids: set[str] = set()
        self._token = secrets.token_hex(6)  # this stream's call ids, without a request id
        self._usage_raw: msgspec.Raw | None = None
        self._usage_read: _UsageMetadata | None = None
        self._details_sent = False
        self._grounding: dict[int, bytes] = {}  # candidate -> the last groundingMetadata
        self._cited: set[bytes] = set()  # citation sources already sent
        #: 1.1: blocks that carry only tokenwire.block (server tools, raw parts, URL
        #: context) -> their candidate; they end with content.stop too (rule 9).
        self._meta: dict[int, int] = {}
        self._refused: set[int] = set()  # blocks marked tokenwire:refusal
        self._url_context: dict[int, bytes] = {}  # candidate -> the last urlContextMetadata

    # -- helpers -------------------------------------------------------------

    def _block(self, candidate: int, reasoning: bool) -> int:
        key = (candidate, reasoning)
        index = self._blocks.get(key)
        if index is None:
            index = self._blocks.of(key)
            self._mark(candidate, index)
        if not reasoning:
            self._text_blocks[candidate] = index
        return index

    def _mark(self, candidate: int, index: int) -> None:
        # docs/extensions.md: a block of candidate c > 0 says so before its first event.
        mark = x.choice_mark(candidate, index)
        if mark is not None:
            self.out += self.writer.add(mark)

    def _new_index(self) -> int:
        return self._blocks.new()

    def _call_id(self, given: str | None) -> str:
        # Gemini gives no id (§5.3.4 requires one): generate a stable one.
        n = self._calls
        self._calls += 1
        if given and given not in self._ids:
            call_id = given
        else:
            rid = self.writer.request_id or self._token
            call_id = f"call_{rid}_{n}"
            while call_id in self._ids:
                call_id += "_"
        self._ids.add(call_id)
        return call_id

    def _block_event(self, body: dict[str, Any]) -> None:
        """A ``tokenwire.block`` extension event (docs/extensions.md)."""
        self.out += self.writer.add(x.extension(x.BLOCK, body))

    def _signature(
        self, index: int, signature: str, *, reasoning: bool = False, call_id: str | None = None
    ) -> None:
        body: dict[str, Any] = {"index": index}
        if reasoning:
            body[x.REASONING] = True
        if call_id is not None:
            body[x.TOOL_CALL_ID] = call_id
        body[x.SIGNATURE] = signature
        body[x.VENDOR] = VENDOR
        self._block_event(body)

    def _emit_call(
        self, candidate: int, call_id: str | None, name: str, arguments: str, signature: str | None
    ) -> None:
        # §5.3.4: a tool.call is whole; its block stops right away with tool_use (§4.8).
        # Its signature goes in between, on the call's block.
        index = self._new_index()
        call_id = self._call_id(call_id)
        self._mark(candidate, index)
        self.out += self.writer.tool_call(id=call_id, name=name, arguments=arguments, index=index)
        if signature:
            self._signature(index, signature, call_id=call_id)
        self.out += self.writer.stop(index, "tool_use")
        self._called.add(candidate)

    def _fail(self, code: str, message: str) -> None:
        """``tokenwire.usage``, ``error``, the usage so far (§5.4 allows it), ``stream.end``."""
        writer = self.writer
        if writer.ended:
            return
        if not writer.errored:
            self._usage_details()
            self.out += writer.error(code, message)
        self.out += self._usage_events() + writer.end()

    @property
    def _usage(self) -> _UsageMetadata | None:
        """The last ``usageMetadata`` (decoded on first use; unknown fields counted)."""
        raw = self._usage_raw
        if raw is None:
            return None
        if self._usage_read is None:
            try:
                self._usage_read = _decode_usage(raw)
            except msgspec.ValidationError:
                obj = _decode_any(raw)
                self._strip(obj, _USAGE_FIELDS, "usageMetadata")
                try:
                    self._usage_read = msgspec.convert(obj, _UsageMetadata)
                except msgspec.ValidationError:
                    self._usage_raw = None
                    return None
        return self._usage_read

    def _usage_events(self) -> list[Any]:
        u = self._usage
        if u is None:
            return []
        return self.writer.usage(
            u.promptTokenCount + (u.toolUsePromptTokenCount or 0),
            u.candidatesTokenCount + (u.thoughtsTokenCount or 0),
        )

    def _usage_details(self) -> None:
        """``tokenwire.usage``: the counts inside ``input``/``output_tokens`` (once, before
        any ``error``: only ``usage`` and ``stream.end`` may follow one, §5.4)."""
        u = self._usage
        if u is None or self._details_sent or self.writer.errored:
            return
        self._details_sent = True
        body: dict[str, int] = {}
        if u.cachedContentTokenCount is not None:
            body[x.CACHE_READ] = u.cachedContentTokenCount
        if u.thoughtsTokenCount is not None:
            body[x.REASONING_TOKENS] = u.thoughtsTokenCount
        if u.toolUsePromptTokenCount is not None:
            body[x.TOOL_USE_INPUT] = u.toolUsePromptTokenCount
        if body:
            self.out += self.writer.add(x.extension(x.USAGE, body))

    # -- one chunk -------------------------------------------------------------

    def _on_frame(self, frame: sse.Message) -> None:
        data = frame.data
        raw_parts: dict[int, dict[int, dict[str, Any]]] | None = None
        try:
            chunk = _decode_chunk(data)
        except msgspec.ValidationError as exc:
            if "unknown field" not in str(exc):
                raise TranslationError(
                    f"gemini: upstream chunk is not a GenerateContentResponse: {exc}"
                ) from None
            chunk, raw_parts = self._lenient(data)
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
        if len(chunk.usageMetadata):
            # §5.3.5: a running total; the last one wins.
            self._usage_raw, self._usage_read = chunk.usageMetadata, None
        feedback = chunk.promptFeedback
        if not chunk.candidates and feedback is not None and feedback.blockReason:
            self._on_prompt_blocked(feedback)
            return
        if raw_parts is None:
            for cand in chunk.candidates:
                self._on_candidate(cand, None)
                if self.writer.ended:
                    return
            return
        for position, cand in enumerate(chunk.candidates):
            self._on_candidate(cand, raw_parts.get(position))
            if self.writer.ended:
                return

    def _lenient(self, data: str) -> tuple[_Chunk, dict[int, dict[int, dict[str, Any]]]]:
        """The slow path of a chunk with fields the wire types do not know.

        Each unknown field is counted (``unknown_types``) and removed; a part
        left with no known kind is kept whole for a ``tokenwire:raw`` block:
        ``{candidate position: {part position: the part}}``.
        """
        obj = _decode_any(data)
        raw_parts: dict[int, dict[int, dict[str, Any]]] = {}
        if not isinstance(obj, dict):
            raise TranslationError("gemini: upstream chunk is not a JSON object")
        self._strip(obj, _CHUNK_FIELDS, "chunk")
        self._strip(obj.get("promptFeedback"), _FEEDBACK_FIELDS, "promptFeedback")
        candidates = obj.get("candidates")
        for i, cand in enumerate(candidates if isinstance(candidates, list) else ()):
            self._strip(cand, _CANDIDATE_FIELDS, "candidate")
            content = cand.get("content") if isinstance(cand, dict) else None
            self._strip(content, _CONTENT_FIELDS, "content")
            parts = content.get("parts") if isinstance(content, dict) else None
            for j, part in enumerate(parts if isinstance(parts, list) else ()):
                if not isinstance(part, dict):
                    continue
                whole = dict(part)
                removed = self._strip(part, _PART_FIELDS, "part")
                if removed and not _PART_KINDS & part.keys():
                    whole.pop("thoughtSignature", None)
                    raw_parts.setdefault(i, {})[j] = whole
                call = part.get("functionCall")
                self._strip(call, _CALL_FIELDS, "functionCall")
                partial = call.get("partialArgs") if isinstance(call, dict) else None
                for arg in partial if isinstance(partial, list) else ():
                    self._strip(arg, _PARTIAL_FIELDS, "partialArgs")
        try:
            return _decode_chunk(_encode(obj)), raw_parts
        except msgspec.DecodeError as exc:
            raise TranslationError(
                f"gemini: upstream chunk is not a GenerateContentResponse: {exc}"
            ) from None

    def _strip(self, obj: object, known: frozenset[str], where: str) -> dict[str, Any]:
        """Remove and count the fields of ``obj`` not in ``known``; returns them."""
        if not isinstance(obj, dict):
            return {}
        removed = {key: obj.pop(key) for key in [k for k in obj if k not in known]}
        for key in removed:
            self.unknown_types[f"{where}.{key}"] += 1
        return removed

    def _on_prompt_blocked(self, feedback: _PromptFeedback) -> None:
        # The prompt was refused before any generation: a refusal, stop reason
        # content_filter on block 0, with the vendor's promptFeedback kept whole.
        raw: dict[str, Any] = {"blockReason": feedback.blockReason}
        if feedback.blockReasonMessage:
            raw["blockReasonMessage"] = feedback.blockReasonMessage
        if len(feedback.safetyRatings):
            raw["safetyRatings"] = _decode_any(feedback.safetyRatings)
        stop = {x.RAW_STOP_REASON: feedback.blockReason, x.RAW: {"promptFeedback": raw}}
        writer = self.writer
        # 1.1: one refusal carrier for every vendor, the block's tokenwire:refusal.
        self._block_event({"index": self._block(0, False), x.REFUSAL: True})
        self.out += writer.add(x.extension(x.STOP, stop))
        self.out += writer.stop(self._block(0, False), "content_filter")
        self._usage_details()
        self.out += self._usage_events() + writer.end()

    def _on_candidate(self, cand: _Candidate, raw_parts: dict[int, dict[str, Any]] | None) -> None:
        c = cand.index
        self._seen.add(c)
        content = cand.content
        if content is not None:
            if raw_parts is None:
                text_block = self._text_blocks.get(c)
                for part in content.parts:
                    text = part.text
                    if (
                        text is not None
                        and part.functionCall is None
                        and part.thoughtSignature is None
                        and not part.thought
                        and not self._streamed
                    ):
                        # The hot path: plain answer text.
                        if text:
                            if text_block is None:
                                text_block = self._block(c, False)
                            self.out += self.writer.text(text, text_block)
                        continue
                    self._on_part(c, part)
            else:
                for j, part in enumerate(content.parts):
                    whole = raw_parts.get(j)
                    if whole is None:
                        self._on_part(c, part)
                        continue
                    index = self._meta_block(c)
                    self._mark(c, index)
                    self._block_event({"index": index, x.RAW: whole, x.VENDOR: VENDOR})
                    if part.thoughtSignature:
                        self._signature(index, part.thoughtSignature)
        if (
            cand.groundingMetadata
            or cand.citationMetadata
            or cand.urlContextMetadata
            or cand.logprobsResult
            or cand.finishReason is not None
        ):
            self._on_metadata(c, cand)

    def _meta_block(self, c: int) -> int:
        """A block of candidate ``c`` that only carries ``tokenwire.block`` events."""
        index = self._new_index()
        self._meta[index] = c
        return index

    def _on_url_context(self, c: int, raw: msgspec.Raw) -> None:
        # 1.1: each URL the model retrieved with its status, and the vendor's object.
        data = bytes(raw)
        if self._url_context.get(c) == data:
            return  # repeated on a later chunk
        self._url_context[c] = data
        metadata = _decode_any(data)
        entries = metadata.get("urlMetadata") if isinstance(metadata, dict) else None
        urls = (
            [
                {"url": e.get("retrievedUrl"), "status": e.get("urlRetrievalStatus")}
                for e in entries
                if isinstance(e, dict)
            ]
            if isinstance(entries, list)
            else []
        )
        body = {
            "index": self._meta_block(c),
            x.URL_CONTEXT: urls,
            x.RAW: {"urlContextMetadata": metadata},
            x.VENDOR: VENDOR,
        }
        self._block_event(body)

    def _on_logprobs(self, c: int, raw: msgspec.Raw) -> None:
        # 1.1: the chunk's tokens with their log probabilities and top alternatives,
        # on the candidate's text block, right after its text.
        result = _decode_any(raw)
        if not isinstance(result, dict):
            return
        chosen = result.get("chosenCandidates")
        tops = result.get("topCandidates")
        tokens = []
        for i, pick in enumerate(chosen if isinstance(chosen, list) else ()):
            if not isinstance(pick, dict):
                continue
            entry: dict[str, Any] = {
                "token": pick.get("token"),
                "logprob": pick.get("logProbability"),
            }
            top = tops[i] if isinstance(tops, list) and i < len(tops) else None
            alternatives = top.get("candidates") if isinstance(top, dict) else None
            entry["top_logprobs"] = [
                {"token": a.get("token"), "logprob": a.get("logProbability")}
                for a in (alternatives if isinstance(alternatives, list) else ())
                if isinstance(a, dict)
            ]
            tokens.append(entry)
        if tokens:
            self._block_event({"index": self._block(c, False), x.LOGPROBS: tokens})

    def _on_metadata(self, c: int, cand: _Candidate) -> None:
        if cand.logprobsResult:
            self._on_logprobs(c, cand.logprobsResult)
        if cand.urlContextMetadata:
            self._on_url_context(c, cand.urlContextMetadata)
        if cand.groundingMetadata:
            self._on_grounding(c, cand.groundingMetadata)
        if cand.citationMetadata:
            self._on_citations(c, cand.citationMetadata)
        reason = cand.finishReason
        if reason is not None:
            self._on_finish(c, cand, reason)

    def _on_part(self, c: int, part: _Part) -> None:
        signature = part.thoughtSignature
        call = part.functionCall
        if call is not None:
            self._on_function_call(c, call, signature)
            return
        text = part.text
        if text is not None:
            if text and c in self._streamed:
                raise TranslationError("gemini: text inside a streamed function call")
            if part.thought:
                if not self.reasoning:
                    return  # reasoning is dropped, and the thought's signature with it
                index = self._block(c, True)
                if text:
                    self.out += self.writer.text(text, index, reasoning=True)
                if signature:
                    self._signature(index, signature, reasoning=True)
                return
            index = self._block(c, False)
            if text:
                self.out += self.writer.text(text, index)
            if signature:
                self._signature(index, signature)
            return
        for name in ("executableCode", "codeExecutionResult"):
            raw: msgspec.Raw = getattr(part, name)
            if len(raw):
                # Ran on Gemini's side: shown (tokenwire:server_tool), never executed.
                index = self._meta_block(c)
                value = _decode_any(raw)
                server_tool = {name: value}
                body = {"index": index, x.SERVER_TOOL: server_tool, x.VENDOR: VENDOR}
                code = _code(name, value)
                if code is not None:
                    body[x.CODE] = code  # 1.1: the cross-vendor shape
                self._block_event(body)
                if signature:
                    self._signature(index, signature)
                return
        whole = {
            name: _decode_any(getattr(part, name))
            for name in _UNMAPPED_PART_FIELDS
            if len(getattr(part, name))
        }
        if whole:
            index = self._meta_block(c)
            self._block_event({"index": index, x.RAW: whole, x.VENDOR: VENDOR})
            if signature:
                self._signature(index, signature)
        elif signature:
            # A part that is only a signature: it signs the candidate's answer.
            self._signature(self._block(c, False), signature)

    def _on_grounding(self, c: int, raw: msgspec.Raw) -> None:
        data = bytes(raw)
        if self._grounding.get(c) == data:
            return  # repeated on a later chunk
        self._grounding[c] = data
        metadata = _decode_any(data)
        if not isinstance(metadata, dict):
            return
        supports = metadata.pop("groundingSupports", None)
        index = self._meta_block(c)
        server_tool = {"groundingMetadata": metadata}
        self._block_event({"index": index, x.SERVER_TOOL: server_tool, x.VENDOR: VENDOR})
        text = self._block(c, False)
        for support in supports if isinstance(supports, list) else ():
            if isinstance(support, dict):
                citation = {"type": "grounding_support", **support}
                self._block_event({"index": text, x.CITATION: citation, x.VENDOR: VENDOR})

    def _on_citations(self, c: int, raw: msgspec.Raw) -> None:
        metadata = _decode_any(raw)
        sources = metadata.get("citationSources") if isinstance(metadata, dict) else None
        text = self._block(c, False)
        for source in sources if isinstance(sources, list) else ():
            if not isinstance(source, dict):
                continue
            key = _encode(source)
            if key in self._cited:
                continue  # running metadata repeats the earlier sources
            self._cited.add(key)
            citation = {"type": "citation_source", **source}
            self._block_event({"index": text, x.CITATION: citation, x.VENDOR: VENDOR})

    def _on_finish(self, c: int, cand: _Candidate, reason: str) -> None:
        if c in self._streamed:
            raise TranslationError("gemini: stream finished inside a streamed function call")
        if reason not in KNOWN_FINISH_REASONS:
            self.unknown_types[f"finishReason.{reason}"] += 1
        # docs/extensions.md: the vendor's own value, next to the mapped stop_reason.
        stop: dict[str, Any] = {x.RAW_STOP_REASON: reason}
        detail: dict[str, Any] = {}
        if cand.finishMessage:
            detail["finishMessage"] = cand.finishMessage
        if reason in REFUSAL_REASONS:
            # 1.1: one refusal carrier for every vendor, on the candidate's text block.
            block = self._block(c, False)
            self._refused.add(block)
            self._block_event({"index": block, x.REFUSAL: True})
            if len(cand.safetyRatings):
                detail["safetyRatings"] = _decode_any(cand.safetyRatings)
        if detail:
            stop[x.RAW] = detail
        self.out += self.writer.add(x.extension(x.STOP, stop))
        if reason in FINISH_ERRORS:
            # 1.1, rule 9: the candidate's blocks still end with content.stop (the
            # raw reason just went out), then the error.
            # A candidate that sent nothing still gets one content.stop (its text block).
            self._meta.setdefault(self._block(c, False), c)
            self._stop_blocks(lambda _c: "end_turn")
            message = f": {cand.finishMessage}" if cand.finishMessage else ""
            self._fail(FINISH_ERRORS[reason], f"gemini: {reason}{message}")
            return
        stop_reason = FINISH_REASONS.get(reason, UNNAMED_STOP)
        if stop_reason == "end_turn" and c in self._called:
            stop_reason = "tool_use"  # Gemini says STOP while calling tools
        self._finish[c] = stop_reason

    def _on_function_call(self, c: int, call: _FunctionCall, signature: str | None) -> None:
        pending = self._streamed.get(c)
        if pending is not None and call.name:
            # A new call while one is still streaming: the first one is complete.
            del self._streamed[c]
            held = self._streamed_signature.pop(c, None)
            self._emit_call(c, pending.id, pending.name, pending.arguments(), held)
            pending = None
        if pending is None:
            if not call.name:
                raise TranslationError("gemini: functionCall without a name")
            if not call.willContinue and not call.partialArgs:
                args = bytes(call.args)
                arguments = "{}" if not args or args == b"null" else args.decode()
                self._emit_call(c, call.id, call.name, arguments, signature)
                return
            pending = self._streamed[c] = StreamedCall(call.id, call.name)
            if len(call.args) and bytes(call.args) != b"null":
                decoded = msgspec.json.decode(call.args)
                if isinstance(decoded, dict):
                    pending.args.update(decoded)
        if signature:
            # Vertex signs the call's first part; it goes out with the whole call.
            self._streamed_signature[c] = signature
        for arg in call.partialArgs or ():
            pending.add(arg)
        if not call.willContinue:
            del self._streamed[c]
            held = self._streamed_signature.pop(c, None)
            self._emit_call(c, pending.id, pending.name, pending.arguments(), held)

    # -- end of body -------------------------------------------------------------

    def _stop_blocks(self, reason_of: Any) -> None:
        """``content.stop`` for every block not stopped yet, in index order: the open
        ones, the refused ones and (1.1) the metadata-only ones."""
        writer = self.writer
        pending = {
            index: c
            for (c, _reasoning), index in self._blocks.items()
            if index in writer.open_blocks or index in self._refused
        }
        pending.update(self._meta)
        for index in sorted(pending):
            reason = reason_of(pending[index])
            if index in self._meta and reason == "tool_use":
                reason = "end_turn"  # it carries no tool.call
            self.out += writer.stop(index, reason)
        self._meta.clear()
        self._refused.clear()
        self._blocks.forget(pending)

    def _on_eof(self) -> None:
        # Gemini's end marker is a finishReason on every candidate, then EOF.
        if not self._seen or any(c not in self._finish for c in self._seen):
            # §5.3.5: whatever usage the vendor reported still goes out.
            self._fail(
                "internal_error", f"{self.name} stream ended before its end marker (truncated)"
            )
            return
        self._stop_blocks(lambda c: self._finish[c])
        self._usage_details()
        self.out += self._usage_events() + self.writer.end()
