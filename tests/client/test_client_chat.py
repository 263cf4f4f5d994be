"""``tokenwire chat`` in a real terminal: a pseudo-terminal, as a user would run it.

The REPL runs as a subprocess on a pty (``os.openpty``), so rich sees a
terminal and renders live; the tests type into it and read what it shows,
with the ANSI control sequences stripped.
"""

from __future__ import annotations

import fcntl
import io
import json
import os
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console
from tests.client.client_servers import (
    Head,
    Received,
    ScriptedServer,
    Send,
    ServerProcess,
    Sleep,
    Step,
)

from tokenwire import Writer
from tokenwire import events as ev
from tokenwire.cli.chat import EXIT_REFUSED, Chat, ToolBox
from tokenwire.client import Client, Timeouts
from tokenwire.request import Message
from tokenwire.testing.upstream import FakeUpstream

TOKENWIRE = str(Path(sys.executable).parent / "tokenwire")
ANSI = re.compile(
    rb"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[=>()][0-9A-Za-z]?"
)
# The rate is shown only for a stream long enough to measure (cli.chat.rate).
STATS = re.compile(r"(\d+) in / (\d+) out tokens · TTFT \d+ ms · (?:[\d.]+ tokens/s · )?[\d.]+ s")


class Terminal:
    """A program on a pseudo-terminal: ``expect`` what it shows, ``type`` into it."""

    def __init__(self, argv: list[str]) -> None:
        master, slave = os.openpty()
        # A wide terminal, so rich does not wrap the lines the tests look for.
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
        env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "200", "LINES": "50"}
        env.pop("NO_COLOR", None)
        self.proc = subprocess.Popen(
            argv, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True
        )
        os.close(slave)
        self.master = master
        self.raw = b""
        self.seen = 0  # how much of the screen text earlier expects consumed

    @property
    def text(self) -> str:
        return ANSI.sub(b"", self.raw).replace(b"\r", b"").decode("utf-8", "replace")

    def _read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return False
        try:
            data = os.read(self.master, 65536)
        except OSError:  # EIO: the program exited and the pty closed
            return False
        self.raw += data
        return bool(data)

    def expect(self, pattern: str | re.Pattern[str], timeout: float = 30.0) -> re.Match[str]:
        """Wait until ``pattern`` (a regex) shows up after what was already matched."""
        deadline = time.monotonic() + timeout
        regex = re.compile(pattern)
        while True:
            match = regex.search(self.text, self.seen)
            if match:
                self.seen = match.end()
                return match
            if time.monotonic() > deadline or (
                not self._read(0.2) and self.proc.poll() is not None
            ):
                raise AssertionError(f"{pattern!r} never showed up; the screen:\n{self.text}")

    def type(self, text: str) -> None:
        os.write(self.master, text.encode())

    def wait(self, timeout: float = 60.0) -> int:
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < deadline:
            self._read(0.1)
        return self.proc.wait(1)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        os.close(self.master)


@pytest.fixture
def terminals() -> Iterator[list[Terminal]]:
    opened: list[Terminal] = []
    yield opened
    for term in opened:
        term.close()


def chat(terminals: list[Terminal], url: str, *args: str) -> Terminal:
    term = Terminal([TOKENWIRE, "chat", "--url", url, *args])
    terminals.append(term)
    return term


def test_repl_streams_answers_and_keeps_history(
    gateway: ServerProcess, terminals: list[Terminal]
) -> None:
    term = chat(terminals, gateway.url)
    term.expect(r"you> ")
    term.type("Hello there\r")
    term.expect(r'"Hello there"')  # the demo echoes the question in its answer
    first = term.expect(STATS)
    term.expect(r"you> ")
    term.type("And what about Paris?\r")
    term.expect(r'"And what about Paris\?"')
    second = term.expect(STATS)
    term.expect(r"you> ")
    term.type("/exit\r")
    assert term.wait() == 0

    # The second request carried the first turn: the same question asked alone
    # counts fewer input tokens than it did inside the conversation.
    alone = subprocess.run(
        [TOKENWIRE, "chat", "--url", gateway.url, "And what about Paris?"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert alone.returncode == 0, alone.stderr
    match = STATS.search(alone.stderr)
    assert match is not None, alone.stderr
    assert int(second[1]) > int(match[1]) > 0
    assert int(second[1]) > int(first[1])


def test_spinner_until_the_first_token_and_history_sent(
    scripted: ScriptedServer, terminals: list[Terminal]
) -> None:
    def answer(req: Received) -> list[Step]:
        body = json.loads(req.body)
        w = Writer(model="m", request_id=body["metadata"]["request_id"])
        said = body["messages"][-1]["content"]
        start = w.start()
        rest = w.text(f"echo: {said}") + w.usage(7, 2) + w.end()
        return [Head(), Send(ev.dump(start[0])), Sleep(1.0), *[Send(ev.dump(e)) for e in rest]]

    scripted.route("POST", "/v1/stream", answer)
    term = chat(terminals, scripted.url, "--system", "Be brief.")
    term.expect(r"you> ")
    term.type("first question\r")
    term.expect(r"waiting for the first token")
    term.expect(r"echo: first question")
    term.expect(STATS)
    term.type("second question\r")
    term.expect(r"echo: second question")
    term.expect(r"you> ")
    term.type("/exit\r")  # a Ctrl-D typed while rich redraws can be lost in the pty
    assert term.wait() == 0

    sent = [json.loads(r.body)["messages"] for r in scripted.requests]
    assert sent[1] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "first question"},
        {"role": "assistant", "content": "echo: first question"},
        {"role": "user", "content": "second question"},
    ]


def test_tools_file_runs_the_tool_loop(
    gateway: ServerProcess, terminals: list[Terminal], tmp_path: Path
) -> None:
    tools = tmp_path / "tools.json"
    tools.write_text(
        json.dumps(
            {
                "tools": [
                    {
                        "name": "get_weather",
                        "description": "Get current weather for a city.",
                        "parameters": {
                            "type": "object",
                            "properties": {"city": {"type": "string"}},
                            "required": ["city"],
                        },
                    }
                ],
                "results": {"get_weather": "Vienna: 24C, sunny"},
            }
        )
    )
    term = chat(terminals, gateway.url, "--tools", str(tools), "What is the weather in Vienna?")
    term.expect(r'get_weather\(\{"city":"Vienna"\}\)')  # the call is shown
    term.expect(r"get_weather returned Vienna: 24C, sunny")  # answered from the file
    term.expect(r'The get_weather tool returned: "Vienna: 24C, sunny"')  # §4.8 step 5
    term.expect(STATS)
    assert term.wait() == 0


def test_side_effect_tools_ask_first(
    gateway: ServerProcess, terminals: list[Terminal], tmp_path: Path
) -> None:
    tools = tmp_path / "tools.json"
    email = {
        "name": "send_email",
        "description": "Send an email message.",
        "side_effects": True,
        "parameters": {"type": "object", "properties": {"to": {"type": "string"}}},
    }
    tools.write_text(json.dumps({"tools": [email], "results": {"send_email": {"sent": True}}}))
    term = chat(terminals, gateway.url, "--tools", str(tools))
    term.expect(r"you> ")
    term.type("Send an email to Ann\r")
    term.expect(r"run send_email\(.*\)\? \[y/N\]")  # §8.2: confirmation first
    term.type("y\r")
    term.expect(r'send_email returned \{"sent": true\}')
    term.expect(r"The send_email tool returned")
    term.expect(r"you> ")
    term.type("Send an email to Bob\r")
    term.expect(r"\[y/N\]")
    term.type("n\r")
    term.expect(r"send_email rejected \(not-confirmed\)")
    term.expect(r"you> ")
    term.type("/exit\r")
    assert term.wait() == EXIT_REFUSED  # a refusal is not a clean session


def test_raw_shows_events_with_seq(gateway: ServerProcess, terminals: list[Terminal]) -> None:
    term = chat(terminals, gateway.url, "--raw", "Hello there")
    term.expect(r"\[seq 0\]\s*event: stream\.start\s*id: 0")
    term.expect(r"\[seq 1\]\s*event: content\.delta\s*id: 1\s*data: \{")
    term.expect(r"event: stream\.end")
    assert term.wait() == 0


def test_unreachable_endpoint_fails_cleanly(terminals: list[Terminal]) -> None:
    term = chat(terminals, "http://127.0.0.1:9", "hi")
    term.expect(r"error: .*Connect")
    assert term.wait() == 1
    assert "Traceback" not in term.text


EMAIL = {
    "name": "send_email",
    "description": "Send an email message.",
    "side_effects": True,
    "parameters": {"type": "object", "properties": {"to": {"type": "string"}}},
}


def test_one_shot_exits_3_after_a_refused_side_effect_tool(
    gateway: ServerProcess, terminals: list[Terminal], tmp_path: Path
) -> None:
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps({"tools": [EMAIL], "results": {"send_email": {"sent": True}}}))
    term = chat(terminals, gateway.url, "--tools", str(tools), "Send an email to Ann")
    term.expect(r"\[y/N\]")
    term.type("n\r")
    term.expect(r"send_email rejected \(not-confirmed\)")
    assert term.wait() == EXIT_REFUSED


def test_commands_are_local_and_never_sent(
    scripted: ScriptedServer, terminals: list[Terminal]
) -> None:
    term = chat(terminals, scripted.url)
    term.expect(r"you> ")
    term.type("/help\r")
    term.expect(r"commands: /help")
    term.expect(r"you> ")
    term.type("/frobnicate now\r")
    term.expect(r"unknown command /frobnicate: /help lists the commands")
    term.expect(r"you> ")
    term.type("/exit\r")
    assert term.wait() == 0
    assert scripted.requests == []  # nothing reached the endpoint, let alone the model


def test_a_full_stream_url_works_too(gateway: ServerProcess, terminals: list[Terminal]) -> None:
    term = chat(terminals, gateway.url + "/v1/stream", "Hello there")
    term.expect(STATS)
    assert term.wait() == 0


def test_ctrl_c_cancels_the_answer_and_returns_to_the_prompt(
    slow_gateway: ServerProcess, slow_upstream: FakeUpstream, terminals: list[Terminal]
) -> None:
    before = len(slow_upstream.disconnects)
    completed = slow_upstream.completed
    term = chat(terminals, slow_gateway.url, "--model", "slow")
    term.expect(r"you> ")
    term.type("talk to me\r")
    term.expect(r"word3 ")
    term.proc.send_signal(signal.SIGINT)  # what Ctrl-C sends
    term.expect(r"\(interrupted\)")
    term.expect(r"you> ")
    # The generation was cancelled: the upstream saw its client go, unfinished.
    assert slow_upstream.wait_for(lambda f: len(f.disconnects) > before, timeout=10.0)
    assert slow_upstream.completed == completed
    term.type("/exit\r")
    assert term.wait() == 0


class FakeClock:
    """``time.perf_counter`` plus whatever the test adds (a user thinking at a prompt)."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.perf_counter() + self.offset


def test_ttft_leaves_out_the_confirmation_prompt(scripted: ScriptedServer) -> None:
    def answer(req: Received) -> list[Step]:
        body = json.loads(req.body)
        w = Writer(model="m", request_id=body["metadata"]["request_id"])
        events = w.start()
        events += w.tool_call(id="call_1", name="send_email", arguments={"to": "ann"}, index=0)
        events += w.usage(3, 2) + w.end()
        return [Head(), *[Send(ev.dump(e)) for e in events]]

    scripted.route("POST", "/v1/stream", answer)
    clock = FakeClock()

    def ask(question: str) -> bool:
        clock.offset += 30.0  # the user takes 30 s to answer
        return True

    out = io.StringIO()
    err = io.StringIO()
    console, errors = Console(file=out, width=200), Console(file=err, width=200)
    with Client(scripted.url, timeout=Timeouts(first_event=20, idle=20)) as client:
        session = Chat(
            client,
            model="m",
            toolbox=ToolBox(tools=[EMAIL]),
            raw=False,
            system=None,
            out=console,
            err=errors,
            ask=ask,
            clock=clock,
        )
        client.confirm = session.confirm
        response = session.answer(session.request([Message(role="user", content="mail ann")]))
    assert [c.name for c in response.tool_calls] == ["send_email"]
    stats = re.search(r"TTFT (\d+) ms .* ([\d.]+) s", err.getvalue())
    assert stats is not None, err.getvalue()
    assert int(stats[1]) < 30_000  # the 30 s at the prompt are not the endpoint's
    assert float(stats[2]) < 30.0


@pytest.mark.parametrize(("prompt", "status"), [("/help", 0), ("/frobnicate", 2)])
def test_a_command_as_prompt_is_run_not_sent(
    scripted: ScriptedServer, prompt: str, status: int
) -> None:
    done = subprocess.run(
        [TOKENWIRE, "chat", "--url", scripted.url, prompt],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == status, done.stderr
    assert ("commands: /help" in done.stderr) == (status == 0)
    assert scripted.requests == []
