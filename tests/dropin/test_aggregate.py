"""Issue 23: each aggregator gives what its vendor's own SDK builds from the stream.

Every recorded vendor stream (``vendor-fixtures/*/raw-sse-*.sse``, read in
place) becomes standard events; the whole answer the aggregator builds from them must equal
the final object the vendor's SDK accumulates from the streamed answer of
the same events (openai's ``ChatCompletionStreamState``, anthropic's
``accumulate_event``), and every stream that failed gives the vendor's error
body with the status its SDK maps to the right exception.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import msgspec
import openai
import pytest
from anthropic.lib.streaming._messages import accumulate_event
from anthropic.types import RawMessageStreamEvent
from openai.lib.streaming.chat._completions import ChatCompletionStreamState
from openai.types.chat import ChatCompletionChunk
from tests.gateway.conftest import fixture_files

from tokenwire import events as ev
from tokenwire import sse
from tokenwire.translate import translator
from tokenwire.translate.anthropic.aggregate import MessageAggregator
from tokenwire.translate.anthropic.ingress import EventEncoder as AnthropicEncoder
from tokenwire.translate.gemini.aggregate import ContentAggregator
from tokenwire.translate.openai.aggregate import ChatAggregator
from tokenwire.translate.openai.ingress import ChunkEncoder
from tokenwire.translate.openai_responses.aggregate import ResponseAggregator
from tokenwire.writer import Writer


def _events(vendor: str, path: Path) -> list[ev.Event]:
    t = translator(vendor, model="m", request_id="r1", reasoning=True)
    return t.feed(path.read_bytes()) + t.close()


def _frames(encode: Any, events: list[ev.Event]) -> list[sse.Message]:
    decoder = sse.Decoder()
    return [m for e in events for m in decoder.feed(encode(e))]


CASES = fixture_files()


@pytest.mark.parametrize(("vendor", "path"), CASES, ids=[f"{v}-{p.stem}" for v, p in CASES])
def test_chat_aggregate_is_what_the_openai_sdk_accumulates(vendor: str, path: Path) -> None:
    events = _events(vendor, path)
    whole = ChatAggregator(model="m", id="chatcmpl-1")
    for event in events:
        whole.feed(event)
    status, answer = whole.result()
    encode = ChunkEncoder(model="m", id="chatcmpl-1", include_usage=True).encode
    state: ChatCompletionStreamState[Any] = ChatCompletionStreamState()
    failed = None
    for message in _frames(encode, events):
        if message.data == "[DONE]":
            continue
        obj = json.loads(message.data)
        if "error" in obj:
            failed = obj
            continue
        state.handle_chunk(ChatCompletionChunk.model_validate(obj))
    if failed is not None:
        assert status >= 400 and answer == failed
        return
    assert status == 200
    final = state.current_completion_snapshot  # (get_final_completion raises on "length")
    ours = openai.types.chat.ChatCompletion.model_validate(answer)
    assert len(ours.choices) == len(final.choices)
    for mine, theirs in zip(ours.choices, final.choices, strict=True):
        assert mine.index == theirs.index
        assert mine.finish_reason == theirs.finish_reason
        assert mine.message.content == theirs.message.content
        assert mine.message.refusal == theirs.message.refusal
        calls = [
            (c.id, c.function.name, c.function.arguments) for c in mine.message.tool_calls or []
        ]  # type: ignore[union-attr]
        sdk = [
            (c.id, c.function.name, c.function.arguments) for c in theirs.message.tool_calls or []
        ]  # type: ignore[union-attr]
        assert calls == sdk
        assert mine.message.annotations == (theirs.message.annotations or [])
    assert ours.usage == final.usage


@pytest.mark.parametrize(("vendor", "path"), CASES, ids=[f"{v}-{p.stem}" for v, p in CASES])
def test_message_aggregate_is_what_the_anthropic_sdk_accumulates(vendor: str, path: Path) -> None:
    events = _events(vendor, path)
    whole = MessageAggregator(model="m", id="msg_1")
    for event in events:
        whole.feed(event)
    status, answer = whole.result()
    encode = AnthropicEncoder(model="m", id="msg_1").encode
    snapshot = None
    bufs: dict[int, bytes] = {}
    failed = None
    adapter: Any = anthropic._models.TypeAdapter(RawMessageStreamEvent)
    for message in _frames(encode, events):
        obj = json.loads(message.data)
        if obj.get("type") == "error":
            failed = obj
            continue
        if obj.get("type") in ("ping",):
            continue
        snapshot = accumulate_event(
            event=adapter.validate_python(obj), current_snapshot=snapshot, json_bufs=bufs
        )
    if failed is not None:
        assert status >= 400 and answer["type"] == "error"
        assert answer["error"]["type"] == failed["error"]["type"]
        return
    assert status == 200 and snapshot is not None
    ours = anthropic.types.Message.model_validate(answer)
    theirs = snapshot.model_dump(exclude_none=True)
    mine = ours.model_dump(exclude_none=True)
    for block in theirs["content"]:
        block.pop("parsed_output", None)
    assert mine["content"] == theirs["content"]
    assert (mine["stop_reason"], mine["usage"]) == (theirs["stop_reason"], theirs["usage"])


def _stream(*events: ev.Event) -> list[ev.Event]:
    writer = Writer(model="m", request_id="r1")
    out = writer.start()
    for event in events:
        out += writer.add(event)
    if not writer.ended:
        out += writer.end()
    return out


UPSTREAM_404 = ev.ErrorEvent(
    v=ev.VERSION, seq=0, code="internal_error", message="upstream answered HTTP 404: no model"
)
OVERLOADED = ev.ErrorEvent(v=ev.VERSION, seq=0, code="overloaded", message="busy")


@pytest.mark.parametrize(
    ("make", "event", "status", "check"),
    [
        (ChatAggregator, UPSTREAM_404, 404, lambda b: b["error"]["message"].endswith("no model")),
        (ChatAggregator, OVERLOADED, 503, lambda b: b["error"]["type"] == "server_error"),
        (MessageAggregator, UPSTREAM_404, 404, lambda b: b["error"]["type"] == "not_found_error"),
        (MessageAggregator, OVERLOADED, 529, lambda b: b["error"]["type"] == "overloaded_error"),
        (ContentAggregator, UPSTREAM_404, 404, lambda b: b["error"]["status"] == "NOT_FOUND"),
        (ContentAggregator, OVERLOADED, 503, lambda b: b["error"]["status"] == "UNAVAILABLE"),
        (ResponseAggregator, OVERLOADED, 503, lambda b: b["error"]["message"] == "busy"),
    ],
)
def test_a_failed_stream_is_the_vendors_error(
    make: Any, event: Any, status: int, check: Any
) -> None:
    whole = make(model="m")
    for each in _stream(event):
        whole.feed(each)
    got, body = whole.result()
    assert got == status and check(body), body


def test_gemini_aggregate_merges_each_candidates_text() -> None:
    delta = ev.ContentDelta
    events = _stream(
        delta(v="1.0", seq=0, index=0, role="assistant", delta=ev.Delta(text="A")),
        ev.UnknownEvent(
            type="tokenwire.block",
            data=msgspec.json.encode(
                {"type": "tokenwire.block", "v": "1.0", "seq": 0, "index": 1, "tokenwire:choice": 1}
            ).decode(),
        ),
        delta(v="1.0", seq=0, index=1, role="assistant", delta=ev.Delta(text="B")),
        delta(v="1.0", seq=0, index=0, role="assistant", delta=ev.Delta(text="a")),
        delta(v="1.0", seq=0, index=1, role="assistant", delta=ev.Delta(text="b")),
    )
    whole = ContentAggregator(model="m")
    for event in events:
        whole.feed(event)
    status, answer = whole.result()
    assert status == 200
    parts = {c["index"]: c["content"]["parts"] for c in answer["candidates"]}
    assert parts == {0: [{"text": "Aa"}], 1: [{"text": "Bb"}]}
    assert [c["finishReason"] for c in answer["candidates"]] == ["STOP", "STOP"]
