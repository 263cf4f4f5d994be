"""The built-in demo model: the vectors of tests/vectors/demo and its promised properties."""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path
from typing import Any

import jsonschema
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tokenwire
from tokenwire import events as ev
from tokenwire import request as rq
from tokenwire.errors import InvalidRequest
from tokenwire.gateway.providers import demo
from tokenwire.gateway.providers.demo import DemoModel, arguments_for, plan_reply, tokenize
from tokenwire.writer import Writer

VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "demo"
CASES = [(p.stem, json.loads(p.read_text())) for p in sorted(VECTORS.glob("*.json"))]


def _request(raw: dict[str, Any]) -> rq.Request:
    return rq.parse(msgspec.json.encode(raw))


def _stream(request: rq.Request, model: DemoModel | None = None) -> list[ev.Event]:
    """The demo's events as the server sends them (through a Writer)."""

    async def collect() -> list[ev.Event]:
        writer = Writer(model="demo", request_id=request.request_id)
        out = writer.start()
        async for event in (model or DemoModel()).generate(request):
            out += writer.add(event)
        return out + writer.end()

    return asyncio.run(collect())


@pytest.mark.parametrize(("name", "vector"), CASES, ids=[c[0] for c in CASES])
def test_demo_vectors(name: str, vector: dict[str, Any]) -> None:
    request = _request(vector["request"])
    expect = vector["expect"]
    reply = plan_reply(request)
    assert reply.stop_reason == expect["stop_reason"]
    assert reply.input_tokens == expect["input_tokens"]
    assert reply.output_tokens == expect["output_tokens"]
    if "tool_call" in expect:
        assert reply.tool_call is not None and not reply.tokens
        assert reply.tool_call.name == expect["tool_call"]["name"]
        if "arguments_bytes_at_most" in expect["tool_call"]:
            # An amplifying schema: the synthesis is bounded, so the arguments
            # fall short of it, and the §8.2 check of the stream says so.
            assert len(reply.tool_call.arguments) <= expect["tool_call"]["arguments_bytes_at_most"]
            report = tokenwire.validate(b"".join(map(ev.dump, _stream(request))), request)
            assert [v.rule for v in report.violations] == ["invalid-arguments"]
            return
        arguments = json.loads(reply.tool_call.arguments)
        assert arguments == expect["tool_call"]["arguments"]
        tool = request.tool(reply.tool_call.name)
        assert tool is not None
        jsonschema.validate(arguments, tool.parameters)
    else:
        assert reply.tool_call is None
        assert reply.text == expect["text"]
        assert len(reply.tokens) == expect["tokens"]
    # The stream the server sends is conformant, checked against the request (§8.2 too).
    events = _stream(request)
    wire = b"".join(map(ev.dump, events))
    report = tokenwire.validate(wire, request)
    assert report.ok, report.violations
    assert not report.warnings, report.warnings
    (usage,) = [e for e in events if isinstance(e, ev.Usage)]
    assert (usage.input_tokens, usage.output_tokens) == (reply.input_tokens, reply.output_tokens)


def test_the_vectors_cover_the_promises() -> None:
    names = {name for name, _ in CASES}
    for required in (
        "plain-question",
        "max-tokens-7",
        "stop-sequence",
        "tool-call-weather",
        "tool-call-schema-kinds",
        "tool-result-answer",
        "tool-no-shared-word",
        "max-tokens-1024-sdk-default",
        "exact-tokens-extension",
        "tool-weather-whats-paris",
        "tool-docs-confirmation-example",
        "tool-amplifying-schema-bounded",
    ):
        assert required in names


def test_the_weather_example_of_the_draft() -> None:
    request = rq.build(
        model="demo",
        messages="What is the weather in Vienna?",
        tools=[
            {
                "name": "get_weather",
                "description": "Get the weather",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            }
        ],
    )
    reply = plan_reply(request)
    assert reply.tool_call is not None
    assert json.loads(reply.tool_call.arguments) == {"city": "Vienna"}
    assert reply.stop_reason == "tool_use"


_texts = st.text(min_size=1, max_size=80).filter(lambda s: s.strip())


@settings(max_examples=60, deadline=None)
@given(text=_texts, max_tokens=st.integers(min_value=1, max_value=demo.MAX_TOKENS))
def test_max_tokens_is_a_cap(text: str, max_tokens: int) -> None:
    # Issue 13: max_tokens caps the reply as it would a real model's; it is
    # not the length. A cap under the natural reply cuts it (max_tokens).
    natural = plan_reply(rq.build(model="demo", messages=text))
    reply = plan_reply(rq.build(model="demo", messages=text, parameters={"max_tokens": max_tokens}))
    assert len(reply.tokens) == min(max_tokens, len(natural.tokens)) == reply.output_tokens
    assert reply.tokens == natural.tokens[: len(reply.tokens)]
    cut = max_tokens < len(natural.tokens)
    assert reply.stop_reason == ("max_tokens" if cut else "end_turn")


@settings(max_examples=40, deadline=None)
@given(text=_texts, tokens=st.integers(min_value=1, max_value=2000))
def test_the_tokens_extension_gives_that_length(text: str, tokens: int) -> None:
    extensions = {demo.EXTENSION: {"tokens": tokens}}
    reply = plan_reply(rq.build(model="demo", messages=text, extensions=extensions))
    assert len(reply.tokens) == tokens == reply.output_tokens
    assert reply.stop_reason == "end_turn"


@pytest.mark.parametrize(
    ("parameters", "extensions", "path"),
    [
        ({"max_tokens": demo.MAX_TOKENS + 1}, None, "parameters.max_tokens"),
        ({"max_tokens": 10**30}, None, "parameters.max_tokens"),
        (
            None,
            {demo.EXTENSION: {"tokens": demo.MAX_TOKENS + 1}},
            'extensions["tokenwire:demo"].tokens',
        ),
        (None, {demo.EXTENSION: {"tokens": 0}}, 'extensions["tokenwire:demo"].tokens'),
        (None, {demo.EXTENSION: {"tokens": "many"}}, 'extensions["tokenwire:demo"].tokens'),
    ],
)
def test_over_the_cap_is_a_400_naming_the_field(
    parameters: dict[str, Any] | None, extensions: dict[str, Any] | None, path: str
) -> None:
    request = rq.build(model="demo", messages="hi", parameters=parameters, extensions=extensions)
    with pytest.raises(InvalidRequest) as info:
        DemoModel().check_request(request)
    assert info.value.path == path and info.value.status_hint == 400
    with pytest.raises(InvalidRequest):
        plan_reply(request)

    async def first_event() -> None:
        async for _event in DemoModel().generate(request):
            raise AssertionError("an event before the refusal")

    with pytest.raises(InvalidRequest):
        asyncio.run(first_event())
    # At the cap itself it is served.
    at_cap = rq.build(model="demo", messages="hi", parameters={"max_tokens": demo.MAX_TOKENS})
    DemoModel().check_request(at_cap)


def test_the_stream_is_lazy_and_matches_the_plan() -> None:
    # generate() streams the same tokens plan_reply lists, without building them first.
    for parameters, extensions in (
        (None, None),
        ({"max_tokens": 9}, None),
        (None, {demo.EXTENSION: {"tokens": 500}}),
        ({"stop_sequences": ["demo"]}, None),
    ):
        request = rq.build(
            model="demo", messages="Tell me more", parameters=parameters, extensions=extensions
        )
        events = _stream(request)
        texts = [e.text for e in events if isinstance(e, ev.ContentDelta)]
        reply = plan_reply(request)
        assert texts == reply.tokens
        (usage,) = [e for e in events if isinstance(e, ev.Usage)]
        assert usage.output_tokens == reply.output_tokens


@pytest.mark.parametrize(
    ("message", "tool", "arguments"),
    [
        ("What's the weather in Paris?", "get_weather", {"city": "Paris"}),
        ("what is the weather like in paris", "get_weather", {"city": "paris"}),
        ("Paris weather?", "get_weather", {"city": "Paris"}),
        ("How is the weather today? I am in Oslo.", "get_weather", {"city": "Oslo"}),
        ("Mail the Vienna weather to Ann", "send_email", {"to": "Ann"}),
        ("E-mail Bob the forecast", "send_email", {"to": "Bob"}),
        ("Send an email to Ann about the Vienna weather", "send_email", {"to": "Ann"}),
    ],
)
def test_tool_arguments_come_from_the_prompt(
    message: str, tool: str, arguments: dict[str, Any]
) -> None:
    weather = {
        "name": "get_weather",
        "description": "Get current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    }
    email = {
        "name": "send_email",
        "description": "Send an email.",
        "parameters": {"type": "object", "properties": {"to": {"type": "string"}}},
    }
    reply = plan_reply(rq.build(model="demo", messages=message, tools=[weather, email]))
    assert reply.tool_call is not None
    assert (reply.tool_call.name, json.loads(reply.tool_call.arguments)) == (tool, arguments)


def test_argument_synthesis_is_bounded_whatever_the_schema() -> None:
    # A schema that bypassed request.parse (which refuses min* over 4096).
    nested = {"type": "array", "minItems": 10**9, "items": {"type": "string", "minLength": 10**9}}
    schema = {
        "type": "object",
        "properties": {"a": {"type": "array", "minItems": 10**9, "items": nested}},
    }
    arguments = arguments_for(schema, "x")
    size = len(msgspec.json.encode(arguments))
    assert size <= 4 * (demo.MAX_ARGUMENT_CHARS + 8 * demo.MAX_ARGUMENT_VALUES)


@settings(max_examples=60, deadline=None)
@given(text=_texts)
def test_about_forty_tokens_by_default(text: str) -> None:
    reply = plan_reply(rq.build(model="demo", messages=text))
    assert 25 <= len(reply.tokens) <= 60
    assert reply.stop_reason == "end_turn"
    assert reply.text.endswith((".", '"', "?", "!"))


@settings(max_examples=60, deadline=None)
@given(text=_texts, request_id=st.text(max_size=20), delay=st.integers(0, 50))
def test_deterministic_and_blind_to_metadata(text: str, request_id: str, delay: int) -> None:
    base = rq.build(model="demo", messages=text)
    other = rq.build(
        model="demo",
        messages=text,
        metadata={"request_id": request_id},
        extensions={demo.EXTENSION: {"delay_ms": delay}},
    )
    assert plan_reply(base) == plan_reply(other) == plan_reply(base)


def test_parameters_change_the_text() -> None:
    texts = {
        plan_reply(
            rq.build(model="demo", messages="Same words", parameters={"temperature": t})
        ).text
        for t in (0.0, 0.5, 1.0, 1.5)
    }
    assert len(texts) > 1


@settings(max_examples=60, deadline=None)
@given(text=_texts, stop=st.text(min_size=1, max_size=3))
def test_stop_sequences_never_appear(text: str, stop: str) -> None:
    reply = plan_reply(rq.build(model="demo", messages=text, parameters={"stop_sequences": [stop]}))
    assert stop not in reply.text
    if reply.stop_reason == "end_turn":
        full = plan_reply(rq.build(model="demo", messages=text)).text
        assert full.startswith(reply.text)


_schemas = st.recursive(
    st.sampled_from(
        [
            {"type": "string"},
            {"type": "string", "enum": ["a", "b"]},
            {"type": "integer", "minimum": 3},
            {"type": "integer", "maximum": -2},
            {"type": "number", "exclusiveMinimum": 1.5},
            {"type": "boolean"},
            {"type": "null"},
            {"type": ["null", "string"]},
            {"type": "string", "minLength": 12, "maxLength": 14},
            {"const": 7},
            {"anyOf": [{"type": "integer"}, {"type": "string"}]},
        ]
    ),
    lambda children: st.one_of(
        st.builds(
            lambda items, n: {"type": "array", "items": items, "minItems": n},
            children,
            st.integers(0, 3),
        ),
        st.dictionaries(
            st.sampled_from(["city", "query", "name", "x", "n"]), children, max_size=4
        ).map(lambda props: {"type": "object", "properties": props, "required": sorted(props)}),
    ),
    max_leaves=8,
)


@settings(max_examples=80, deadline=None)
@given(
    props=st.dictionaries(st.sampled_from(["city", "query", "name", "id", "count"]), _schemas),
    message=st.text(max_size=60),
)
def test_tool_arguments_are_valid_against_their_schema(props: dict[str, Any], message: str) -> None:
    schema = {"type": "object", "properties": props, "required": sorted(props)}
    arguments = arguments_for(schema, message)
    jsonschema.validate(arguments, schema)
    assert set(arguments) == set(props)


def test_tokens_rebuild_the_text() -> None:
    text = "  Hello,  world!\tand\nmore "
    assert "".join(tokenize(text)) == text.rstrip()
    assert demo.count_tokens(text) == 4


def test_delay_extension_is_clamped_and_validated() -> None:
    def delay(value: object) -> float:
        request = rq.build(model="demo", messages="x", extensions={demo.EXTENSION: value})
        return demo._delay_ms(request, 7.0)

    assert delay({"delay_ms": 25}) == 25.0
    assert delay({"delay_ms": 10**9}) == demo.MAX_DELAY_MS
    assert delay({"delay_ms": -5}) == 0.0
    assert delay({"delay_ms": "fast"}) == 7.0
    assert delay({"delay_ms": True}) == 7.0
    assert delay("not an object") == 7.0


def test_paced_stream_sleeps_between_events(monkeypatch: pytest.MonkeyPatch) -> None:
    sleeps: list[float] = []

    async def fake_pause(seconds: float) -> None:
        sleeps.append(seconds)

    monkeypatch.setattr(demo, "_pause", fake_pause)  # the paced stream's sleep
    request = rq.build(
        model="demo",
        messages="pace me",
        parameters={"max_tokens": 5},
        extensions={demo.EXTENSION: {"delay_ms": 40}},
    )
    events = _stream(request)
    assert sleeps == [0.04] * 5
    assert sum(isinstance(e, ev.ContentDelta) for e in events) == 5


def test_unpaced_long_reply_yields_to_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    sleeps: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        sleeps.append(seconds)

    monkeypatch.setattr(demo.asyncio, "sleep", fake_sleep)
    _stream(rq.build(model="demo", messages="long", extensions={demo.EXTENSION: {"tokens": 300}}))
    assert len(sleeps) == 300 // 64 and set(sleeps) == {0}


def test_a_cancelled_pause_is_left_alone_by_its_timer() -> None:
    # A paced stream cancelled mid-pause (its client hung up): the pause's timer
    # still fires, on a done future, and must not raise in the event loop.
    async def run() -> list[dict[str, object]]:
        loop = asyncio.get_running_loop()
        problems: list[dict[str, object]] = []
        loop.set_exception_handler(lambda _loop, context: problems.append(context))
        pause = asyncio.ensure_future(demo._pause(0.01))
        await asyncio.sleep(0)  # one loop turn, not a pause: the pause starts its timer
        pause.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await pause
        assert pause.cancelled()
        await asyncio.wait_for(demo._pause(0.02), 10)  # its timer comes after the first's
        return problems

    assert asyncio.run(run()) == []
