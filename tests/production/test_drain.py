"""Graceful drain: SIGTERM to a real ``tokenwire serve``; streams that finish within
``drain_s`` finish; the rest end with ``error`` + ``stream.end``; the process exits."""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path

import httpx
import msgspec
from tests.gateway.gateway_http import MEDIA, StreamReader, body
from tests.production.conftest import start, table
from tests.resume.redis_proc import RedisServer
from tests.resume.resume_http import events_of as resume_events_of
from tests.resume.resume_http import new_id, payload, read_part, resume

from tokenwire import events as ev
from tokenwire.gateway.policy.drain import Drain
from tokenwire.testing import wait_until


def _recorder(name: str, record_dir: Path, **options: object) -> str:
    return table(
        "models",
        {
            "name": name,
            "provider": "python",
            "factory": "gateway_plugins:Recorder",
            "options": {"record_dir": str(record_dir), **options},
        },
        array=True,
    )


def _wait(predicate: Callable[[], object], timeout: float = 20.0) -> None:
    wait_until(predicate, timeout=timeout)


def test_sigterm_lets_streams_finish_then_ends_the_rest(tmp_path: Path) -> None:
    config = "\n".join(
        [
            table("server", {"drain_s": 2.0}),
            # 30 tokens 50 ms apart: done well within the drain time.
            _recorder("quick", tmp_path, interval_ms=50, limit=30),
            # A token every 50 ms for minutes: still running when the drain time is over.
            _recorder("endless", tmp_path, interval_ms=50),
        ]
    )
    gateway = start(tmp_path, config)
    try:
        quick, endless = StreamReader(gateway.url, "quick"), StreamReader(gateway.url, "endless")
        quick.start()
        endless.start()
        _wait(lambda: len(quick.events) >= 2 and len(endless.events) >= 2)
        assert gateway.proc is not None
        gateway.proc.send_signal(signal.SIGTERM)
        at_signal = len(endless.events)
        quick.join(30)
        endless.join(30)
        assert quick.failure is None and endless.failure is None
        # The quick stream finished on its own, complete.
        assert isinstance(quick.events[-1], ev.StreamEnd)
        assert not [e for e in quick.events if isinstance(e, ev.ErrorEvent)]
        assert len([e for e in quick.events if isinstance(e, ev.ContentDelta)]) == 30
        # The endless one kept streaming during the drain, then got error + stream.end.
        assert len(endless.events) > at_signal + 2
        assert isinstance(endless.events[-1], ev.StreamEnd)
        error, usage = endless.events[-3:-1]  # the usage sent so far, estimated, follows it
        assert isinstance(usage, ev.Usage) and usage.estimated and usage.output_tokens > 0
        assert isinstance(error, ev.ErrorEvent) and error.code == "overloaded"
        assert "shutting down" in error.message
        gateway.proc.wait(timeout=30)
        assert "drain_time_over" in gateway.stderr()
    finally:
        gateway.stop()


def test_the_drain_ends_at_once_when_nothing_streams() -> None:
    import asyncio

    async def run() -> None:
        drain = Drain(drain_s=3600.0)
        drain.begin()
        await asyncio.wait_for(drain.wait(), timeout=10.0)
        assert drain.draining

    asyncio.run(run())


def test_requests_arriving_while_draining_get_503() -> None:
    import asyncio

    from tokenwire.gateway.app import build_app

    app = build_app()

    async def run() -> None:
        app.state.gateway.production.drain.draining = True
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
            refused = await client.post(
                "/v1/stream",
                content=msgspec.json.encode(body("demo", "hi")),
                headers={"content-type": MEDIA},
            )
            assert refused.status_code == 503
            assert refused.json()["error"]["code"] == "draining"
            assert refused.headers["retry-after"] == "1"
            assert (await client.get("/healthz")).status_code == 200

    asyncio.run(run())


def test_a_drained_resumable_stream_stays_resumable_from_another_replica(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    config = "\n".join(
        [
            table("server", {"drain_s": 1.0}),
            table("resume", {"backend": "redis", "url": redis_server.url}),
            _recorder("endless", tmp_path, interval_ms=50),
        ]
    )
    a = start(tmp_path, config)
    b = start(tmp_path, config)
    try:
        request_id = new_id("drained")
        with a.client(timeout=20.0) as client:
            # Read a few events, then hang up: the stream goes on, recorded in Redis.
            part = read_part(client, payload("endless", request_id=request_id), 3)
        assert len(resume_events_of(part)) == 3
        assert a.proc is not None
        a.proc.send_signal(signal.SIGTERM)
        a.proc.wait(timeout=30)
        assert "drain_time_over" in a.stderr()
        with b.client(timeout=20.0) as client:
            response = resume(client, request_id, 0)
        assert response.status_code == 200
        events = resume_events_of(response.content)
        assert isinstance(events[-1], ev.StreamEnd)
        error, usage = events[-3:-1]  # the usage sent so far, estimated, follows it
        assert isinstance(usage, ev.Usage) and usage.estimated
        assert isinstance(error, ev.ErrorEvent) and error.code == "overloaded"
        assert "shutting down" in error.message
        assert len([e for e in events if isinstance(e, ev.ContentDelta)]) >= 2
    finally:
        a.stop()
        b.stop()
