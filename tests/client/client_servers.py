"""Small purpose-built servers for the client tests, all on 127.0.0.1.

``ScriptedServer`` is a raw asyncio HTTP/1.1 server in a background thread:
each route answers with a script of steps (send bytes, pause, end, or drop the
connection mid-body), so faults like a stall, a seq gap, a cut connection or
a resumable stream are exact and need no framework. Every request it gets is
recorded for assertions.

``GatewayProcess`` runs ``tokenwire serve`` (or any command) as a subprocess
and waits for ``/healthz``; ``granian_app`` serves a Starlette app the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokenwire import Writer
from tokenwire import events as ev
from tokenwire.testing import processes

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
VECTORS = ROOT / "tests" / "vectors" / "client"


def load_vectors(folder: Path = VECTORS) -> list[dict[str, Any]]:
    """The JSON vectors in ``folder``, by file name."""
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]


# --- scripts -----------------------------------------------------------------------


@dataclass(frozen=True)
class Head:
    """The status line and headers; a body is sent chunked unless ``length`` is set."""

    status: int = 200
    headers: tuple[tuple[str, str], ...] = (("content-type", "text/event-stream"),)


@dataclass(frozen=True)
class Send:
    data: bytes


@dataclass(frozen=True)
class Sleep:
    seconds: float


@dataclass(frozen=True)
class Drop:
    """Close the connection abruptly, without the chunked terminator."""


Step = Head | Send | Sleep | Drop


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


Handler = Callable[[Received], list[Step]]


def sse_answer(*chunks: bytes, pause: float = 0.0) -> list[Step]:
    """A 200 text/event-stream answer sending ``chunks`` in order, then ending."""
    steps: list[Step] = [Head()]
    for chunk in chunks:
        if pause:
            steps.append(Sleep(pause))
        steps.append(Send(chunk))
    return steps


def json_answer(status: int, body: bytes) -> list[Step]:
    return [Head(status, (("content-type", "application/json"),)), Send(body)]


@dataclass
class ScriptedServer:
    """A raw HTTP/1.1 server playing scripted answers; see the module docstring."""

    routes: dict[tuple[str, str], Handler] = field(default_factory=dict)
    requests: list[Received] = field(default_factory=list)
    port: int = 0

    def __post_init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._main, daemon=True)
        self._tasks: set[asyncio.Task[None]] = set()
        self._server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def route(self, method: str, path: str, handler: Handler) -> None:
        """Answer ``method path`` (a trailing ``*`` matches any suffix) with ``handler``."""
        self.routes[(method, path)] = handler

    def answer(self, method: str, path: str, steps: list[Step]) -> None:
        """Answer every ``method path`` request with the same ``steps``."""
        self.route(method, path, lambda _req: steps)

    def start(self) -> ScriptedServer:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("scripted server did not start")
        return self

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        fut = asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop)
        fut.result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- internals -------------------------------------------------------------

    def _main(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._listen())
        self._ready.set()
        self._loop.run_forever()

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _shutdown(self) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _handler(self, method: str, path: str) -> Handler | None:
        bare = path.split("?", 1)[0]
        if (method, bare) in self.routes:
            return self.routes[(method, bare)]
        for (m, p), handler in self.routes.items():
            if m == method and p.endswith("*") and bare.startswith(p[:-1]):
                return handler
        return None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            headers = {}
            for line in lines[1:]:
                if line:
                    name, _, value = line.partition(":")
                    headers[name.strip().lower()] = value.strip()
            length = int(headers.get("content-length", "0"))
            body = await reader.readexactly(length) if length else b""
            received = Received(method, path, headers, body)
            self.requests.append(received)
            handler = self._handler(method, path)
            steps = handler(received) if handler else json_answer(404, b'{"error":"not found"}')
            await self._play(writer, steps)
        except (asyncio.CancelledError, ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._tasks.discard(task)
            writer.transport.abort()

    async def _play(self, writer: asyncio.StreamWriter, steps: list[Step]) -> None:
        chunked = False
        for step in steps:
            if isinstance(step, Head):
                reason = {200: "OK", 404: "Not Found", 415: "Unsupported Media Type"}.get(
                    step.status, "Status"
                )
                lines = [f"HTTP/1.1 {step.status} {reason}"]
                lines += [f"{k}: {v}" for k, v in step.headers]
                lines += ["transfer-encoding: chunked", "connection: close", "", ""]
                writer.write("\r\n".join(lines).encode("latin-1"))
                chunked = True
            elif isinstance(step, Send):
                if step.data:
                    writer.write(b"%x\r\n%s\r\n" % (len(step.data), step.data))
            elif isinstance(step, Sleep):
                await writer.drain()
                await asyncio.sleep(step.seconds)  # a scripted pause: the behaviour under test
            elif isinstance(step, Drop):
                await writer.drain()
                writer.transport.abort()
                return
            await writer.drain()
        if chunked:
            writer.write(b"0\r\n\r\n")
            await writer.drain()
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


class CuttingProxy:
    """A TCP proxy to ``127.0.0.1:target`` that cuts its first connection short.

    The first connection's answer is cut after ``cut_after`` bytes (the client
    sees the connection drop mid-stream); later connections pass whole.
    """

    def __init__(self, target: int, cut_after: int) -> None:
        self.target = target
        self.cut_after = cut_after
        self.connections = 0
        self._server = ScriptedServer()  # reuse its thread and loop
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> CuttingProxy:
        self._server.start()
        loop = self._server._loop
        fut = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._pipe, "127.0.0.1", 0), loop
        )
        self._listener = fut.result(10)
        self.port = self._listener.sockets[0].getsockname()[1]
        return self

    def __exit__(self, *exc: object) -> None:
        self._server._loop.call_soon_threadsafe(self._listener.close)
        self._server.stop()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._server._tasks.add(task)
        self.connections += 1
        budget = self.cut_after if self.connections == 1 else None
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target)

        async def upstream() -> None:
            with contextlib.suppress(ConnectionError):
                while data := await reader.read(65536):
                    up_writer.write(data)
                    await up_writer.drain()

        pump = asyncio.ensure_future(upstream())
        try:
            while data := await up_reader.read(65536):
                if budget is not None:
                    data = data[:budget]
                    budget -= len(data)
                writer.write(data)
                await writer.drain()
                if budget == 0:
                    break  # cut: drop the client's connection mid-answer
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            pump.cancel()
            writer.transport.abort()
            up_writer.transport.abort()
            self._server._tasks.discard(task)


# --- subprocess servers ------------------------------------------------------------------


free_port = processes.free_port


@dataclass
class ServerProcess:
    """A server subprocess on 127.0.0.1:port, stopped on exit: ``processes.ServedProcess``
    (the one launcher), ready once ``health`` answers below 500."""

    argv: list[str]
    port: int
    health: str = "/healthz"
    env: dict[str, str] | None = None
    cwd: Path | None = None
    served: processes.ServedProcess | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, wait: float = 30.0) -> ServerProcess:
        env = dict(os.environ)
        env.update(self.env or {})
        self.served = processes.ServedProcess(
            self.argv,
            self.port,
            ready=lambda: 0 < processes.http_status(self.port, self.health) < 500,
            env=env,
            cwd=self.cwd or ROOT,
            timeout_s=wait,
        ).start()
        return self

    def stop(self) -> None:
        if self.served is not None:
            self.served.close()
            self.served = None


def gateway_argv(port: int, config: Path | None = None) -> list[str]:
    argv = [str(VENV_BIN / "tokenwire"), "serve", "--host", "127.0.0.1", "--port", str(port)]
    if config is not None:
        argv += ["--config", str(config)]
    return argv


def granian_argv(target: str, port: int) -> list[str]:
    return [
        str(VENV_BIN / "granian"),
        "--interface",
        "asgi",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--no-ws",
        "--log-level",
        "warning",
        "--working-dir",
        str(Path(__file__).resolve().parent),
        target,
    ]


@contextlib.contextmanager
def running(server: ServerProcess) -> Iterator[ServerProcess]:
    server.start()
    try:
        yield server
    finally:
        server.stop()


class OwnedStreams:
    """A resumable endpoint on a ``ScriptedServer`` that binds each stream to its owner.

    As the gateway does (issue 16): the answer to a POST that asks for a
    resumable stream (``"tokenwire:resumable": true``) carries a fresh
    ``tokenwire-resume-token``; ``GET`` and ``DELETE /v1/streams/{id}`` answer
    404, like a stream that does not exist, unless ``Tokenwire-Resume-Token``
    names the stream's token. The POST sends the events up to seq
    ``cut_after`` and then drops the connection (mid-event); a resume answers
    the events after ``Last-Event-ID``. ``cancelled`` lists the request_ids
    deleted by their owner.
    """

    def __init__(self, server: ScriptedServer, words: list[str], *, cut_after: int) -> None:
        self.words = words
        self.cut_after = cut_after
        self.tokens: dict[str, str] = {}
        self.cancelled: list[str] = []
        self.refused: list[Received] = []
        server.route("POST", "/v1/stream", self._post)
        server.route("GET", "/v1/streams/*", self._get)
        server.route("DELETE", "/v1/streams/*", self._delete)

    def frames(self, request_id: str) -> list[bytes]:
        w = Writer(model="m", request_id=request_id, created=1)
        out = []
        for word in self.words:
            out += w.text(word)
        return [ev.dump(e) for e in out + w.usage(1, len(self.words)) + w.end()]

    def _post(self, req: Received) -> list[Step]:
        body = json.loads(req.body)
        rid = str(body["metadata"]["request_id"])
        head = Head()
        if (body.get("extensions") or {}).get("tokenwire:resumable") is True:
            token = self.tokens[rid] = os.urandom(16).hex()
            head = Head(headers=(*head.headers, ("tokenwire-resume-token", token)))
        wire = self.frames(rid)
        cut = self.cut_after + 1
        if cut >= len(wire):
            return [head, *[Send(f) for f in wire]]
        return [head, *[Send(f) for f in wire[:cut]], Send(wire[cut][:20]), Drop()]

    def _owner(self, req: Received) -> str | None:
        rid = req.path.split("?", 1)[0].rsplit("/", 1)[1]
        token = self.tokens.get(rid)
        if token is None or req.headers.get("tokenwire-resume-token") != token:
            self.refused.append(req)
            return None
        return rid

    def _get(self, req: Received) -> list[Step]:
        rid = self._owner(req)
        if rid is None:
            return json_answer(404, b'{"error":{"message":"no such stream"}}')
        after = int(req.headers.get("last-event-id", "-1"))
        return sse_answer(*self.frames(rid)[after + 1 :])

    def _delete(self, req: Received) -> list[Step]:
        rid = self._owner(req)
        if rid is None:
            return json_answer(404, b'{"error":{"message":"no such stream"}}')
        self.cancelled.append(rid)
        return json_answer(200, b'{"cancelled":true}')
