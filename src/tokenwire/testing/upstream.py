"""A faithful fake vendor upstream on 127.0.0.1, with fault injection.

``FakeUpstream("openai", Script(text="Hi there"))`` runs a raw asyncio HTTP/1.1
server (no web framework, so the bytes go out exactly as the vendor module
scripted them) on its own event loop in a daemon thread, on a free port of
127.0.0.1. It answers ``POST`` on any path with a chunked ``200`` whose body is
the vendor's stream, one HTTP chunk per vendor event, flushed as it is written.
It works the same from sync tests, async tests and users' own code::

    with FakeUpstream("openai", Script(text="Hello there")) as fake:
        client = openai.OpenAI(base_url=fake.url + "/v1", api_key="x", max_retries=0)
        ...
    assert fake.requests[0].path == "/v1/chat/completions"

Vendors plug in through ``RENDERERS``: each module there provides
``CONTENT_TYPE``, ``render(script, *, model, request) -> list[bytes]`` (the exact
response body as the vendor's events, one item per event, so faults can count
events) and ``error_body(status) -> bytes`` (the vendor's JSON error body). It
may also provide ``check_request(request) -> str | None`` (a message answers
``400``; ``refusal_body(problem) -> bytes`` words that answer as the vendor
does), ``answer_other(request) -> (status, body) | None`` (an endpoint
of the vendor answered whole, such as Responses' compaction),
``RESPONSE_HEADERS`` (extra headers of a streamed answer),
``bad_event(event) -> bytes`` (how one event looks garbled) and
``huge_event(size) -> Iterator[bytes]`` (one oversized event, in pieces).

Faults (``Fault(kind=...)``) reproduce what goes wrong with real upstreams: an
HTTP error status before streaming, a connection cut mid-stream, a stall before
the first byte or after the first event, one garbled event, the body split into
pieces of a few bytes, and one event far over any sane size limit.

SDK base URLs per vendor (the path each SDK appends decides it):
``openai``/``mistral``/``openai-responses``: ``fake.url + "/v1"``;
``anthropic``: ``fake.url``; ``gemini``: ``fake.url`` with ``api_version="v1beta"``;
``cohere``: ``fake.url``. SDKs retry 429/5xx answers by default: pass
``max_retries=0`` (or the SDK's equivalent) in fault tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import re
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, Final, Literal, Protocol, cast

import msgspec

from .. import translate
from ..errors import TokenwireError

__all__ = [
    "RENDERERS",
    "Fault",
    "FakeUpstream",
    "RecordedRequest",
    "Renderer",
    "Script",
    "ScriptedToolCall",
    "choice_count",
    "choice_text",
    "count_answer",
    "counted_tokens",
    "cut_text",
    "json_object",
    "loop_thread",
    "padding",
    "split_words",
    "streamed_messages",
]

#: Vendor name -> the module that renders its wire format: the fake each
#: ``VendorFormat`` names (``translate.registry``), in registry order.
RENDERERS: Final[dict[str, str]] = {
    fmt.name: fmt.fake for fmt in translate.formats() if fmt.fake is not None
}


def json_object(request: RecordedRequest, *, model: bool = True) -> dict[str, Any] | str:
    """The request's body as a JSON object, or what is wrong with it.

    The checks every fake starts with: JSON, an object, and (``model``) a
    string ``model``. A returned string is the problem, answered with 400.
    """
    try:
        body = request.json()
    except ValueError:
        return "body is not JSON"
    if not isinstance(body, dict):
        return "body is not a JSON object"
    if model and not isinstance(body.get("model"), str):
        return "model: required"
    return body


#: The most choices (OpenAI ``n``, Gemini ``candidateCount``) a fake answers with.
MAX_CHOICES: Final = 8


def choice_count(value: Any) -> int:
    """How many choices a request asked for (1 when it did not say, bounded)."""
    if type(value) is not int or value < 1:
        return 1
    return min(value, MAX_CHOICES)


def choice_text(script: Script, choice: int) -> str:
    """Choice ``choice``'s answer: the script's text, numbered after choice 0."""
    return script.text if choice == 0 else f"Choice {choice}: {script.text}"


def counted_tokens(value: Any) -> int:
    """The fakes' own token count of a counting request's body: one per
    word of every string in it, the ``model`` names left out. Deterministic, and
    never the gateway's estimate (one per 4 characters), so a test can tell them apart."""
    stack, words = [value], 0
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            words += len(item.split())
        elif isinstance(item, dict):
            stack.extend(v for k, v in item.items() if k != "model")
        elif isinstance(item, list):
            stack.extend(item)
    return words


def count_answer(
    request: RecordedRequest,
    suffix: str,
    allowed: frozenset[str],
    required: tuple[str, ...],
    answer: Callable[[int], dict[str, Any]],
    refuse: Callable[[str], bytes],
) -> tuple[int, bytes] | None:
    """A fake's answer to its vendor's counting endpoint (``None``: not that endpoint).

    Strict as the vendors are: a field outside ``allowed`` (a generation-only
    one such as ``max_tokens`` or ``stream``) or a missing required one is a 400.
    """
    if not request.path.split("?", 1)[0].endswith(suffix):
        return None
    body = json_object(request, model=False)
    if isinstance(body, str):
        return 400, refuse(body)
    extra = sorted(set(body) - allowed)
    if extra:
        return 400, refuse(f"{extra[0]}: Extra inputs are not permitted")
    for name in required:
        if name not in body:
            return 400, refuse(f"{name}: Field required")
    return 200, msgspec.json.encode(answer(counted_tokens(body)))


def cut_text(text: str, lengths: tuple[int, ...]) -> list[str]:
    """``text`` cut into pieces of ``lengths``, cycled (mid-token, as vendors cut)."""
    out: list[str] = []
    i = k = 0
    while i < len(text):
        n = lengths[k % len(lengths)]
        out.append(text[i : i + n])
        i += n
        k += 1
    return out


def padding(size: int) -> Iterator[bytes]:
    """``size`` bytes of ``x`` (none if ``size`` < 1), in pieces of 1 MiB at most."""
    left = max(size, 0)
    block = b"x" * (1 << 20)
    while left > 0:
        n = min(left, len(block))
        yield block[:n]
        left -= n


def streamed_messages(body: dict[str, Any], key: str = "messages") -> str | None:
    """The checks of a chat-shaped body: a non-empty ``key`` array and ``stream: true``."""
    if not isinstance(body.get(key), list) or not body[key]:
        return f"{key}: a non-empty array is required"
    if body.get("stream") is not True:
        return "the fake only streams: stream must be true"
    return None


class ScriptedToolCall(msgspec.Struct, frozen=True):
    """One tool call the fake model makes; ``id`` is generated when ``None``."""

    name: str
    arguments: dict[str, Any]
    id: str | None = None


class Script(msgspec.Struct, frozen=True, kw_only=True):
    """What the fake model answers, in standard terms; each vendor module renders it."""

    #: Streamed word by word, spaces kept attached (see ``split_words``).
    text: str = "Hello from the fake upstream."
    #: Streamed with the vendor's own argument fragmenting.
    tool_calls: list[ScriptedToolCall] = []
    input_tokens: int = 12
    #: ``None``: the number of text pieces.
    output_tokens: int | None = None
    #: A standard stop reason; ``None``: ``tool_use`` with tool calls, else ``end_turn``.
    stop_reason: str | None = None
    #: ``(draft error code, message)``: a vendor in-stream error after the text.
    error: tuple[str, str] | None = None
    #: Pause between body chunks, in seconds.
    delay_s: float = 0.0
    #: Reasoning streamed before the answer, in a thinking block of its own
    #: (vendors that sign it, Anthropic, sign it; see that vendor's module).
    thinking: str = ""
    #: Encrypted reasoning sent whole before the answer (Anthropic's redacted_thinking).
    redacted_thinking: bool = False
    #: Vendor items sent after the tool calls, in the vendor's own shape (Responses:
    #: output items such as ``custom_tool_call``, ``apply_patch_call``,
    #: ``mcp_approval_request``, ``compaction``; Anthropic: content blocks such as
    #: ``compaction``, ``server_tool_use``). Ids the next turn must send back are
    #: filled in and signed by the vendor's module, which checks them then.
    items: list[dict[str, Any]] = []
    #: Anthropic: the container of the turn (``pause_turn`` continuations name it).
    container: str | None = None

    @property
    def pieces(self) -> list[str]:
        """The text as the pieces it is streamed in."""
        return split_words(self.text)

    @property
    def usage_output_tokens(self) -> int:
        """``output_tokens``, or the number of text pieces when it is ``None``."""
        return len(self.pieces) if self.output_tokens is None else self.output_tokens

    @property
    def final_stop_reason(self) -> str:
        """``stop_reason``, or its default."""
        if self.stop_reason is not None:
            return self.stop_reason
        return "tool_use" if self.tool_calls else "end_turn"


FaultKind = Literal[
    "status",
    "cut",
    "stall_before_first_byte",
    "stall_after_first_event",
    "bad_json",
    "split_bytes",
    "huge_event",
]


class Fault(msgspec.Struct, frozen=True, kw_only=True):
    """One thing going wrong with the upstream.

    - ``status``: answer ``status`` with the vendor's JSON error body, no stream.
    - ``cut``: send ``after_events`` events, then drop the connection without
      ending the chunked body (what a reset or a dying proxy looks like); with
      ``graceful=True`` the body ends cleanly instead, just without the rest
      (a clean EOF that lacks the vendor's end marker).
    - ``stall_before_first_byte``: wait ``stall_s`` before the status line.
    - ``stall_after_first_event``: send one event, wait ``stall_s``, go on.
    - ``bad_json``: after ``after_events`` events, one garbled event, then the rest.
    - ``split_bytes``: the whole body in HTTP chunks of ``split_every`` bytes.
    - ``huge_event``: after the first event, one event of ``size`` bytes, then the rest.
    """

    kind: FaultKind
    status: int = 500
    after_events: int = 2
    stall_s: float = 30.0
    split_every: int = 1
    size: int = 64 << 20
    graceful: bool = False


class RecordedRequest(msgspec.Struct, frozen=True):
    """A request the fake received; header names are lower-cased."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        """The body decoded as JSON. Raises ``msgspec.DecodeError`` if it is not JSON."""
        return msgspec.json.decode(self.body)


class Renderer(Protocol):
    """What a vendor module in ``RENDERERS`` provides (the optional hooks aside)."""

    CONTENT_TYPE: str

    def render(self, script: Script, *, model: str, request: RecordedRequest) -> list[bytes]: ...

    def error_body(self, status: int) -> bytes: ...


_WORDS: Final = re.compile(r"\s*\S+")


def split_words(text: str) -> list[str]:
    """``text`` cut before each word, so ``"".join(split_words(t)) == t``.

    Leading spaces stay on the word that follows them (``["Hello", " from"]``),
    trailing spaces on the last piece. Returns ``[]`` for ``""``.
    """
    pieces = _WORDS.findall(text)
    rest = text[sum(map(len, pieces)) :]
    if rest:
        if pieces:
            pieces[-1] += rest
        else:
            pieces = [rest]
    return pieces


_REASONS: Final[dict[int, str]] = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    408: "Request Timeout",
    413: "Payload Too Large",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
    529: "Site Overloaded",
}

_MAX_HEAD: Final = 64 * 1024
_MAX_BODY: Final = 64 << 20
_MODEL_IN_PATH: Final = re.compile(r"/models/([^/:?]+)")
_BAD_REQUEST: Final = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"


class _ClientGone(TokenwireError):
    """The client hung up while we were answering."""


def loop_thread(
    loop: asyncio.AbstractEventLoop,
    start: Coroutine[Any, Any, object],
    *,
    name: str,
    stop: Callable[[], Coroutine[Any, Any, object]] | None = None,
    timeout: float | None = None,
) -> threading.Thread:
    """Run ``loop`` forever on a daemon thread, after ``start``; ``stop`` when it ends.

    Returns the thread once ``start`` has finished (waiting ``timeout`` seconds
    at most); raises what ``start`` raised, the loop then closed.
    """
    ready = threading.Event()
    failure: list[BaseException] = []

    def run() -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(start)
        except BaseException as exc:  # pragma: no cover - bind failures are rare
            failure.append(exc)
            ready.set()
            loop.close()
            return
        ready.set()
        try:
            loop.run_forever()
        finally:
            if stop is not None:
                loop.run_until_complete(stop())
            loop.close()

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    ready.wait(timeout)
    if failure:
        thread.join()
        raise failure[0]
    return thread


class _BadRequest(TokenwireError):
    """The bytes we read are not an HTTP/1.1 request we can answer."""


def _default_bad_event(event: bytes) -> bytes:
    # Keep the framing, break the JSON: a doubled opening brace is never valid.
    i = event.find(b"{")
    return event[:i] + b"{" + event[i:] if i >= 0 else event + b"{"


def _default_huge_event(size: int) -> Iterator[bytes]:
    # One SSE data line of ``size`` bytes: a JSON string padded to length.
    head, tail = b'data: {"pad":"', b'"}\n\n'
    yield head
    yield from padding(size - len(head) - len(tail) + 2)
    yield tail


class _Exchange:
    """One response on a connection: writes HTTP chunks, notices hang-ups."""

    #: How often a pause looks for a hang-up, in seconds.
    POLL_S: Final = 0.005

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    def check(self) -> None:
        # The client sends nothing while it reads a streamed answer, so an EOF
        # on its side means it hung up. Looking at the reader's state (rather
        # than keeping a read pending) consumes nothing from the connection.
        if self.reader.at_eof() or self.writer.is_closing():
            raise _ClientGone

    async def pause(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while True:
            self.check()
            left = deadline - time.monotonic()
            if left <= 0:
                return
            await asyncio.sleep(min(left, self.POLL_S))

    async def send(self, data: bytes) -> None:
        self.check()
        self.writer.write(data)
        try:
            await self.writer.drain()
        except (ConnectionError, RuntimeError):
            raise _ClientGone from None
        # Let the event loop see an EOF that arrived during the write.
        await asyncio.sleep(0)
        self.check()

    async def chunk(self, data: bytes) -> None:
        if data:  # an empty chunk would end the chunked body
            await self.send(b"%x\r\n%s\r\n" % (len(data), data))


class FakeUpstream:
    """A scripted vendor endpoint on ``127.0.0.1``: see the module docstring.

    ``script`` is a ``Script``, a function of the ``RecordedRequest`` returning
    one, or ``None`` for the default script. ``fault`` applies to every request.
    """

    def __init__(
        self,
        vendor: str,
        script: Script | Callable[[RecordedRequest], Script] | None = None,
        *,
        fault: Fault | None = None,
    ) -> None:
        if vendor not in RENDERERS:
            known = ", ".join(sorted(RENDERERS))
            raise ValueError(f"unknown vendor {vendor!r} (known: {known})")
        self.vendor = vendor
        self.script = script
        self.fault = fault
        self.renderer: Any = importlib.import_module(RENDERERS[vendor])
        self.url = ""
        self.port = 0
        self.requests: list[RecordedRequest] = []
        self.disconnects: list[float] = []
        self.completed = 0
        #: Problems the fake hit itself (a renderer bug, an unreadable request).
        self.errors: list[str] = []
        self._changed = threading.Condition()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    # -- lifecycle ---------------------------------------------------------

    def start(self) -> FakeUpstream:
        """Bind a free port on 127.0.0.1 and serve in a daemon thread. Returns ``self``.

        Raises ``RuntimeError`` if it is already running, ``OSError`` if it cannot bind.
        """
        if self._thread is not None:
            raise RuntimeError("FakeUpstream is already running")
        loop = asyncio.new_event_loop()

        async def bind() -> None:
            self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)

        thread = loop_thread(loop, bind(), name=f"FakeUpstream-{self.vendor}")
        assert self._server is not None
        self._loop, self._thread = loop, thread
        self.port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        return self

    def stop(self) -> None:
        """Close the listening socket and every connection, end the thread. Idempotent."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        future = asyncio.run_coroutine_threadsafe(self._shutdown(), loop)
        with contextlib.suppress(Exception):
            future.result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        self._loop = self._thread = self._server = None

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5)

    def __enter__(self) -> FakeUpstream:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # The fake runs on a thread of its own: in async code too, start and stop block.
    async def __aenter__(self) -> FakeUpstream:
        return self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        self.stop()

    def wait_for(self, predicate: Callable[[FakeUpstream], bool], timeout: float = 5.0) -> bool:
        """Block until ``predicate(self)`` holds (re-checked on every change).

        Returns ``False`` when ``timeout`` seconds pass first. Useful to wait
        for a disconnect to be recorded: ``fake.wait_for(lambda f: f.disconnects)``.
        """
        with self._changed:
            return self._changed.wait_for(lambda: bool(predicate(self)), timeout)

    def _append(self, target: list[Any], item: Any) -> None:
        # Under the condition, so that ``wait_for`` wakes up on every change.
        with self._changed:
            target.append(item)
            self._changed.notify_all()

    def _completed(self) -> None:
        with self._changed:
            self.completed += 1
            self._changed.notify_all()

    # -- one connection ----------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(cast("asyncio.Task[None]", task))
        try:
            while True:
                try:
                    request = await self._read_request(reader)
                except _BadRequest as exc:
                    self._append(self.errors, f"bad request: {exc}")
                    writer.write(_BAD_REQUEST)
                    break
                if request is None:
                    break
                self._append(self.requests, request)
                keep_alive = await self._answer(request, reader, writer)
                if not keep_alive:
                    break
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        except Exception as exc:  # a bug in the fake: record it, never kill the loop
            self._append(self.errors, f"connection failed: {type(exc).__name__}: {exc}")
        finally:
            self._tasks.discard(cast("asyncio.Task[None]", task))
            with contextlib.suppress(Exception):
                writer.close()

    async def _read_request(self, reader: asyncio.StreamReader) -> RecordedRequest | None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as exc:
            if exc.partial.strip():
                raise _BadRequest("connection closed inside the request head") from None
            return None
        except asyncio.LimitOverrunError:
            raise _BadRequest("request head too large") from None
        if len(head) > _MAX_HEAD:
            raise _BadRequest("request head too large")
        lines = head.decode("latin-1").split("\r\n")
        try:
            method, path, _version = lines[0].split(" ", 2)
        except ValueError:
            raise _BadRequest(f"bad request line {lines[0]!r}") from None
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if not line:
                continue
            name, sep, value = line.partition(":")
            if not sep:
                raise _BadRequest(f"bad header line {line!r}")
            headers[name.strip().lower()] = value.strip()
        if "chunked" in headers.get("transfer-encoding", "").lower():
            body = await self._read_chunked(reader)
        else:
            length = int(headers.get("content-length", "0") or 0)
            if length > _MAX_BODY:
                raise _BadRequest("request body too large")
            body = await reader.readexactly(length)
        return RecordedRequest(method=method, path=path, headers=headers, body=body)

    async def _read_chunked(self, reader: asyncio.StreamReader) -> bytes:
        parts: list[bytes] = []
        total = 0
        while True:
            size_line = await reader.readuntil(b"\r\n")
            size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                while (await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers
                    pass
                return b"".join(parts)
            total += size
            if total > _MAX_BODY:
                raise _BadRequest("request body too large")
            parts.append(await reader.readexactly(size))
            await reader.readexactly(2)

    def _model_of(self, request: RecordedRequest) -> str:
        try:
            body = request.json()
        except msgspec.DecodeError:
            body = None
        if isinstance(body, dict) and isinstance(body.get("model"), str):
            return str(body["model"])
        match = _MODEL_IN_PATH.search(request.path)
        return match[1] if match else "fake-model"

    def _script_for(self, request: RecordedRequest) -> Script:
        if self.script is None:
            return Script()
        if isinstance(self.script, Script):
            return self.script
        return self.script(request)

    async def _simple(
        self, writer: asyncio.StreamWriter, status: int, body: bytes, extra: dict[str, str]
    ) -> None:
        head = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}"]
        head += ["content-type: application/json", f"content-length: {len(body)}"]
        head += [f"{k}: {v}" for k, v in extra.items()]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)
        await writer.drain()

    async def _answer(
        self,
        request: RecordedRequest,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> bool:
        """Answer one request. Returns whether the connection may be reused."""
        renderer = self.renderer
        keep_alive = request.headers.get("connection", "").lower() != "close"
        if request.method != "POST":
            await self._simple(writer, 405, renderer.error_body(405), {"allow": "POST"})
            self._completed()
            return keep_alive
        count = getattr(renderer, "count_tokens", None)
        counted = count(request) if count is not None else None
        if counted is None:  # another endpoint answered whole (Responses' compaction)
            other = getattr(renderer, "answer_other", None)
            counted = other(request) if other is not None else None
        if counted is not None:  # the vendor's token-counting endpoint
            await self._simple(writer, counted[0], counted[1], {})
            self._completed()
            return keep_alive
        check = getattr(renderer, "check_request", None)
        problem = check(request) if check is not None else None
        if problem is not None:
            extra = {"x-fake-upstream-problem": problem.replace("\r", " ").replace("\n", " ")}
            # A renderer may word the refusal the way its vendor does.
            refusal = getattr(renderer, "refusal_body", None)
            body = refusal(problem) if refusal is not None else renderer.error_body(400)
            # Recorded before it is answered: a test that saw the 400 sees the reason.
            self._append(self.errors, f"rejected: {problem}")
            await self._simple(writer, 400, body, extra)
            self._completed()
            return keep_alive
        fault = self.fault
        exchange = _Exchange(reader, writer)
        try:
            if fault is not None and fault.kind == "status":
                await self._simple(writer, fault.status, renderer.error_body(fault.status), {})
                self._completed()
                return keep_alive
            wants_whole = getattr(renderer, "wants_whole", None)
            if wants_whole is not None and wants_whole(request):
                # The vendor's non-streaming answer, for clients that call it directly.
                script = self._script_for(request)
                body = renderer.whole(script, model=self._model_of(request), request=request)
                await self._simple(writer, 200, body, {})
                self._completed()
                return keep_alive
            try:
                script = self._script_for(request)
                events = list(
                    renderer.render(script, model=self._model_of(request), request=request)
                )
            except Exception as exc:
                self._append(self.errors, f"render failed: {type(exc).__name__}: {exc}")
                await self._simple(writer, 500, renderer.error_body(500), {})
                return False
            if fault is not None and fault.kind == "stall_before_first_byte":
                await exchange.pause(fault.stall_s)
            await self._stream(exchange, events, script.delay_s, fault)
        except _ClientGone:
            self._append(self.disconnects, time.monotonic())
            return False
        return keep_alive and not (fault is not None and fault.kind == "cut")

    async def _stream(
        self, exchange: _Exchange, events: list[bytes], delay_s: float, fault: Fault | None
    ) -> None:
        renderer = self.renderer
        head = [
            "HTTP/1.1 200 OK",
            f"content-type: {renderer.CONTENT_TYPE}",
            "transfer-encoding: chunked",
            "cache-control: no-cache",
            "connection: keep-alive",
        ]
        head += [f"{k}: {v}" for k, v in getattr(renderer, "RESPONSE_HEADERS", {}).items()]
        await exchange.send(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))

        kind = fault.kind if fault is not None else None
        if fault is not None and kind == "split_bytes":
            body = b"".join(events)
            step = max(fault.split_every, 1)
            for i in range(0, len(body), step):
                if i and delay_s:
                    await exchange.pause(delay_s)
                await exchange.chunk(body[i : i + step])
            await exchange.send(b"0\r\n\r\n")
            self._completed()
            return

        for i, event in enumerate(events):
            if fault is not None:
                if kind == "cut" and i == fault.after_events:
                    if fault.graceful:
                        await exchange.send(b"0\r\n\r\n")
                        self._completed()
                    # Otherwise: drop the connection inside the chunked body.
                    exchange.writer.close()
                    return
                if kind == "bad_json" and i == fault.after_events:
                    garble = getattr(renderer, "bad_event", _default_bad_event)
                    await exchange.chunk(garble(event))
                    continue
                if kind == "huge_event" and i == 1:
                    pieces = getattr(renderer, "huge_event", _default_huge_event)(fault.size)
                    for piece in pieces:
                        await exchange.chunk(piece)
            if i and delay_s:
                await exchange.pause(delay_s)
            await exchange.chunk(event)
            if fault is not None and kind == "stall_after_first_event" and i == 0:
                await exchange.pause(fault.stall_s)
        if fault is not None and kind == "cut":
            # Fewer events than ``after_events``: the cut comes right at the end.
            if fault.graceful:
                await exchange.send(b"0\r\n\r\n")
                self._completed()
            exchange.writer.close()
            return
        await exchange.send(b"0\r\n\r\n")
        self._completed()
