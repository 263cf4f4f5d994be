"""One turn of a Responses WebSocket: an in-process ``POST /v1/responses`` to the gateway itself.

A turn *is* an HTTP request to the app's own route, carrying the socket's
handshake headers (its key among them): keys, the model allow-list, limits,
budgets, routing, passthrough, logs, metrics and the OpenTelemetry span apply
exactly as over HTTP, and the answer is the same ``response.*`` stream. Its
SSE events go to the socket as WebSocket messages, tagged with the turn's
``stream_id``; an answer that is not a stream (400, 401, 403, 429…) becomes
the mode's ``error`` event with its status and the body's own error object.
The socket's write deadline is the turn's: a write that does not complete
fails the turn's ``send`` as a vanished HTTP client does, and the endpoint
cancels the upstream.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Final

import msgspec

from ... import sse
from .protocol import error_event, tagged

__all__ = ["Outcome", "TurnRequest", "count_input", "prepared_turn", "run_turn"]

Write = Callable[[str], Awaitable[None]]
_MAX_ERROR_BODY: Final = 64 * 1024
#: The stream events whose ``response`` object says how the turn ended.
_TERMINAL: Final = frozenset({"response.completed", "response.incomplete", "response.failed"})
_decode = msgspec.json.Decoder(dict[str, Any]).decode


class TurnRequest(msgspec.Struct, frozen=True, kw_only=True):
    """What the in-process request needs: the app, the path, the socket's scope parts."""

    target: Any
    path: str
    headers: list[tuple[bytes, bytes]]
    scheme: str = "http"
    client: Any = None
    server: Any = None
    max_event_bytes: int = 1 << 20


class Outcome(msgspec.Struct, kw_only=True):
    """How a turn ended: the HTTP status, the response id, its terminal event and output."""

    status: int = 0
    response_id: str | None = None
    terminal: str | None = None
    output: list[Any] | None = None


def _scope(
    request: TurnRequest, body_size: int, path: str | None = None
) -> MutableMapping[str, Any]:
    headers = [
        *request.headers,
        (b"content-type", b"application/json"),
        (b"content-length", str(body_size).encode()),
        (b"accept", b"text/event-stream"),
    ]
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": request.scheme,
        "path": path or request.path,
        "raw_path": (path or request.path).encode(),
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": request.client,
        "server": request.server,
        "state": {},
    }


def _body_then_hang_up(
    body: bytes, hang_up: asyncio.Event
) -> Callable[[], Awaitable[dict[str, Any]]]:
    """An ASGI ``receive``: the whole body, then ``http.disconnect`` once ``hang_up`` is set."""
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await hang_up.wait()
        return {"type": "http.disconnect"}

    return receive


async def run_turn(
    request: TurnRequest,
    body: bytes,
    write: Write,
    hang_up: asyncio.Event,
    *,
    stream_id: str | None,
    on_created: Callable[[str], None],
    on_ended: Callable[[Outcome], None],
) -> Outcome:
    """Serve one turn, writing its events; returns how it ended.

    ``on_ended`` runs once, before the turn's last message is written: a client
    may act on that message at once (continue the response, reuse the lane).
    ``hang_up`` set is the client gone (the socket closed): the request sees
    ``http.disconnect`` and its next write fails, as over HTTP.
    """
    outcome = Outcome()
    told = False

    def end() -> None:
        nonlocal told
        if not told:
            told = True
            on_ended(outcome)

    error_body = bytearray()
    decoder = sse.Decoder(max_event_bytes=request.max_event_bytes)

    receive = _body_then_hang_up(body, hang_up)

    async def forward(message: sse.Message) -> None:
        kind = message.event
        if kind == "response.created" or kind in _TERMINAL:
            try:  # (a passthrough carries the upstream's own bytes)
                response = _decode(message.data).get("response")
            except msgspec.DecodeError:
                response = None
            if isinstance(response, dict) and isinstance(response.get("id"), str):
                outcome.response_id = response["id"]
                if kind == "response.created":
                    on_created(response["id"])
                else:
                    outcome.terminal = kind
                    output = response.get("output")
                    outcome.output = output if isinstance(output, list) else []
                    end()
        await write(tagged(message.data, stream_id))

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            outcome.status = message["status"]
            return
        if message["type"] != "http.response.body":
            return
        chunk = message.get("body", b"")
        if outcome.status != 200:
            error_body.extend(chunk[: _MAX_ERROR_BODY - len(error_body)])
            return
        if hang_up.is_set():
            raise OSError("the socket closed")  # as a vanished HTTP client
        for sse_message in decoder.feed(chunk):
            await forward(sse_message)

    try:
        await request.target(_scope(request, len(body)), receive, send)
    except OSError:
        end()
        return outcome  # the socket is gone or stopped reading: nobody to tell
    except Exception:  # the route failed before answering: an error event, not a hang
        outcome.status = outcome.status or 500
    end()
    if hang_up.is_set():
        return outcome
    if outcome.status != 200:
        await write(_refusal(outcome.status, bytes(error_body), stream_id))
    elif outcome.terminal is None:
        await write(
            error_event(
                "server_error",
                "the response stream ended before response.completed",
                status=502,
                kind="server_error",
                stream_id=stream_id,
            )
        )
    return outcome


def _refusal(status: int, body: bytes, stream_id: str | None) -> str:
    """The mode's ``error`` event for a non-stream answer, with the body's own error object."""
    try:
        error = _decode(body).get("error")
    except msgspec.DecodeError:
        error = None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return error_event(
            str(error.get("code") or error.get("type") or "error"),
            error["message"],
            status=status,
            param=error.get("param") if isinstance(error.get("param"), str) else None,
            kind=str(error.get("type") or "invalid_request_error"),
            stream_id=stream_id,
        )
    return error_event(
        "server_error",
        f"the responses route answered {status}",
        status=status,
        kind="server_error",
        stream_id=stream_id,
    )


#: What ``POST /v1/responses/input_tokens`` takes of a ``response.create``.
_COUNT_FIELDS: Final = frozenset(
    {"model", "input", "instructions", "tools", "tool_choice", "reasoning", "text", "truncation"}
)


async def count_input(
    request: TurnRequest, create: dict[str, Any], hang_up: asyncio.Event
) -> tuple[int, bytes]:
    """``generate: false``: the turn's input counted by the app's own count route.

    The route is checked as any request (the key, its models, its limits), and
    no model output is made. Returns the status and the answer's body.
    """
    body = msgspec.json.encode({k: v for k, v in create.items() if k in _COUNT_FIELDS})
    status = 0
    answer = bytearray()

    receive = _body_then_hang_up(body, hang_up)

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body":
            answer.extend(message.get("body", b"")[: _MAX_ERROR_BODY - len(answer)])

    path = request.path.rstrip("/") + "/input_tokens"
    try:
        await request.target(_scope(request, len(body), path), receive, send)
    except Exception:  # the route failed before answering
        status = status or 500
    return status, bytes(answer)


def prepared_turn(
    response_id: str,
    create: dict[str, Any],
    previous: str | None,
    counted: tuple[int, bytes],
    stream_id: str | None,
) -> tuple[bool, list[str]]:
    """The messages of a ``generate: false`` turn and whether it was prepared.

    Prepared: ``response.created`` then ``response.completed`` with no output
    and the counted input tokens. Refused by the count route: its ``error`` event.
    """
    status, answer = counted
    if status != 200:
        return False, [_refusal(status, answer, stream_id)]
    try:
        tokens = _decode(answer).get("input_tokens")
    except msgspec.DecodeError:
        tokens = None
    tokens = tokens if isinstance(tokens, int) else 0
    resource: dict[str, Any] = {
        "id": response_id,
        "object": "response",
        "created_at": int(time.time()),
        "status": "in_progress",
        "model": create.get("model"),
        "output": [],
        "previous_response_id": previous,
        "usage": None,
    }
    usage = {
        "input_tokens": tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 0,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": tokens,
    }
    events = [
        {"type": "response.created", "sequence_number": 0, "response": resource},
        {
            "type": "response.completed",
            "sequence_number": 1,
            "response": {**resource, "status": "completed", "usage": usage},
        },
    ]
    encode = msgspec.json.encode
    return True, [tagged(encode(event).decode(), stream_id) for event in events]
