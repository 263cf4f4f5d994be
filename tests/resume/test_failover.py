"""Redis failing under a running gateway: a Cluster primary killed mid-stream while keys
are being limited, and a single Redis restarted mid-stream while keys are being
limited (docs/scaling.md,
"Redis Cluster" and "What a failover loses").

The cluster (tests/production/redis_cluster.py) has three primaries with a
replica each. To hold the outage open long enough to look at it, the dead
primary's replica is paused (SIGSTOP) until the checks of the outage are done,
then let go; its promotion is waited for in ``CLUSTER NODES``, never slept for.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
from tests.gateway.gateway_procs import Gateway
from tests.production.conftest import Keys, table
from tests.production.redis_cluster import RedisCluster
from tests.resume.conftest import redis_config, start_all
from tests.resume.redis_proc import RedisServer
from tests.resume.resume_http import (
    MEDIA,
    auth,
    complete_frames,
    events_of,
    new_id,
    payload,
    remember,
    text_of,
    wait_for,
)

import tokenwire
from tokenwire import events as ev
from tokenwire.gateway.resume.manager import ResumeManager

#: The demo's pace and length: 600 tokens 50 ms apart, 30 s, so the stream is
#: still generating through the outage and the promotion (a limiter asking the
#: paused replica waits for its socket timeouts: seconds on a loaded machine).
PACE = {"delay_ms": 50, "tokens": 600}
#: A replica's lease outlives the outage (a resume would otherwise end the stream).
LEASE_S = 15.0


def _body(request_id: str) -> dict[str, Any]:
    body = payload(request_id=request_id)
    body["extensions"]["tokenwire:demo"] = PACE
    return body


class LiveRead:
    """POST a stream in a thread; ``stop`` hangs up. ``raw`` is what came so far."""

    def __init__(self, gateway: Gateway, body: dict[str, Any], headers: dict[str, str]) -> None:
        self.raw = b""
        self.status: int | None = None
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(gateway, body, headers))
        self._thread.start()

    def _run(self, gateway: Gateway, body: dict[str, Any], headers: dict[str, str]) -> None:
        try:
            with (
                gateway.client(timeout=60.0) as client,
                client.stream(
                    "POST",
                    "/v1/stream",
                    content=msgspec.json.encode(body),
                    headers={"content-type": MEDIA, **headers},
                ) as response,
            ):
                self.status = response.status_code
                for chunk in response.iter_raw():
                    self.raw += chunk
                    if self._stop.is_set():
                        break
                remember(response, self.raw)
        except BaseException as exc:  # reported by the test
            self.error = exc

    def events(self) -> list[ev.Event]:
        return events_of(complete_frames(self.raw))

    def stop(self) -> bytes:
        """Hang up; the whole frames received."""
        self._stop.set()
        self._thread.join(60)
        assert not self._thread.is_alive(), "the live read hung"
        assert self.error is None, self.error
        return complete_frames(self.raw)


def _resume_whole(gateway: Gateway, request_id: str, after: int, headers: dict[str, str]) -> bytes:
    with gateway.client(timeout=60.0) as client:
        response = client.get(
            f"/v1/streams/{request_id}",
            headers={**auth(request_id), **headers, "last-event-id": str(after)},
        )
    assert response.status_code == 200, (response.status_code, response.text)
    return response.content


def _check_whole(part: bytes, rest: bytes) -> list[ev.Event]:
    joined = events_of(part + rest)
    assert [e.seq for e in joined] == list(range(len(joined))), "a gap or a duplicate"
    assert tokenwire.validate([part + rest]).ok
    assert isinstance(joined[-1], ev.StreamEnd)
    assert not [e for e in joined if isinstance(e, ev.ErrorEvent)], rest[-400:]
    return joined


def _post_status(gateway: Gateway, headers: dict[str, str]) -> httpx.Response:
    # Bounded: a check that hangs fails here, not the whole run.
    with gateway.client(timeout=30.0) as client:
        return client.post(
            "/v1/stream",
            content=msgspec.json.encode(payload(resumable=None)),
            headers={"content-type": MEDIA, **headers},
        )


def _key_id_on(cluster: RedisCluster, port: int, prefix: str) -> str:
    """A key id whose limit counters live on node ``port``."""
    for i in range(10_000):
        key_id = f"fo-{i}"
        if cluster.primary_of(f"{prefix}:{{{key_id}}}:req") == port:
            return key_id
    raise AssertionError("no key id lands on that node")


def _request_id_on(cluster: RedisCluster, port: int, headers: dict[str, str]) -> str:
    """A request_id whose stored stream (in the caller's namespace) lives on ``port``."""
    credential = [(b"authorization", headers["authorization"].encode())]
    while True:
        request_id = new_id("failover")
        stream_id = ResumeManager.stream_id(credential, request_id)
        if cluster.primary_of(f"tw:{{{stream_id}}}:s") == port:
            return request_id


@pytest.mark.xfail(
    strict=False,
    reason=(
        "known gap: after a Cluster failover, the resume from the other replica can be "
        "cut mid-body (incomplete chunked read); seen in 1 of 5 fresh-clone runs and "
        "then in every local run; not yet found at its cause"
    ),
)
def test_a_primary_dies_mid_stream_while_keys_are_limited(
    redis_bin: str, tmp_path: Path, record_dir: Path
) -> None:
    workdir = tmp_path / "cluster"
    workdir.mkdir()
    with RedisCluster(redis_bin, workdir, 3, replicas=1, node_timeout_ms=1000) as cluster:
        doomed = cluster.ports[0]
        (heir,) = cluster.replicas_of(doomed)
        prefix = "test:fo"
        key_id = _key_id_on(cluster, doomed, prefix)
        keys = Keys()
        secret = keys.add(key_id, requests_per_minute=2)
        headers = {"authorization": f"Bearer {secret}"}
        resume = redis_config(record_dir, cluster.url, cluster=True, lease_s=LEASE_S, grace_s=60.0)

        def limits(fail_open: bool) -> str:
            fields = {
                "backend": "redis",
                "url": cluster.url,
                "cluster": True,
                "prefix": prefix,
                "fail_open": fail_open,
            }
            return table("limits", fields)

        # a lets requests through while the limiter is down, b refuses them.
        a = Gateway(tmp_path, config=resume + "\n" + keys.toml() + "\n" + limits(True))
        b = Gateway(tmp_path, config=resume + "\n" + keys.toml() + "\n" + limits(False))
        start_all(a, b)
        try:
            request_id = _request_id_on(cluster, doomed, headers)
            # Two requests of the key's two a minute: the stream on a, one on b.
            live = LiveRead(a, _body(request_id), headers)
            wait_for(lambda: len(live.events()) >= 5, what="the stream's first events")
            assert live.status == 200
            assert _post_status(b, headers).status_code == 200
            # The primary holding both the stream and the key's counters dies; its
            # replica is held back, so the outage lasts until the checks are done.
            heir_pid = cluster.procs[heir].pid
            os.kill(heir_pid, signal.SIGSTOP)
            try:
                cluster.kill(doomed)
                seen = len(live.events())
                # The stream goes on live, as if nothing happened.
                wait_for(lambda: len(live.events()) >= seen + 10, what="events in the outage")
                # The limiter is down: a fails open, b closed (503 + Retry-After).
                assert _post_status(a, headers).status_code == 200
                refused = _post_status(b, headers)
                assert refused.status_code == 503, refused.text
                assert refused.headers["retry-after"] == "1"
                assert refused.json()["error"]["message"] == "the rate limiter is unavailable"
                # The client hangs up in the outage; what it got, it keeps.
                part = live.stop()
                # Its slot has no node: its resume and its cancel answer 503 (a client
                # retries).
                assert _resume_status(b, request_id, headers) == 503
                with b.client(timeout=30.0) as client:
                    url = f"/v1/streams/{request_id}"
                    cancel = client.delete(url, headers={**auth(request_id), **headers})
                assert cancel.status_code == 503, cancel.text
            finally:
                os.kill(heir_pid, signal.SIGCONT)
            assert cluster.wait_promoted([heir]) == heir
            # The key's counters came through: its two requests are still counted
            # (the one a let through in the outage could not be).
            wait_for(
                lambda: _post_status(a, headers).status_code == 429,
                what="the limit counted across the failover",
            )
            assert _post_status(b, headers).status_code == 429
            # The stream resumes from the other replica with every seq, once. (Until
            # that replica's client has found the new primary, a resume answers 503,
            # as during the outage: a client retries.)
            last = events_of(part)[-1].seq
            assert last is not None
            wait_for(
                lambda: _resume_status(b, request_id, headers) == 200,
                what="the other replica finding the new primary",
            )
            rest = _resume_whole(b, request_id, last, headers)
            joined = _check_whole(part, rest)
            assert len(text_of(joined).split()) >= PACE["tokens"] // 2
            assert "resume_store_unavailable" in a.stderr()
        finally:
            a.stop()
            b.stop()


def test_a_single_redis_restarts_mid_stream_while_keys_are_limited(
    redis_bin: str, tmp_path: Path, record_dir: Path
) -> None:
    # With persistence (appendonly, every write fsynced): a restart keeps the streams
    # and the counters.
    server = RedisServer(redis_bin, tmp_path, persistent=True).start()
    try:
        keys = Keys()
        secret = keys.add(new_id("restart-key"), requests_per_minute=2)
        headers = {"authorization": f"Bearer {secret}"}
        resume = redis_config(record_dir, server.url, lease_s=LEASE_S, grace_s=60.0)

        def limits(fail_open: bool) -> str:
            fields = {"backend": "redis", "url": server.url, "fail_open": fail_open}
            return table("limits", {**fields, "prefix": "test:restart"})

        a = Gateway(tmp_path, config=resume + "\n" + keys.toml() + "\n" + limits(True))
        b = Gateway(tmp_path, config=resume + "\n" + keys.toml() + "\n" + limits(False))
        start_all(a, b)
        try:
            request_id = new_id("restart")
            live = LiveRead(a, _body(request_id), headers)
            wait_for(lambda: len(live.events()) >= 5, what="the stream's first events")
            assert _post_status(b, headers).status_code == 200  # the key's second request
            server.stop()  # SIGTERM: Redis writes its AOF and exits
            seen = len(live.events())
            wait_for(lambda: len(live.events()) >= seen + 10, what="events while Redis is down")
            # Down: a fails open, b closed; neither hangs.
            assert _post_status(a, headers).status_code == 200
            assert _post_status(b, headers).status_code == 503
            part = live.stop()
            started = time.monotonic()
            server.start()
            # The counters came back with Redis: the key's two requests still count.
            wait_for(
                lambda: _post_status(b, headers).status_code == 429,
                what="the limit counted across the restart",
            )
            last = events_of(part)[-1].seq
            assert last is not None
            wait_for(
                lambda: _resume_status(b, request_id, headers) == 200,
                what="the stream resumable again",
            )
            rest = _resume_whole(b, request_id, last, headers)
            _check_whole(part, rest)
            assert time.monotonic() - started < 120  # nothing hung
        finally:
            a.stop()
            b.stop()
    finally:
        server.kill()


def _resume_status(gateway: Gateway, request_id: str, headers: dict[str, str]) -> int:
    with gateway.client(timeout=30.0) as client:
        url = f"/v1/streams/{request_id}"
        return client.head(url, headers={**auth(request_id), **headers}).status_code
