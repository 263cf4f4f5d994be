"""The stream's flow (``tokenwire.client._flow``) driven by hand: no socket, no thread.

What ``Stream`` and ``AsyncStream`` do with each op is I/O; what the ops are,
and in which order, is decided here once. These tests play the driver.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import httpx
import pytest

from tokenwire import Writer, errors
from tokenwire import events as ev
from tokenwire.client import Client
from tokenwire.client import _flow as ops
from tokenwire.client._common import prepare_request
from tokenwire.client._flow import StreamFlow

SSE = {"content-type": "text/event-stream"}


def wire(request_id: str) -> list[bytes]:
    w = Writer(model="m", request_id=request_id, created=1)
    events = w.start() + w.text("one ") + w.text("two") + w.usage(1, 2) + w.end()
    return [ev.dump(e) for e in events]


def flow_for(client: Client) -> StreamFlow:
    return StreamFlow(client, prepare_request(None, {"model": "m", "messages": "hi"}))


def answer(op: ops.Op, *, status: int = 200, headers: dict[str, str] | None = None) -> Any:
    assert isinstance(op, ops.Send)
    return httpx.Response(status, headers={**SSE, **(headers or {})}, request=op.request)


def step(steps: Generator[ops.Op, Any, None], value: Any) -> ops.Op:
    return steps.send(value)


def hand_out(flow: StreamFlow, batch: ops.Op) -> list[ev.Event]:
    """What a driver does with a batch: deliver each event to the caller."""
    assert isinstance(batch, list)
    for event in batch:
        flow.receiver.deliver(event)
    return batch


def test_a_drop_then_a_resume_with_the_token() -> None:
    with Client("http://gateway.invalid", resume=True) as client:
        flow = flow_for(client)
        rid = flow.request.request_id or ""
        frames = wire(rid)
        steps = flow.run()
        post = next(steps)
        assert isinstance(post, ops.Send) and post.request.method == "POST"
        assert post.phase == "first_event"
        assert isinstance(
            step(steps, answer(post, headers={"tokenwire-resume-token": "t1"})), ops.Attach
        )
        assert isinstance(step(steps, None), ops.Read)
        batch = hand_out(flow, step(steps, frames[0] + frames[1]))
        assert [e.type for e in batch] == ["stream.start", "content.delta"]
        read = step(steps, None)
        assert isinstance(read, ops.Read) and read.phase == "idle"  # the idle clock, now
        assert isinstance(step(steps, ops.Dropped("cut")), ops.Close)
        get = step(steps, None)  # no pause before the first attempt
        assert isinstance(get, ops.Send) and get.request.method == "GET"
        assert get.request.url.path == f"/v1/streams/{rid}"
        assert get.request.headers["last-event-id"] == "1"
        assert get.request.headers["tokenwire-resume-token"] == "t1"
        assert isinstance(step(steps, answer(get)), ops.Attach)
        assert isinstance(step(steps, None), ops.Read)
        # The resume replays seq 1 (dropped: already delivered), then the rest.
        batch = hand_out(flow, step(steps, b"".join(frames[1:])))
        assert [e.seq for e in batch] == list(range(2, len(frames)))
        assert isinstance(step(steps, None), ops.Close)  # stream.end: done reading
        with pytest.raises(StopIteration):
            step(steps, None)
        assert flow.receiver.done
        assert flow.receiver.violations == []


def test_an_expired_clock_raises_from_the_flow() -> None:
    with Client("http://gateway.invalid") as client:
        flow = flow_for(client)
        steps = flow.run()
        post = next(steps)
        step(steps, answer(post))
        step(steps, None)
        with pytest.raises(errors.TimeoutError) as info:
            step(steps, ops.TimedOut())
    assert info.value.phase == "first_event"


def test_cancel_is_a_delete_only_for_a_resumable_stream_not_finished() -> None:
    with Client("http://gateway.invalid") as client:
        plain = flow_for(client)
        steps = plain.run()
        step(steps, answer(next(steps)))
        assert plain.cancel_request() is None  # a hang-up cancels it
        resumable = flow_for(client)
        steps = resumable.run()
        step(steps, answer(next(steps), headers={"tokenwire-resume-token": "t2"}))
        cancel = resumable.cancel_request()
    assert cancel is not None and cancel.method == "DELETE"
    assert cancel.headers["tokenwire-resume-token"] == "t2"
