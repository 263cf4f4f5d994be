"""A 20-turn tool loop through the gateway: HTTP turns against the Responses WebSocket mode.

The same agent loop, with the openai SDK, against one ``tokenwire serve`` and a
fake upstream (its own process) that asks for one tool call per turn until the
20th turn, whose answer is text. Each tool output is ``--tool-bytes`` long (a
file read, a search result), so the conversation grows as a real one does.

- HTTP: ``client.responses.stream(...)`` per turn with the whole conversation
  (``store: false``, as an agent does against a gateway that keeps nothing).
- WebSocket: one ``client.responses.connect()``; each turn sends its new items
  and ``previous_response_id``; the gateway expands the chain.

Per turn: the client's wall time from sending the turn to its
``response.completed`` (median over ``--loops`` loops, the two modes
interleaved), and the bytes the client sent for it (counted on the wire by a
TCP relay between the client and the gateway: request heads, bodies,
WebSocket frames; a separate pass, so the relay costs no time above).
Upstreams: a Chat Completions fake (translated) and a Responses fake (passthrough).

    .venv/bin/python bench/responses_ws.py [--loops 5] [--turns 20] [--no-write]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import openai

from _common import header, md_table, write_section
from tokenwire.testing.processes import gateway_config, loadavg, serve_gateway

TOOLS: list[Any] = [
    {
        "type": "function",
        "name": "read_file",
        "description": "Read a file of the project.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
    }
]

#: The fake upstream: one read_file call per turn until TURNS tool results came back.
_UPSTREAM = r"""
import sys
from tokenwire.testing.upstream import FakeUpstream, Script, ScriptedToolCall
vendor, turns = sys.argv[1], int(sys.argv[2])
markers = ('"function_call_output"', '"role":"tool"')
def script(request):
    text = request.body.decode()
    done = sum(text.count(m) for m in markers)
    if done + 1 >= turns:
        return Script(text="All files read; the change is ready.")
    return Script(text=f"Reading file {done}.",
                  tool_calls=[ScriptedToolCall("read_file", {"path": f"src/f{done}.py"})])
fake = FakeUpstream(vendor, script).start()
fake.requests = type("NoList", (list,), {"append": lambda self, item: None})()
print(fake.url, flush=True)
sys.stdin.read()
fake.stop()
"""


@contextlib.contextmanager
def upstream(vendor: str, turns: int) -> Iterator[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _UPSTREAM, vendor, str(turns)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().strip()
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=10)


class Relay:
    """A TCP relay on 127.0.0.1 counting the bytes the client sends, in a thread."""

    def __init__(self, port: int) -> None:
        self.target = port
        self.sent = 0
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()
        self.port = 0

        async def start() -> None:
            server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
            self.port = server.sockets[0].getsockname()[1]
            ready.set()

        def run() -> None:
            self.loop.run_until_complete(start())
            self.loop.run_forever()

        threading.Thread(target=run, daemon=True).start()
        ready.wait(10)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target)

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter, count: bool) -> None:
            with contextlib.suppress(OSError):
                while data := await src.read(65536):
                    if count:
                        self.sent += len(data)
                    dst.write(data)
                    await dst.drain()
            with contextlib.suppress(OSError):
                dst.close()

        await asyncio.gather(pipe(reader, up_writer, True), pipe(up_reader, writer, False))

    def stop(self) -> None:
        """Stop once the relayed connections ended (the clients closed theirs)."""

        async def drained() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            if tasks:
                await asyncio.wait(tasks, timeout=10)

        asyncio.run_coroutine_threadsafe(drained(), self.loop).result(15)
        self.loop.call_soon_threadsafe(self.loop.stop)


def tool_output(path: str, size: int) -> str:
    line = f"# {path}: def handler(request): return respond(request)\n"
    return (line * (size // len(line) + 1))[:size]


Turn = Callable[[], None]


def http_loop(client: openai.OpenAI, model: str, turns: int, size: int, mark: Turn) -> list[str]:
    items: list[Any] = [{"role": "user", "content": "Read the handlers and fix the bug."}]
    texts = []
    for _ in range(turns):
        with client.responses.stream(model=model, input=items, tools=TOOLS, store=False) as s:
            response = s.get_final_response()
        mark()
        texts.append(response.output_text)
        items += [o.model_dump(exclude_none=True) for o in response.output]
        for call in (o for o in response.output if o.type == "function_call"):
            path = json.loads(call.arguments)["path"]
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": call.call_id,
                    "output": tool_output(path, size),
                }
            )
    return texts


def ws_loop(client: openai.OpenAI, model: str, turns: int, size: int, mark: Turn) -> list[str]:
    texts = []
    with client.responses.connect() as conn:
        items: list[Any] = [{"role": "user", "content": "Read the handlers and fix the bug."}]
        previous = None
        for _ in range(turns):
            extra = {"previous_response_id": previous} if previous else {}
            conn.response.create(model=model, input=items, tools=TOOLS, store=False, **extra)
            for event in conn:
                if event.type == "error":
                    raise RuntimeError(event.error.message)
                if event.type == "response.completed":
                    break
            mark()
            response = event.response
            texts.append(response.output_text)
            previous = response.id
            items = [
                {
                    "type": "function_call_output",
                    "call_id": call.call_id,
                    "output": tool_output(json.loads(call.arguments)["path"], size),
                }
                for call in response.output
                if call.type == "function_call"
            ]
    return texts


def timed(
    loop: Callable[..., list[str]], client: openai.OpenAI, *args: Any
) -> tuple[list[float], list[str]]:
    marks: list[float] = []
    start = time.perf_counter()
    texts = loop(client, *args, lambda: marks.append(time.perf_counter()))
    times = [b - a for a, b in zip([start, *marks[:-1]], marks, strict=True)]
    return times, texts


def counted(loop: Callable[..., list[str]], relay: Relay, *args: Any) -> list[int]:
    client = openai.OpenAI(
        base_url=f"http://127.0.0.1:{relay.port}/v1", api_key="bench", max_retries=0
    )
    sizes: list[int] = []
    before = relay.sent

    def mark() -> None:
        nonlocal before
        sizes.append(relay.sent - before)
        before = relay.sent

    loop(client, *args, mark)
    client.close()
    return sizes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--loops", type=int, default=5)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--tool-bytes", type=int, default=2048)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    load_before = loadavg()
    lines: list[str] = []
    modes = {"HTTP": http_loop, "WebSocket": ws_loop}
    for vendor, label in (
        ("openai", "Chat Completions upstream (translated)"),
        ("openai-responses", "Responses upstream (passthrough)"),
    ):
        with upstream(vendor, args.turns) as url:
            config = gateway_config(
                {"agent": {"provider": vendor, "base_url": url, "upstream_model": "up"}}
            )
            with serve_gateway(config) as gateway:
                base = f"http://127.0.0.1:{gateway.port}/v1"
                client = openai.OpenAI(base_url=base, api_key="bench", max_retries=0)
                times: dict[str, list[list[float]]] = {mode: [] for mode in modes}
                answers: dict[str, list[str]] = {}
                for _ in range(args.loops):
                    for mode, loop in modes.items():
                        turn_times, answers[mode] = timed(
                            loop, client, "agent", args.turns, args.tool_bytes
                        )
                        times[mode].append(turn_times)
                assert answers["HTTP"] == answers["WebSocket"], (
                    "the two modes must give the same loop"
                )
                client.close()
                relay = Relay(gateway.port)
                sent = {
                    mode: counted(loop, relay, "agent", args.turns, args.tool_bytes)
                    for mode, loop in modes.items()
                }
                relay.stop()
        median = {
            mode: [statistics.median(t[i] for t in runs) for i in range(args.turns)]
            for mode, runs in times.items()
        }
        rows = [
            [
                str(i + 1),
                f"{median['HTTP'][i] * 1000:.1f}",
                f"{median['WebSocket'][i] * 1000:.1f}",
                f"{sent['HTTP'][i]:,}",
                f"{sent['WebSocket'][i]:,}",
            ]
            for i in range(args.turns)
        ]
        total = {mode: sum(values) for mode, values in median.items()}
        rows.append(
            [
                "**all**",
                f"**{total['HTTP'] * 1000:.0f}**",
                f"**{total['WebSocket'] * 1000:.0f}**",
                f"**{sum(sent['HTTP']):,}**",
                f"**{sum(sent['WebSocket']):,}**",
            ]
        )
        lines += [f"### {label}", ""]
        lines += md_table(
            ["turn", "HTTP ms", "WebSocket ms", "HTTP bytes sent", "WebSocket bytes sent"], rows
        )
        lines += [""]
        http_ms, ws_ms = total["HTTP"] * 1000, total["WebSocket"] * 1000
        print(
            f"{label}: loop {http_ms:.0f} ms (HTTP) vs {ws_ms:.0f} ms (WebSocket); "
            f"sent {sum(sent['HTTP']):,} vs {sum(sent['WebSocket']):,} bytes"
        )
    intro = (
        f"A {args.turns}-turn tool loop with the openai SDK through `tokenwire serve`, each "
        f"tool output {args.tool_bytes:,} bytes: HTTP turns (the whole conversation each "
        "time) against the Responses WebSocket mode (new items and `previous_response_id`; "
        "the gateway keeps the chain). Per turn: the client's time to `response.completed` "
        f"(median of {args.loops} loops after {args.warmup} warm-up loop, modes "
        "interleaved) and the bytes the client sent (counted on the wire by a relay, in a "
        "separate pass)."
    )
    text = "\n".join(
        [
            "## responses-websocket",
            "",
            intro,
            "",
            *header("bench/responses_ws.py", load_before),
            "",
            *lines,
        ]
    )
    print(text)
    if not args.no_write:
        write_section("responses-websocket", text, keep="what it says")


if __name__ == "__main__":
    main()
