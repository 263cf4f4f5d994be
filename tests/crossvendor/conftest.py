"""Agent loops across vendor formats: one ``tokenwire serve`` in front of a strict fake
of each upstream format, each model served by one of them.

Models: ``chat`` (an OpenAI-compatible server streaming ``reasoning_content``, with
``send_reasoning``), ``claude`` (Anthropic), ``gem`` (Gemini), ``resp`` (OpenAI
Responses). Every fake plays the same agent: a first turn reads a file, a second
runs a command, a third answers with both results (``script_for``), thinking first.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.dropin import conftest as dropin
from tests.gateway.gateway_procs import Gateway

from tokenwire.testing.upstream import FakeUpstream, RecordedRequest, Script, ScriptedToolCall

#: What the client's two tools answer; the fake model's last turn repeats both.
READ_RESULT = "RESULT-A: a.txt says hello"
RUN_RESULT = "RESULT-B: ls shows a.txt"
FINAL = "Both results: RESULT-A and RESULT-B."
VENDORS = {"chat": "openai", "claude": "anthropic", "gem": "gemini", "resp": "openai-responses"}


def _round(body: bytes) -> int:
    """Which round of the loop a request is: the tool results it carries, plus one."""
    return 1 + (b"RESULT-A" in body) + (b"RESULT-B" in body)


def script_for(request: RecordedRequest) -> Script:
    """The agent turn for ``request``: read, then run, then answer (thinking each time)."""
    body = request.body
    if b"weather" in body:  # the parallel-calls loop (test_parallel_results_...)
        if b"functionResponse" in body or b'"tool"' in body:
            return Script(text="Reported.", input_tokens=9)
        calls = [
            ScriptedToolCall("weather", {"city": "Paris"}, id="call_paris"),
            ScriptedToolCall("weather", {"city": "Vienna"}, id="call_vienna"),
        ]
        return Script(text="", tool_calls=calls)
    n = _round(body)
    thinking = f"Round {n}: deciding what to do next."
    if n == 3:
        return Script(text=FINAL, thinking=thinking, input_tokens=30)
    name, args = ("read", {"path": "a.txt"}) if n == 1 else ("run", {"cmd": "ls"})
    if b"mcp__files__read" in body and n == 1:
        name = "mcp__files__read"  # Codex's namespaced tool, as the upstream knows it
    # Chat and Responses fakes number calls per answer: give each round its own id,
    # as the real APIs do (Anthropic's and Gemini's are the fakes' and the gateway's).
    given = f"call_round{n}" if request.path.endswith(("/chat/completions", "/responses")) else None
    return Script(text="", thinking=thinking, tool_calls=[ScriptedToolCall(name, args, id=given)])


class Served(dropin.Served):
    """The gateway and its fakes, with every body each fake received and the log lines."""

    def bodies(self, model: str) -> list[dict[str, Any]]:
        """What the fake behind ``model`` received, in order."""
        return [json.loads(r.body) for r in self.fakes[model].requests]

    def log_lines(self) -> list[dict[str, Any]]:
        lines = []
        for line in self.gateway.stderr().splitlines():
            if line.startswith("{"):
                obj = json.loads(line)
                if obj.get("msg") == "request":
                    lines.append(obj)
        return lines


@pytest.fixture(scope="session")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    fakes = {name: FakeUpstream(vendor, script_for) for name, vendor in VENDORS.items()}
    for fake in fakes.values():
        fake.start()
    try:
        config = "".join(
            f'[[models]]\nname = "{name}"\nprovider = "{VENDORS[name]}"\n'
            f'base_url = "{dropin._base_url(VENDORS[name], fake.url)}"\n'
            f'upstream_model = "{name}-up"\n'
            + ("send_reasoning = true\n" if name == "chat" else "")
            for name, fake in fakes.items()
        )
        config += '[[models]]\nname = "strict-chat"\nprovider = "openai"\n'
        config += f'base_url = "{fakes["chat"].url}/v1"\ntranslate = {{ strict = true }}\n'
        workdir: Path = tmp_path_factory.mktemp("crossvendor")
        with Gateway(workdir, config=config) as gateway:
            yield Served(gateway, fakes)
    finally:
        for fake in fakes.values():
            fake.stop()
