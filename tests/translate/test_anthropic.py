"""The Anthropic Messages translator, both directions, and its fake upstream.

What these tests show:

* every recording in ``../shared/vendor-fixtures/anthropic/`` converts to a
  stream that passes ``tokenwire.validate``, with its text, tool calls, stop
  reason and usage (or its error) asserted;
* the vectors in ``tests/vectors/translate/anthropic/`` (small synthetic
  streams, one hard case each) give exactly the standard events they list;
* any byte split gives the same events; a body cut anywhere before its
  ``message_stop`` ends with ``error`` + ``stream.end``; arbitrary bytes never
  raise;
* the real ``anthropic`` SDK, pointed at ``FakeUpstream("anthropic")``, reads
  the scripted text, tool calls and usage, and so does our ``Translator``;
* ``build_request``, ``request_from_vendor`` and ``EventEncoder`` (whose output
  the SDK parses, served from a real socket on 127.0.0.1).
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import anthropic
import httpx
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tokenwire
from tokenwire import events as ev
from tokenwire import request as rq
from tokenwire.errors import InvalidRequest
from tokenwire.testing import anthropic as fake_anthropic
from tokenwire.testing.upstream import (
    FakeUpstream,
    Fault,
    RecordedRequest,
    Script,
    ScriptedToolCall,
)
from tokenwire.translate import _extensions as x
from tokenwire.translate import anthropic as tr
from tokenwire.translate import translator, vendor_request
from tokenwire.writer import Writer

TESTS = Path(__file__).resolve().parents[1]
# tests/ -> the repository -> its parent, where ../shared lives.
FIXTURES = TESTS.parent.parent / "shared" / "vendor-fixtures" / "anthropic"
VECTORS = TESTS / "vectors" / "translate" / "anthropic"


# --- helpers --------------------------------------------------------------------------


def need_fixtures() -> Path:
    """The recordings folder; skip without it (fail when CI=true)."""
    if not FIXTURES.is_dir():
        reason = f"vendor recordings not found at {FIXTURES}"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return FIXTURES


def fixture_body(path: Path) -> bytes:
    """A recording as the bytes Anthropic sent.

    ``.sse`` files are exact bodies; ``.jsonl`` files hold one data payload per
    line with the ``event:`` lines stripped (SOURCES.md), so the framing is
    rebuilt as ``event: <type>`` + ``data: <line>``.
    """
    if path.suffix == ".sse":
        return path.read_bytes()
    out = bytearray()
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            kind = json.loads(line)["type"]
            out += f"event: {kind}\ndata: {line}\n\n".encode()
    return bytes(out)


def vector_body(vector: dict[str, Any]) -> bytes:
    """A vector's body: objects are framed as Anthropic frames them, strings are raw."""
    out = bytearray()
    for item in vector["events"]:
        if isinstance(item, str):
            out += item.encode("utf-8")
        else:
            data = json.dumps(item, separators=(",", ":"), ensure_ascii=False)
            out += f"event: {item['type']}\ndata: {data}\n\n".encode()
    return bytes(out)


def load_vectors() -> dict[str, dict[str, Any]]:
    return {
        p.stem: json.loads(p.read_text(encoding="utf-8")) for p in sorted(VECTORS.glob("*.json"))
    }


VECTOR_CASES = load_vectors()


def translate(
    chunks: bytes | list[bytes], *, model: str = "fallback-model", **options: Any
) -> list[ev.Event]:
    """Run a fresh Translator over ``chunks``; feed/close must never raise."""
    t = translator("anthropic", model=model, request_id="req-1", created=0, **options)
    out: list[ev.Event] = []
    for chunk in [chunks] if isinstance(chunks, bytes) else chunks:
        out += t.feed(chunk)
    out += t.close()
    assert t.done
    return out


def summarize(events: list[ev.Event]) -> list[list[Any]]:
    """The events in the compact form the vectors use."""
    out: list[list[Any]] = []
    for e in events:
        if isinstance(e, ev.StreamStart):
            out.append(["start", e.model])
        elif isinstance(e, ev.ContentDelta):
            out.append(["reasoning" if e.reasoning else "text", e.index, e.delta.text])
        elif isinstance(e, ev.ToolCall):
            out.append(["tool", e.index, e.id, e.name, json.loads(e.arguments)])
        elif isinstance(e, ev.ContentStop):
            out.append(["stop", e.index, e.stop_reason])
        elif isinstance(e, ev.Usage):
            usage: list[Any] = ["usage", e.input_tokens, e.output_tokens]
            # docs/extensions.md: counts the translator estimated are marked.
            out.append([*usage, {x.ESTIMATED: True}] if e.estimated else usage)
        elif isinstance(e, ev.ErrorEvent):
            out.append(["error", e.code])
        elif isinstance(e, ev.StreamEnd):
            out.append(["end"])
        elif (body := x.fields(e)) is not None:
            # docs/extensions.md: tokenwire.block / tokenwire.usage / tokenwire.stop
            out.append([e.type, {k: v for k, v in body.items() if k not in ("type", "v", "seq")}])
        else:  # pragma: no cover - the translator emits no other unregistered event
            out.append(["unknown", e.type])
    return out


def assert_ends_in_error(events: list[ev.Event]) -> None:
    """``error``, then at most the usage reported so far, then ``stream.end``."""
    kinds = [type(e) for e in events]
    assert ev.ErrorEvent in kinds
    assert kinds[kinds.index(ev.ErrorEvent) + 1 :] in ([ev.StreamEnd], [ev.Usage, ev.StreamEnd])


def wire(events: list[ev.Event]) -> bytes:
    return b"".join(map(ev.dump, events))


def assert_conformant(events: list[ev.Event]) -> None:
    report = tokenwire.validate(wire(events))
    assert report.ok, [str(v) for v in report.violations]
    # Only the SHOULD about usage may be missed, and only when Anthropic reported none.
    assert {v.rule for v in report.warnings} <= {"missing-usage"}


class Outcome(msgspec.Struct):
    """What a standard stream says, in the terms the tests assert."""

    text: str
    reasoning: str
    tools: list[tuple[str, str, Any]]
    stops: list[str]
    usage: tuple[int, int] | None
    error: str | None
    #: The usage is the translator's estimate (``tokenwire:estimated``), not Anthropic's.
    estimated: bool = False


def outcome(events: list[ev.Event]) -> Outcome:
    deltas = [e for e in events if isinstance(e, ev.ContentDelta)]
    usages = [e for e in events if isinstance(e, ev.Usage)]
    usage = [(e.input_tokens, e.output_tokens) for e in usages]
    errors = [e.code for e in events if isinstance(e, ev.ErrorEvent)]
    return Outcome(
        text="".join(e.delta.text for e in deltas if not e.reasoning),
        reasoning="".join(e.delta.text for e in deltas if e.reasoning),
        tools=[
            (e.id, e.name, json.loads(e.arguments)) for e in events if isinstance(e, ev.ToolCall)
        ],
        stops=[e.stop_reason for e in events if isinstance(e, ev.ContentStop)],
        usage=usage[-1] if usage else None,
        error=errors[0] if errors else None,
        estimated=bool(usages) and usages[-1].estimated,
    )


# --- the vectors -------------------------------------------------------------------------


def test_vectors_are_there() -> None:
    assert len(VECTOR_CASES) >= 40


@pytest.mark.parametrize("name", sorted(VECTOR_CASES))
def test_vector(name: str) -> None:
    vector = VECTOR_CASES[name]
    t = translator(
        "anthropic",
        model=vector["model"],
        request_id="req-1",
        created=0,
        **vector.get("options", {}),
    )
    events = t.feed(vector_body(vector)) + t.close()
    assert t.done
    assert summarize(events) == vector["expect"], vector["description"]
    # docs/extensions.md: what the translator skipped is counted, never silently dropped.
    assert dict(t.unknown_types) == vector.get("unknown_types", {}), vector["description"]
    assert_conformant(events)


# --- the recordings ----------------------------------------------------------------------

WEATHER = ("toolu_01NRLabsLyVHZPKxbKvkfSMn", "get_weather", {"location": "Paris"})
JSON_TOOL = (
    "toolu_01KFbKqPYSuAKujiL6mTfzYA",
    "json",
    {"elements": [{"location": "San Francisco", "temperature": 58, "condition": "sunny"}]},
)

#: recording -> (reasoning option, expected outcome). Stops list every content.stop.
RECORDINGS: dict[str, tuple[bool, Outcome]] = {
    "raw-sse-basic-text.sse": (
        False,
        Outcome(
            text="Hello there!",
            reasoning="",
            tools=[],
            stops=["end_turn"],
            usage=(11, 6),
            error=None,
        ),
    ),
    "raw-sse-error-event-overloaded.sse": (
        False,
        Outcome(text="", reasoning="", tools=[], stops=[], usage=None, error="overloaded"),
    ),
    "raw-sse-refusal-stop-details.sse": (
        False,
        Outcome(
            text="", reasoning="", tools=[], stops=["content_filter"], usage=(20, 0), error=None
        ),
    ),
    "raw-sse-text-then-tool-use.sse": (
        False,
        Outcome(
            text="I'll check the current weather in Paris for you.",
            reasoning="",
            tools=[WEATHER],
            stops=["tool_use", "tool_use"],
            usage=(377, 65),
            error=None,
        ),
    ),
    # The make_file input was cut by max_tokens: the call is dropped, never sent invalid.
    "raw-sse-tool-use-max-tokens-truncated.sse": (
        False,
        Outcome(
            text="I'll create a comprehensive tax guide for someone with multiple W2s and "
            "save it in a file called taxes.txt. Let me do that for you now.",
            reasoning="",
            tools=[],
            stops=["max_tokens"],
            usage=(450, 124),
            error=None,
        ),
    ),
    "vercel-anthropic-clear-thinking.1.jsonl": (
        False,
        Outcome(
            text="925 ÷ 5 = 185",
            reasoning="",
            tools=[],
            stops=["end_turn"],
            usage=(69, 53),
            error=None,
        ),
    ),
    "vercel-anthropic-json-tool.2.jsonl": (
        False,
        Outcome(
            text="I'll invoke the JSON response tool.",
            reasoning="",
            tools=[JSON_TOOL],
            stops=["tool_use", "tool_use"],
            usage=(849, 47),
            error=None,
        ),
    ),
    # input_tokens: 43 in message_start, 61 in message_delta; the later value wins.
    "vercel-anthropic-message-delta-input-tokens.jsonl": (
        False,
        Outcome(text="pong", reasoning="", tools=[], stops=["end_turn"], usage=(61, 2), error=None),
    ),
    "vercel-anthropic-refusal.jsonl": (
        False,
        Outcome(
            text="", reasoning="", tools=[], stops=["content_filter"], usage=(18, 5), error=None
        ),
    ),
    "vercel-anthropic-text.jsonl": (
        False,
        Outcome(
            text="Hello! I'm doing well, thank you for asking. How are you doing today? "
            "Is there anything I can help you with?",
            reasoning="",
            tools=[],
            stops=["end_turn"],
            usage=(12, 30),
            error=None,
        ),
    ),
    "vercel-anthropic-tool-no-args.jsonl": (
        False,
        Outcome(
            text="I'll update the issue list for you.",
            reasoning="",
            tools=[("toolu_01QE1WLsSVp5hy5Q3GmGTmjP", "updateIssueList", {})],
            stops=["tool_use", "tool_use"],
            usage=(565, 48),
            error=None,
        ),
    ),
    "vercel-duplicate-message-start.jsonl": (
        False,
        Outcome(
            text="Hello, World!",
            reasoning="",
            tools=[],
            stops=["end_turn"],
            usage=(17, 227),
            error=None,
        ),
    ),
    # Without reasoning nothing of the first attempt was sent: the retry wins.
    "vercel-spliced-message-start.jsonl": (
        False,
        Outcome(
            text="",
            reasoning="",
            tools=[("toolu_second", "test-tool", {"value": "Sparkle Day"})],
            stops=["tool_use"],
            usage=(17, 65),
            error=None,
        ),
    ),
}

#: The same recordings read with reasoning=True, where it changes the outcome.
REASONING_RECORDINGS: dict[str, Outcome] = {
    "vercel-anthropic-clear-thinking.1.jsonl": Outcome(
        text="925 ÷ 5 = 185",
        reasoning="The previous result was 925. Now I need to divide that by 5.\n\n925 ÷ 5 = 185",
        tools=[],
        stops=["end_turn", "end_turn"],
        usage=(69, 53),
        error=None,
    ),
    # The first attempt's thinking was sent and cannot be taken back.
    "vercel-spliced-message-start.jsonl": Outcome(
        text="",
        reasoning="I will call the tool.",
        tools=[],
        stops=[],
        # Cut before message_delta: the 21 characters of reasoning sent, estimated.
        usage=(17, 6),
        error="internal_error",
        estimated=True,
    ),
}


def recording_paths() -> list[Path]:
    return sorted(p for p in FIXTURES.glob("*") if p.suffix in (".sse", ".jsonl"))


@pytest.mark.fixtures
def test_every_recording_has_an_expectation() -> None:
    folder = need_fixtures()
    names = {p.name for p in folder.iterdir() if p.suffix in (".sse", ".jsonl")}
    assert names == set(RECORDINGS) | {"vercel-anthropic-web-search-tool.1.jsonl"}


@pytest.mark.fixtures
@pytest.mark.parametrize("name", sorted(RECORDINGS))
def test_recording(name: str) -> None:
    body = fixture_body(need_fixtures() / name)
    reasoning, expected = RECORDINGS[name]
    events = translate(body, reasoning=reasoning)
    assert outcome(events) == expected
    assert_conformant(events)
    if expected.usage is not None:
        assert isinstance(events[-2], ev.Usage)  # the last totals, once, at the end
    if expected.error is not None:
        assert_ends_in_error(events)


@pytest.mark.fixtures
@pytest.mark.parametrize("name", sorted(REASONING_RECORDINGS))
def test_recording_with_reasoning(name: str) -> None:
    events = translate(fixture_body(need_fixtures() / name), reasoning=True)
    assert outcome(events) == REASONING_RECORDINGS[name]
    assert_conformant(events)
    # Reasoning is on its own block, never inside the answer's block.
    answer = {e.index for e in events if isinstance(e, ev.ContentDelta) and not e.reasoning}
    thought = {e.index for e in events if isinstance(e, ev.ContentDelta) and e.reasoning}
    assert not answer & thought


@pytest.mark.fixtures
def test_recording_model_and_request_id() -> None:
    """stream.start names the caller's model; the upstream's is kept as upstream_model."""
    t = translator("anthropic", model="my-alias", request_id="req-1")
    events = t.feed(fixture_body(need_fixtures() / "vercel-anthropic-text.jsonl")) + t.close()
    assert isinstance(events[0], ev.StreamStart) and isinstance(events[-1], ev.StreamEnd)
    assert events[0].model == "my-alias"
    assert t.upstream_model == "claude-sonnet-4-5-20250929"
    assert events[0].request_id == events[-1].request_id == "req-1"


@pytest.mark.fixtures
def test_recording_web_search() -> None:
    """Server-tool blocks are dropped; the 11 text blocks are one standard text block."""
    path = need_fixtures() / "vercel-anthropic-web-search-tool.1.jsonl"
    # An independent oracle: every text_delta of the recording, in order.
    expected_text = "".join(
        obj["delta"]["text"]
        for obj in map(json.loads, path.read_text(encoding="utf-8").splitlines())
        if obj["type"] == "content_block_delta" and obj["delta"]["type"] == "text_delta"
    )
    events = translate(fixture_body(path))
    result = outcome(events)
    assert result.text == expected_text
    assert result.text.startswith("Based on my search results, here are the key tech news")
    assert result.text.endswith(
        "marking over 20 years since their first international retail expansion."
    )
    assert result.tools == []  # web_search ran on Anthropic's side
    # extensions 1.1: every block ends with content.stop (the two server tool blocks too).
    assert result.stops == ["end_turn", "end_turn", "end_turn"]
    assert result.usage == (15665, 795)
    assert result.error is None
    # Every text block is one standard block; the server tool blocks before it
    # are tokenwire:server_tool blocks of their own (docs/extensions.md).
    assert len({e.index for e in events if isinstance(e, ev.ContentDelta)}) == 1
    server = [
        b[x.SERVER_TOOL] for e in events if (b := x.fields(e, x.BLOCK)) and x.SERVER_TOOL in b
    ]
    assert [s["type"] for s in server] == ["server_tool_use", "web_search_tool_result"]
    assert server[0]["name"] == "web_search" and server[1]["tool_use_id"] == server[0]["id"]
    assert_conformant(events)


# --- splits, truncation, garbage --------------------------------------------------------


def all_bodies() -> dict[str, tuple[bytes, dict[str, Any]]]:
    bodies = {
        f"vector:{name}": (vector_body(v), {"model": v["model"], **v.get("options", {})})
        for name, v in VECTOR_CASES.items()
    }
    if FIXTURES.is_dir():
        for path in recording_paths():
            bodies[f"recording:{path.name}"] = (fixture_body(path), {})
            bodies[f"recording+reasoning:{path.name}"] = (fixture_body(path), {"reasoning": True})
    return bodies


BODIES = all_bodies()
BODY_NAMES = sorted(BODIES)
EXPECTED = {name: summarize(translate(body, **opts)) for name, (body, opts) in BODIES.items()}


def complete_at(body: bytes) -> int:
    """The offset after which the body holds a whole message_stop payload (else len+1)."""
    at = body.rfind(b'"message_stop"')
    if at < 0:
        return len(body) + 1
    return body.index(b"}", at) + 1


@pytest.mark.parametrize("name", BODY_NAMES)
def test_byte_by_byte_split(name: str) -> None:
    body, opts = BODIES[name]
    chunks = [body[i : i + 1] for i in range(len(body))]
    assert summarize(translate(chunks, **opts)) == EXPECTED[name]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(BODY_NAMES), data=st.data())
def test_any_split_gives_the_same_events(name: str, data: st.DataObject) -> None:
    body, opts = BODIES[name]
    cuts = sorted(data.draw(st.lists(st.integers(0, len(body)), max_size=12)))
    chunks = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]
    assert summarize(translate(chunks, **opts)) == EXPECTED[name]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(BODY_NAMES), data=st.data())
def test_truncation_anywhere_is_an_error(name: str, data: st.DataObject) -> None:
    body, opts = BODIES[name]
    end = min(complete_at(body), len(body) + 1)
    cut = data.draw(st.integers(0, end - 1))
    events = translate(body[:cut], **opts)
    assert_ends_in_error(events)
    assert_conformant(events)


#: Bodies small enough to cut at every offset; the hypothesis test samples the others.
SMALL_BODY_NAMES = [name for name in BODY_NAMES if len(BODIES[name][0]) <= 4000]


@pytest.mark.parametrize("name", SMALL_BODY_NAMES)
def test_every_truncation_point(name: str) -> None:
    """Exhaustive: each cut before message_stop is complete ends in an error."""
    body, opts = BODIES[name]
    for cut in range(min(complete_at(body), len(body) + 1)):
        assert_ends_in_error(translate(body[:cut], **opts))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=200), max_size=8))
def test_arbitrary_bytes_never_raise(chunks: list[bytes]) -> None:
    events = translate(chunks)
    assert isinstance(events[0], ev.StreamStart) and isinstance(events[-1], ev.StreamEnd)
    assert tokenwire.validate(wire(events)).ok


_PAYLOAD = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.fixed_dictionaries(
            {
                "type": st.sampled_from(
                    [
                        "message_start",
                        "content_block_start",
                        "content_block_delta",
                        "content_block_stop",
                        "message_delta",
                        "message_stop",
                        "ping",
                        "error",
                    ]
                )
            },
            optional={"index": st.integers(-1, 3), "delta": _PAYLOAD, "message": _PAYLOAD},
        ),
        max_size=10,
    )
)
def test_arbitrary_anthropic_shaped_events_never_raise(items: list[dict[str, Any]]) -> None:
    events = translate(vector_body({"events": items}))
    assert isinstance(events[-1], ev.StreamEnd)
    assert tokenwire.validate(wire(events)).ok


def test_translator_is_found_by_name() -> None:
    t = translator("anthropic", model="m", request_id="r")
    assert isinstance(t, tr.Translator)
    assert t.name == "anthropic"


def test_module_does_no_io() -> None:
    """Sans-I/O: importing the translator loads no network or async library."""
    code = (
        "import sys, tokenwire.translate.anthropic as m; "
        "bad = [n for n in ('asyncio', 'httpx', 'starlette', 'anthropic') if n in sys.modules]; "
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


# --- the fake upstream and the real SDK --------------------------------------------------

USER = [{"role": "user", "content": "hi"}]

SCRIPTS = {
    "text": Script(text="Hello from the fake upstream, in several words.", input_tokens=21),
    "parallel-tools": Script(
        text="Let me check both.",
        tool_calls=[
            ScriptedToolCall("get_weather", {"city": "Vienna", "units": "celsius"}, id="toolu_w"),
            ScriptedToolCall("get_time", {"tz": "Europe/Vienna", "nested": {"a": [1, 2, "é"]}}),
        ],
        input_tokens=55,
        output_tokens=40,
    ),
    "tool-only-no-args": Script(text="", tool_calls=[ScriptedToolCall("refresh", {})]),
    "max-tokens": Script(text="This answer is cut", stop_reason="max_tokens", output_tokens=5),
    "refusal": Script(text="", stop_reason="content_filter"),
}


def script_outcome(script: Script) -> Outcome:
    tools = [
        (call.id or f"toolu_fake{i:04d}", call.name, call.arguments)
        for i, call in enumerate(script.tool_calls)
    ]
    blocks = (1 if script.text else 0) + len(tools)
    reason = script.final_stop_reason
    stops = ([reason] if script.text else []) + ["tool_use"] * len(tools)
    return Outcome(
        text=script.text,
        reasoning="",
        tools=tools,
        stops=stops if blocks else [reason],
        usage=(script.input_tokens, script.usage_output_tokens),
        error=None,
    )


def raw_post(url: str, body: dict[str, Any] | None = None) -> bytes:
    payload = body or {"model": "claude-fake", "max_tokens": 64, "messages": USER, "stream": True}
    with httpx.Client() as client:
        r = client.post(
            url + "/v1/messages", json=payload, headers={"anthropic-version": "2023-06-01"}
        )
        return r.content


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_sdk_and_translator_read_the_fake_alike(name: str) -> None:
    script = SCRIPTS[name]
    with FakeUpstream("anthropic", script) as fake:
        client = anthropic.Anthropic(base_url=fake.url, api_key="x", max_retries=0)
        with client.messages.stream(model="claude-fake", max_tokens=64, messages=USER) as stream:
            message = stream.get_final_message()
        body = raw_post(fake.url)
        assert fake.errors == []
    # The SDK's reading.
    text = "".join(b.text for b in message.content if b.type == "text")
    calls = [(b.id, b.name, b.input) for b in message.content if b.type == "tool_use"]
    expected = script_outcome(script)
    assert text == script.text
    assert calls == expected.tools
    assert message.usage.input_tokens == script.input_tokens
    assert message.usage.output_tokens == script.usage_output_tokens
    assert message.stop_reason == tr.VENDOR_STOP_REASONS[script.final_stop_reason]
    assert message.model == "claude-fake"
    # Ours, over the same bytes.
    events = translate(body)
    assert outcome(events) == expected
    assert_conformant(events)


def test_sdk_create_stream_sees_every_event_type() -> None:
    with FakeUpstream("anthropic", SCRIPTS["parallel-tools"]) as fake:
        client = anthropic.Anthropic(base_url=fake.url, api_key="x", max_retries=0)
        stream = client.messages.create(
            model="claude-fake", max_tokens=64, messages=USER, stream=True
        )
        kinds = [event.type for event in stream]
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    assert kinds.count("content_block_start") == kinds.count("content_block_stop") == 3


@pytest.mark.parametrize(
    ("code", "error_type"),
    [
        ("overloaded", "overloaded_error"),
        ("rate_limited", "rate_limit_error"),
        ("context_length_exceeded", "invalid_request_error"),
        ("internal_error", "api_error"),
    ],
)
def test_scripted_error(code: str, error_type: str) -> None:
    script = Script(text="Partial answer", error=(code, "scripted failure"))
    with FakeUpstream("anthropic", script) as fake:
        client = anthropic.Anthropic(base_url=fake.url, api_key="x", max_retries=0)
        with pytest.raises(anthropic.APIStatusError) as info:
            with client.messages.stream(model="m", max_tokens=64, messages=USER) as stream:
                stream.get_final_message()
        assert isinstance(info.value.body, dict)
        assert info.value.body["error"]["type"] == error_type
        events = translate(raw_post(fake.url))
    result = outcome(events)
    assert result.text == "Partial answer"
    assert result.error == code
    # message_start's input tokens; the output ("Partial answer", 14 characters)
    # estimated, since the failure came before message_delta's count.
    assert (result.usage, result.estimated) == ((12, 4), True)
    assert_conformant(events)


@pytest.mark.parametrize(
    ("status", "code", "sdk_error"),
    [
        (429, "rate_limited", anthropic.RateLimitError),
        (500, "internal_error", anthropic.InternalServerError),
        (529, "overloaded", anthropic.APIStatusError),
    ],
)
def test_http_error_status(status: int, code: str, sdk_error: type[Exception]) -> None:
    with FakeUpstream("anthropic", fault=Fault(kind="status", status=status)) as fake:
        client = anthropic.Anthropic(base_url=fake.url, api_key="x", max_retries=0)
        with pytest.raises(sdk_error) as info:
            client.messages.create(model="m", max_tokens=64, messages=USER, stream=True)
        assert getattr(info.value, "status_code", None) == status
        with httpx.Client() as http:
            r = http.post(
                fake.url + "/v1/messages",
                json={"model": "m", "max_tokens": 9, "messages": USER, "stream": True},
                headers={"anthropic-version": "2023-06-01"},
            )
    assert r.status_code == status
    assert tr.http_error(status, r.content)[0] == code
    assert tr.http_error(status, b"<html>bad gateway</html>")[0] == code


def test_fake_rejects_what_anthropic_rejects() -> None:
    with FakeUpstream("anthropic") as fake:
        client = anthropic.Anthropic(base_url=fake.url, api_key="x", max_retries=0)
        with pytest.raises(anthropic.BadRequestError):
            client.messages.create(
                model="m",
                max_tokens=64,
                messages=[{"role": "system", "content": "x"}],  # type: ignore[list-item]
                stream=True,
            )
        assert fake.wait_for(lambda f: bool(f.errors))
        assert "role" in fake.errors[0]


def test_fault_split_bytes() -> None:
    script = SCRIPTS["parallel-tools"]
    with FakeUpstream("anthropic", script, fault=Fault(kind="split_bytes", split_every=3)) as fake:
        client = anthropic.Anthropic(base_url=fake.url, api_key="x", max_retries=0)
        with client.messages.stream(model="m", max_tokens=64, messages=USER) as stream:
            message = stream.get_final_message()
        body = raw_post(fake.url)
    assert [b.input for b in message.content if b.type == "tool_use"] == [
        c.arguments for c in script.tool_calls
    ]
    assert outcome(translate(body)) == script_outcome(script)


@pytest.mark.parametrize("graceful", [False, True])
def test_fault_cut_is_an_error(graceful: bool) -> None:
    fault = Fault(kind="cut", after_events=4, graceful=graceful)
    chunks: list[bytes] = []
    with FakeUpstream("anthropic", SCRIPTS["text"], fault=fault) as fake:
        with httpx.Client() as client:
            try:
                with client.stream(
                    "POST",
                    fake.url + "/v1/messages",
                    json={"model": "m", "max_tokens": 9, "messages": USER, "stream": True},
                    headers={"anthropic-version": "2023-06-01"},
                ) as r:
                    for chunk in r.iter_raw():
                        chunks.append(chunk)
            except httpx.HTTPError:
                assert not graceful  # a reset connection; a graceful cut ends cleanly
    assert chunks
    events = translate(chunks)
    assert outcome(events).error == "internal_error"
    assert "truncated" in next(e.message for e in events if isinstance(e, ev.ErrorEvent))
    assert_conformant(events)


def test_fault_bad_json_is_an_error() -> None:
    fault = Fault(kind="bad_json", after_events=3)
    with FakeUpstream("anthropic", SCRIPTS["text"], fault=fault) as fake:
        events = translate(raw_post(fake.url))
    assert outcome(events).error == "internal_error"
    assert_conformant(events)


class _SmallTranslator(tr.Translator):
    max_event_bytes: ClassVar[int] = 1 << 16


def test_fault_huge_event_is_an_error() -> None:
    fault = Fault(kind="huge_event", size=200_000)
    with FakeUpstream("anthropic", SCRIPTS["text"], fault=fault) as fake:
        body = raw_post(fake.url)
    # Under the limit the padded ping is just a ping.
    assert outcome(translate(body)) == script_outcome(SCRIPTS["text"])
    small = _SmallTranslator(model="m")
    events = small.feed(body) + small.close()
    assert outcome(events).error == "internal_error"
    assert_conformant(events)


def test_render_shape() -> None:
    script = SCRIPTS["parallel-tools"]
    request = RecordedRequest("POST", "/v1/messages", {}, b"")
    items = fake_anthropic.render(script, model="claude-x", request=request)
    kinds = [item.split(b"\n", 1)[0] for item in items]
    assert kinds[0] == b"event: message_start"
    assert b"event: ping" in kinds
    assert kinds[-1] == b"event: message_stop"
    assert all(item.endswith(b"\n\n") and item.count(b"\n\n") == 1 for item in items)
    fragments = [
        json.loads(i.split(b"data: ", 1)[1])["delta"] for i in items if b"input_json_delta" in i
    ]
    assert fragments[0]["partial_json"] == ""  # as Anthropic sends it
    assert len(fragments) > 4
    words = [
        json.loads(i.split(b"data: ", 1)[1])["delta"]["text"] for i in items if b"text_delta" in i
    ]
    assert words == ["Let", " me", " check", " both."]


# --- build_request -----------------------------------------------------------------------

PNG = base64.b64encode(b"\x89PNG fake").decode()
PDF = base64.b64encode(b"%PDF-1.4 fake").decode()


def rich_request(**extra: Any) -> rq.Request:
    return rq.build(
        model="std-model",
        messages=[
            {"role": "system", "content": "Be brief."},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Look:"},
                    {"type": "image", "media_type": "image/png", "data": PNG},
                    {"type": "document", "media_type": "application/pdf", "data": PDF},
                ],
            },
            {"role": "user", "content": "And the weather?"},
            {
                "role": "assistant",
                "content": "Checking.",
                "tool_calls": [
                    {"id": "toolu_1", "name": "get_weather", "arguments": '{"city": "Vienna"}'},
                    {"id": "toolu_2", "name": "get_time", "arguments": ""},
                ],
            },
            {"role": "tool", "tool_call_id": "toolu_1", "content": "24C"},
            {
                "role": "tool",
                "tool_call_id": "toolu_2",
                "content": [{"type": "text", "text": "10:00"}],
            },
            {"role": "user", "content": "Thanks, summarise."},
            {"role": "system", "content": [{"type": "text", "text": "Use metric units."}]},
        ],
        tools=[
            {
                "name": "get_weather",
                "description": "Weather for a city.",
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"],
                },
            },
            {
                "name": "get_time",
                "description": "",
                "parameters": {"type": "object", "properties": {}},
            },
        ],
        **extra,
    )


def test_build_request_full() -> None:
    req = rich_request(
        parameters={"temperature": 0.2, "top_p": 0.9, "stop_sequences": ["END"]},
        extensions={
            "vendor:anthropic": {
                "thinking": {"type": "enabled", "budget_tokens": 2048},
                "top_k": 5,
            },
            "vendor:openai": {"ignored": True},
        },
    )
    out = tr.build_request(
        req, base_url="https://api.anthropic.com/", api_key="sk-test", upstream_model="claude-x"
    )
    assert out.method == "POST"
    assert out.url == "https://api.anthropic.com/v1/messages"
    assert out.headers["x-api-key"] == "sk-test"
    assert out.headers["anthropic-version"] == "2023-06-01"
    assert out.headers["content-type"] == "application/json"
    body = json.loads(out.body)
    assert body == {
        "model": "claude-x",
        "max_tokens": 4096,
        "system": "Be brief.\n\nUse metric units.",
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Look:"},
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": PNG},
                    },
                    {
                        "type": "document",
                        "source": {"type": "base64", "media_type": "application/pdf", "data": PDF},
                    },
                    {"type": "text", "text": "And the weather?"},
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Checking."},
                    {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "get_weather",
                        "input": {"city": "Vienna"},
                    },
                    {"type": "tool_use", "id": "toolu_2", "name": "get_time", "input": {}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "24C"},
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_2",
                        "content": [{"type": "text", "text": "10:00"}],
                    },
                    {"type": "text", "text": "Thanks, summarise."},
                ],
            },
        ],
        "tools": [
            {
                "name": "get_weather",
                "description": "Weather for a city.",
                "input_schema": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"],
                },
            },
            {"name": "get_time", "input_schema": {"type": "object", "properties": {}}},
        ],
        "temperature": 0.2,
        "top_p": 0.9,
        "stop_sequences": ["END"],
        "thinking": {"type": "enabled", "budget_tokens": 2048},
        "top_k": 5,
        "stream": True,
    }


def test_build_request_minimal_and_options() -> None:
    req = rq.build(model="claude-y", messages="Hi", parameters={"max_tokens": 77})
    out = vendor_request(
        "anthropic", req, base_url="http://127.0.0.1:9/v1", headers={"anthropic-beta": "x"}
    )
    assert out.url == "http://127.0.0.1:9/v1/messages"
    assert "x-api-key" not in out.headers
    assert out.headers["anthropic-beta"] == "x"
    assert json.loads(out.body) == {
        "model": "claude-y",
        "max_tokens": 77,
        "messages": [{"role": "user", "content": "Hi"}],
        "stream": True,
    }


def test_build_request_tool_result_before_text_in_a_merged_turn() -> None:
    req = rq.build(
        model="m",
        messages=[
            {"role": "user", "content": "Go"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "t1", "name": "f", "arguments": "{}"}],
            },
            {"role": "user", "content": "note first"},
            {"role": "tool", "tool_call_id": "t1", "content": "done"},
        ],
    )
    messages = tr.request_body(req)["messages"]
    assert messages[1] == {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}],
    }
    # Anthropic wants tool_result blocks first in a user turn.
    assert [b["type"] for b in messages[2]["content"]] == ["tool_result", "text"]


def test_build_request_plain_text_document() -> None:
    text = base64.b64encode("Hello, notes é".encode()).decode()
    req = rq.build(
        model="m",
        messages=[
            {
                "role": "user",
                "content": [{"type": "document", "media_type": "text/plain", "data": text}],
            }
        ],
    )
    block = tr.request_body(req)["messages"][0]["content"][0]
    assert block == {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": "Hello, notes é"},
    }


@pytest.mark.parametrize(
    ("messages", "extensions", "path"),
    [
        (
            [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "x"},
                        {"type": "audio", "media_type": "audio/wav", "data": "AAAA"},
                    ],
                }
            ],
            None,
            "messages[0].content[1]",
        ),
        (
            [
                {"role": "user", "content": "x"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": "a", "name": "f", "arguments": "{oops"}],
                },
            ],
            None,
            "messages[1].tool_calls[0].arguments",
        ),
        (
            [
                {"role": "user", "content": "x"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": "a", "name": "f", "arguments": "[1]"}],
                },
            ],
            None,
            "messages[1].tool_calls[0].arguments",
        ),
        (
            [
                {
                    "role": "system",
                    "content": [{"type": "image", "media_type": "image/png", "data": PNG}],
                },
                {"role": "user", "content": "x"},
            ],
            None,
            "messages[0].content[0]",
        ),
        (
            [
                {
                    "role": "user",
                    "content": [{"type": "document", "media_type": "text/plain", "data": "%%%"}],
                }
            ],
            None,
            "messages[0].content[0].data",
        ),
        (
            [{"role": "user", "content": "x"}],
            {"vendor:anthropic": [1]},
            'extensions["vendor:anthropic"]',
        ),
    ],
)
def test_build_request_refuses(
    messages: list[dict[str, Any]], extensions: dict[str, Any] | None, path: str
) -> None:
    req = rq.build(model="m", messages=messages, extensions=extensions)
    with pytest.raises(InvalidRequest) as info:
        tr.build_request(req, base_url="http://127.0.0.1:1")
    assert info.value.path == path


def test_build_request_against_the_fake() -> None:
    """What build_request sends is a request the fake (Anthropic's rules) accepts."""
    script = SCRIPTS["parallel-tools"]
    with FakeUpstream("anthropic", script) as fake:
        out = tr.build_request(rich_request(), base_url=fake.url, api_key="k")
        with httpx.Client() as client:
            r = client.request(out.method, out.url, headers=out.headers, content=out.body)
        assert fake.errors == []
        assert fake.requests[0].headers["x-api-key"] == "k"
    assert r.status_code == 200
    assert outcome(translate(r.content)) == script_outcome(script)


# --- request_from_vendor -------------------------------------------------------------------

ANTHROPIC_BODY: dict[str, Any] = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 1024,
    "system": [{"type": "text", "text": "Be brief."}],
    "messages": [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Look:"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": PNG},
                },
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "s"},
                {"type": "text", "text": "Checking."},
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "get_weather",
                    "input": {"city": "Vienna"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "24C"},
                {"type": "text", "text": "Thanks"},
            ],
        },
    ],
    "tools": [
        {
            "name": "get_weather",
            "description": "Weather.",
            "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
        }
    ],
    "temperature": 0.5,
    "stop_sequences": ["END"],
    "stream": True,
    "metadata": {"user_id": "u-1"},
    "thinking": {"type": "enabled", "budget_tokens": 1024},
    "tool_choice": {"type": "auto"},
}


def test_request_from_vendor() -> None:
    req = tr.request_from_vendor(ANTHROPIC_BODY)
    assert req.model == "claude-sonnet-4-5"
    assert [m.role for m in req.messages] == ["system", "user", "assistant", "tool", "user"]
    assert req.messages[0].content == "Be brief."
    assert req.messages[1].content == [
        rq.TextPart(text="Look:"),
        rq.ImagePart(media_type="image/png", data=PNG),
    ]
    assistant = req.messages[2]
    assert assistant.content == "Checking."  # the thinking block is dropped
    assert assistant.tool_calls == [
        rq.ToolCallRef(id="toolu_1", name="get_weather", arguments='{"city":"Vienna"}')
    ]
    assert req.messages[3].tool_call_id == "toolu_1" and req.messages[3].content == "24C"
    assert req.messages[4].content == "Thanks"
    assert req.tools == [
        rq.Tool(
            name="get_weather",
            description="Weather.",
            parameters={"type": "object", "properties": {"city": {"type": "string"}}},
        )
    ]
    assert req.parameters == rq.Parameters(max_tokens=1024, temperature=0.5, stop_sequences=["END"])
    assert req.metadata == {"user_id": "u-1"}
    assert req.extension("vendor:anthropic") == {
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "tool_choice": {"type": "auto"},
    }
    assert req.extension("tokenwire:reasoning") is True


def test_request_from_vendor_round_trip() -> None:
    """Anthropic body -> standard -> Anthropic body keeps what Anthropic needs."""
    body = tr.request_body(tr.request_from_vendor(ANTHROPIC_BODY))
    assert body["system"] == "Be brief."
    # The earlier turn's thinking block comes back first, unchanged (issue 18).
    assert body["messages"][1]["content"] == [
        {"type": "thinking", "thinking": "hmm", "signature": "s"},
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Vienna"}},
    ]
    assert body["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "24C"},
        {"type": "text", "text": "Thanks"},
    ]
    for key in ("model", "max_tokens", "tools", "temperature", "stop_sequences", "thinking"):
        expected = ANTHROPIC_BODY[key]
        if key == "tools":
            expected = [dict(t) for t in expected]
        assert body[key] == expected, key
    assert body["tool_choice"] == {"type": "auto"}


def test_request_from_vendor_document_text_source() -> None:
    req = tr.request_from_vendor(
        {
            "model": "m",
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "document",
                            "source": {"type": "text", "media_type": "text/plain", "data": "notes"},
                        }
                    ],
                },
            ],
        }
    )
    assert req.messages[0].content == [
        rq.DocumentPart(media_type="text/plain", data=base64.b64encode(b"notes").decode())
    ]
    assert req.parameters is None and req.extensions is None


@pytest.mark.parametrize(
    ("body", "path"),
    [
        ([], "$"),
        ({"messages": USER}, "model"),
        ({"model": " ", "messages": USER}, "model"),
        ({"model": "m", "messages": []}, "messages"),
        ({"model": "m", "messages": [{"role": "tool", "content": "x"}]}, "messages[0].role"),
        ({"model": "m", "messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
        ({"model": "m", "messages": [{"role": "user", "content": [7]}]}, "messages[0].content[0]"),
        (
            {
                "model": "m",
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "image", "source": {"type": "url", "url": "https://x"}}
                        ],
                    }
                ],
            },
            "messages[0].content[0].source.type",
        ),
        (
            {"model": "m", "messages": [{"role": "user", "content": [{"type": "video"}]}]},
            "messages[0].content[0].type",
        ),
        (
            {
                "model": "m",
                "messages": [
                    {
                        "role": "assistant",
                        "content": [{"type": "tool_use", "id": "a", "name": "f", "input": [1]}],
                    }
                ],
            },
            "messages[0].content[0].input",
        ),
        (
            {
                "model": "m",
                "messages": [
                    {"role": "user", "content": [{"type": "tool_result", "content": "x"}]}
                ],
            },
            "messages[0].content[0].tool_use_id",
        ),
        (
            {
                "model": "m",
                "messages": USER,
                "tools": [{"type": "web_search_20250305", "name": "web_search"}],
            },
            "tools[0].type",
        ),
        ({"model": "m", "messages": USER, "tools": [{"name": "f"}]}, "tools[0].input_schema"),
        (
            {
                "model": "m",
                "messages": USER,
                "system": [
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": PNG},
                    }
                ],
            },
            "system",
        ),
        ({"model": "m", "messages": USER, "max_tokens": 0}, "max_tokens"),
        (
            {
                "model": "m",
                "messages": USER,
                "tools": [{"name": "f", "input_schema": {}}, {"name": "f", "input_schema": {}}],
            },
            "tools[1].name",
        ),
    ],
)
def test_request_from_vendor_refuses(body: Any, path: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        tr.request_from_vendor(body)
    assert info.value.path == path


# --- EventEncoder --------------------------------------------------------------------------


class BytesServer:
    """A tiny HTTP server on 127.0.0.1 that answers every POST with fixed bytes."""

    def __init__(self, body: bytes, content_type: str = "text/event-stream") -> None:
        self.body = body
        self.requests: list[tuple[str, bytes]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                outer.requests.append((self.path, self.rfile.read(length)))
                self.send_response(200)
                self.send_header("content-type", content_type)
                self.send_header("content-length", str(len(outer.body)))
                self.end_headers()
                self.wfile.write(outer.body)

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> BytesServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"


def encode_all(events: list[ev.Event], *, model: str = "claude-gw") -> bytes:
    encoder = tr.EventEncoder(model=model, id="msg_gw1")
    return b"".join(encoder.encode(e) for e in events)


def standard_stream(*, reasoning: bool = False, error: str | None = None) -> list[ev.Event]:
    w = Writer(model="std", request_id="r", created=0)
    out = []
    if reasoning:
        out += w.text("Thinking it", 2, reasoning=True)
        out += w.text(" over.", 2, reasoning=True)
    out += w.text("Hello ", 0)
    out += w.text("world", 0)
    if error is not None:
        return out + w.usage(30, 4) + w.fail(error, "it broke")
    out += w.tool_call(id="toolu_a", name="get_weather", arguments='{"city": "Vienna"}', index=1)
    out += w.text("!", 0)  # text resumes after the tool call
    out += w.tool_call(id="toolu_b", name="get_time", arguments="{}", index=3)
    out += w.stop(0, "tool_use") + w.stop(1, "tool_use") + w.stop(3, "tool_use")
    if reasoning:
        out += w.stop(2, "tool_use")
    return out + w.usage(30, 12) + w.end()


def test_event_encoder_sdk_parses_it() -> None:
    body = encode_all(standard_stream(reasoning=True))
    with BytesServer(body) as server:
        client = anthropic.Anthropic(base_url=server.url, api_key="x", max_retries=0)
        with client.messages.stream(model="claude-gw", max_tokens=64, messages=USER) as stream:
            message = stream.get_final_message()
        assert server.requests[0][0] == "/v1/messages"
    assert message.id == "msg_gw1" and message.model == "claude-gw"
    assert [b.type for b in message.content] == ["thinking", "text", "tool_use", "text", "tool_use"]
    assert message.content[0].thinking == "Thinking it over."  # type: ignore[union-attr]
    text = "".join(b.text for b in message.content if b.type == "text")
    assert text == "Hello world!"
    calls = [(b.id, b.name, b.input) for b in message.content if b.type == "tool_use"]
    assert calls == [("toolu_a", "get_weather", {"city": "Vienna"}), ("toolu_b", "get_time", {})]
    assert message.stop_reason == "tool_use"
    assert (message.usage.input_tokens, message.usage.output_tokens) == (30, 12)


def test_event_encoder_round_trip_through_the_translator() -> None:
    events = translate(encode_all(standard_stream(reasoning=True)), reasoning=True)
    result = outcome(events)
    assert result.text == "Hello world!"
    assert result.reasoning == "Thinking it over."
    assert [t[:2] for t in result.tools] == [("toolu_a", "get_weather"), ("toolu_b", "get_time")]
    assert result.usage == (30, 12)
    assert set(result.stops) == {"tool_use"}
    assert_conformant(events)


def test_event_encoder_exact_bytes() -> None:
    w = Writer(model="std", created=0)
    events = w.text("Hi", 0) + w.stop(0, "end_turn") + w.usage(3, 1) + w.end()
    assert encode_all(events) == (
        b"event: message_start\n"
        b'data: {"type":"message_start","message":{"id":"msg_gw1","type":"message",'
        b'"role":"assistant","model":"claude-gw","content":[],"stop_reason":null,'
        b'"stop_sequence":null,"usage":{"input_tokens":0,"output_tokens":0}}}\n\n'
        b"event: content_block_start\n"
        b'data: {"type":"content_block_start","index":0,'
        b'"content_block":{"type":"text","text":""}}\n\n'
        b"event: content_block_delta\n"
        b'data: {"type":"content_block_delta","index":0,'
        b'"delta":{"type":"text_delta","text":"Hi"}}\n\n'
        b"event: content_block_stop\n"
        b'data: {"type":"content_block_stop","index":0}\n\n'
        b"event: message_delta\n"
        b'data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},'
        b'"usage":{"input_tokens":3,"output_tokens":1}}\n\n'
        b"event: message_stop\n"
        b'data: {"type":"message_stop"}\n\n'
    )


@pytest.mark.parametrize(
    ("reason", "vendor"),
    [("end_turn", "end_turn"), ("max_tokens", "max_tokens"), ("content_filter", "refusal")],
)
def test_event_encoder_stop_reasons(reason: str, vendor: str) -> None:
    w = Writer(model="std", created=0)
    events = w.text("x", 0) + w.stop(0, reason) + w.end()
    body = encode_all(events)
    assert f'"stop_reason":"{vendor}"'.encode() in body
    assert outcome(translate(body)).stops == [reason]


def test_event_encoder_empty_stream() -> None:
    w = Writer(model="std", created=0)
    body = encode_all(w.start() + w.end())
    with BytesServer(body) as server:
        client = anthropic.Anthropic(base_url=server.url, api_key="x", max_retries=0)
        with client.messages.stream(model="m", max_tokens=64, messages=USER) as stream:
            message = stream.get_final_message()
    assert message.content == [] and message.stop_reason == "end_turn"


@pytest.mark.parametrize(
    "code", ["overloaded", "rate_limited", "internal_error", "context_length_exceeded"]
)
def test_event_encoder_error(code: str) -> None:
    events = standard_stream(error=code)
    body = encode_all(events)
    assert body.count(b"event: error\n") == 1 and b"message_stop" not in body
    with BytesServer(body) as server:
        client = anthropic.Anthropic(base_url=server.url, api_key="x", max_retries=0)
        with pytest.raises(anthropic.APIStatusError) as info:
            with client.messages.stream(model="m", max_tokens=64, messages=USER) as stream:
                stream.get_final_message()
    assert isinstance(info.value.body, dict)
    assert info.value.body["error"]["type"] == tr.ERROR_TYPES[code]
    # Read back by our translator: the same code, except context length, whose
    # message must say so (Anthropic has no code of its own for it).
    expected = "internal_error" if code == "context_length_exceeded" else code
    assert outcome(translate(body)).error == expected


def test_event_encoder_ignores_what_follows_the_end() -> None:
    encoder = tr.EventEncoder(model="m")
    w = Writer(model="std", created=0)
    for event in w.text("a", 0) + w.end():
        encoder.encode(event)
    assert encoder.ended
    assert encoder.encode(ev.Usage(v="1.0", seq=9, input_tokens=1, output_tokens=1)) == b""
    assert encoder.id.startswith("msg_")
    unknown = ev.UnknownEvent(type="x.y", data='{"type":"x.y"}', v="1.0", seq=1)
    assert tr.EventEncoder(model="m").encode(unknown).startswith(b"event: message_start")


# --- small pure helpers ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("vendor", "standard"),
    [
        ("end_turn", "end_turn"),
        ("stop_sequence", "end_turn"),
        ("max_tokens", "max_tokens"),
        ("model_context_window_exceeded", "max_tokens"),
        ("tool_use", "tool_use"),
        ("refusal", "content_filter"),
        ("pause_turn", "end_turn"),
        ("something_new", "content_filter"),  # never a clean stop
    ],
)
def test_stop_reason_table(vendor: str, standard: str) -> None:
    assert tr.stop_reason(vendor) == standard
    assert standard in ev.STOP_REASONS


def test_error_code_table() -> None:
    assert tr.error_code("overloaded_error") == "overloaded"
    assert tr.error_code("rate_limit_error") == "rate_limited"
    assert tr.error_code("invalid_request_error", "prompt is too long: 9 tokens") == (
        "context_length_exceeded"
    )
    assert tr.error_code("invalid_request_error", "bad role") == "internal_error"
    assert tr.error_code("new_error") == "internal_error"
    assert set(tr.ERROR_CODES.values()) <= ev.ERROR_CODES
    assert (
        tr.http_error(
            400,
            b'{"type":"error","error":{"type":"invalid_request_error",'
            b'"message":"prompt is too long"}}',
        )[0]
        == "context_length_exceeded"
    )


@pytest.mark.parametrize("module", [tr, fake_anthropic])
def test_all_is_complete(module: Any) -> None:
    """Every public name a module defines is in its ``__all__``, and nothing else."""
    defined = {
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and getattr(value, "__module__", module.__name__) == module.__name__
        and not isinstance(value, type(json))
        and not isinstance(value, dict | str | int)  # a constant cannot tell its home module
    }
    assert defined <= set(module.__all__)
    assert all(hasattr(module, name) for name in module.__all__)


# --- tool deltas (docs/extensions.md, opt-in) ----------------------------------------------

#: Vectors where deltas legitimately change more than adding tokenwire.tool_delta events.
_DELTAS_CHANGE_MORE: dict[str, str] = {
    # A delta is output that cannot be taken back: a restart after one is an error.
    "spliced-restart-before-content": "the first attempt's tool input went out as deltas",
}


@pytest.mark.parametrize("name", sorted(VECTOR_CASES))
def test_tool_deltas_only_add_deltas(name: str) -> None:
    """``tokenwire:tool_deltas`` adds display-only events and changes nothing else:
    every other event (tool.call indexes and arguments included) is the same."""
    vector = VECTOR_CASES[name]
    options = {k: v for k, v in vector.get("options", {}).items() if k != "tool_deltas"}
    plain = summarize(translate(vector_body(vector), model=vector["model"], **options))
    events = translate(vector_body(vector), model=vector["model"], tool_deltas=True, **options)
    live = summarize(events)
    assert_conformant(events)  # the deltas add up to their calls (no tool-delta-* warning)
    if name in _DELTAS_CHANGE_MORE:
        assert live[1][0] == "tokenwire.tool_delta", _DELTAS_CHANGE_MORE[name]
        assert_ends_in_error(events)
        return
    assert [e for e in live if e[0] != "tokenwire.tool_delta"] == plain
