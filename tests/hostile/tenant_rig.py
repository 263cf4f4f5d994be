"""The tenant-boundary tests' gateway, in process: keys, demo-served models, scripted clients.

``Rig`` builds the real gateway app (``gateway.app.Gateway``) from a config
dict, every model served by the built-in demo, and plays its clients with
``tests.server.server_asgi.Exchange`` (no HTTP server: each request's body,
hang-up and answer are scripted). All of one test's requests run in one event
loop, so the gateway's background work (the settlement of a stream's tokens)
runs as it does in a server.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

import msgspec
from tests.server.server_asgi import Exchange

import tokenwire
from tokenwire import events as ev
from tokenwire.gateway.app import Gateway
from tokenwire.gateway.config import parse
from tokenwire.gateway.policy.keys import hash_key, new_key
from tokenwire.request import MEDIA_TYPE

#: Every wait in these tests is on a condition, bounded by this (a loaded 2-core machine).
DEADLINE_S = 60.0


class Rig:
    """A gateway with ``keys`` (id -> [[keys]] fields) and demo-served ``models``."""

    def __init__(
        self,
        keys: Mapping[str, Mapping[str, Any]],
        models: tuple[str, ...] = (),
        **sections: Any,
    ) -> None:
        self.secrets = {key_id: new_key() for key_id in keys}
        document: dict[str, Any] = {
            "models": [{"name": name, "provider": "demo"} for name in models],
            "keys": [
                {"id": key_id, "hash": hash_key(self.secrets[key_id]), **fields}
                for key_id, fields in keys.items()
            ],
            **sections,
        }
        self.gateway = Gateway(parse(document))
        self.app = self.gateway.app()

    def auth(self, key_id: str) -> dict[str, str]:
        return {"authorization": f"Bearer {self.secrets[key_id]}"}

    async def call(
        self,
        path: str,
        payload: Any = None,
        *,
        method: str = "POST",
        headers: Mapping[str, str] | None = None,
        content_type: str | None = MEDIA_TYPE,
        query: bytes = b"",
        hang_up_after: int | None = None,
    ) -> Exchange:
        """One request; ``hang_up_after`` body sends, the client hangs up."""
        data = payload if isinstance(payload, bytes) else b""
        if payload is not None and not isinstance(payload, bytes):
            data = msgspec.json.encode(payload)
        exchange = Exchange(
            data,
            method=method,
            content_type=content_type if method == "POST" else None,
            headers=dict(headers or {}),
            content_length=method == "POST",
            hang_up_after=hang_up_after,
        )
        exchange.scope["path"] = path
        exchange.scope["query_string"] = query
        await self.app(exchange.scope, exchange.receive, exchange.send)
        return exchange

    async def settled(self) -> None:
        """Until the gateway's background work (the token settlements) is done."""
        tasks = list(self.gateway.production._tasks)
        if tasks:
            await asyncio.wait(tasks, timeout=DEADLINE_S)


def body(model: str, text: str = "hi", **fields: Any) -> dict[str, Any]:
    """A standard request body."""
    messages = [{"role": "user", "content": text}]
    return {"version": "1.0", "stream": True, "model": model, "messages": messages, **fields}


def served_model(exchange: Exchange) -> str | None:
    """The model of the stream's ``stream.start`` (``None``: no stream)."""
    if exchange.status != 200:
        return None
    for event in tokenwire.iter_events(exchange.body):
        if isinstance(event, ev.StreamStart):
            return event.model
    return None


def deltas(exchange: Exchange) -> int:
    """The ``content.delta`` events the client received (each one demo token)."""
    if exchange.status != 200:
        return 0
    return sum(
        1
        for line in exchange.body.split(b"\n")
        if line.startswith(b"data: ") and b'"content.delta"' in line[:64]
    )


def error_code(exchange: Exchange) -> str | None:
    """The JSON error body's code (standard, OpenAI) or status (Gemini)."""
    try:
        error = json.loads(exchange.body)["error"]
    except (ValueError, KeyError, TypeError):
        return None
    return str(error.get("code") if not isinstance(error.get("code"), int) else error["status"])
