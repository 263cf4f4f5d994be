"""One Responses WebSocket: its lanes, its chain, its steering queue, its bounds.

The socket's life is a small state table (``TRANSITIONS``): it is ``open``
until the client leaves, a bound closes it (idle), or a write misses its
deadline (``cut``: the client stopped reading). Each ``response.create`` is
checked against the socket's bounds, expanded with the chain's history when
it names a ``previous_response_id``, and served as an in-process HTTP
request (``turn``) on its own task, so several lanes (``stream_id``) stream
at once. Completed responses join the chain; steering input waits for the
response it targets to finish, then for the turn that continues it.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import secrets
import time
from collections.abc import Callable, MutableMapping
from typing import Any, Final

import msgspec

from ...server.asgi import Receive, Send
from ...server.frames.channel import client_headers
from ..config.responses_websocket import ResponsesWebSocketConfig
from ..telemetry import logs
from . import steering
from .bounds import BOUND_CODES
from .chain import Chain, UnknownResponse
from .protocol import (
    ClientEventError,
    Create,
    Steer,
    error_event,
    input_items,
    parse_client_event,
    steer_event,
    steer_problem,
)
from .turn import Outcome, TurnRequest, count_input, prepared_turn, run_turn

__all__ = ["Socket", "SocketState", "TRANSITIONS"]

_encode = msgspec.json.encode
Scope = MutableMapping[str, Any]


class SocketState(enum.Enum):
    OPEN = "open"
    CLOSED = "closed"


#: (state, what happened) -> next state. Anything else leaves the state as it is.
TRANSITIONS: Final = {
    (SocketState.OPEN, "client_left"): SocketState.CLOSED,
    (SocketState.OPEN, "idle"): SocketState.CLOSED,
    (SocketState.OPEN, "draining"): SocketState.CLOSED,
    (SocketState.OPEN, "write_timeout"): SocketState.CLOSED,
    (SocketState.OPEN, "write_failed"): SocketState.CLOSED,
}

_MAX_EVENT_BYTES: Final = 64 << 20
#: How often an idle socket looks whether the gateway is draining.
_DRAIN_CHECK_S: Final = 1.0
#: The close code of each way the gateway closes a socket (RFC 6455 7.4.1).
_CLOSE_CODES: Final = {"draining": 1001}
#: The terminal events of a response the chain keeps.
_DONE: Final = frozenset({"response.completed", "response.incomplete"})


class _Lane:
    """One response in flight: its task, hang-up, lane id, parent, input and steering queue."""

    __slots__ = (
        "ended",
        "hang_up",
        "input",
        "parent",
        "response_id",
        "steers",
        "stream_id",
        "task",
    )

    def __init__(self, stream_id: str | None, parent: str | None, items: list[Any]) -> None:
        self.stream_id = stream_id
        self.parent = parent
        self.input = items
        self.response_id: str | None = None
        self.steers: list[tuple[str, Any]] = []
        self.hang_up = asyncio.Event()
        self.task: asyncio.Task[None] | None = None
        self.ended = False


class Socket:
    """One accepted socket; ``run`` serves it until it closes."""

    def __init__(
        self,
        scope: Scope,
        send: Send,
        *,
        target: Any,
        path: str,
        bounds: ResponsesWebSocketConfig,
        write_timeout_s: float,
        max_message_bytes: int,
        clock: Callable[[], float] = time.monotonic,
        draining: Callable[[], bool] = lambda: False,
    ) -> None:
        headers = client_headers(scope.get("headers", ()))
        if not any(name == b"traceparent" for name, _ in headers):
            # Every turn's span joins one trace: the socket's.
            trace = f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01"
            headers.append((b"traceparent", trace.encode()))
        self.request = TurnRequest(
            target=target,
            path=path,
            headers=headers,
            scheme="https" if scope.get("scheme") == "wss" else "http",
            client=scope.get("client"),
            server=scope.get("server"),
            # An event of the route's own stream: response.completed repeats the
            # whole output, which an HTTP client reads unbounded too.
            max_event_bytes=_MAX_EVENT_BYTES,
        )
        self.bounds = bounds
        self.write_timeout_s = write_timeout_s
        self.max_message_bytes = max_message_bytes
        self.clock = clock
        self.draining = draining
        self.chain = Chain(max_bytes=bounds.max_chain_bytes, ttl_s=bounds.chain_ttl_s)
        self.state = SocketState.OPEN
        self.reason = ""
        self.turns = 0
        self.lanes: dict[str | None, _Lane] = {}
        self.active: dict[str, _Lane] = {}
        #: Completed responses' accepted steering, for the turn that continues each.
        self.waiting_steers: dict[str, list[tuple[str, Any]]] = {}
        self._steer_seq = 0
        self._send = send
        self._lock = asyncio.Lock()
        self._ended = asyncio.Event()
        self._activity = asyncio.Event()

    # -- state ------------------------------------------------------------------------

    def _happen(self, what: str) -> None:
        after = TRANSITIONS.get((self.state, what))
        if after is None:
            return
        self.state, self.reason = after, what
        for lane in self.lanes.values():
            lane.hang_up.set()
        self._ended.set()

    # -- writing ----------------------------------------------------------------------

    async def write(self, text: str) -> None:
        """Send one message within the write deadline; raises ``OSError`` once closed."""
        if self.state is not SocketState.OPEN:
            raise OSError("the socket closed")
        async with self._lock:  # one writer at a time on the socket
            if self.state is not SocketState.OPEN:  # closed while this write waited
                raise OSError("the socket closed")
            try:
                async with asyncio.timeout(self.write_timeout_s):
                    await self._send({"type": "websocket.send", "text": text})
            except TimeoutError:
                # The same deadline as an HTTP stream's (server/guard.py): the client
                # stopped reading, so every response on the socket ends.
                self._happen("write_timeout")
                raise OSError(f"the client read nothing for {self.write_timeout_s:g} s") from None
            except (OSError, RuntimeError) as exc:
                self._happen("write_failed")
                raise OSError("the socket is gone") from exc

    async def _tell(self, text: str) -> None:
        with contextlib.suppress(OSError):
            await self.write(text)

    # -- the socket's life ------------------------------------------------------------

    async def run(self, receive: Receive) -> None:
        """Read client events until the socket closes; then end every lane and log."""
        reader = asyncio.ensure_future(self._read(receive))
        idle = asyncio.ensure_future(self._watch_idle())
        try:
            await self._ended.wait()
        finally:
            reader.cancel()
            idle.cancel()
            for lane in self.lanes.values():
                lane.hang_up.set()
            tasks = [lane.task for lane in self.lanes.values() if lane.task is not None]
            if tasks:
                await asyncio.wait(tasks)
            if self.reason != "client_left":
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(1.0):
                        code = _CLOSE_CODES.get(self.reason, 1000)
                        await self._send({"type": "websocket.close", "code": code})
            line = {
                "msg": "responses_websocket_closed",
                "reason": self.reason,
                "turns": self.turns,
                "chain_bytes": self.chain.size,
            }
            logging.getLogger(logs.LOGGER_NAME).info(_encode(line).decode())

    async def _read(self, receive: Receive) -> None:
        try:
            while self.state is SocketState.OPEN:
                message = await receive()
                if message["type"] == "websocket.disconnect":
                    break
                self._activity.set()
                data = message.get("text")
                if data is None:
                    data = message.get("bytes") or b""
                if len(data) > self.max_message_bytes:
                    await self._tell(
                        error_event(
                            "message_too_large",
                            f"a message is at most {self.max_message_bytes} bytes "
                            "(server.max_body_bytes)",
                            status=413,
                        )
                    )
                    continue
                await self._event(data)
        finally:
            self._happen("client_left")

    async def _watch_idle(self) -> None:
        """Close the socket when it idles past its bound, or once the gateway drains.

        Streaming is not idleness; a draining gateway lets the responses in
        flight end (the drain bounds them) and then closes with 1001, so that
        the client reconnects, to another replica.
        """
        limit = self.bounds.idle_timeout_s
        tick = min(limit, _DRAIN_CHECK_S)
        idle_for = 0.0
        while True:
            try:
                async with asyncio.timeout(tick):
                    await self._activity.wait()
                self._activity.clear()
                idle_for = 0.0
            except TimeoutError:
                idle_for += tick
            if self.lanes:
                idle_for = 0.0
                continue
            if self.draining():
                message = "the gateway is shutting down: reconnect, and send the whole input"
                await self._tell(error_event("draining", message, status=503))
                self._happen("draining")
                return
            if idle_for >= limit:
                await self._tell(
                    error_event(
                        BOUND_CODES["idle_timeout_s"],
                        f"no event for {limit:g} s (responses_websocket.idle_timeout_s): "
                        "the socket closes; open a new one",
                        status=408,
                    )
                )
                self._happen("idle")
                return

    async def _event(self, data: str | bytes) -> None:
        try:
            event = parse_client_event(data)
            if isinstance(event, Create):
                await self._create(event)
            else:
                await self._steer(event)
        except ClientEventError as exc:
            await self._tell(
                error_event("invalid_request_error", str(exc), status=400, param=exc.param)
            )

    # -- response.create --------------------------------------------------------------

    async def _refuse(
        self, code: str, message: str, status: int, param: str | None, lane: str | None
    ) -> None:
        await self._tell(error_event(code, message, status=status, param=param, stream_id=lane))

    async def _create(self, event: Create) -> None:
        lane_id, previous = event.stream_id, event.previous_response_id
        bounds = self.bounds
        if lane_id in self.lanes:
            what = f"stream_id {lane_id!r}" if lane_id is not None else "the default lane"
            await self._refuse(
                "stream_id_in_use",
                f"{what} has a response in progress; use another stream_id or wait for it",
                409,
                "stream_id",
                lane_id,
            )
            return
        if len(self.lanes) >= bounds.max_in_flight:
            await self._refuse(
                BOUND_CODES["max_in_flight"],
                f"at most {bounds.max_in_flight} responses in flight per socket "
                "(responses_websocket.max_in_flight); wait for one to complete",
                429,
                None,
                lane_id,
            )
            return
        if self.turns >= bounds.max_turns:
            await self._refuse(
                BOUND_CODES["max_turns"],
                f"this socket served its {bounds.max_turns} responses "
                "(responses_websocket.max_turns); open a new socket and send the whole input",
                400,
                None,
                lane_id,
            )
            return
        items = input_items(event.body.get("input"))
        history: list[Any] = []
        if previous is not None:
            if previous in self.active:
                await self._refuse(
                    "previous_response_in_progress",
                    f"response {previous!r} is still in progress; continue it after its "
                    "response.completed",
                    400,
                    "previous_response_id",
                    lane_id,
                )
                return
            try:
                history = self.chain.history(previous, self.clock())
            except UnknownResponse as exc:
                await self._refuse(
                    BOUND_CODES["chain_ttl_s"], str(exc), 400, "previous_response_id", lane_id
                )
                return
            steered = self.waiting_steers.pop(previous, [])
            items = steering.with_steering(items, [it for _, v in steered for it in input_items(v)])
        if not self.chain.has_room(len(_encode(items))):
            await self._refuse(
                BOUND_CODES["max_chain_bytes"],
                f"this socket's chain holds {self.chain.size} of its "
                f"{bounds.max_chain_bytes} bytes (responses_websocket.max_chain_bytes); "
                "open a new socket and send the whole input",
                400,
                None,
                lane_id,
            )
            return
        create = {k: v for k, v in event.body.items() if k != "generate"}
        create["input"] = [*history, *items]
        self.turns += 1
        lane = self.lanes[lane_id] = _Lane(lane_id, previous, items)
        loop = asyncio.get_running_loop()
        if event.body.get("generate") is False:
            lane.task = loop.create_task(self._prepare(lane, create))
        else:
            lane.task = loop.create_task(self._serve(lane, _encode({**create, "stream": True})))

    def _end(self, lane: _Lane, outcome: Outcome) -> None:
        """Free the lane and keep a completed response in the chain (once per lane).

        Runs before the turn's last message goes out: the client may reuse the
        lane or continue the response as soon as it reads it.
        """
        if lane.ended:
            return
        lane.ended = True
        if self.lanes.get(lane.stream_id) is lane:
            del self.lanes[lane.stream_id]
        if lane.response_id is not None:
            self.active.pop(lane.response_id, None)
        done = outcome.terminal in _DONE
        if done and outcome.response_id is not None and outcome.output is not None:
            self.chain.record(
                outcome.response_id, lane.parent, lane.input, outcome.output, self.clock()
            )
        self._activity.set()

    async def _serve(self, lane: _Lane, body: bytes) -> None:
        def created(response_id: str) -> None:
            lane.response_id = response_id
            self.active[response_id] = lane

        outcome = Outcome()
        try:
            outcome = await run_turn(
                self.request,
                body,
                self.write,
                lane.hang_up,
                stream_id=lane.stream_id,
                on_created=created,
                on_ended=lambda ended: self._end(lane, ended),
            )
        finally:
            self._end(lane, outcome)  # (a no-op when run_turn ended it already)
        if lane.steers and self.state is SocketState.OPEN:
            await self._settle_steers(lane, outcome)

    async def _prepare(self, lane: _Lane, create: dict[str, Any]) -> None:
        """``generate: false``: the input checked and counted, kept in the chain, no output."""
        outcome = Outcome()
        try:
            counted = await count_input(self.request, create, lane.hang_up)
            response_id = f"resp_{secrets.token_hex(16)}"
            prepared, messages = prepared_turn(
                response_id, create, lane.parent, counted, lane.stream_id
            )
            if prepared:
                outcome = Outcome(
                    status=200, response_id=response_id, terminal="response.completed", output=[]
                )
            self._end(lane, outcome)
            for message in messages:
                await self.write(message)
        except OSError:
            pass  # the socket is gone: nobody to tell
        finally:
            self._end(lane, outcome)

    # -- response.steer ---------------------------------------------------------------

    def _next_seq(self) -> int:
        self._steer_seq += 1
        return self._steer_seq - 1

    async def _steer_failed(
        self, code: str, message: str, event: Steer, steer_id: str | None, lane: str | None
    ) -> None:
        steer: dict[str, Any] = {
            "input": event.input,
            "previous_response_id": event.previous_response_id,
        }
        if steer_id is not None:
            steer["id"] = steer_id
        error = {"code": code, "message": message, "type": "invalid_request_error"}
        await self._tell(steer_event("failed", self._next_seq(), lane, error=error, steer=steer))

    async def _steer(self, event: Steer) -> None:
        problem = steer_problem(event.input)
        if problem is not None:
            await self._steer_failed("invalid_input", problem, event, None, None)
            return
        target = event.previous_response_id
        lane = self.active.get(target)
        refused = steering.refusal(
            target,
            in_progress=lane is not None,
            completed=target in self.chain.nodes,
            queued=len(lane.steers) if lane is not None else 0,
            limit=self.bounds.max_pending_steers,
        )
        if refused is not None:
            where = lane.stream_id if lane is not None else None
            await self._steer_failed(*refused, event, None, where)
            return
        assert lane is not None  # refusal() queues only for a response in progress
        steer_id = f"steer_{secrets.token_hex(12)}"
        lane.steers.append((steer_id, event.input))
        steer = {"id": steer_id, "previous_response_id": target}
        await self._tell(steer_event("accepted", self._next_seq(), lane.stream_id, steer=steer))

    async def _settle_steers(self, lane: _Lane, outcome: Outcome) -> None:
        """After the target ends: its steering waits for the continuing turn, or goes back."""
        target = outcome.response_id or ""
        fate, detail = steering.settle(outcome.output or [], outcome.terminal in _DONE)
        if fate == "pending":
            self.waiting_steers[target] = lane.steers
            for steer_id, _ in lane.steers:
                steer = {"id": steer_id, "previous_response_id": target}
                await self._tell(
                    steer_event(
                        "pending",
                        self._next_seq(),
                        lane.stream_id,
                        reason="waiting_for_required_input",
                        required_input=detail,
                        steer=steer,
                    )
                )
            return
        code, message = detail
        for steer_id, value in lane.steers:
            await self._steer_failed(
                code,
                message,
                Steer(input=value, previous_response_id=target),
                steer_id,
                lane.stream_id,
            )
