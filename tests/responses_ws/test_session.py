"""One socket driven in process: scripted client messages in, a scripted app behind.

The app stands in for the gateway's ``POST /v1/responses`` route: it answers a
Responses stream, a refusal, a stream that stops short, or holds until the
client leaves. What the socket writes is read back as the client would.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from tokenwire.gateway.config.responses_websocket import ResponsesWebSocketConfig
from tokenwire.gateway.responses_ws.session import Socket

Message = dict[str, Any]


def sse(kind: str, **fields: Any) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **fields})}\n\n".encode()


def response(rid: str, status: str, output: list[Any]) -> dict[str, Any]:
    return {"id": rid, "object": "response", "status": status, "output": output}


class App:
    """The route behind the socket: what it answers depends on the turn's ``model``."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.release = asyncio.Event()
        self.disconnected = asyncio.Event()

    async def __call__(
        self, scope: Message, receive: Callable[[], Awaitable[Message]], send: Any
    ) -> None:
        body = json.loads((await receive())["body"])
        self.bodies.append(body)
        model = body["model"]
        if model == "refused":
            error = {
                "error": {
                    "message": "bad key",
                    "type": "invalid_request_error",
                    "code": "invalid_api_key",
                }
            }
            await send({"type": "http.response.start", "status": 401, "headers": []})
            await send({"type": "http.response.body", "body": json.dumps(error).encode()})
            return
        rid = f"resp_{len(self.bodies)}"
        await send({"type": "http.response.start", "status": 200, "headers": []})
        created = sse(
            "response.created", sequence_number=0, response=response(rid, "in_progress", [])
        )
        await send({"type": "http.response.body", "body": created, "more_body": True})
        if model == "held":
            message = await receive()  # until the client leaves
            assert message["type"] == "http.disconnect"
            self.disconnected.set()
            return
        if model == "short":
            await send({"type": "http.response.body", "body": b""})
            return
        output = [
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "ok"}],
            }
        ]
        done = sse(
            "response.completed", sequence_number=1, response=response(rid, "completed", output)
        )
        await send({"type": "http.response.body", "body": done})


async def drive(
    app: App,
    script: Callable[
        [Callable[[Message], None], Callable[[], Awaitable[Message]]], Awaitable[None]
    ],
) -> None:
    """Run a socket; ``script(send_to_socket, next_from_socket)`` plays the client."""
    inbox: asyncio.Queue[Message] = asyncio.Queue()
    outbox: asyncio.Queue[Message] = asyncio.Queue()

    async def receive() -> Message:
        return await inbox.get()

    async def send(message: Message) -> None:
        await outbox.put(message)

    socket = Socket(
        {"type": "websocket", "headers": [(b"authorization", b"Bearer k")]},
        send,
        target=app,
        path="/v1/responses",
        bounds=ResponsesWebSocketConfig(),
        write_timeout_s=5.0,
        max_message_bytes=1 << 20,
    )
    served = asyncio.ensure_future(socket.run(receive))

    def to_socket(event: Message) -> None:
        inbox.put_nowait({"type": "websocket.receive", "text": json.dumps(event)})

    async def from_socket() -> Message:
        message = await asyncio.wait_for(outbox.get(), 10)
        return json.loads(message["text"])

    try:
        await asyncio.wait_for(script(to_socket, from_socket), 30)
    finally:
        inbox.put_nowait({"type": "websocket.disconnect"})
        await asyncio.wait_for(served, 10)


def test_turns_are_tagged_and_refusals_keep_the_socket() -> None:
    app = App()

    async def client(send: Any, recv: Any) -> None:
        send({"type": "response.create", "model": "ok", "input": "hi", "stream_id": "a"})
        created, completed = await recv(), await recv()
        assert (created["type"], created["stream_id"]) == ("response.created", "a")
        assert (completed["type"], completed["stream_id"]) == ("response.completed", "a")
        send({"type": "response.create", "model": "refused", "input": "hi"})
        refused = await recv()
        assert (refused["type"], refused["status"], refused["error"]["code"]) == (
            "error",
            401,
            "invalid_api_key",
        )
        assert "stream_id" not in refused
        send({"type": "response.create", "model": "short", "input": "hi"})
        await recv()  # response.created
        short = await recv()
        assert (short["type"], short["status"], short["error"]["type"]) == (
            "error",
            502,
            "server_error",
        )
        send({"type": "response.cancel"})  # not an event of this mode
        unknown = await recv()
        assert (unknown["error"]["param"], unknown["status"]) == ("type", 400)
        send(
            {
                "type": "response.create",
                "model": "ok",
                "input": "more",
                "previous_response_id": completed["response"]["id"],
            }
        )
        await recv()
        assert (await recv())["type"] == "response.completed"

    asyncio.run(drive(app, client))
    # Sent upstream without previous_response_id, with the whole history and stream on.
    last = app.bodies[-1]
    assert "previous_response_id" not in last and last["stream"] is True
    assert [item.get("content") for item in last["input"]][0] == "hi"
    assert last["input"][-1]["content"] == "more"


def test_a_lane_in_use_and_a_response_in_progress_are_refused() -> None:
    app = App()

    async def client(send: Any, recv: Any) -> None:
        send({"type": "response.create", "model": "held", "input": "hi", "stream_id": "a"})
        created = await recv()
        send({"type": "response.create", "model": "ok", "input": "hi", "stream_id": "a"})
        in_use = await recv()
        assert (in_use["error"]["code"], in_use["status"], in_use["stream_id"]) == (
            "stream_id_in_use",
            409,
            "a",
        )
        rid = created["response"]["id"]
        send(
            {
                "type": "response.create",
                "model": "ok",
                "input": "x",
                "previous_response_id": rid,
                "stream_id": "b",
            }
        )
        busy = await recv()
        assert (busy["error"]["code"], busy["error"]["param"]) == (
            "previous_response_in_progress",
            "previous_response_id",
        )
        send({"type": "response.steer", "input": "faster", "previous_response_id": rid})
        accepted = await recv()
        assert (accepted["type"], accepted["stream_id"]) == ("response.steer.accepted", "a")

    asyncio.run(drive(app, client))
    # The client left with lane a streaming: its request saw the disconnect.
    assert app.disconnected.is_set()
