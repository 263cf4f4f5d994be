"""A SignalR hub for tests: the JSON hub protocol over ``websockets`` on 127.0.0.1.

It speaks the real protocol (HubProtocol.md, TransportProtocols.md), so the
official clients (npm ``@microsoft/signalr``, PyPI ``signalrcore``) and the
gateway's SignalR provider can all talk to it:

* ``POST {path}/negotiate`` (negotiateVersion 0 and 1, WebSockets only); with
  ``require_negotiate=True`` a WebSocket must present a negotiated ``id``;
* the handshake (``{"protocol":"json","version":0|1}`` -> ``{}``, or
  ``{"error": ...}`` for another protocol), records ended by 0x1E, several per
  frame, a Ping after the handshake and every ``ping_interval_s``;
* StreamInvocation (4) answered by a ``Script``: StreamItems (2) and a
  Completion (3), or copilot-style cumulative ``update`` Invocations (1), a
  final item and a Completion; errors as Completion ``error`` or Close (7)
  ``error``; CancelInvocation (5) stops the stream; Invocation (1) with an id
  gets a Completion ``result``.

Use it from async code (``async with SignalRHub() as hub``) or from sync code,
where it runs on its own thread (``with SignalRHub() as hub``). ``hub.url`` is
the hub's ``http://`` URL (clients turn it into ``ws://``); ``hub.received``
lists every client message and ``hub.outcomes`` how each stream ended.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import http
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Final, Literal
from urllib.parse import parse_qs, urlsplit

import msgspec
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from .upstream import loop_thread

__all__ = ["Script", "SignalRHub", "prompt_of"]

RS: Final = "\x1e"

_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder().decode


@dataclass(frozen=True)
class Script:
    """What the hub answers to one StreamInvocation.

    ``mode="stream"`` sends one StreamItem per token, shaped by ``item``:
    ``"text"`` -> ``{"text": t}``, ``"string"`` -> ``t``, ``"delta"`` ->
    ``{"delta": t}``; then a ``tool_call`` item ``(id, name, arguments)`` and a
    ``usage`` item ``(input, output)`` when given. ``mode="copilot"`` sends
    ``update`` Invocations with the cumulative text (then ``rewrite``, a
    snapshot that replaces it, when given), a final StreamItem with the
    finished message and ``result`` as ``result.value``.

    The end: a Completion, with ``error`` when set; or a Close with
    ``close_error``; or, with ``drop``, the socket is closed with no message.
    ``delay_s`` is the pause before each item.
    """

    tokens: tuple[str, ...] = ("Hel", "lo", " world")
    mode: Literal["stream", "copilot"] = "stream"
    item: Literal["text", "string", "delta"] = "text"
    tool_call: tuple[str, str, str] | None = None
    usage: tuple[int, int] | None = None
    rewrite: str | None = None
    result: str = "Success"
    error: str | None = None
    close_error: str | None = None
    drop: bool = False
    delay_s: float = 0.0


def prompt_of(arguments: Any) -> str:
    """The prompt text in an invocation's arguments.

    Reads a plain string argument, a standard request envelope (the last
    user message) or a Copilot-style ``{"message": {"text": ...}}``.
    """
    if not isinstance(arguments, list) or not arguments:
        return ""
    first = arguments[0]
    if isinstance(first, str):
        return first
    if not isinstance(first, dict):
        return ""
    message = first.get("message")
    if isinstance(message, dict) and isinstance(message.get("text"), str):
        return str(message["text"])
    for entry in reversed(first.get("messages") or []):
        if isinstance(entry, dict) and entry.get("role") == "user":
            content = entry.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                return "".join(
                    p.get("text", "")
                    for p in content
                    if isinstance(p, dict) and p.get("type") == "text"
                )
    return ""


@dataclass
class _Connection:
    ws: ServerConnection
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    streams: dict[str, asyncio.Task[None]] = field(default_factory=dict)
    cancelled: set[str] = field(default_factory=set)

    async def send(self, *messages: Mapping[str, Any]) -> None:
        # One frame may hold several records (the protocol allows it).
        frame = "".join(_encode(m).decode() + RS for m in messages)
        async with self.lock:
            await self.ws.send(frame)


class SignalRHub:
    """A scripted SignalR hub on 127.0.0.1 (a free port unless ``port`` is given).

    ``scripts`` maps a prompt (see ``prompt_of``) to its ``Script``; other
    prompts get ``default``. ``path`` is the hub's path. ``negotiate`` serves
    ``POST {path}/negotiate``; ``require_negotiate`` refuses a WebSocket
    without a negotiated ``id`` (HTTP 404, as ASP.NET does).
    """

    def __init__(
        self,
        *,
        scripts: Mapping[str, Script] | None = None,
        default: Script | None = None,
        choose: Callable[[str, list[Any]], Script] | None = None,
        path: str = "/chathub",
        port: int = 0,
        negotiate: bool = True,
        require_negotiate: bool = False,
        ping_interval_s: float | None = 15.0,
    ) -> None:
        self.scripts = dict(scripts or {})
        self.default = default or Script()
        self._choose = choose
        self.path = path.rstrip("/") or "/"
        self.port = port
        self.negotiate = negotiate
        self.require_negotiate = require_negotiate
        self.ping_interval_s = ping_interval_s
        #: Every message received from a client, in order (handshakes included).
        self.received: list[dict[str, Any]] = []
        #: ``(invocationId, how)`` per stream: completed, error, closed, dropped, cancelled.
        self.outcomes: list[tuple[str, str]] = []
        #: Paths (with query) of the WebSocket connections, and how many closed.
        self.connections: list[str] = []
        self.disconnects = 0
        self.negotiations = 0
        self._tokens: set[str] = set()
        self._server: Server | None = None
        self._front: asyncio.Server | None = None
        self._front_tasks: set[asyncio.Task[Any]] = set()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- lifecycle ---------------------------------------------------------

    @property
    def url(self) -> str:
        """The hub's URL, ``http://127.0.0.1:PORT/chathub``."""
        return f"http://127.0.0.1:{self.port}{self.path}"

    @property
    def ws_url(self) -> str:
        """The hub's WebSocket URL, ``ws://127.0.0.1:PORT/chathub``."""
        return f"ws://127.0.0.1:{self.port}{self.path}"

    async def start(self) -> None:
        """Listen on 127.0.0.1; ``port`` is set once this returns.

        The port is an HTTP front door, as a hub's is: negotiate's ``POST`` is
        answered there, since websockets' server (before 17) refuses any method
        but ``GET`` before a hook sees it; every other connection is piped to the
        WebSocket server, which listens on a port of its own.
        """
        self._server = await serve(
            self._handler,
            "127.0.0.1",
            0,
            process_request=self._process_request,
            max_size=16 << 20,
            ping_interval=None,
        )
        inner = next(iter(self._server.sockets)).getsockname()[1]

        async def front_door(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await self._front_door(inner, reader, writer)

        self._front = await asyncio.start_server(front_door, "127.0.0.1", self.port)
        self.port = next(iter(self._front.sockets)).getsockname()[1]

    async def stop(self) -> None:
        """Close every connection and stop listening."""
        if self._front is not None:
            self._front.close()
            self._front = None
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        # The piped connections end with the WebSocket server's; wait for them.
        if self._front_tasks:
            await asyncio.wait(self._front_tasks, timeout=5)

    async def __aenter__(self) -> SignalRHub:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    def __enter__(self) -> SignalRHub:
        """Run the hub on a thread of its own, for sync clients."""
        self._loop = loop = asyncio.new_event_loop()
        self._thread = loop_thread(
            loop, self.start(), name="signalr-hub", stop=self.stop, timeout=10
        )
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._thread = None
            self._loop = None

    # -- HTTP: negotiate and the upgrade --------------------------------------

    async def _front_door(
        self, inner: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        """One connection: any method but ``GET`` answered here (negotiate, or a 404),
        a ``GET`` (the upgrade) piped to the WebSocket server."""
        task = asyncio.current_task()
        if task is not None:
            self._front_tasks.add(task)
        upstream: asyncio.StreamWriter | None = None
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            method, target = head.split(b" ", 2)[:2]
            url = urlsplit(target.decode("latin-1"))
            if method != b"GET":
                lines = head.decode("latin-1").split("\r\n")
                fields = dict(line.split(":", 1) for line in lines[1:] if ":" in line)
                length = {k.strip().lower(): v.strip() for k, v in fields.items()}.get(
                    "content-length", "0"
                )
                await reader.readexactly(int(length) if length.isdigit() else 0)
                if method == b"POST" and url.path == self.path + "/negotiate" and self.negotiate:
                    answer = self._negotiate(url.query)
                else:  # no negotiate here, or another method: ASP.NET's 404
                    empty = Headers([("Content-Length", "0"), ("Connection", "close")])
                    answer = Response(404, "Not Found", empty, b"")
                status = f"HTTP/1.1 {answer.status_code} {answer.reason_phrase}\r\n"
                fields_out = "".join(f"{k}: {v}\r\n" for k, v in answer.headers.raw_items())
                writer.write(f"{status}{fields_out}\r\n".encode("latin-1") + answer.body)
                await writer.drain()
                return
            upstream_reader, upstream = await asyncio.open_connection("127.0.0.1", inner)
            upstream.write(head)
            await asyncio.gather(_pipe(reader, upstream), _pipe(upstream_reader, writer))
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError, OSError):
            pass
        finally:
            for side in (upstream, writer):
                if side is not None:
                    side.close()
                    with contextlib.suppress(OSError):
                        await side.wait_closed()
            if task is not None:
                self._front_tasks.discard(task)

    def _process_request(self, connection: ServerConnection, request: Request) -> Response | None:
        url = urlsplit(request.path)
        if url.path == self.path + "/negotiate" and self.negotiate:
            return self._negotiate(url.query)
        if url.path != self.path:
            return connection.respond(http.HTTPStatus.NOT_FOUND, "Not Found\n")
        if self.require_negotiate:
            ids = parse_qs(url.query).get("id", [])
            if not ids or ids[0] not in self._tokens:
                return connection.respond(http.HTTPStatus.NOT_FOUND, "No Connection with that ID\n")
        return None

    def _negotiate(self, query: str) -> Response:
        # TransportProtocols.md: version 1 adds connectionToken, which the
        # client then passes as ?id=; version 0 uses connectionId for both.
        self.negotiations += 1
        version = 1 if parse_qs(query).get("negotiateVersion", ["0"])[0] == "1" else 0
        connection_id = base64.urlsafe_b64encode(os.urandom(12)).decode()
        body: dict[str, Any] = {
            "connectionId": connection_id,
            "negotiateVersion": version,
            "availableTransports": [
                {"transport": "WebSockets", "transferFormats": ["Text", "Binary"]}
            ],
        }
        if version == 1:
            token = base64.urlsafe_b64encode(os.urandom(12)).decode()
            body["connectionToken"] = token
            self._tokens.add(token)
        else:
            self._tokens.add(connection_id)
        payload = _encode(body)
        headers = Headers(
            [
                ("Content-Type", "application/json"),
                ("Content-Length", str(len(payload))),
                ("Connection", "close"),
            ]
        )
        return Response(200, "OK", headers, payload)

    # -- the hub protocol ----------------------------------------------------------

    async def _handler(self, ws: ServerConnection) -> None:
        self.connections.append(ws.request.path if ws.request else "")
        conn = _Connection(ws)
        pinger: asyncio.Task[None] | None = None
        buffer = ""
        handshaken = False
        try:
            async for frame in ws:
                buffer += frame if isinstance(frame, str) else frame.decode("utf-8")
                while RS in buffer:
                    raw, buffer = buffer.split(RS, 1)
                    message = _decode(raw)
                    self.received.append(message)
                    if not handshaken:
                        handshaken = True
                        if message.get("protocol") != "json" or message.get("version") not in (
                            0,
                            1,
                        ):
                            error = (
                                f"Requested protocol '{message.get('protocol')}' is not available."
                            )
                            await conn.send({"error": error})
                            return
                        await conn.send({}, {"type": 6})
                        if self.ping_interval_s:
                            pinger = asyncio.create_task(self._ping(conn, self.ping_interval_s))
                        continue
                    if await self._dispatch(conn, message):
                        return
        except ConnectionClosed:
            pass
        finally:
            self.disconnects += 1
            if pinger is not None:
                pinger.cancel()
            for task in conn.streams.values():
                task.cancel()

    async def _ping(self, conn: _Connection, interval: float) -> None:
        with contextlib.suppress(ConnectionClosed):
            while True:
                await asyncio.sleep(interval)
                await conn.send({"type": 6})

    async def _dispatch(self, conn: _Connection, message: dict[str, Any]) -> bool:
        """Handle one client message; True when the connection should close."""
        kind = message.get("type")
        invocation_id = message.get("invocationId")
        if kind == 4 and isinstance(invocation_id, str):
            target = str(message.get("target", ""))
            arguments = message.get("arguments") or []
            script = self.script_for(target, arguments)
            task = asyncio.create_task(self._stream(conn, invocation_id, script))
            conn.streams[invocation_id] = task
        elif kind == 1 and isinstance(invocation_id, str):
            arguments = message.get("arguments") or []
            result = arguments[0] if arguments else None
            await conn.send({"type": 3, "invocationId": invocation_id, "result": result})
        elif kind == 5 and isinstance(invocation_id, str):
            stream = conn.streams.pop(invocation_id, None)
            if stream is not None and not stream.done():
                conn.cancelled.add(invocation_id)
                stream.cancel()
                with contextlib.suppress(ConnectionClosed):
                    await conn.send({"type": 3, "invocationId": invocation_id})
        elif kind == 7:
            return True
        return False

    def script_for(self, target: str, arguments: list[Any]) -> Script:
        """The script for one invocation: ``choose``, else by prompt, else ``default``."""
        if self._choose is not None:
            return self._choose(target, arguments)
        return self.scripts.get(prompt_of(arguments), self.default)

    async def _stream(self, conn: _Connection, invocation_id: str, script: Script) -> None:
        try:
            if script.mode == "copilot":
                await self._copilot(conn, invocation_id, script)
            else:
                await self._items(conn, invocation_id, script)
            if script.drop:
                self.outcomes.append((invocation_id, "dropped"))
                await conn.ws.close()
            elif script.close_error is not None:
                self.outcomes.append((invocation_id, "closed"))
                await conn.send({"type": 7, "error": script.close_error, "allowReconnect": False})
                await conn.ws.close()
            elif script.error is not None:
                self.outcomes.append((invocation_id, "error"))
                await conn.send({"type": 3, "invocationId": invocation_id, "error": script.error})
            else:
                self.outcomes.append((invocation_id, "completed"))
                await conn.send({"type": 3, "invocationId": invocation_id})
        except ConnectionClosed:
            self.outcomes.append((invocation_id, "disconnected"))
        except asyncio.CancelledError:
            # CancelInvocation (type 5), or the socket went away mid-stream.
            how = "cancelled" if invocation_id in conn.cancelled else "disconnected"
            self.outcomes.append((invocation_id, how))
            raise
        finally:
            conn.streams.pop(invocation_id, None)

    async def _pause(self, script: Script) -> None:
        if script.delay_s:
            await asyncio.sleep(script.delay_s)

    async def _items(self, conn: _Connection, invocation_id: str, script: Script) -> None:
        for token in script.tokens:
            await self._pause(script)
            item: Any = {"string": token, "text": {"text": token}, "delta": {"delta": token}}[
                script.item
            ]
            await conn.send({"type": 2, "invocationId": invocation_id, "item": item})
        if script.tool_call is not None:
            call_id, name, arguments = script.tool_call
            item = {"index": 1, "tool_call": {"id": call_id, "name": name, "arguments": arguments}}
            await conn.send({"type": 2, "invocationId": invocation_id, "item": item})
        if script.usage is not None:
            usage = {"input_tokens": script.usage[0], "output_tokens": script.usage[1]}
            await conn.send({"type": 2, "invocationId": invocation_id, "item": {"usage": usage}})

    async def _copilot(self, conn: _Connection, invocation_id: str, script: Script) -> None:
        text = ""
        for token in script.tokens:
            await self._pause(script)
            text += token
            await conn.send(_update(text))
        if script.rewrite is not None:
            text = script.rewrite
            await conn.send(_update(text))
        await self._pause(script)
        item = {
            "messages": [
                {"text": text, "author": "bot", "messageId": "m1", "turnState": "Completed"}
            ],
            "result": {"value": script.result, "message": text},
        }
        await conn.send({"type": 2, "invocationId": invocation_id, "item": item})


def _update(text: str) -> dict[str, Any]:
    """A Copilot ``update`` Invocation: no invocationId, the cumulative text."""
    message = {"text": text, "author": "bot", "messageId": "m1", "messageType": "Chat"}
    return {"type": 1, "target": "update", "arguments": [{"messages": [message]}]}


async def _pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    """Copy ``src`` to ``dst`` until EOF, then end ``dst`` (the other way then ends too)."""
    with contextlib.suppress(OSError):
        while data := await src.read(65536):
            dst.write(data)
            await dst.drain()
    with contextlib.suppress(OSError):
        dst.close()
