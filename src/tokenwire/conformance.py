"""``tokenwire check``: probes that judge a live endpoint against the draft.

Each probe sends one or two requests, reads the answer with the library's own
SSE decoder, event parser and lifecycle validator (no second copy of the
rules), and returns a ``ProbeResult``: a verdict, the draft section, what was
seen, timing, and the raw exchange for ``--save``.

Verdicts: ``pass``; ``fail`` (a MUST is broken); ``warn`` (a SHOULD is
broken); ``not-exercised`` (the endpoint never took the path the probe needs,
e.g. the model did not call the tool).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final, Literal
from urllib.parse import urlsplit, urlunsplit

import httpx
import msgspec

from . import events as ev
from . import sse
from ._secrets import SECRET_HEADERS, SECRET_PARAMS
from ._suggest import connection_hint
from .errors import EventDecodeError, FramingError
from .lifecycle import RULES, Validator, Violation
from .request import MEDIA_TYPE, Request
from .request import parse as parse_request

__all__ = [
    "PROBES",
    "REDACTED",
    "SECRET_HEADERS",
    "Exchange",
    "ProbeResult",
    "Target",
    "redact_headers",
    "redact_url",
    "misdirected",
    "reachable",
    "run",
]

Verdict = Literal["pass", "fail", "warn", "not-exercised"]

PROFILE_ACCEPT: Final = 'text/event-stream; profile="llm-stream-1.0"'
WEATHER_TOOL: Final[dict[str, Any]] = {
    "name": "get_weather",
    "description": "Get the current weather for a city.",
    "parameters": {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "City name, e.g. Vienna"},
            "units": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        },
        "required": ["city"],
    },
}


REDACTED: Final = "[redacted]"


def redact_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """``headers`` with the value of every credential header replaced by ``[redacted]``."""
    # §8.1: credentials (one list, ``tokenwire._secrets``) never reach a report or a file.
    return {k: REDACTED if k.lower() in SECRET_HEADERS else v for k, v in headers.items()}


def redact_url(url: str) -> str:
    """``url`` with credential query parameters and ``user:password@`` redacted."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{REDACTED}@{netloc.rpartition('@')[2]}"
    query = "&".join(
        f"{name}={REDACTED}" if name.lower() in SECRET_PARAMS else f"{name}{sep}{value}"
        for name, sep, value in (item.partition("=") for item in parts.query.split("&") if item)
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


class Exchange(msgspec.Struct, kw_only=True):
    """One HTTP exchange, as sent and as received (for ``--save``).

    Credentials are redacted when it is built (``redact_headers``,
    ``redact_url``), so no report or saved file can carry them.
    """

    method: str
    url: str
    request_headers: dict[str, str]
    request_body: str
    status: int | None = None
    response_headers: dict[str, str] = {}
    response_body: str = ""
    error: str | None = None


class ProbeResult(msgspec.Struct, kw_only=True):
    id: str
    title: str
    section: str
    level: Literal["must", "should"]
    verdict: Verdict
    seen: str
    ttfe_ms: float | None = None
    events_per_s: float | None = None
    exchanges: list[Exchange] = []


class Target(msgspec.Struct, kw_only=True):
    """The endpoint under test."""

    url: str
    model: str = "demo"
    headers: dict[str, str] = {}
    timeout_s: float = 30.0


class _Stream(msgspec.Struct, kw_only=True):
    """A response read to its end: status, raw body, events, violations, timing."""

    exchange: Exchange
    status: int | None
    content_type: str
    events: list[ev.Event]
    violations: list[Violation]
    ttfe_ms: float | None
    duration_s: float


class _Ctx:
    def __init__(self, target: Target, client: httpx.Client) -> None:
        self.target = target
        self.client = client

    def body(self, **overrides: Any) -> dict[str, Any]:
        base: dict[str, Any] = {
            "version": "1.0",
            "stream": True,
            "model": self.target.model,
            "messages": [{"role": "user", "content": "Say hello in one short sentence."}],
        }
        base.update(overrides)
        return base

    def post(
        self,
        body: dict[str, Any] | bytes,
        *,
        content_type: str = MEDIA_TYPE,
        accept: str = "text/event-stream",
        read_events: int | None = None,
    ) -> _Stream:
        """POST ``body`` and read the answer (all of it, or ``read_events`` events)."""
        raw = body if isinstance(body, bytes) else msgspec.json.encode(body)
        headers = {**self.target.headers, "content-type": content_type, "accept": accept}
        exchange = Exchange(
            method="POST",
            url=redact_url(self.target.url),
            request_headers=redact_headers(headers),
            request_body=raw.decode("utf-8", "replace"),
        )
        req: Request | None = None
        if not isinstance(body, bytes):
            try:
                req = parse_request(raw)
            except Exception:
                req = None
        validator = Validator(req)
        decoder = sse.Decoder()
        events: list[ev.Event] = []
        received = bytearray()
        ttfe: float | None = None
        status: int | None = None
        content_type_seen = ""
        t0 = time.perf_counter()
        try:
            with self.client.stream("POST", self.target.url, content=raw, headers=headers) as r:
                status = r.status_code
                exchange.status = status
                exchange.response_headers = redact_headers(r.headers)
                content_type_seen = r.headers.get("content-type", "")
                streaming = status == 200 and content_type_seen.startswith("text/event-stream")
                for chunk in r.iter_raw():
                    received += chunk
                    if not streaming:
                        continue
                    for msg in decoder.feed(chunk):
                        if ttfe is None:
                            ttfe = (time.perf_counter() - t0) * 1000
                        _take(msg, validator, events)
                    if read_events is not None and len(events) >= read_events:
                        break
                    if len(received) > 64 << 20:
                        exchange.error = "response over 64 MiB; stopped reading"
                        break
                else:
                    if streaming:
                        for msg in decoder.close():
                            _take(msg, validator, events)
                        validator.close()
        except FramingError as exc:
            validator.violations.append(_framing(exc))
        except httpx.HTTPError as exc:
            exchange.error = _transport_error(exc)
        exchange.response_body = bytes(received).decode("utf-8", "replace")
        return _Stream(
            exchange=exchange,
            status=status,
            content_type=content_type_seen,
            events=events,
            violations=validator.violations,
            ttfe_ms=ttfe,
            duration_s=time.perf_counter() - t0,
        )


def _transport_error(exc: httpx.HTTPError) -> str:
    # httpx messages can quote the URL, and with it a ?key= credential.
    text = str(exc) or "no detail"
    try:
        url = str(exc.request.url)
    except RuntimeError:  # an error raised before a request existed
        url = ""
    if url:
        text = text.replace(url, redact_url(url))
    text = f"{type(exc).__name__}: {text}"
    return text + connection_hint(text, redact_url(url)) if url else text


def _framing(exc: FramingError) -> Violation:
    r = RULES["framing"]
    return Violation(
        rule="framing", seq=None, section=r.section, level=r.level, message=exc.message
    )


def _take(msg: sse.Message, validator: Validator, out: list[ev.Event]) -> None:
    try:
        event = ev.parse(msg.event, msg.data)
    except EventDecodeError as exc:
        validator.feed_invalid(exc)
        return
    out.append(event)
    validator.feed(event)


ProbeFn = Callable[[_Ctx], ProbeResult]
PROBES: dict[str, ProbeFn] = {}


def _probe(fn: ProbeFn) -> ProbeFn:
    PROBES[fn.__name__.removeprefix("probe_").replace("_", "-")] = fn
    return fn


def _result(
    id: str,
    title: str,
    section: str,
    level: Literal["must", "should"],
    ok: bool | None,
    seen: str,
    *streams: _Stream,
) -> ProbeResult:
    verdict: Verdict
    if ok is None:
        verdict = "not-exercised"
    elif ok:
        verdict = "pass"
    else:
        verdict = "fail" if level == "must" else "warn"
    timed = [s for s in streams if s.ttfe_ms is not None]
    ttfe = timed[0].ttfe_ms if timed else None
    rate = None
    if timed and timed[0].duration_s > 0:
        rate = len(timed[0].events) / timed[0].duration_s
    return ProbeResult(
        id=id,
        title=title,
        section=section,
        level=level,
        verdict=verdict,
        seen=seen,
        ttfe_ms=ttfe,
        events_per_s=rate,
        exchanges=[s.exchange for s in streams],
    )


def _describe(violations: list[Violation], rules: set[str] | None = None) -> list[Violation]:
    return [v for v in violations if rules is None or v.rule in rules]


def _summary(violations: list[Violation]) -> str:
    first = violations[0]
    more = f" (+{len(violations) - 1} more)" if len(violations) > 1 else ""
    return f"seq {first.seq}: {first.rule}: {first.message}{more}"


def _rules_result(
    s: _Stream,
    rules: set[str],
    clean: str,
    id: str,
    title: str,
    section: str,
    level: Literal["must", "should"],
) -> ProbeResult:
    """Passed when the answer is an LLM-Stream that breaks none of ``rules``
    (``clean`` says what was seen then)."""
    problem = _http_problem(s)
    bad = _describe(s.violations, rules)
    seen = problem or (_summary(bad) if bad else clean)
    return _result(id, title, section, level, problem is None and not bad, seen, s)


def _http_problem(s: _Stream) -> str | None:
    if s.exchange.error and s.status is None:
        return s.exchange.error
    if s.status != 200:
        hint = _refusal_hint(s.status, s.exchange.response_body)
        return f"HTTP {s.status}{hint}: {s.exchange.response_body[:200]!r}"
    if not s.content_type.startswith("text/event-stream"):
        return f"Content-Type is {s.content_type!r}, not text/event-stream"
    return None


# -- the probes ---------------------------------------------------------------

_ENVELOPE_RULES = {
    "framing",
    "invalid-json",
    "type-mismatch",
    "invalid-field",
    "bad-version",
    "seq-gap",
    "seq-regression",
    "start-seq-not-zero",
}
_LIFECYCLE_RULES = {
    "missing-start",
    "start-not-first",
    "duplicate-start",
    "bad-role",
    "block-already-stopped",
    "unknown-stop-reason",
    "block-not-stopped",
    "duplicate-error",
    "after-error",
    "after-end",
    "missing-end",
    "duplicate-tool-id",
    "bad-arguments-json",
}


@_probe
def probe_media_type(ctx: _Ctx) -> ProbeResult:
    s = ctx.post(ctx.body())
    problem = _http_problem(s)
    if problem is None:
        first = s.events[0] if s.events else None
        if first is None:
            problem = "no events"
        elif first.type != "stream.start" or first.seq != 0:
            problem = f"first event is {first.type} seq {first.seq}, not stream.start seq 0"
    seen = problem or f"200 text/event-stream, {len(s.events)} events from stream.start seq 0"
    return _result(
        "media-type", "text request gets an LLM-Stream", "4.9", "must", problem is None, seen, s
    )


@_probe
def probe_envelope(ctx: _Ctx) -> ProbeResult:
    s = ctx.post(ctx.body())
    clean = f"{len(s.events)} envelopes, seq continuous"
    return _rules_result(
        s, _ENVELOPE_RULES, clean, "envelope", "v, seq and type on every event", "5.2", "must"
    )


@_probe
def probe_lifecycle(ctx: _Ctx) -> ProbeResult:
    s = ctx.post(ctx.body())
    clean = "start first, end last, every block stopped"
    return _rules_result(
        s, _LIFECYCLE_RULES, clean, "lifecycle", "stream.start … stream.end", "5.4", "must"
    )


@_probe
def probe_usage(ctx: _Ctx) -> ProbeResult:
    s = ctx.post(ctx.body())
    problem = _http_problem(s)
    n = sum(1 for e in s.events if e.type == "usage")
    seen = problem or f"{n} usage event(s)"
    ok = problem is None and n > 0
    return _result("usage", "at least one usage event", "5.3.5", "should", ok, seen, s)


@_probe
def probe_request_id_echo(ctx: _Ctx) -> ProbeResult:
    rid = f"check-{uuid.uuid4()}"
    s = ctx.post(ctx.body(metadata={"request_id": rid}))
    clean = f"request_id {rid} echoed"
    title = "request_id echoed in start and end"
    return _rules_result(
        s, {"request-id-not-echoed"}, clean, "request-id-echo", title, "4.6", "should"
    )


@_probe
def probe_unsupported_media_type(ctx: _Ctx) -> ProbeResult:
    s = ctx.post(ctx.body(), content_type="text/plain")
    ok = s.status == 415
    seen = f"HTTP {s.status} for Content-Type text/plain" if s.status else str(s.exchange.error)
    return _result(
        "unsupported-media-type", "another Content-Type gets 415", "7.2", "must", ok, seen, s
    )


@_probe
def probe_accept_profile(ctx: _Ctx) -> ProbeResult:
    s = ctx.post(ctx.body(), accept=PROFILE_ACCEPT)
    problem = _http_problem(s) or _first_problem(s)
    seen = problem or "profile Accept answered with a conformant stream"
    return _result(
        "accept-profile", "Accept profile honoured", "7.3", "must", problem is None, seen, s
    )


def _first_problem(s: _Stream) -> str | None:
    must = [v for v in s.violations if v.level == "must"]
    return _summary(must) if must else None


def _conformant_probe(
    id: str, title: str, section: str, ctx: _Ctx, body: dict[str, Any]
) -> ProbeResult:
    s = ctx.post(body)
    problem = _http_problem(s) or _first_problem(s)
    seen = problem or f"accepted: {len(s.events)} events, conformant"
    return _result(id, title, section, "must", problem is None, seen, s)


@_probe
def probe_multi_turn(ctx: _Ctx) -> ProbeResult:
    messages = [
        {"role": "system", "content": "You are a terse assistant."},
        {"role": "user", "content": "Name a colour."},
        {"role": "assistant", "content": "Blue."},
        {"role": "user", "content": "Name another one."},
    ]
    body = ctx.body(messages=messages)
    return _conformant_probe("multi-turn", "multi-turn history accepted", "4.3", ctx, body)


@_probe
def probe_content_parts(ctx: _Ctx) -> ProbeResult:
    parts = [{"type": "text", "text": "Say hello"}, {"type": "text", "text": " briefly."}]
    body = ctx.body(messages=[{"role": "user", "content": parts}])
    return _conformant_probe("content-parts", "content-part arrays accepted", "4.3.1", ctx, body)


@_probe
def probe_unknown_fields(ctx: _Ctx) -> ProbeResult:
    body = ctx.body(
        parameters={"max_tokens": 32, "x_unknown_knob": 3},
        extensions={"vendor:nobody": {"anything": True}},
        x_future_field={"a": 1},
    )
    return _conformant_probe(
        "unknown-fields", "unknown fields, parameters, extensions ignored", "4.7", ctx, body
    )


@_probe
def probe_tool_call(ctx: _Ctx) -> ProbeResult:
    body = ctx.body(
        messages=[{"role": "user", "content": "What is the weather in Vienna?"}],
        tools=[WEATHER_TOOL],
    )
    s = ctx.post(body)
    problem = _http_problem(s)
    if problem is not None:
        return _result(
            "tool-call", "tool.call is declared and valid", "8.2", "must", False, problem, s
        )
    calls = [e for e in s.events if isinstance(e, ev.ToolCall)]
    if not calls:
        return _result(
            "tool-call", "tool.call is declared and valid", "8.2", "must", None,
            "the model answered without calling the tool", s,
        )  # fmt: skip
    rules = {"undeclared-tool", "invalid-arguments", "bad-arguments-json", "tool-use-not-signalled"}
    bad = _describe(s.violations, rules) + [v for v in s.violations if v.level == "must"]
    stops = {e.index: e.stop_reason for e in s.events if isinstance(e, ev.ContentStop)}
    unsignalled = [c for c in calls if stops.get(c.index) != "tool_use"]
    if bad:
        seen = _summary(bad)
    elif unsignalled:
        seen = f"tool.call {unsignalled[0].name} not followed by content.stop tool_use"
    else:
        seen = f"{calls[0].name}({calls[0].arguments}) then content.stop tool_use"
    ok = not bad and not unsignalled
    return _result("tool-call", "tool.call is declared and valid", "8.2", "must", ok, seen, s)


@_probe
def probe_tool_result(ctx: _Ctx) -> ProbeResult:
    user = {"role": "user", "content": "What is the weather in Vienna?"}
    first = ctx.post(ctx.body(messages=[user], tools=[WEATHER_TOOL]))
    calls = [e for e in first.events if isinstance(e, ev.ToolCall)]
    problem = _http_problem(first)
    if problem is not None:  # no stream at all is a failure, not "not exercised"
        return _result(
            "tool-result", "tool result completes with text", "4.8", "must", False, problem, first
        )
    if not calls:
        seen = "the model did not call the tool"
        return _result("tool-result", "tool result completes with text", "4.8", "must", None, seen)
    call = calls[0]
    messages = [
        user,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": call.id, "name": call.name, "arguments": call.arguments}],
        },
        {"role": "tool", "tool_call_id": call.id, "content": "Vienna: 24C, sunny"},
    ]
    s = ctx.post(ctx.body(messages=messages, tools=[WEATHER_TOOL]))
    problem = _http_problem(s) or _first_problem(s)
    text = "".join(e.delta.text for e in s.events if isinstance(e, ev.ContentDelta))
    if problem is None and not text:
        problem = "the follow-up stream has no text"
    seen = problem or f"answered: {text[:60]!r}"
    return _result(
        "tool-result", "tool result completes with text", "4.8", "must", problem is None, seen,
        first, s,
    )  # fmt: skip


@_probe
def probe_hang_up(ctx: _Ctx) -> ProbeResult:
    cut = ctx.post(ctx.body(), read_events=1)
    s = ctx.post(ctx.body())
    # No stream to hang up on is a failure too, not a survived hang-up.
    problem = _http_problem(cut) or _http_problem(s) or _first_problem(s)
    seen = problem or "after a hang-up mid-stream, the next request is served"
    return _result(
        "hang-up", "survives a client hang-up", "3", "must", problem is None, seen, cut, s
    )


#: The answers that judge an envelope invalid: 400 (what tokenwire sends, naming the
#: field), 413 (over a size limit) and 422 (what some frameworks send for a bad body).
_ENVELOPE_REFUSALS: Final = frozenset({400, 413, 422})


def _refusal_hint(status: int | None, body: str = "") -> str:
    if status == 404 and _MODEL_NOT_FOUND in body:
        return " (the endpoint does not serve this model: pass --model with one it serves)"
    if status in (404, 405):
        return " (the URL does not serve POST: pass the gateway's base URL or its /v1/stream URL)"
    if status == 415:
        return " (the standard's media type is refused)"
    return ""


@_probe
def probe_invalid_envelope(ctx: _Ctx) -> ProbeResult:
    cases: list[tuple[str, bytes]] = [
        ("invalid JSON", b'{"version":"1.0","stream":tru'),
        ("no messages", msgspec.json.encode(ctx.body(messages=None))),
        ("tool message without tool_call_id", msgspec.json.encode(
            ctx.body(messages=[{"role": "tool", "content": "x"}]))),
    ]  # fmt: skip
    streams = []
    bad = []
    for label, raw in cases:
        s = ctx.post(raw)
        streams.append(s)
        # A 404, 405 or 415 says the URL or the media type is not served at
        # all, not that this envelope is invalid: it must not pass the probe.
        if s.status not in _ENVELOPE_REFUSALS:
            bad.append(f"{label}: HTTP {s.status}{_refusal_hint(s.status)}")
    seen = "; ".join(bad) if bad else "each invalid envelope got a 4xx"
    return _result(
        "invalid-envelope", "invalid envelopes get a 4xx", "4.2", "must", not bad, seen, *streams
    )


def reachable(target: Target, *, client: httpx.Client | None = None) -> str | None:
    """``None`` when something answers HTTP at ``target.url``, else why not (one line).

    Any status counts as an answer (a ``GET`` on a stream URL gets 405); only
    a connection that cannot be made, or no answer in ``timeout_s``, does not.
    """
    own = client is None
    http = client or httpx.Client(timeout=httpx.Timeout(target.timeout_s))
    try:
        http.get(target.url).close()  # no credentials needed to learn that
    except httpx.TransportError as exc:
        return _transport_error(exc)
    finally:
        if own:
            http.close()
    return None


#: The ``code`` of a 404 that names the model, not the URL, as unknown.
_MODEL_NOT_FOUND: Final = '"model_not_found"'


def misdirected(target: Target, *, client: httpx.Client | None = None) -> str | None:
    """Why every probe would fail the same way, when one request shows it, else ``None``:
    a 404 ``model_not_found`` (the URL is right, the model is not served) or a
    404 or 405 for anything else (the URL serves no LLM-Stream). One sentence
    that ends with what to pass instead."""
    own = client is None
    http = client or httpx.Client(timeout=httpx.Timeout(target.timeout_s))
    try:
        ctx = _Ctx(target, http)
        s = ctx.post(ctx.body(), read_events=1)
    finally:
        if own:
            http.close()
    body = s.exchange.response_body
    url = redact_url(target.url)
    if s.status == 404 and _MODEL_NOT_FOUND in body:
        try:
            said = str(msgspec.json.decode(body)["error"]["message"])
        except (msgspec.DecodeError, KeyError, TypeError):
            said = body[:200]
        return (
            f"{url} does not serve model {target.model!r} ({said}); "
            "pass --model with a model it serves"
        )
    if s.status in (404, 405):
        parts = urlsplit(url)
        origin = f"{parts.scheme}://{parts.netloc}"
        return (
            f"{url} answers HTTP {s.status} to a POST: it is no LLM-Stream endpoint; pass "
            f"the gateway's base URL or its stream URL (for a gateway at {origin}: "
            f"{origin} or {origin}/v1/stream)"
        )
    return None


def run(
    target: Target,
    *,
    only: list[str] | None = None,
    client: httpx.Client | None = None,
    progress: Callable[[str], None] | None = None,
) -> Iterator[ProbeResult]:
    """Run the probes (all, or those in ``only``) against ``target``, in order."""
    names = list(PROBES) if not only else only
    unknown = [n for n in names if n not in PROBES]
    if unknown:
        raise ValueError(f"unknown probe(s): {', '.join(unknown)} (known: {', '.join(PROBES)})")
    own = client is None
    http = client or httpx.Client(timeout=httpx.Timeout(target.timeout_s))
    try:
        ctx = _Ctx(target, http)
        for name in names:
            if progress is not None:
                progress(name)
            yield PROBES[name](ctx)
    finally:
        if own:
            http.close()
