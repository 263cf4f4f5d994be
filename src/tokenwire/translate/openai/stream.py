"""An OpenAI Chat Completions SSE body -> standard events (§7.1).

The rules (which block index each thing gets, how stop reasons and error codes
map, what is dropped) are tabled in ``docs/translation.md``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Final

import msgspec

from ... import sse
from ...errors import TranslationError
from .. import _extensions as x
from .._base import SSETranslator
from .errors import ERROR_FINISH_REASONS, FINISH_REASONS, _HTTPError, error_code

# --- Stream side: OpenAI chunks -> standard events -----------------------------------
# One typed decoder for the whole chunk: only the fields the translator reads
# are declared, so msgspec skips logprobs, obfuscation, content_filter_results,
# system_fingerprint and the rest without building them (the per-chunk
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


class _Audio(msgspec.Struct, gc=False, omit_defaults=True):
    """``delta.audio`` (1.1): fragments of the audio output and its transcript."""

    id: str | None = None
    data: str | None = None
    transcript: str | None = None
    expires_at: int | None = None


class _Delta(msgspec.Struct, gc=False):
    content: str | list[_ContentPart] | None = None
    refusal: str | None = None
    tool_calls: list[_ToolFragment] | None = None
    function_call: _Function | None = None
    reasoning_content: str | None = None  # DeepSeek
    reasoning: str | None = None  # OpenRouter, vLLM
    annotations: list[msgspec.Raw] | None = None  # url_citation (search models)
    audio: _Audio | None = None  # 1.1: audio output (id, data, transcript)


class _Logprobs(msgspec.Struct, gc=False):
    content: list[msgspec.Raw] | None = None
    refusal: list[msgspec.Raw] | None = None


class _Choice(msgspec.Struct, gc=False):
    index: int = 0
    delta: _Delta | None = None
    finish_reason: str | None = None
    logprobs: _Logprobs | None = None  # 1.1: the tokens' log probabilities, when asked


class _Details(msgspec.Struct, gc=False):
    cached_tokens: int | None = None
    reasoning_tokens: int | None = None


class _Usage(msgspec.Struct, gc=False):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    prompt_tokens_details: _Details | None = None
    completion_tokens_details: _Details | None = None


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
_decode_any = msgspec.json.Decoder().decode
#: Chunk ``object`` values this translator knows; another is counted in ``unknown_types``.
_KNOWN_OBJECTS: Final = frozenset({"chat.completion.chunk", "chat.completion", "error"})
_LEGACY_CALL: Final = -1  # the deprecated ``delta.function_call``, kept apart


class _PendingCall:
    __slots__ = ("block", "final_id", "id", "name", "parts")

    def __init__(self, id: str) -> None:
        self.id = id
        self.name = ""
        self.parts: list[str] = []
        #: With tool deltas on: the block and the unique id its ``tool.call`` will
        #: carry, reserved at its first argument fragment (docs/extensions.md).
        self.block: int | None = None
        self.final_id = ""


class _ChoiceState:
    """What one choice has opened so far."""

    __slots__ = (
        "audio_block",
        "by_index",
        "calls",
        "finished",
        "index",
        "last",
        "reason_block",
        "refusal_block",
        "refused",
        "text_block",
    )

    def __init__(self, index: int) -> None:
        self.index = index
        self.text_block: int | None = None
        self.reason_block: int | None = None
        self.refusal_block: int | None = None
        self.audio_block: int | None = None
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
        self._details: dict[str, int] = {}  # tokenwire.usage (cached, reasoning tokens)
        self._tool_ids: set[str] = set()
        #: Chunk ``object`` types not known here, counted (never silently dropped).
        self.unknown_types: Counter[str] = Counter()

    # -- messages ------------------------------------------------------------
    # Translation is budgeted at 2x the bare SSE decode: each payload is
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
            choices is not None
            and len(choices) == 1
            and chunk.usage is None
            and chunk.error is None
            and chunk.object != "error"
        ):
            choice = choices[0]
            delta = choice.delta
            if delta is not None and choice.finish_reason is None and choice.logprobs is None:
                content = delta.content
                state = self._choices.get(choice.index)
                if (
                    type(content) is str
                    and content
                    and state is not None
                    and state.text_block is not None
                    and not state.finished
                    and not (
                        delta.refusal
                        or delta.tool_calls
                        or delta.reasoning_content
                        or delta.reasoning
                        or delta.function_call is not None
                        or delta.annotations is not None
                        or delta.audio is not None
                    )
                ):
                    # More text for an open block: Writer.text's fast path.
                    self.out += self.writer.text(content, state.text_block)
                    return
        self._on_chunk(chunk)

    def _on_chunk(self, chunk: _Chunk) -> None:
        if chunk.error is not None or chunk.object == "error":
            self._vendor_error(chunk)
            return
        if chunk.object is not None and chunk.object not in _KNOWN_OBJECTS:
            self.unknown_types[chunk.object] += 1
        usage = chunk.usage
        if usage is not None:
            # Reports are totals, not increments: keep the last one (§5.3.5).
            self._usage = (max(usage.prompt_tokens or 0, 0), max(usage.completion_tokens or 0, 0))
            # Both details are inside the totals (docs/translation.md).
            prompt, completion = usage.prompt_tokens_details, usage.completion_tokens_details
            if prompt is not None and prompt.cached_tokens is not None:
                self._details[x.CACHE_READ] = max(prompt.cached_tokens, 0)
            if completion is not None and completion.reasoning_tokens is not None:
                self._details[x.REASONING_TOKENS] = max(completion.reasoning_tokens, 0)
        for choice in chunk.choices or ():
            state = self._choices.get(choice.index) or self._choice(choice.index)
            if choice.delta is not None:
                self._on_delta(state, choice.delta)
            if choice.logprobs is not None:
                self._logprobs(state, choice.logprobs)
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
            self._refusal(state, delta.refusal)
        if delta.audio is not None:
            self._audio(state, delta.audio)
        if delta.annotations:
            index = self._text_index(state)
            for annotation in delta.annotations:
                body = {"index": index, x.CITATION: _decode_any(bytes(annotation))}
                self.out += self.writer.add(x.extension(x.BLOCK, body))
        if delta.tool_calls:
            for fragment in delta.tool_calls:
                state.fragment(fragment.index, fragment.id, fragment.function)
                if self.tool_deltas:
                    self._send_tool_delta(state, fragment.function)
        if delta.function_call is not None:
            state.fragment(_LEGACY_CALL, None, delta.function_call)
            if self.tool_deltas:
                self._send_tool_delta(state, delta.function_call)

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

    def _own_index(self, state: _ChoiceState) -> int:
        """The choice's own index ``c`` when free (see the class docstring), else a new one."""
        index = state.index
        if index in self._taken:
            return self._new_block()
        self._taken.add(index)
        return index

    def _mark(self, state: _ChoiceState, index: int) -> None:
        # docs/extensions.md: a block of choice c > 0 says so before its first event.
        mark = x.choice_mark(state.index, index)
        if mark is not None:
            self.out += self.writer.add(mark)

    def _text_index(self, state: _ChoiceState) -> int:
        if state.text_block is None:
            state.text_block = self._own_index(state)
            self._mark(state, state.text_block)
        return state.text_block

    def _text(self, state: _ChoiceState, text: str) -> None:
        if state.finished:
            raise TranslationError(f"choice {state.index} sent text after its finish_reason")
        self.out += self.writer.text(text, self._text_index(state))

    def _refusal(self, state: _ChoiceState, text: str) -> None:
        # The model declined: its words on a block of their own, marked
        # tokenwire:refusal before the first delta, never the answer's text.
        if state.finished:
            raise TranslationError(f"choice {state.index} sent a refusal after its finish_reason")
        state.refused = True
        if state.refusal_block is None:
            state.refusal_block = self._own_index(state)
            self._mark(state, state.refusal_block)
            body = {"index": state.refusal_block, x.REFUSAL: True}
            self.out += self.writer.add(x.extension(x.BLOCK, body))
        self.out += self.writer.text(text, state.refusal_block)

    def _audio(self, state: _ChoiceState, audio: _Audio) -> None:
        # 1.1: audio output on a block of its own (id, data and transcript
        # fragments), closed at the choice's finish like its other blocks.
        if state.finished:
            raise TranslationError(f"choice {state.index} sent audio after its finish_reason")
        if state.audio_block is None:
            state.audio_block = self._own_index(state)
        fields = {k: v for k, v in msgspec.structs.asdict(audio).items() if v is not None}
        body = {"index": state.audio_block, x.AUDIO: fields}
        self.out += self.writer.add(x.extension(x.BLOCK, body))

    def _logprobs(self, state: _ChoiceState, logprobs: _Logprobs) -> None:
        # 1.1: the log probabilities of the tokens just sent, on their block.
        for entries, block in (
            (logprobs.content, state.text_block),
            (logprobs.refusal, state.refusal_block),
        ):
            if entries and block is not None:
                tokens = [_decode_any(bytes(entry)) for entry in entries]
                body = {"index": block, x.LOGPROBS: tokens}
                self.out += self.writer.add(x.extension(x.BLOCK, body))

    def _reasoning(self, state: _ChoiceState, text: str) -> None:
        # Reasoning is not in the draft's registry: carried only when asked for,
        # on its own block, marked "tokenwire:reasoning" (docs/extensions.md).
        if not self.reasoning:
            return
        if state.finished:
            raise TranslationError(f"choice {state.index} sent reasoning after its finish_reason")
        if state.reason_block is None:
            state.reason_block = self._new_block()
            self._mark(state, state.reason_block)
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
            # A reason the standard has no name for: the endpoint ended the answer,
            # which must never look complete (the raw value goes in tokenwire.stop).
            stop = FINISH_REASONS.get(finish_reason, "content_filter")
        if state.refused:
            stop = "content_filter"
        if finish_reason is not None and state.index == 0:
            # docs/extensions.md: the vendor's own value, next to the mapped stop_reason.
            body = {x.RAW_STOP_REASON: finish_reason}
            self.out += self.writer.add(x.extension(x.STOP, body))
        # The reasoning ended before the answer, and the answer before the
        # calls (they are only complete now), so the blocks stop in that order.
        writer = self.writer
        if state.reason_block is not None:
            self.out += writer.stop(state.reason_block, "end_turn" if stop == "tool_use" else stop)
        if state.text_block is not None:
            self.out += writer.stop(state.text_block, stop)
        if state.refusal_block is not None:
            self.out += writer.stop(state.refusal_block, stop)
        if state.audio_block is not None:
            self.out += writer.stop(state.audio_block, stop)
        # A choice that wrote no text leaves its own index free: its first
        # tool call takes it (so a lone call is block 0, "0 for primary", §5.3.2).
        spare = state.index if state.index not in self._taken else None
        for call in state.calls:
            if self._emit_call(call, truncated=stop == "max_tokens", index=spare, state=state):
                spare = None

    def _unique_id(self, id: str) -> str:
        call_id = id or f"call_{len(self._tool_ids)}"
        while call_id in self._tool_ids:  # §5.3.4: ids are unique in a stream
            call_id += "_"
        self._tool_ids.add(call_id)
        return call_id

    def _send_tool_delta(self, state: _ChoiceState, fn: _Function | None) -> None:
        """``tokenwire.tool_delta`` for the fragment just accumulated (opt-in, live UIs)."""
        call = state.last
        assert call is not None
        if call.block is None:
            # At the call's first fragment, the block and id its tool.call will
            # carry (so calls keep the order they began in): the choice's own
            # index when it has no text (as at the end), else a new one.
            call.final_id = self._unique_id(call.id)
            spare = state.index
            if spare in self._taken or state.text_block is not None:
                call.block = self._new_block()
            else:
                self._taken.add(spare)
                call.block = spare
            self._mark(state, call.block)
        if fn is not None and fn.arguments:
            self.out += self._tool_delta(call.block, call.final_id, call.name or None, fn.arguments)

    def _emit_call(
        self,
        call: _PendingCall,
        *,
        truncated: bool,
        index: int | None,
        state: _ChoiceState | None = None,
    ) -> bool:
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
                if call.block is not None:  # its deltas went to a reserved block
                    self.out += self.writer.stop(call.block, "max_tokens")
                return False
            raise TranslationError(
                f"tool call {call.name!r} arguments are not a JSON object: {arguments[:80]!r}"
            )
        if call.block is not None:  # reserved by its first tool delta
            call_id, index = call.final_id, call.block
        else:
            call_id = self._unique_id(call.id)
            if index is None:
                index = self._new_block()
            else:
                self._taken.add(index)
            if state is not None:
                self._mark(state, index)
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
            # tokenwire.usage before the error: only usage and stream.end may follow it (§5.4).
            self.out += self._usage_details() + writer.error(code, message)
        if self._usage is not None:
            self.out += writer.usage(*self._usage)
        self.out += writer.end()

    def _usage_details(self) -> list[Any]:
        """``tokenwire.usage``: the cached and reasoning tokens, when reported (once)."""
        if not self._details:
            return []
        body, self._details = self._details, {}
        return self.writer.add(x.extension(x.USAGE, body))

    def _done(self) -> None:
        for state in list(self._choices.values()):
            self._finish(state, None)
            if self.writer.ended:
                return
        self.out += self._usage_details()
        if self._usage is not None:
            self.out += self.writer.usage(*self._usage)
        self.out += self.writer.end()

    def _on_eof(self) -> None:
        finished = bool(self._choices) and all(s.finished for s in self._choices.values())
        where = "after its finish_reason" if finished else "mid-answer"
        self._fail(
            "internal_error", f"{self.name} stream ended {where} without data: [DONE] (truncated)"
        )
