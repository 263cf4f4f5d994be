"""The fake model's side of a coding agent's tool loop, on any upstream format.

``ToolLoop`` is a ``FakeUpstream`` script. Whatever the agent and the upstream
format, it reads the request the gateway sent as the gateway's own ingress of
that format reads it (a vendor-neutral view: tools, calls, results), then
answers the next step of a two-round loop:

1. no tool result yet: call the agent's file-reading tool on the notes file
   (an agent without one, Codex, gets its shell tool with ``cat``);
2. one result: call the agent's shell tool with the loop's command;
3. two results: a final answer built from what the two results say, so the
   answer is right only when both results reached the model, each paired with
   its own call.

Requests that declare no shell tool are the agents' side calls (titles,
quota checks): they get a short text. Every loop turn is recorded in
``turns`` for the test to read.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokenwire import translate
from tokenwire.gateway.providers.passthrough_request import lenient
from tokenwire.request import Message, Request, TextPart
from tokenwire.testing.upstream import RecordedRequest, Script, ScriptedToolCall

#: Each agent's tool that reads a file -> the argument naming the file.
READ_TOOLS = {"Read": "file_path", "read_file": "file_path"}
#: Each agent's shell tool -> how its arguments carry a command line.
SHELL_TOOLS = {
    "Bash": lambda cmd: {"command": cmd, "description": "Compute the sum"},
    "run_shell_command": lambda cmd: {"command": cmd, "description": "Compute the sum"},
    "exec_command": lambda cmd: {"cmd": cmd},
    "shell": lambda cmd: {"command": ["bash", "-lc", cmd]},
}
_GEMINI_MODEL = re.compile(r"/models/([^/:?]+)")


@dataclass(frozen=True)
class LoopSpec:
    """The loop from ``tests/vectors/agents/clis.json`` (``loop``), in a project dir."""

    project: Path
    file: str
    command: str
    code_pattern: str
    output_pattern: str
    title: str

    @property
    def file_path(self) -> str:
        return str(self.project / self.file)


@dataclass(frozen=True)
class ToolResult:
    """One tool result the upstream received, with the call it answers."""

    call_id: str
    name: str
    arguments: str
    text: str


@dataclass
class Turn:
    """One loop request the fake answered: the results it saw, what it answered."""

    results: list[ToolResult]
    unpaired: list[str]
    answer: str


@dataclass
class ToolLoop:
    """A ``FakeUpstream`` script of the two-round loop (see the module docstring)."""

    vendor: str
    spec: LoopSpec
    thinking: str = ""
    turns: list[Turn] = field(default_factory=list)
    #: Each loop request's neutral view, for a failing test to show.
    seen: list[Request] = field(default_factory=list)
    side_calls: int = 0
    #: Requests the neutral view could not read (a bug in the test or the gateway).
    unreadable: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, request: RecordedRequest) -> Script:
        try:
            seen = self._neutral(request)
        except Exception as exc:
            with self._lock:
                self.unreadable.append(f"{type(exc).__name__}: {exc}")
            return Script(text="unreadable request")
        tools = {tool.name: tool for tool in seen.tools or ()}
        shell = next((name for name in SHELL_TOOLS if name in tools), None)
        if shell is None:
            with self._lock:
                self.side_calls += 1
            return Script(text=self.spec.title)
        with self._lock:
            self.seen.append(seen)
        results, unpaired = paired_results(seen.messages)
        script = self._step(tools, shell, results)
        answer = script.text or ",".join(call.name for call in script.tool_calls)
        with self._lock:
            self.turns.append(Turn(results, unpaired, answer))
        return script

    def _call(self, n: int, name: str, arguments: dict[str, Any]) -> ScriptedToolCall:
        # The Chat fake numbers calls per answer (call_fake0000 every turn) where
        # OpenAI mints unique ids: name them here. The other fakes mint ids from
        # the turn's signed reasoning, which differs per round; Gemini gives none.
        call_id = f"call_loop{n}" if self.vendor == "openai" else None
        return ScriptedToolCall(name, arguments, id=call_id)

    def _thinking(self, n: int) -> str:
        return f"Round {n}. {self.thinking}" if self.thinking else ""

    def _step(self, tools: dict[str, Any], shell: str, results: list[ToolResult]) -> Script:
        n = len(results)
        if not results:
            read = next((name for name in READ_TOOLS if name in tools), None)
            if read is None:  # Codex reads files with its shell tool
                call = self._call(n, shell, SHELL_TOOLS[shell](f"cat {self.spec.file_path}"))
            else:
                call = self._call(n, read, {READ_TOOLS[read]: self.spec.file_path})
            return Script(text="", thinking=self._thinking(n), tool_calls=[call])
        if n == 1:
            call = self._call(n, shell, SHELL_TOOLS[shell](self.spec.command))
            return Script(text="", thinking=self._thinking(n), tool_calls=[call])
        code = re.search(self.spec.code_pattern, results[0].text)
        total = re.search(self.spec.output_pattern, results[1].text)
        said_code = code[0] if code else "(not in the file's result)"
        said_sum = total[1] if total else "(not in the command's result)"
        text = f"The launch code is {said_code} and the sum is {said_sum}."
        return Script(text=text, thinking=self._thinking(n))

    def _neutral(self, request: RecordedRequest) -> Request:
        body = request.json()
        if self.vendor == "gemini":  # the model is in Gemini's path, not its body
            match = _GEMINI_MODEL.search(request.path)
            body["model"] = match[1] if match else "gemini"
        ingress = translate.get(self.vendor).ingress
        assert ingress is not None
        # What the standard does not model (hosted and server tools) is left out, as
        # the gateway's own passthrough reads a body.
        parsed, _encode = lenient(self.vendor, request.body, body, ingress.parse)
        return parsed  # type: ignore[no-any-return]


def _text(message: Message) -> str:
    if isinstance(message.content, str):
        return message.content
    return "".join(p.text for p in message.content or () if isinstance(p, TextPart))


def paired_results(messages: list[Message]) -> tuple[list[ToolResult], list[str]]:
    """The tool results in ``messages``, in order, each with the earlier call it
    answers; and the ids of results that answer no earlier call."""
    calls: dict[str, tuple[str, str]] = {}
    results: list[ToolResult] = []
    unpaired: list[str] = []
    for message in messages:
        for call in message.tool_calls or ():
            calls[call.id] = (call.name, call.arguments)
        if message.role == "tool":
            call_id = message.tool_call_id or ""
            if call_id not in calls:
                unpaired.append(call_id)
                continue
            name, arguments = calls[call_id]
            results.append(ToolResult(call_id, name, arguments, _text(message)))
    return results, unpaired
