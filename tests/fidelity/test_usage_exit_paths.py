"""Issue 18 item 7 at the endpoint: usage on every exit path, marked when estimated.

``StreamEndpoint`` builds its ``Writer`` with ``estimate_usage=True`` and notes
the prompt's input tokens as an estimate (one token per 4 characters of the
messages' text, docs/extensions.md). A provider's own usage always wins; a
stream that generated nothing gets no invented usage.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import msgspec
from tests.server.server_asgi import Exchange

import tokenwire
from tokenwire import events as ev
from tokenwire.request import Request
from tokenwire.server import StreamEndpoint

PROMPT = "How many tokens is this prompt, roughly?"  # 40 characters: 10 tokens


def _body(messages: list[dict[str, object]] | None = None) -> bytes:
    return msgspec.json.encode(
        {
            "version": "1.0",
            "stream": True,
            "model": "m",
            "messages": messages or [{"role": "user", "content": PROMPT}],
        }
    )


def _delta(text: str) -> ev.ContentDelta:
    return ev.ContentDelta(v="1.0", seq=0, index=0, role="assistant", delta=ev.Delta(text=text))


class _Provider:
    def __init__(self, events: list[ev.Event], raises: BaseException | None = None) -> None:
        self.events = events
        self.raises = raises

    async def generate(self, request: Request) -> AsyncIterator[ev.Event]:
        for event in self.events:
            yield event
        if self.raises is not None:
            raise self.raises


def _run(provider: _Provider, body: bytes | None = None) -> list[ev.Event]:
    x = Exchange(body or _body()).run(StreamEndpoint(provider))
    assert tokenwire.validate(x.body).ok
    return x.events()


def test_a_failure_after_output_reports_estimated_usage() -> None:
    events = _run(_Provider([_delta("Twelve chars")], raises=RuntimeError("upstream bug")))
    assert [e.type for e in events][-3:] == ["error", "usage", "stream.end"]
    usage = events[-2]
    assert isinstance(usage, ev.Usage)
    assert (usage.input_tokens, usage.output_tokens, usage.estimated) == (10, 3, True)
    assert b'"tokenwire:estimated":true' in ev.dump(usage)


def test_the_prompt_estimate_counts_every_message_text() -> None:
    messages: list[dict[str, object]] = [
        {"role": "system", "content": "Be brief."},  # 9
        {"role": "user", "content": [{"type": "text", "text": PROMPT}]},  # 40
        {"role": "assistant", "content": "Ok."},  # 3
    ]
    events = _run(_Provider([_delta("a")], raises=RuntimeError("boom")), _body(messages))
    usage = events[-2]
    assert isinstance(usage, ev.Usage)
    assert (usage.input_tokens, usage.output_tokens, usage.estimated) == (13, 1, True)  # 52 chars


def test_the_providers_own_usage_is_never_replaced() -> None:
    reported = ev.Usage(v="1.0", seq=0, input_tokens=321, output_tokens=7)
    events = _run(_Provider([_delta("Hello"), reported], raises=RuntimeError("after usage")))
    usages = [e for e in events if isinstance(e, ev.Usage)]
    assert [(u.input_tokens, u.output_tokens, u.estimated) for u in usages] == [(321, 7, False)]
    assert b"tokenwire:estimated" not in b"".join(map(ev.dump, events))


def test_a_stream_that_generated_nothing_invents_no_usage() -> None:
    # An upstream that refused the request (say HTTP 429) used no tokens.
    refused = ev.ErrorEvent(v="1.0", seq=0, code="rate_limited", message="slow down")
    events = _run(_Provider([refused]))
    assert [e.type for e in events] == ["stream.start", "error", "stream.end"]


def test_a_connection_failure_mid_body_keeps_the_vendors_input_count() -> None:
    # What HTTPProvider does on a reset or a timeout: the translator ends the
    # stream, so Anthropic's own input count survives (not a prompt estimate).
    from tokenwire.translate import translator

    start = (
        b'event: message_start\ndata: {"type":"message_start","message":{"id":"m","type":"message",'
        b'"role":"assistant","model":"c","content":[],"stop_reason":null,'
        b'"usage":{"input_tokens":1234,"output_tokens":1}}}\n\n'
        b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
        b'"content_block":{"type":"text","text":""}}\n\n'
        b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
        b'"delta":{"type":"text_delta","text":"Hello there, half an answer"}}\n\n'
    )
    t = translator("anthropic", model="c", request_id="r")
    events = t.feed(start) + t.fail("internal_error", "upstream connection failed (ReadError)")
    error, usage, end = events[-3:]
    assert isinstance(error, ev.ErrorEvent) and error.code == "internal_error"
    assert isinstance(usage, ev.Usage) and usage.input_tokens == 1234
    assert usage.estimated and usage.output_tokens >= 1
    assert isinstance(end, ev.StreamEnd)
    assert t.fail("internal_error", "again") == []  # the stream is over
