"""The built-in ``demo`` model: a deterministic development model that needs no network.

It is a documented model, not a test mock (docs/gateway.md, "The demo model"):

- **Deterministic.** The reply is a pure function of the messages, tools and
  parameters; ``metadata`` (``request_id``) and the pacing extension do not
  change it. ``max_tokens`` and ``stop_sequences`` only cut it short (a prefix
  of the same text); ``temperature`` and ``top_p`` pick another wording.
- **Streams real text.** A fluent reply built from the conversation, echoing
  the user's question, one token per ``content.delta``. A token is a word with
  its leading whitespace. Its natural length is about 40 tokens, ending at a
  sentence (``end_turn``); ``parameters.max_tokens`` is a cap, as for a real
  model: a smaller one cuts the reply (``stop_reason`` ``max_tokens``), a
  larger one changes nothing. ``"tokenwire:demo": {"tokens": N}`` asks for a
  reply of exactly N tokens (for load tests).
- **Bounded.** At most ``MAX_TOKENS`` tokens: a ``max_tokens`` or ``tokens``
  above it is refused (``check_request``, a 400 naming the field), and the
  tokens are produced lazily, handing the event loop back every 64.
- **Calls tools.** When tools are declared and the last message is a user
  message sharing a word with a tool's name or description, it calls the best
  match (§4.8) with arguments valid against its JSON Schema, filled from the
  message ("What's the weather in Paris?" -> ``{"city": "Paris"}``, "Mail the
  Vienna weather to Ann" -> ``send_email`` with ``{"to": "Ann"}``), then
  ``content.stop`` with ``tool_use``. The arguments are bounded in size
  whatever the schema asks. When the last message is a ``tool`` result, it
  answers with text quoting that result.
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
from itertools import chain, islice, repeat
from typing import Any, Final

import msgspec

from ... import events as ev
from ...errors import InvalidRequest
from ...request import Message, Request, Tool
from ...server.hooks import Provider

__all__ = [
    "DEFAULT_TOKENS",
    "EXTENSION",
    "MAX_ARGUMENT_CHARS",
    "MAX_ARGUMENT_VALUES",
    "MAX_DELAY_MS",
    "MAX_TOKENS",
    "DemoModel",
    "Reply",
    "arguments_for",
    "check_request",
    "count_tokens",
    "plan_reply",
    "tokenize",
]

#: The natural length of a reply: the sentence end closest to this many tokens.
DEFAULT_TOKENS: Final = 40
#: The most tokens one reply may have; a larger ``max_tokens`` (or ``tokens``)
#: is a 400. A real model's output limit plays the same part.
MAX_TOKENS: Final = 32768
#: Tool arguments hold at most this many values and this many characters of
#: strings, whatever ``minItems``/``minLength`` the schema asks for.
MAX_ARGUMENT_VALUES: Final = 1024
MAX_ARGUMENT_CHARS: Final = 16384
#: The demo's extension key (§4.7): ``{"delay_ms": N}`` paces the stream.
EXTENSION: Final = "tokenwire:demo"
#: ``delay_ms`` is clamped to this, so a client cannot park a connection for long.
MAX_DELAY_MS: Final = 5000.0
#: The echoed question is cut to this many words.
_ECHO_WORDS: Final = 24
#: A quoted tool result is cut to this many words.
_QUOTE_WORDS: Final = 48
#: Tool choice and argument hints read this much of a message, never more.
_SCAN_CHARS: Final = 4096
#: At zero delay, hand the event loop back every this many tokens.
_YIELD_EVERY: Final = 64

_TOKEN: Final = re.compile(r"\s*\S+")
_WORD: Final = re.compile(r"[A-Za-z0-9]+")
_CAMEL: Final = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_QUOTED: Final = re.compile(r"\"([^\"]+)\"|“([^”]+)”|'([^']+)'")
_UPPER: Final = "A-ZÀ-ÖØ-Þ"
# A run of capitalised words ("New York"); its start offset tells whether it
# opens a sentence, where capitals say nothing ("What", "Mail").
_PROPER: Final = re.compile(rf"\b[{_UPPER}][\w'-]*(?:\s+[{_UPPER}][\w'-]*)*")
_OPENING_MARKS: Final = " \t\"'“‘«([-*"
_AFTER_PREPOSITION: Final = re.compile(
    rf"\b((?i:in|at|for|to|from|near|about|of|on|into|around|with))\s+((?:[{_UPPER}][\w'-]*"
    rf"(?:\s+[{_UPPER}][\w'-]*)*)|[A-Za-z][\w'-]*)"
)
#: Which prepositions introduce which kind of value, best first.
_PLACE_PREPOSITIONS: Final = ("in", "at", "near", "around", "for", "of")
# "to" and "from" often name a person ("Mail the Vienna weather to Ann").
_WEAK_PLACE_PREPOSITIONS: Final = ("into", "to", "from")
_DESTINATION_PREPOSITIONS: Final = ("to", "into", "for")
_ORIGIN_PREPOSITIONS: Final = ("from",)
_PERSON_PREPOSITIONS: Final = ("to", "for", "with", "from")
#: Words that mean the same to the tool matcher ("Mail Ann" calls send_email).
_SYNONYMS: Final = {"mail": "email", "e": "", "emails": "email", "mails": "email", "texts": "text"}

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
#: Property names that want a person.
_PERSON_NAMES: Final = frozenset(
    "to recipient recipients person who user username contact attendee assignee owner".split()
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
    "Set parameters.max_tokens to cap how many tokens it streams.",
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
    # One token per run of non-whitespace: str.split counts them in C, without
    # building a match object per word of a 4 MiB message.
    return len(text.split())


def _content_words(text: str) -> list[str]:
    """Content words in order: lower-cased, split on ``_`` and camelCase, minus
    stop words, synonyms merged ("mail" is "email")."""
    out = []
    for word in _WORD.findall(_CAMEL.sub(" ", text)):
        word = word.lower()
        word = _SYNONYMS.get(word, word)
        if word and word not in _STOPWORDS:
            out.append(word)
    return out


def _words(text: str) -> set[str]:
    return set(_content_words(text))


def _cut_words(text: str, limit: int) -> str:
    head = text[: 64 * limit]  # enough for ``limit`` words of any sane length
    words = head.split()
    if len(words) <= limit and len(head) == len(text):
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
    yield from _head(first, question)
    start = seed[1] % len(_SENTENCES)
    while True:
        for k in range(len(_SENTENCES)):
            yield _SENTENCES[(start + k) % len(_SENTENCES)]


def _head(first: str, question: str) -> list[str]:
    """The reply's own sentences, before the pool: ``first``, then the question's keywords."""
    keywords: list[str] = []
    for word in _WORD.findall(question):
        if word.lower() not in _STOPWORDS and word.lower() not in map(str.lower, keywords):
            keywords.append(word)
    keywords = keywords[:3]
    if keywords:
        return [first, f"Your message mentions {_join(keywords)}."]
    return [first]


def _join(words: list[str]) -> str:
    if len(words) == 1:
        return words[0]
    return ", ".join(words[:-1]) + " and " + words[-1]


def _pool_rotations() -> tuple[tuple[str, ...], ...]:
    # The pool's tokens once round from each starting sentence, each sentence
    # after a space (a pool sentence never opens a reply). Built once: every
    # stream shares these strings instead of tokenizing the pool again.
    tokens = [tokenize(" " + sentence) for sentence in _SENTENCES]
    n = len(tokens)
    return tuple(
        tuple(token for k in range(n) for token in tokens[(start + k) % n]) for start in range(n)
    )


_POOL_TOKENS: Final = _pool_rotations()


def _natural_length(sentences: Iterator[str]) -> int:
    """The sentence boundary closest to DEFAULT_TOKENS (never an empty reply)."""
    count = best = 0
    for sentence in sentences:
        count += count_tokens(sentence)
        if not best or abs(count - DEFAULT_TOKENS) <= abs(best - DEFAULT_TOKENS):
            best = count
        if count >= DEFAULT_TOKENS:
            break
    return best


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
    """The declared tool that best matches ``message`` (the first on a tie), or ``None``.

    A word shared with the tool's name counts 2, one shared only with its
    description 1, and the message's first content word (its verb, as in
    "Mail the weather to Ann") 1 more: the action picks the tool.
    """
    order = _content_words(message.text[:_SCAN_CHARS])  # the start says what is asked
    words = set(order)
    lead = order[0] if order else None
    best, best_score = None, 0
    for tool in tools:
        named = _words(tool.name)
        described = _words(tool.description) - named
        score = 2 * len(words & named) + len(words & described)
        if score and lead is not None and lead in named | described:
            score += 1
        if score > best_score:
            best, best_score = tool, score
    return best


def plan_reply(request: Request) -> Reply:
    """What the demo answers to ``request``: a pure, deterministic function.

    Returns a ``Reply`` with either text tokens or one tool call, its stop
    reason and token counts.
    """
    check_request(request)
    reply = _tool_reply(request)
    if reply is not None:
        return reply
    params = request.parameters
    stops = (params.stop_sequences or []) if params is not None else []
    input_tokens = _input_tokens(request)
    length, cut = _length(request)
    tokens = list(islice(_reply_tokens(request), length))
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


def _tool_reply(request: Request) -> Reply | None:
    """The tool call the demo makes for ``request``, or ``None`` (§4.8 step 2)."""
    last = request.messages[-1]
    # A user turn that mentions a declared tool gets a tool call.
    if not request.tools or last.role != "user":
        return None
    tool = _pick_tool(request.tools, last)
    if tool is None:
        return None
    arguments = msgspec.json.encode(arguments_for(tool.parameters, last.text)).decode()
    call = ev.ToolCall(
        v=ev.VERSION,
        seq=0,
        index=0,
        id="call_" + _seed(request).hex()[:16],
        name=tool.name,
        arguments=arguments,
    )
    return Reply(
        tokens=[],
        tool_call=call,
        stop_reason="tool_use",
        input_tokens=_input_tokens(request),
        output_tokens=count_tokens(tool.name) + count_tokens(arguments),
    )


def _sentences_for(request: Request) -> Iterator[str]:
    """The reply's sentences for a text answer, endlessly."""
    return _sentences(*_opening(request))


def _opening(request: Request) -> tuple[bytes, str, str]:
    """The reply's seed, first sentence and the question it echoes."""
    seed = _seed(request)
    messages = request.messages
    last = messages[-1]
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
    return seed, first, question


def _reply_tokens(request: Request) -> Iterator[str]:
    """A text reply's tokens, lazily and endlessly (cut them with ``_length``).

    The tokens of ``_sentences_for(request)``, each sentence after the first
    with a leading space, held as the reply's own few tokens and an iterator
    over the shared pool's: a stream paced over minutes keeps ~0.3 KiB of
    them, not a chain of generators.
    """
    seed, first, question = _opening(request)
    head = _head(first, question)
    tokens = tokenize(head[0])
    for sentence in head[1:]:
        tokens += tokenize(" " + sentence)
    pool = _POOL_TOKENS[seed[1] % len(_SENTENCES)]
    return chain(tokens, chain.from_iterable(repeat(pool)))


def _exact_tokens(request: Request) -> int | None:
    option = request.extension(EXTENSION)
    value = option.get("tokens") if isinstance(option, dict) else None
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_TOKENS:
        raise InvalidRequest(
            f"the demo model's reply length must be an integer from 1 to {MAX_TOKENS}",
            path=f'extensions["{EXTENSION}"].tokens',
        )
    return value


def _length(request: Request) -> tuple[int, bool]:
    """How many tokens a text reply has, and whether ``max_tokens`` cut it."""
    exact = _exact_tokens(request)
    natural = exact if exact is not None else _natural_length(_sentences_for(request))
    params = request.parameters
    cap = params.max_tokens if params is not None else None
    if cap is not None and cap < natural:
        return cap, True
    return natural, False


def check_request(request: Request) -> None:
    """Refuse what the demo will not do; raises ``InvalidRequest`` (a 400).

    ``parameters.max_tokens`` above ``MAX_TOKENS`` (``1e30`` never gets here:
    ``request.parse`` wants an integer), and a ``"tokenwire:demo"`` ``tokens``
    that is not an integer from 1 to ``MAX_TOKENS``. The path names the field.
    """
    params = request.parameters
    cap = params.max_tokens if params is not None else None
    if cap is not None and cap > MAX_TOKENS:
        shown = str(cap) if cap.bit_length() <= 64 else "a larger number"
        raise InvalidRequest(
            f"the demo model streams at most {MAX_TOKENS} tokens; got {shown}",
            path="parameters.max_tokens",
        )
    _exact_tokens(request)


# --- Tool arguments from a JSON Schema ----------------------------------------------------


class _Hints:
    """Values a message offers for string arguments."""

    def __init__(self, text: str) -> None:
        text = text[:_SCAN_CHARS]  # the hints need the start of a message, not all of it
        self.text = text.strip()
        self.quoted = [next(g for g in m.groups() if g) for m in _QUOTED.finditer(text)]
        # Capitalised names; a capital that opens a sentence says nothing
        # ("Mail Bob" names Bob), so such a word is only a last resort.
        self.proper: list[str] = []
        self.initial: list[str] = []
        for m in _PROPER.finditer(text):
            run = m.group(0)
            if _opens_sentence(text, m.start()):
                first, _, run = run.partition(" ")
                if first.lower() not in _STOPWORDS:
                    self.initial.append(first)
            name = _strip_stopwords(run.strip())
            if name and name.lower() not in _STOPWORDS:
                self.proper.append(name)
        # (preposition, the capitalised name or the word after it)
        self.after: list[tuple[str, str]] = [
            (m.group(1).lower(), _strip_stopwords(m.group(2)))
            for m in _AFTER_PREPOSITION.finditer(text)
            if _strip_stopwords(m.group(2)) and m.group(2).lower() not in _STOPWORDS
        ]

    def whole(self) -> str:
        return self.text.rstrip("?!. ") or self.text

    def _after(self, prepositions: Sequence[str], capitalised: bool) -> str | None:
        for preposition in prepositions:
            for seen, word in self.after:
                if seen == preposition and (word[:1].isupper() or not capitalised):
                    return word
        return None

    def _place(self, prepositions: Sequence[str], weak: Sequence[str] = ()) -> str:
        # "weather in Paris": a name after a place word, then any name, then a
        # name after a weaker one ("to"), then a lower-case word after one
        # ("in paris"), then a quoted phrase.
        found = self._after(prepositions, True)
        if found is None and self.proper:
            found = self.proper[0]
        if found is None:
            found = self._after(weak, True)
        if found is None:
            found = self._after((*prepositions, *weak), False)
        if found is None and self.quoted:
            found = self.quoted[0]
        if found is None and self.initial:
            found = self.initial[0]  # "Paris weather?"
        return found or self.whole()

    def for_name(self, name: str) -> str:
        key = name.lower()
        words = set(_WORD.findall(_CAMEL.sub(" ", name).lower()))
        if key in _TEXT_NAMES or words & _TEXT_NAMES:
            return self.whole()
        if key in ("destination", "to_city", "arrival") or "destination" in words:
            return self._place(_DESTINATION_PREPOSITIONS)
        if key in ("origin", "from", "from_city", "departure") or "origin" in words:
            return self._place(_ORIGIN_PREPOSITIONS)
        if key in _PLACE_NAMES or words & _PLACE_NAMES:
            return self._place(_PLACE_PREPOSITIONS, _WEAK_PLACE_PREPOSITIONS)
        if key in _PERSON_NAMES or words & _PERSON_NAMES:
            # "Mail the weather to Ann": a name after to/for/with, else the last name.
            found = self._after(_PERSON_PREPOSITIONS, True)
            if found is None and self.proper:
                found = self.proper[-1]
            return found or self.whole()
        for candidates in (self.quoted, self.proper):
            if candidates:
                return candidates[0]
        return self.whole()


def _opens_sentence(text: str, start: int) -> bool:
    """Whether the word at ``start`` opens a sentence (looking back 64 characters at most)."""
    window = text[max(0, start - 64) : start]
    before = window.rstrip(_OPENING_MARKS)
    if not before:
        return start - len(window) == 0
    return before[-1] in ".!?:;\n\r"


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


class _Budget:
    """What is left of ``MAX_ARGUMENT_VALUES`` and ``MAX_ARGUMENT_CHARS``."""

    def __init__(self) -> None:
        self.values = MAX_ARGUMENT_VALUES
        self.chars = MAX_ARGUMENT_CHARS

    def take(self) -> bool:
        self.values -= 1
        return self.values >= 0


def _string(schema: dict[str, Any], name: str, hints: _Hints, budget: _Budget) -> str:
    value = hints.for_name(name)
    low, high = schema.get("minLength"), schema.get("maxLength")
    if isinstance(high, int) and not isinstance(high, bool) and len(value) > high:
        value = value[: max(high, 0)]
    if isinstance(low, int) and not isinstance(low, bool) and len(value) < low:
        # Bounded: past the budget the string is shorter than asked (and the
        # §8.2 check says so); nobody gets megabytes from a schema.
        value = value + "x" * max(0, min(low, budget.chars) - len(value))
    value = value[: max(budget.chars, 0)]
    budget.chars -= len(value)
    return value


def _value(schema: Any, name: str, hints: _Hints, depth: int, budget: _Budget) -> Any:
    if not budget.take():
        return None
    if not isinstance(schema, dict) or depth > 16:
        return _string({}, name, hints, budget)
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
            return _value(options[0], name, hints, depth + 1, budget)
    kind = _schema_type(schema)
    if kind == "object":
        return _object(schema, hints, depth + 1, budget)
    if kind == "array":
        count = schema.get("minItems", 0)
        count = count if isinstance(count, int) and not isinstance(count, bool) else 0
        items = schema.get("items", {})
        out = []
        for _ in range(min(max(0, count), MAX_ARGUMENT_VALUES)):
            if budget.values <= 0:
                break
            out.append(_value(items, name, hints, depth + 1, budget))
        return out
    if kind == "integer":
        return _number(schema, integer=True)
    if kind == "number":
        return _number(schema, integer=False)
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    return _string(schema, name, hints, budget)


def _object(schema: dict[str, Any], hints: _Hints, depth: int, budget: _Budget) -> dict[str, Any]:
    properties = schema.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    required = schema.get("required")
    # Required fields always; without a "required" list, every declared one.
    names = (
        [n for n in required if isinstance(n, str)]
        if isinstance(required, list)
        else list(properties)
    )
    out = {}
    for name in names[:MAX_ARGUMENT_VALUES]:
        if budget.values <= 0:
            break
        out[name] = _value(properties.get(name, {}), name, hints, depth, budget)
    return out


def arguments_for(schema: dict[str, Any], message: str) -> dict[str, Any]:
    """Tool arguments valid against ``schema`` (a JSON Schema object), filled from ``message``.

    Required properties are always present (every declared property when the
    schema has no ``required`` list). ``const``, then the first ``enum`` value,
    then ``default`` win; numbers take their minimum (else 0), booleans
    ``false``, arrays ``minItems`` items; strings come from the message: a
    place for names like ``city``, a person for names like ``to``, the whole
    message for names like ``query``, else a quoted phrase or a proper name.
    Whatever the schema asks, the result holds at most ``MAX_ARGUMENT_VALUES``
    values and ``MAX_ARGUMENT_CHARS`` characters of strings.
    """
    return _object(schema, _Hints(message), 0, _Budget())


# --- The provider ------------------------------------------------------------------------


def _delay_ms(request: Request, default: float) -> float:
    option = request.extension(EXTENSION)
    value: Any = option.get("delay_ms", default) if isinstance(option, dict) else default
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        value = default
    return min(max(float(value), 0.0), MAX_DELAY_MS)


class DemoModel(Provider):
    """The ``demo`` provider: streams ``plan_reply(request)``, lazily.

    ``delay_ms`` paces every event (a request's ``"tokenwire:demo":
    {"delay_ms": N}`` overrides it, clamped to ``MAX_DELAY_MS``).
    ``check_request`` says, before any event, whether it will serve a request.
    """

    def __init__(self, *, delay_ms: float = 0.0) -> None:
        self.delay_ms = delay_ms

    def check_request(self, request: Request) -> None:
        """Raise ``InvalidRequest`` (a 400, ``.path`` naming the field) for a
        request the demo refuses: see the module function ``check_request``."""
        check_request(request)

    async def generate(self, request: Request) -> AsyncIterator[ev.Event]:
        """Yield the reply's events: text or a tool call, ``content.stop``, ``usage``.

        Raises ``InvalidRequest`` before the first event for a request
        ``check_request`` refuses. The text is produced token by token, never
        all at once, and the event loop gets a turn every 64 tokens.
        """
        check_request(request)
        params = request.parameters
        tokens: Iterator[str] | list[str]
        reply = _tool_reply(request)
        if reply is None and not (params is not None and params.stop_sequences):
            # The common case, lazily: no list of the reply's tokens is ever built.
            length, cut = _length(request)
            tokens = islice(_reply_tokens(request), length)
            stop_reason = "max_tokens" if cut else "end_turn"
            input_tokens, tool_call = _input_tokens(request), None
        else:
            # Stop sequences need the text ahead; a tool call has no text.
            reply = reply or plan_reply(request)
            tokens, stop_reason = reply.tokens, reply.stop_reason
            input_tokens, tool_call = reply.input_tokens, reply.tool_call
        delay = _delay_ms(request, self.delay_ms) / 1000.0
        sleep = asyncio.sleep
        v = ev.VERSION
        sent = 0
        for token in tokens:
            if delay:
                await _pause(delay)
            elif sent and sent % _YIELD_EVERY == 0:
                await sleep(0)  # a long reply must not starve other streams
            sent += 1
            yield ev.ContentDelta(v=v, seq=0, index=0, role="assistant", delta=ev.Delta(text=token))
        if tool_call is not None:
            if delay:
                await _pause(delay)
            yield tool_call
        output_tokens = reply.output_tokens if reply is not None else sent
        yield ev.ContentStop(v=v, seq=0, index=0, stop_reason=stop_reason)
        yield ev.Usage(v=v, seq=0, input_tokens=input_tokens, output_tokens=output_tokens)


def _pause(delay_s: float) -> asyncio.Future[None]:
    """``asyncio.sleep(delay_s)`` without its coroutine frame (~0.25 KiB a paced stream holds).

    Cancelling the awaiting task cancels the future; the timer then finds it done.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[None] = loop.create_future()
    loop.call_later(delay_s, _wake, future)
    return future


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
