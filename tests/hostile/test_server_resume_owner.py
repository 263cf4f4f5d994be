"""Attack: read or cancel someone else's resumable stream by knowing (or guessing) its
``request_id`` (issue 16, "Resumable streams bound to their owner").

The stream's POST answer carries ``tokenwire-resume-token``; ``GET`` and ``DELETE
/v1/streams/{id}`` need it back (and the creator's credential, when it had one).
Without them the answer is the 404 of a stream that does not exist, byte for
byte. Driven in-process (scripted ASGI, tests/server/server_asgi.py) against the
memory store and a real ``redis-server``, and once through a real gateway.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from tests.gateway.gateway_procs import Gateway
from tests.resume.redis_proc import RedisServer, redis_binary
from tests.server.server_asgi import Exchange

from tokenwire import events as ev
from tokenwire.gateway.resume import (
    NOT_FOUND,
    TOKEN_HEADER,
    MemoryStore,
    RedisStore,
    ResumeEndpoint,
    ResumeManager,
    Store,
)
from tokenwire.gateway.resume.access import credential_digest, scoped
from tokenwire.request import MEDIA_TYPE, Request
from tokenwire.server import StreamEndpoint

TOKEN = TOKEN_HEADER.decode()


class Ticker:
    """Tokens ``interval`` s apart, for ``count`` of them; records how each stream ended."""

    def __init__(self, count: int = 10_000, interval: float = 0.01) -> None:
        self.count = count
        self.interval = interval
        self.outcome: dict[str, str] = {}

    async def generate(self, request: Request) -> AsyncIterator[ev.Event]:
        rid = request.request_id or "?"
        try:
            for i in range(self.count):
                await asyncio.sleep(self.interval)  # a paced model: the pacing is the behaviour
                yield ev.ContentDelta(
                    v="1.0", seq=0, index=0, role="assistant", delta=ev.Delta(text=f" t{i}")
                )
        except asyncio.CancelledError:
            self.outcome[rid] = "cancelled"
            raise
        self.outcome[rid] = "completed"


def _body(request_id: str) -> bytes:
    return msgspec.json.encode(
        {
            "version": "1.0",
            "stream": True,
            "model": "m",
            "messages": [{"role": "user", "content": "my secret question"}],
            "metadata": {"request_id": request_id},
            "extensions": {"tokenwire:resumable": True},
        }
    )


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    binary, why = redis_binary()
    if binary is None:
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)
    with RedisServer(binary, tmp_path_factory.mktemp("redis")) as server:
        yield server.url


@pytest.fixture(params=["memory", "redis"])
def make_store(request: pytest.FixtureRequest) -> Callable[[], Store]:
    if request.param == "memory":
        return MemoryStore
    url = request.getfixturevalue("redis_url")
    prefix = f"h{uuid.uuid4().hex[:8]}"
    return lambda: RedisStore(url, owner="me", prefix=prefix)


class Rig:
    """A resumable endpoint and its route, on one store, in one event loop."""

    def __init__(self, store: Store, provider: Ticker) -> None:
        self.store = store
        self.provider = provider
        self.manager = ResumeManager(store, grace_s=30.0, replica="me")
        self.post_endpoint = StreamEndpoint(provider, resumption=self.manager)
        self.route = ResumeEndpoint(self.manager)

    async def post(
        self, request_id: str, headers: dict[str, str] | None = None, hang_up_after: int = 3
    ) -> Exchange:
        exchange = Exchange(_body(request_id), headers=headers, hang_up_after=hang_up_after)
        await self.post_endpoint(exchange.scope, exchange.receive, exchange.send)
        return exchange

    async def call(self, method: str, request_id: str, headers: dict[str, str]) -> Exchange:
        exchange = Exchange(b"", method=method, content_type=None, headers=headers)
        exchange.scope["path_params"] = {"request_id": request_id}
        if method == "GET":
            # A resume follows a live stream: hang up once it has sent something.
            exchange.hang_up_after = 2
        await self.route(exchange.scope, exchange.receive, exchange.send)
        return exchange


def _run(make_store: Callable[[], Store], test: Callable[[Rig], Awaitable[None]]) -> None:
    async def main() -> None:
        rig = Rig(make_store(), Ticker())
        try:
            await test(rig)
        finally:
            await rig.manager.aclose()

    asyncio.run(main())


def _answer(exchange: Exchange) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """Everything the client gets: status, headers in order, body bytes."""
    return exchange.status, list(exchange.messages[0]["headers"]), exchange.body


def test_a_guessed_request_id_gets_the_404_of_a_missing_stream(
    make_store: Callable[[], Store],
) -> None:
    async def test(rig: Rig) -> None:
        victim = await rig.post("victim-1")
        token = victim.headers[TOKEN]
        assert len(token) >= 43  # secrets.token_urlsafe(32)
        missing_get = _answer(await rig.call("GET", "never-was", {}))
        missing_delete = _answer(await rig.call("DELETE", "never-was", {}))
        assert missing_get[0] == 404 and missing_get[2] == NOT_FOUND
        for headers in (
            {},  # knows the id only
            {TOKEN: "x" * 43},  # guessed a token
            {TOKEN: token[:-1] + ("A" if token[-1] != "A" else "B")},  # one character off
            {TOKEN: token, "authorization": "Bearer someone"},  # a credential it lacked
            {"last-event-id": "0"},
        ):
            assert _answer(await rig.call("GET", "victim-1", headers)) == missing_get, headers
            assert _answer(await rig.call("HEAD", "victim-1", headers)) == missing_get, headers
            assert _answer(await rig.call("DELETE", "victim-1", headers)) == missing_delete
        # Nothing was cancelled: the generation still runs for its owner.
        assert "victim-1" not in rig.provider.outcome
        assert "victim-1" in rig.manager.live
        # The owner's token works, for the rest and for the cancel.
        rest = await rig.call("GET", "victim-1", {TOKEN: token, "last-event-id": "2"})
        assert rest.status == 200
        assert rest.events()[0].seq == 3
        cancelled = await rig.call("DELETE", "victim-1", {TOKEN: token})
        assert (cancelled.status, cancelled.json()["status"]) == (200, "cancelled")
        assert rig.provider.outcome["victim-1"] == "cancelled"

    _run(make_store, test)


def test_the_creators_credential_is_bound_too(make_store: Callable[[], Store]) -> None:
    async def test(rig: Rig) -> None:
        alice = {"authorization": "Bearer alice-key"}
        stream = await rig.post("cred-1", headers=alice)
        token = stream.headers[TOKEN]
        missing = _answer(await rig.call("GET", "never-was", {}))
        for headers in (
            {TOKEN: token},  # the token without the credential
            {TOKEN: token, "authorization": "Bearer mallory-key"},
            {TOKEN: token, "x-api-key": "mallory-key"},
            {TOKEN: token, "authorization": "Basic alice-key"},  # not the key: a scheme
        ):
            assert _answer(await rig.call("GET", "cred-1", headers)) == missing, headers
        # The key is the caller, whichever header it comes in (as the SDKs send it).
        same = {TOKEN: token, "x-api-key": "alice-key", "last-event-id": "1"}
        assert (await rig.call("GET", "cred-1", same)).status == 200
        delete_missing = _answer(await rig.call("DELETE", "never-was", {}))
        assert _answer(await rig.call("DELETE", "cred-1", {TOKEN: token})) == delete_missing
        ok = await rig.call("GET", "cred-1", {TOKEN: token, **alice, "last-event-id": "1"})
        assert ok.status == 200
        for name in ("x-api-key", "x-goog-api-key"):
            bound = await rig.post(f"cred-{name}", headers={name: "k1"})
            other = await rig.call("GET", f"cred-{name}", {TOKEN: bound.headers[TOKEN]})
            assert _answer(other) == missing, name
            mine = {TOKEN: bound.headers[TOKEN], name: "k1", "last-event-id": "1"}
            assert (await rig.call("GET", f"cred-{name}", mine)).status == 200
        done = await rig.call("DELETE", "cred-1", {TOKEN: token, **alice})
        assert done.status == 200

    _run(make_store, test)


def test_the_store_keeps_digests_only(make_store: Callable[[], Store]) -> None:
    async def test(rig: Rig) -> None:
        headers = {"x-goog-api-key": "goog-secret"}
        stream = await rig.post("digest-1", headers=headers)
        token = stream.headers[TOKEN]
        # Kept in the caller's own namespace (access.scoped), under digests only.
        stored_id = scoped(credential_digest(_raw(headers)), "digest-1")
        assert "goog-secret" not in stored_id
        assert await rig.store.info("digest-1") is None
        info = await rig.store.info(stored_id)
        assert info is not None
        assert token not in info and "goog-secret" not in info
        assert len(info.token) == 64 and len(info.credential) == 64  # SHA-256 hex
        if isinstance(rig.store, RedisStore):
            meta = await rig.store.call("HGETALL", rig.store.keys(stored_id)[0])
            raw = b"".join(k + v for k, v in meta.items())
            assert token.encode() not in raw and b"goog-secret" not in raw
        await rig.call("DELETE", "digest-1", {TOKEN: token, "x-goog-api-key": "goog-secret"})

    _run(make_store, test)


def test_a_reused_request_id(make_store: Callable[[], Store]) -> None:
    # The ruling (docs/scaling.md "Security"), issue 30: the same caller gets 409;
    # another caller's request_id is in its own namespace, so it gets its own
    # resumable stream, token and all: the answer is the one it gets for an id
    # nobody uses, and nothing tells it that the id exists elsewhere.
    async def test(rig: Rig) -> None:
        alice = {"authorization": "Bearer alice-key"}
        first = await rig.post("reused-1", headers=alice)
        token = first.headers[TOKEN]
        again = await rig.post("reused-1", headers=alice)
        assert again.status == 409
        assert again.json()["error"]["code"] == "request_id_in_use"
        mallory = {"authorization": "Bearer mallory"}
        other = await rig.post("reused-1", headers=mallory)
        fresh = await rig.post("never-used-1", headers=mallory)
        assert other.status == fresh.status == 200
        assert TOKEN in other.headers and TOKEN in fresh.headers
        # Each reads its own stream with its own token; neither token opens the other's.
        mine = {TOKEN: other.headers[TOKEN], **mallory, "last-event-id": "1"}
        assert (await rig.call("GET", "reused-1", mine)).status == 200
        crossed = {TOKEN: token, **mallory, "last-event-id": "1"}
        assert (await rig.call("GET", "reused-1", crossed)).status == 404
        stored = await rig.call("GET", "reused-1", {TOKEN: token, **alice, "last-event-id": "1"})
        assert stored.status == 200
        assert (await rig.call("DELETE", "reused-1", {TOKEN: token, **alice})).status == 200
        # Without credentials there is no one to tell apart: the same caller, 409.
        await rig.post("anonymous-1")
        assert (await rig.post("anonymous-1")).status == 409

    _run(make_store, test)


def test_through_a_real_gateway(tmp_path: Path) -> None:
    # The token crosses a real HTTP server; the 404s match on the wire (``date``
    # aside, which ticks).
    with Gateway(tmp_path) as gateway, gateway.client(timeout=30.0) as client:
        body: dict[str, Any] = {
            "version": "1.0",
            "stream": True,
            "model": "demo",
            "messages": [{"role": "user", "content": "Hi"}],
            "metadata": {"request_id": f"real-{uuid.uuid4().hex}"},
            "extensions": {"tokenwire:resumable": True},
        }
        rid = body["metadata"]["request_id"]
        posted = client.post(
            "/v1/stream", content=msgspec.json.encode(body), headers={"content-type": MEDIA_TYPE}
        )
        assert posted.status_code == 200
        token = posted.headers[TOKEN]

        def wire(response: Any) -> tuple[int, list[tuple[str, str]], bytes]:
            headers = [(k, v) for k, v in response.headers.multi_items() if k != "date"]
            return response.status_code, headers, response.content

        missing = wire(client.get("/v1/streams/never-was"))
        assert wire(client.get(f"/v1/streams/{rid}")) == missing
        assert wire(client.get(f"/v1/streams/{rid}", headers={TOKEN: "guess"})) == missing
        assert wire(client.delete(f"/v1/streams/{rid}")) == wire(
            client.delete("/v1/streams/never-was")
        )
        whole = client.get(f"/v1/streams/{rid}", headers={TOKEN: token})
        assert whole.status_code == 200 and whole.content == posted.content


def _raw(headers: dict[str, str]) -> list[tuple[bytes, bytes]]:
    return [(k.encode(), v.encode()) for k, v in headers.items()]
