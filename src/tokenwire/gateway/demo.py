"""The built-in ``demo`` model: a deterministic development model that needs no network.

It is a documented model, not a test mock (docs/gateway.md, "The demo model"):

- **Deterministic.** The reply is a pure function of the messages, tools and
  parameters; ``metadata`` (``request_id``) and extensions do not change it.
  ``max_tokens`` and ``stop_sequences`` only cut it short (a prefix of the
  same text); ``temperature`` and ``top_p`` pick another wording.
- **Streams real text.** A fluent reply built from the conversation, echoing
  the user's question, one token per ``content.delta``. A token is a word with
  its leading whitespace. ``parameters.max_tokens`` tokens when given (then
  ``stop_reason`` is ``max_tokens``), about 40 when not (``end_turn``).
- **Calls tools.** When tools are declared and the last message is a user
  message sharing a word with a tool's name or description, it calls that tool
  (§4.8) with arguments valid against its JSON Schema, filled from the message
  where it can ("What is the weather in Vienna?" -> ``{"city": "Vienna"}``),
  then ``content.stop`` with ``tool_use``. When the last message is a ``tool``
  result, it answers with text quoting that result.
- **Emits the rest.** ``usage`` with counted tokens; ``stop_sequences`` end
  the text early (``end_turn``); ``"tokenwire:demo": {"delay_ms": N}`` paces it.

``plan_reply(request)`` is the pure part (what to say); ``DemoModel`` streams it.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import re
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any, Final

import msgspec

from .. import events as ev
from ..request import Message, Request, Tool

__all__ = [
    "DEFAULT_TOKENS",
    "EXTENSION",
    "MAX_DELAY_MS",
    "DemoModel",
    "Reply",
    "arguments_for",
    "count_tokens",
    "plan_reply",
    "tokenize",
]

#: About this many tokens are streamed when ``max_tokens`` is not given.
DEFAULT_TOKENS: Final = 40
#: The demo's extension key (§4.7): ``{"delay_ms": N}`` paces the stream.
EXTENSION: Final = "tokenwire:demo"
#: ``delay_ms`` is clamped to this, so a client cannot park a connection for long.
MAX_DELAY_MS: Final = 5000.0
#: The echoed question is cut to this many words.
_ECHO_WORDS: Final = 24
#: A quoted tool result is cut to this many words.
_QUOTE_WORDS: Final = 48
#: At zero delay, hand the event loop back every this many tokens.
_YIELD_EVERY: Final = 64

_TOKEN: Final = re.compile(r"\s*\S+")
_WORD: Final = re.compile(r"[A-Za-z0-9]+")
_CAMEL: Final = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_QUOTED: Final = re.compile(r"\"([^\"]+)\"|“([^”]+)”|'([^']+)'")
_PROPER: Final = re.compile(r"\b[A-Z][\w'-]*(?:\s+[A-Z][\w'-]*)*")
_AFTER_PREPOSITION: Final = re.compile(
    r"\b(?:in|at|for|to|from|near|about|of|on|into|around)\s+([A-Za-z][\w'-]*)", re.IGNORECASE
)

#: Words too common to link a message to a tool.
_STOPWORDS: Final = frozenset(
    """a about after again all also am an and any are as at be been before being but by can
    could did do does for from get give had has have he her here his how i if in into is it
    its just let like me might more most my no not now of on or our out please she should so
    some tell than that the their them then there these they this to too up us use using was
    we were what when where which who why will with would you your""".split()
)
#: Property names that want a place.
_PLACE_NAMES: Final = frozenset(
    "city location place country region town destination origin address where area".split()
)
#: Property names that want the whole request text.
_TEXT_NAMES: Final = frozenset(
    "query q text question prompt input message content search term terms keywords body".split()
)

_OPENERS: Final = (
    'You asked: "{q}"',
    'Your question was: "{q}"',
    'You wrote: "{q}"',
)
_NO_QUESTION: Final = "There is no question in this conversation yet."
_SENTENCES: Final = (
    "This is the tokenwire demo model, a deterministic development model that runs offline.",
    "It builds its reply from your conversation, so the same messages and parameters "
    "always give the same text.",
    "Every word arrives as its own content.delta event, in order, with its sequence number.",
    "Set parameters.max_tokens to choose exactly how many tokens it streams.",
    "Declare a tool that shares a word with your message and it calls that tool instead.",
    "Add the extension tokenwire:demo with delay_ms to pace the stream.",
    "A real model would answer the question itself; this one describes the stream you are reading.",
)


# --- Tokens -------------------------------------------------------------------------


def tokenize(text: str) -> list[str]:
    """``text`` as the demo's tokens: each word with its leading whitespace.

    ``"".join(tokenize(t)) == t`` except for trailing whitespace.
    """
    return _TOKEN.findall(text)


def count_tokens(text: str) -> int:
    """How many demo tokens ``text`` holds."""
    return len(_TOKEN.findall(text))


def _words(text: str) -> set[str]:
    """Content words: lower-cased, split on ``_`` and camelCase, minus stop words."""
    out = set()
    for word in _WORD.findall(_CAMEL.sub(" ", text)):
        word = word.lower()
        if word not in _STOPWORDS:
            out.add(word)
    return out


def _cut_words(text: str, limit: int) -> str:
    words = text.split()
    if len(words) <= limit:
        return " ".join(words)
    return " ".join(words[:limit]) + " ..."


# --- The plan -------------------------------------------------------------------------


class Reply(msgspec.Struct, frozen=True, kw_only=True):
    """What the demo says for one request: text tokens or one tool call."""

    tokens: list[str]
    tool_call: ev.ToolCall | None
    stop_reason: str
    input_tokens: int
    output_tokens: int

    @property
    def text(self) -> str:
        """The whole streamed text."""
        return "".join(self.tokens)


def _seed(request: Request) -> bytes:
    # §4.6: metadata never influences generation, and extensions only pace it.
    # max_tokens and stop_sequences only cut the reply short, so they are not
    # part of the seed: a shorter budget gives a prefix of the same text.
    params = request.parameters
    sampling = (params.temperature, params.top_p) if params is not None else (None, None)
    key = msgspec.json.encode([request.messages, request.tools, sampling])
    return hashlib.sha256(key).digest()


def _input_tokens(request: Request) -> int:
    total = 0
    for message in request.messages:
        total += count_tokens(message.text)
        for call in message.tool_calls or ():
            total += count_tokens(call.name) + count_tokens(call.arguments)
    for tool in request.tools or ():
        total += count_tokens(tool.name) + count_tokens(tool.description)
    return total


def _last_user(messages: Sequence[Message]) -> Message | None:
    for message in reversed(messages):
        if message.role == "user":
            return message
    return None


def _question(messages: Sequence[Message]) -> str:
    user = _last_user(messages)
    return _cut_words(user.text, _ECHO_WORDS) if user is not None else ""


def _sentences(seed: bytes, first: str, question: str) -> Iterator[str]:
    """The reply, sentence after sentence, endlessly (the pool cycles)."""
    yield first
    keywords: list[str] = []
    for word in _WORD.findall(question):
        if word.lower() not in _STOPWORDS and word.lower() not in map(str.lower, keywords):
            keywords.append(word)
    keywords = keywords[:3]
    if keywords:
        yield f"Your message mentions {_join(keywords)}."
    start = seed[1] % len(_SENTENCES)
    while True:
        for k in range(len(_SENTENCES)):
            yield _SENTENCES[(start + k) % len(_SENTENCES)]


def _join(words: list[str]) -> str:
    if len(words) == 1:
        return words[0]
    return ", ".join(words[:-1]) + " and " + words[-1]


def _text_tokens(sentences: Iterator[str], budget: int | None) -> tuple[list[str], bool]:
    """Tokens for the reply: exactly ``budget`` when given, else about 40 at a sentence end.

    Returns the tokens and whether the budget cut the text.
    """
    tokens: list[str] = []
    if budget is not None:
        for sentence in sentences:
            tokens += tokenize(sentence if not tokens else " " + sentence)
            if len(tokens) >= budget:
                return tokens[:budget], True
    # The sentence boundary closest to DEFAULT_TOKENS (never an empty reply).
    best: list[str] = []
    for sentence in sentences:
        tokens += tokenize(sentence if not tokens else " " + sentence)
        if not best or abs(len(tokens) - DEFAULT_TOKENS) <= abs(len(best) - DEFAULT_TOKENS):
            best = list(tokens)
        if len(tokens) >= DEFAULT_TOKENS:
            break
    return best, False


def _apply_stop_sequences(tokens: list[str], stops: Sequence[str]) -> list[str] | None:
    """The tokens cut before the first stop sequence, or ``None`` when none occurs."""
    text = "".join(tokens)
    cut = min((i for s in stops if s and (i := text.find(s)) >= 0), default=-1)
    if cut < 0:
        return None
    out: list[str] = []
    used = 0
    for token in tokens:
        if used + len(token) <= cut:
            out.append(token)
            used += len(token)
            continue
        if cut > used:
            out.append(token[: cut - used])
        break
    return out


def _tool_result_text(messages: Sequence[Message]) -> str:
    result = messages[-1]
    name = "the tool"
    for message in reversed(messages):
        for call in message.tool_calls or ():
            if call.id == result.tool_call_id:
                name = call.name
                break
    quoted = _cut_words(result.text, _QUOTE_WORDS)
    return f'The {name} tool returned: "{quoted}".'


def _pick_tool(tools: Sequence[Tool], message: Message) -> Tool | None:
    """The declared tool sharing the most words with ``message`` (first on a tie)."""
    words = _words(message.text)
    best, best_score = None, 0
    for tool in tools:
        score = len(words & (_words(tool.name) | _words(tool.description)))
        if score > best_score:
            best, best_score = tool, score
    return best


def plan_reply(request: Request) -> Reply:
    """What the demo answers to ``request``: a pure, deterministic function.

    Returns a ``Reply`` with either text tokens or one tool call, its stop
    reason and token counts.
    """
    seed = _seed(request)
    messages = request.messages
    params = request.parameters
    budget = params.max_tokens if params is not None else None
    stops = (params.stop_sequences or []) if params is not None else []
    input_tokens = _input_tokens(request)
    last = messages[-1]

    # §4.8 step 2: a user turn that mentions a declared tool gets a tool call.
    if request.tools and last.role == "user":
        tool = _pick_tool(request.tools, last)
        if tool is not None:
            arguments = msgspec.json.encode(arguments_for(tool.parameters, last.text)).decode()
            call = ev.ToolCall(
                v=ev.VERSION,
                seq=0,
                index=0,
                id="call_" + seed.hex()[:16],
                name=tool.name,
                arguments=arguments,
            )
            return Reply(
                tokens=[],
                tool_call=call,
                stop_reason="tool_use",
                input_tokens=input_tokens,
                output_tokens=count_tokens(tool.name) + count_tokens(arguments),
            )

    question = _question(messages)
    if last.role == "tool":
        # §4.8 step 5: the model reads the tool result and answers.
        first = _tool_result_text(messages)
        if question:
            first += f' That answers "{question}"'
            first += "" if question.endswith(("?", ".", "!")) else "."
    elif question:
        first = _OPENERS[seed[0] % len(_OPENERS)].format(q=question)
        first += "" if question.endswith(("?", ".", "!")) else "."
    else:
        first = _NO_QUESTION
    tokens, cut = _text_tokens(_sentences(seed, first, question), budget)
    stop_reason = "max_tokens" if cut else "end_turn"
    stopped = _apply_stop_sequences(tokens, stops)
    if stopped is not None:
        # §4.5: a stop sequence ends generation; it is a natural end, not a cut.
        tokens, stop_reason = stopped, "end_turn"
    return Reply(
        tokens=tokens,
        tool_call=None,
        stop_reason=stop_reason,
        input_tokens=input_tokens,
        output_tokens=len(tokens),
    )


# --- Tool arguments from a JSON Schema ----------------------------------------------------


class _Hints:
    """Values a message offers for string arguments."""

    def __init__(self, text: str) -> None:
        self.text = text.strip()
        self.quoted = [next(g for g in m.groups() if g) for m in _QUOTED.finditer(text)]
        self.proper = [
            name
            for m in _PROPER.finditer(text)
            if (name := _strip_stopwords(m.group(0))) and name.lower() not in _STOPWORDS
        ]
        self.after_preposition = [
            m.group(1)
            for m in _AFTER_PREPOSITION.finditer(text)
            if m.group(1).lower() not in _STOPWORDS
        ]

    def whole(self) -> str:
        return self.text.rstrip("?!. ") or self.text

    def for_name(self, name: str) -> str:
        key = name.lower()
        words = set(_WORD.findall(_CAMEL.sub(" ", name).lower()))
        if key in _TEXT_NAMES or words & _TEXT_NAMES:
            return self.whole()
        if key in _PLACE_NAMES or words & _PLACE_NAMES:
            for candidates in (self.proper, self.after_preposition, self.quoted):
                if candidates:
                    return candidates[0]
            return self.whole()
        for candidates in (self.quoted, self.proper):
            if candidates:
                return candidates[0]
        return self.whole()


def _strip_stopwords(name: str) -> str:
    # "What Vienna" -> "Vienna": a capitalised question word is not a name.
    parts = name.split()
    while parts and parts[0].lower() in _STOPWORDS:
        parts.pop(0)
    return " ".join(parts)


def _schema_type(schema: dict[str, Any]) -> str:
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if isinstance(kind, str):
        return kind
    if "properties" in schema:
        return "object"
    if "items" in schema:
        return "array"
    return "string"


def _bound(schema: dict[str, Any], key: str) -> float | None:
    value = schema.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value


def _number(schema: dict[str, Any], integer: bool) -> int | float:
    # The minimum when there is one, else 0; kept inside the other bounds.
    low, high = _bound(schema, "minimum"), _bound(schema, "maximum")
    xlow, xhigh = _bound(schema, "exclusiveMinimum"), _bound(schema, "exclusiveMaximum")
    value: float = low if low is not None else xlow + 1 if xlow is not None else 0
    if high is not None and value > high:
        value = high
    if xhigh is not None and value >= xhigh:
        value = xhigh - 1
    return math.ceil(value) if integer else value


def _string(schema: dict[str, Any], name: str, hints: _Hints) -> str:
    value = hints.for_name(name)
    low, high = schema.get("minLength"), schema.get("maxLength")
    if isinstance(high, int) and len(value) > high:
        value = value[:high]
    if isinstance(low, int) and len(value) < low:
        value = value + "x" * (low - len(value))
    return value


def _value(schema: Any, name: str, hints: _Hints, depth: int) -> Any:
    if not isinstance(schema, dict) or depth > 16:
        return hints.for_name(name)
    if "const" in schema:
        return schema["const"]
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return enum[0]
    if "default" in schema:
        return schema["default"]
    for combinator in ("anyOf", "oneOf", "allOf"):
        options = schema.get(combinator)
        if isinstance(options, list) and options:
            return _value(options[0], name, hints, depth + 1)
    kind = _schema_type(schema)
    if kind == "object":
        return _object(schema, hints, depth + 1)
    if kind == "array":
        count = schema.get("minItems", 0)
        items = schema.get("items", {})
        return [_value(items, name, hints, depth + 1) for _ in range(max(0, int(count)))]
    if kind == "integer":
        return _number(schema, integer=True)
    if kind == "number":
        return _number(schema, integer=False)
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    return _string(schema, name, hints)


def _object(schema: dict[str, Any], hints: _Hints, depth: int) -> dict[str, Any]:
    properties = schema.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    required = schema.get("required")
    # Required fields always; without a "required" list, every declared one.
    names = (
        [n for n in required if isinstance(n, str)]
        if isinstance(required, list)
        else list(properties)
    )
    return {name: _value(properties.get(name, {}), name, hints, depth) for name in names}


def arguments_for(schema: dict[str, Any], message: str) -> dict[str, Any]:
    """Tool arguments valid against ``schema`` (a JSON Schema object), filled from ``message``.

    Required properties are always present (every declared property when the
    schema has no ``required`` list). ``const``, then the first ``enum`` value,
    then ``default`` win; numbers take their minimum (else 0), booleans
    ``false``, arrays ``minItems`` items; strings come from the message: a
    place for names like ``city``, the whole message for names like ``query``,
    else a quoted phrase or a proper name.
    """
    return _object(schema, _Hints(message), 0)


# --- The provider ------------------------------------------------------------------------


def _delay_ms(request: Request, default: float) -> float:
    option = request.extension(EXTENSION)
    value: Any = option.get("delay_ms", default) if isinstance(option, dict) else default
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        value = default
    return min(max(float(value), 0.0), MAX_DELAY_MS)


class DemoModel:
    """The ``demo`` provider: streams ``plan_reply(request)``.

    ``delay_ms`` paces every event (a request's ``"tokenwire:demo":
    {"delay_ms": N}`` overrides it, clamped to ``MAX_DELAY_MS``).
    """

    def __init__(self, *, delay_ms: float = 0.0) -> None:
        self.delay_ms = delay_ms

    async def generate(self, request: Request) -> AsyncIterator[ev.Event]:
        """Yield the reply's events: text or a tool call, ``content.stop``, ``usage``."""
        reply = plan_reply(request)
        delay = _delay_ms(request, self.delay_ms) / 1000.0
        sleep = asyncio.sleep
        v = ev.VERSION
        for n, token in enumerate(reply.tokens):
            if delay:
                await sleep(delay)
            elif n and n % _YIELD_EVERY == 0:
                await sleep(0)  # a long reply must not starve other streams
            yield ev.ContentDelta(v=v, seq=0, index=0, role="assistant", delta=ev.Delta(text=token))
        if reply.tool_call is not None:
            if delay:
                await sleep(delay)
            yield reply.tool_call
        yield ev.ContentStop(v=v, seq=0, index=0, stop_reason=reply.stop_reason)
        yield ev.Usage(
            v=v, seq=0, input_tokens=reply.input_tokens, output_tokens=reply.output_tokens
        )
