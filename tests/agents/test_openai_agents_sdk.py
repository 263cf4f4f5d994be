"""The OpenAI Agents SDK (``openai-agents``) through the gateway, on Chat and Responses upstreams.

The same two-round loop as the agent CLIs (``loop.ToolLoop``): the SDK's agent
has a file-reading tool and a shell tool, the fake model calls one then the
other, and answers with what both results said. The SDK calls the Responses API
by default; its Chat Completions model is the other way apps use it. Tracing is
off: the SDK would otherwise export to api.openai.com.
"""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path
from typing import Any

import openai
import pytest
from tests.agents.clis import PINS, require
from tests.agents.conftest import Served


@pytest.fixture(scope="module")
def agents() -> Any:
    return require("agents", "the OpenAI Agents SDK is in the peers extra (openai-agents)")


LOOP = PINS["loop"]


def _tools(agents: Any, project: Path) -> list[object]:
    @agents.function_tool
    def read_file(file_path: str) -> str:
        """Read a text file of the project."""
        path = (project / file_path).resolve()
        assert path.is_relative_to(project), path
        return path.read_text()

    @agents.function_tool
    def run_shell_command(command: str, description: str) -> str:
        """Run a shell command in the project and return its output."""
        done = subprocess.run(
            ["bash", "-c", command], cwd=project, capture_output=True, text=True, timeout=30
        )
        return done.stdout + done.stderr

    return [read_file, run_shell_command]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("api", ["responses", "chat_completions"])
@pytest.mark.parametrize("kind", ["chat", "responses"])
def test_openai_agents_tool_loop(
    api: str, kind: str, served: Served, tmp_path: Path, agents: Any
) -> None:
    up = PINS["upstreams"][kind]
    started = served.start_loop(kind, tmp_path)
    project, loop = started.project, started.loop

    async def run() -> str:
        client = openai.AsyncOpenAI(
            base_url=served.url + "/v1", api_key="sk-agent-test", max_retries=0
        )
        model_class = (
            agents.OpenAIResponsesModel if api == "responses" else agents.OpenAIChatCompletionsModel
        )
        agent = agents.Agent(
            name="loop",
            instructions="Use the tools to answer.",
            tools=_tools(agents, project),
            model=model_class(model=up["model"], openai_client=client),
        )
        try:
            result = await agents.Runner.run(
                agent,
                LOOP["prompt"],
                max_turns=6,
                run_config=agents.RunConfig(tracing_disabled=True),
            )
        finally:
            await client.close()
        return str(result.final_output)

    answer = asyncio.run(run())

    assert not started.refusals, started.refusals
    assert not loop.unreadable, loop.unreadable
    assert answer == LOOP["answer"], loop.turns
    read, shell = loop.turns[-1].results[:2]
    assert read.name == "read_file" and "PLUM-4417" in read.text
    assert shell.name == "run_shell_command" and "sum=391" in shell.text
    assert read.call_id != shell.call_id
