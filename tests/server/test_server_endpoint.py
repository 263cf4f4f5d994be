"""``tokenwire.server.StreamEndpoint``, driven with scripted ASGI ``receive``/``send``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import msgspec
import pytest
from tests.server.server_asgi import Exchange

import tokenwire
from tokenwire import events as ev
from tokenwire import request as rq
from tokenwire import server
from tokenwire.errors import ProtocolError
from tokenwire.server import StreamEndpoint, StreamRecord, negotiate
from tokenwire.server import asgi as _asgi
from tokenwire.server.outbox import KEEPALIVE
from tokenwire.testing import async_wait_until


def _body(model: str = "m", **fields: Any) -> bytes:
    raw = {
        "version": "1.0",
        "stream": True,
        "model": model,
        "messages": [{"role": "user", "content": "hi"}],
    }
    raw.update(fields)
    return msgspec.json.encode(raw)


def _delta(text: str, index: int = 0) -> ev.ContentDelta:
    return ev.ContentDelta(v="1.0", seq=0, index=index, role="assistant", delta=ev.Delta(text=text))


def _assert_estimated(event: ev.Event, input_tokens: int, output_tokens: int) -> None:
    """docs/extensions.md: a provider that reported no usage gets the endpoint's
    estimate (one token per 4 characters of the prompt's and the output's text),
    marked ``tokenwire:estimated``."""
    assert isinstance(event, ev.Usage), event
    assert (event.input_tokens, event.output_tokens, event.estimated) == (
        input_tokens,
        output_tokens,
        True,
    )
    assert b'"tokenwire:estimated":true' in ev.dump(event)


class Script:
    """A provider yielding ``events`` (optionally once ``before()`` holds), then maybe raising."""

    def __init__(
        self,
        events: list[ev.Event],
        *,
        before: Callable[[], bool] | None = None,
        raises: BaseException | None = None,
        forever: bool = False,
    ) -> None:
        self.events = events
        self.before = before
        self.raises = raises
        self.forever = forever
        self.cancelled = False
        self.closed = False
        self.cleanup_done = False

    async def generate(self, request: rq.Request) -> AsyncIterator[ev.Event]:
        try:
            if self.before is not None:
                await async_wait_until(self.before)
            for event in self.events:
                yield event
            if self.raises is not None:
                raise self.raises
            while self.forever:
                await asyncio.sleep(0.001)  # a model that never stops: its pacing is the behaviour
                yield _delta(".")
        except asyncio.CancelledError:
            self.cancelled = True
            # Cleanup that awaits (closing an upstream) must not be cut short: the
            # pause is the behaviour under test (the flag says whether it ran out).
            await asyncio.sleep(0.01)
            self.cleanup_done = True
            raise
        finally:
            self.closed = True


# --- refusals -----------------------------------------------------------------------


def _error(x: Exchange) -> dict[str, Any]:
    assert x.headers["content-type"] == "application/json"
    error: dict[str, Any] = x.json()["error"]
    assert set(error) == {"code", "message", "path"}
    return error


def test_method_not_allowed() -> None:
    x = Exchange(method="GET").run(StreamEndpoint(Script([])))
    assert x.status == 405 and x.headers["allow"] == "POST"
    assert _error(x)["code"] == "method_not_allowed"


@pytest.mark.parametrize(
    "ctype", [None, "application/json", "text/plain", "application/llm-request"]
)
def test_unsupported_media_type(ctype: str | None) -> None:
    x = Exchange(_body(), content_type=ctype).run(StreamEndpoint(Script([])))
    assert x.status == 415
    assert _error(x)["code"] == "unsupported_media_type"
    assert x.headers["accept-post"] == rq.MEDIA_TYPE


def test_media_type_parameters_and_case_are_ignored() -> None:
    x = Exchange(_body(), content_type="Application/LLM-Request+JSON; charset=utf-8")
    assert x.run(StreamEndpoint(Script([]))).status == 200


def test_content_length_over_the_limit_reads_nothing() -> None:
    x = Exchange([b"x" * 100] * 10)
    x.run(StreamEndpoint(Script([]), max_body_bytes=500))
    assert x.status == 413 and _error(x)["code"] == "request_too_large"
    assert x.received == 0


@pytest.mark.parametrize(
    ("lengths", "message"),
    [
        (["12x"], "Content-Length is not a number"),
        (["-1"], "Content-Length is not a number"),
        (["5", "6"], "Content-Length is given twice, differently"),
    ],
)
def test_an_unreadable_content_length_is_400_and_reads_nothing(
    lengths: list[str], message: str
) -> None:
    x = Exchange(_body(), content_length=False)
    x.scope["headers"] = [*x.scope["headers"], *((b"content-length", n.encode()) for n in lengths)]
    x.run(StreamEndpoint(Script([])))
    assert x.status == 400 and _error(x)["message"] == message
    assert x.received == 0


def test_body_over_the_limit_stops_reading() -> None:
    # No Content-Length (chunked): the limit is checked chunk by chunk.
    x = Exchange([b"x" * 1024] * 64, content_length=False)
    x.run(StreamEndpoint(Script([]), max_body_bytes=4096))
    assert x.status == 413
    assert x.received == 5  # 4 KiB fit; the fifth chunk crossed the limit


def test_invalid_json_names_the_byte_offset() -> None:
    x = Exchange(b'{"version": "1.0", "stream": tru').run(StreamEndpoint(Script([])))
    assert x.status == 400
    error = _error(x)
    assert error["code"] == "invalid_request" and error["path"] == "$"
    assert "byte" in error["message"]


def test_invalid_envelope_names_the_field() -> None:
    body = _body(messages=[{"role": "user", "content": "q"}, {"role": "tool", "content": "r"}])
    x = Exchange(body).run(StreamEndpoint(Script([])))
    assert x.status == 400
    assert _error(x)["path"] == "messages[1].tool_call_id"


def test_nesting_limit_is_413() -> None:
    x = Exchange(b"[" * 200 + b"]" * 200).run(StreamEndpoint(Script([])))
    assert x.status == 413 and _error(x)["path"] == "$"


def test_unknown_model_is_404() -> None:
    x = Exchange(_body("nope")).run(StreamEndpoint({"m": Script([])}))
    assert x.status == 404
    error = _error(x)
    assert error["code"] == "model_not_found" and error["path"] == "model"


def test_lookup_function() -> None:
    provider = Script([_delta("hi")])
    endpoint = StreamEndpoint(lambda name: provider if name.startswith("m") else None)
    assert Exchange(_body("m1")).run(endpoint).status == 200
    assert Exchange(_body("x1")).run(endpoint).status == 404


# --- the stream ----------------------------------------------------------------------


def test_stream_headers_and_conformance() -> None:
    x = Exchange(_body(metadata={"request_id": "r9"})).run(
        StreamEndpoint(Script([_delta("Hello")]))
    )
    assert x.status == 200
    assert x.headers["content-type"] == "text/event-stream"
    assert x.headers["cache-control"] == "no-cache"
    assert x.headers["x-accel-buffering"] == "no"
    assert "content-length" not in x.headers
    report = tokenwire.validate(x.body, rq.parse(_body(metadata={"request_id": "r9"})))
    assert report.ok, report.violations
    events = x.events()
    assert [e.type for e in events] == [
        "stream.start",
        "content.delta",
        "content.stop",
        "usage",
        "stream.end",
    ]
    _assert_estimated(events[3], 1, 2)  # "hi" and "Hello"
    assert not report.warnings, report.warnings  # the usage SHOULD is met
    assert events[0].request_id == events[-1].request_id == "r9"  # type: ignore[union-attr]
    assert x.messages[-1]["more_body"] is False


def test_events_already_produced_leave_in_one_send() -> None:
    provider = Script([_delta(f"t{i} ") for i in range(200)])
    x = Exchange(_body()).run(StreamEndpoint(provider))
    assert len(x.events()) == 204
    _assert_estimated(x.events()[-2], 1, 223)  # 890 characters of "t0 " ... "t199 "
    # stream.start (with whatever the provider's first step produced), then
    # everything the provider produced meanwhile, in one send.
    assert len(x.bodies) <= 3
    assert tokenwire.validate(x.body).ok


def test_provider_stream_start_and_seq_are_restamped() -> None:
    events: list[ev.Event] = [
        ev.StreamStart(v="1.0", seq=7, model="other", created=1),
        _delta("a"),
        _delta("b"),
        ev.Usage(v="1.0", seq=0, input_tokens=1, output_tokens=2),
    ]
    x = Exchange(_body()).run(StreamEndpoint(Script(events)))
    out = x.events()
    assert [e.seq for e in out] == list(range(len(out)))  # type: ignore[union-attr]
    assert sum(isinstance(e, ev.StreamStart) for e in out) == 1
    assert tokenwire.validate(x.body).ok


def test_provider_stream_end_ends_the_stream_and_closes_the_generator() -> None:
    provider = Script([_delta("a"), ev.StreamEnd(v="1.0", seq=0), _delta("never")])
    x = Exchange(_body()).run(StreamEndpoint(provider))
    assert b"never" not in x.body
    assert provider.closed
    assert tokenwire.validate(x.body).ok


@pytest.mark.parametrize(
    ("exc", "code", "message"),
    [
        (RuntimeError("secret detail"), "internal_error", "internal error"),
        (TimeoutError(), "overloaded", None),
        (ProtocolError("bad upstream"), "internal_error", "bad upstream"),
    ],
)
def test_failures_become_error_and_stream_end(
    exc: Exception, code: str, message: str | None
) -> None:
    record: list[StreamRecord] = []

    class Keep:
        def opened(self, r: StreamRecord) -> None:
            return None

        def closed(self, r: StreamRecord) -> None:
            record.append(r)

    x = Exchange(_body()).run(
        StreamEndpoint(Script([_delta("so far")], raises=exc), observers=[Keep()])
    )
    assert x.status == 200
    events = x.events()
    error = next(e for e in events if isinstance(e, ev.ErrorEvent))
    assert error.code == code
    if message is not None:
        assert error.message == message
    assert isinstance(events[-1], ev.StreamEnd)
    assert b"secret detail" not in x.body and b"Traceback" not in x.body
    assert tokenwire.validate(x.body).ok
    assert record[0].error_code == code and record[0].exception is exc


def test_an_invalid_provider_sequence_still_ends_cleanly() -> None:
    events: list[ev.Event] = [
        ev.ErrorEvent(v="1.0", seq=0, code="overloaded", message="busy"),
        _delta("content after an error is illegal"),
    ]
    x = Exchange(_body()).run(StreamEndpoint(Script(events)))
    assert tokenwire.validate(x.body).ok
    assert [e.type for e in x.events()] == ["stream.start", "error", "stream.end"]


def test_hang_up_cancels_the_provider_and_lets_it_clean_up() -> None:
    provider = Script([], forever=True)
    records: list[StreamRecord] = []

    class Keep:
        def opened(self, r: StreamRecord) -> None:
            return None

        def closed(self, r: StreamRecord) -> None:
            records.append(r)

    x = Exchange(_body(), hang_up_after=3).run(StreamEndpoint(provider, observers=[Keep()]))
    assert provider.cancelled and provider.cleanup_done and provider.closed
    assert records[0].disconnected and records[0].status == 200
    assert len(x.bodies) == 3  # nothing was sent after the hang-up


def test_send_failure_counts_as_a_hang_up() -> None:
    provider = Script([], forever=True)
    x = Exchange(_body(), send_error_after=2).run(StreamEndpoint(provider))
    assert provider.cancelled and provider.closed
    assert len(x.bodies) == 3


def test_idle_stream_gets_keepalives() -> None:
    x = Exchange(_body())
    # The provider stays idle until a keepalive went out: no race with the clock.
    provider = Script([_delta("late")], before=lambda: KEEPALIVE in x.bodies)
    x.run(StreamEndpoint(provider, keepalive_s=0.01))
    assert KEEPALIVE in x.bodies
    assert tokenwire.validate(x.body).ok  # comments are ignored by decoders


def test_keepalive_must_be_positive() -> None:
    with pytest.raises(ValueError):
        StreamEndpoint(Script([]), keepalive_s=0)


def test_observers_and_tees_see_everything() -> None:
    seen: list[ev.Event] = []
    calls: list[str] = []

    class Tap:
        def write(self, events: list[ev.Event]) -> None:
            seen.extend(events)

        def close(self) -> None:
            calls.append("tee-close")

    class Watch:
        def opened(self, record: StreamRecord) -> Tap:
            calls.append("opened")
            return Tap()

        def closed(self, record: StreamRecord) -> None:
            calls.append(f"closed {record.status} {record.events}")

    class Broken:
        def opened(self, record: StreamRecord) -> None:
            raise RuntimeError("observer bug")

        def closed(self, record: StreamRecord) -> None:
            raise RuntimeError("observer bug")

    x = Exchange(_body()).run(
        StreamEndpoint(Script([_delta("a"), _delta("b")]), observers=[Broken(), Watch()])
    )
    assert x.status == 200
    assert [e.seq for e in seen] == [0, 1, 2, 3, 4, 5]  # type: ignore[union-attr]
    _assert_estimated(seen[4], 1, 1)  # the tees see the estimated usage too
    assert b"".join(map(ev.dump, seen)) == x.body
    assert calls == ["opened", "tee-close", "closed 200 6"]


def test_rejections_reach_observers() -> None:
    records: list[StreamRecord] = []

    class Keep:
        def opened(self, r: StreamRecord) -> None:
            raise AssertionError("a rejected request opens no stream")

        def closed(self, r: StreamRecord) -> None:
            records.append(r)

    Exchange(_body(version="2.0")).run(StreamEndpoint(Script([]), observers=[Keep()]))
    (record,) = records
    assert (record.status, record.error_code, record.error_path) == (
        400,
        "invalid_request",
        "version",
    )
    assert record.duration is not None and record.time_to_first_event is None


# --- dual-format ingress ------------------------------------------------------------------


class Upper(server.Ingress):
    """A toy vendor format: ``{"ask": "..."}`` in, ``TEXT:...`` lines out."""

    name = "toy"
    media_types = frozenset({"application/json"})

    def parse(self, body: bytes, exchange: server.Exchange) -> tuple[rq.Request, server.Encode]:
        obj = msgspec.json.decode(body)
        request = rq.build(model="m", messages=obj["ask"])

        def encode(event: ev.Event) -> bytes:
            if isinstance(event, ev.ContentDelta):
                return b"TEXT:" + event.delta.text.upper().encode() + b"\n"
            return b""

        return request, encode


def test_ingress_answers_in_the_vendor_format() -> None:
    endpoint = StreamEndpoint(Script([_delta("hi")]), ingress=Upper())
    x = Exchange(b'{"ask": "q"}', content_type="application/json").run(endpoint)
    assert x.status == 200 and x.body == b"TEXT:HI\n"


def test_ingress_answers_in_the_standard_on_request() -> None:
    endpoint = StreamEndpoint(Script([_delta("hi")]), ingress=Upper())
    accept = 'application/json, text/event-stream; profile="llm-stream-1.0"'
    x = Exchange(b'{"ask": "q"}', content_type="application/json", headers={"accept": accept})
    x.run(endpoint)
    assert tokenwire.validate(x.body).ok


def test_ingress_route_takes_standard_bodies() -> None:
    endpoint = StreamEndpoint(Script([_delta("hi")]), ingress=Upper())
    x = Exchange(_body()).run(endpoint)
    assert tokenwire.validate(x.body).ok
    x = Exchange(b"hi", content_type="text/plain").run(endpoint)
    assert x.status == 415
    assert x.headers["accept-post"] == f"{rq.MEDIA_TYPE}, application/json"


# --- helpers ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        ('text/event-stream; profile="llm-stream-1.0"', True),
        ("text/event-stream;profile=llm-stream-1.0", True),
        ('application/json, TEXT/EVENT-STREAM; q=0.9; profile="llm-stream-1.0"', True),
        ("text/event-stream", False),
        ('text/event-stream; profile="llm-stream-2.0"', False),
        ('application/json; profile="llm-stream-1.0"', False),
        ("", False),
        (None, False),
    ],
)
def test_wants_standard(accept: str | None, expected: bool) -> None:
    assert negotiate.wants_standard(accept) is expected
    if accept is not None:
        assert negotiate.wants_standard(accept.encode()) is expected


def test_media_type_essence() -> None:
    assert negotiate.media_type_essence(b"Application/JSON ; charset=x") == "application/json"
    assert negotiate.media_type_essence(None) == ""


def test_classify_exception() -> None:
    assert _asgi.classify_exception(KeyError("x")) == ("internal_error", "internal error")
    assert _asgi.classify_exception(TimeoutError())[0] == "overloaded"


def test_non_http_scope_is_refused() -> None:
    async def go() -> None:
        async def receive() -> dict[str, Any]:
            return {}

        async def send(message: Any) -> None:
            return None

        await StreamEndpoint(Script([]))({"type": "websocket"}, receive, send)

    with pytest.raises(RuntimeError):
        asyncio.run(go())


def test_lifespan_is_answered() -> None:
    sent: list[dict[str, Any]] = []
    incoming = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]

    async def go() -> None:
        async def receive() -> dict[str, Any]:
            return incoming.pop(0)

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        await StreamEndpoint(Script([]))({"type": "lifespan"}, receive, send)

    asyncio.run(go())
    assert [m["type"] for m in sent] == ["lifespan.startup.complete", "lifespan.shutdown.complete"]


def test_provider_raising_cancelled_itself_still_ends_the_stream() -> None:
    x = Exchange(_body()).run(
        StreamEndpoint(Script([_delta("a")], raises=asyncio.CancelledError()))
    )
    assert [e.type for e in x.events()][-3:] == ["error", "usage", "stream.end"]
    _assert_estimated(x.events()[-2], 1, 1)  # usage on every exit path (issue 18 item 7)
    assert tokenwire.validate(x.body).ok


def test_a_failing_tee_does_not_break_the_stream() -> None:
    class BadTap:
        def write(self, events: list[ev.Event]) -> None:
            raise RuntimeError("store down")

        def close(self) -> None:
            raise RuntimeError("store down")

    class Watch:
        def opened(self, record: StreamRecord) -> BadTap:
            return BadTap()

        def closed(self, record: StreamRecord) -> None:
            return None

    x = Exchange(_body()).run(StreamEndpoint(Script([_delta("a")]), observers=[Watch()]))
    assert [e.type for e in x.events()] == [
        "stream.start",
        "content.delta",
        "content.stop",
        "usage",
        "stream.end",
    ]


@pytest.mark.parametrize("hang_up_after", [None, 3])
def test_nothing_outlives_the_request(hang_up_after: int | None) -> None:
    # The sending and the hang-up watcher race (starlette's StreamingResponse):
    # whichever ends first cancels the other, and the provider, its keep-alive
    # and the watcher are all over when the request returns.
    provider = Script([_delta("a"), _delta("b")], forever=hang_up_after is not None)
    left: list[set[asyncio.Task[Any]]] = []

    async def go() -> None:
        x = Exchange(_body(), hang_up_after=hang_up_after)
        await StreamEndpoint(provider, keepalive_s=0.01)(x.scope, x.receive, x.send)
        left.append(asyncio.all_tasks() - {asyncio.current_task()})  # type: ignore[operator]
        if hang_up_after is None:
            assert isinstance(x.events()[-1], ev.StreamEnd)
            assert not x.gone.is_set()  # the client never hung up: the watcher was cancelled

    asyncio.run(go())
    assert left == [set()]
    assert provider.closed


class _Upstream:
    """A provider that "writes its upstream request" at once, then waits for an answer
    the test gives once the client has seen the stream start."""

    def __init__(self, x: Exchange) -> None:
        self.x = x
        self.messages_when_called: int | None = None
        self.answer: asyncio.Event | None = None

    async def generate(self, request: rq.Request) -> AsyncIterator[ev.Event]:
        self.messages_when_called = len(self.x.messages)
        self.answer = asyncio.Event()
        await self.answer.wait()
        yield _delta("late")


def test_provider_starts_before_the_response_and_stream_start_does_not_wait_for_it() -> None:
    x = Exchange(_body())
    provider = _Upstream(x)
    endpoint = StreamEndpoint(provider)

    async def go() -> None:
        task = asyncio.create_task(endpoint(x.scope, x.receive, x.send))
        # §5.3.1: stream.start reaches the client while the provider still waits.
        await async_wait_until(lambda: x.bodies)
        assert [e.type for e in x.events()] == ["stream.start"]
        assert provider.answer is not None
        provider.answer.set()
        await task

    asyncio.run(go())
    # The provider's first step (an upstream request written) ran before the
    # response started: the upstream works while the response is set up.
    assert provider.messages_when_called == 0
    assert x.status == 200
    assert [e.type for e in x.events()][:2] == ["stream.start", "content.delta"]
    assert x.events()[-1].type == "stream.end"


class _FirstThenMany:
    """A provider whose first read holds its first event and many more (a short reply)."""

    def __init__(self, x: Exchange) -> None:
        self.x = x
        self.first_sent_before_second: bool | None = None

    async def generate(self, request: rq.Request) -> AsyncIterator[ev.Event]:
        # The upstream works while stream.start goes out.
        await async_wait_until(lambda: self.x.bodies)
        yield _delta("first ")
        self.first_sent_before_second = b"first " in self.x.body
        for i in range(50):
            yield _delta(f"t{i} ")


def test_the_first_event_is_sent_before_the_provider_goes_on() -> None:
    x = Exchange(_body())
    provider = _FirstThenMany(x)
    x.run(StreamEndpoint(provider))
    # The first token reaches the client without waiting for the rest of the read.
    assert provider.first_sent_before_second is True
    assert len(x.events()) == 1 + 51 + 3  # start, 51 deltas, stop, usage, end
    assert tokenwire.validate(x.body).ok
