"""Claude Code, Codex and Gemini CLI, from npm, through the gateway to five upstream formats.

Each of the 15 pairings is a real loop of two tool rounds: the fake model asks
the agent to read a file, then to run a command, then answers with what both
results said (``loop.ToolLoop``). The agent really reads the file and really
runs the command; the answer is right only if both results reached the
upstream paired with their calls. The fakes refuse what their vendors refuse
(an altered thinking block, a result without its call, a mid-conversation
``system`` message at Anthropic), so a pairing passes only if the gateway
sent each upstream what it takes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.agents.clis import PINS, install, run_agent
from tests.agents.conftest import Served

LOOP = PINS["loop"]


class KnownRefusal(AssertionError):
    """The run failed on exactly the refusal its pairing is expected to meet."""


#: (agent, upstream) -> (the refusal's words, seen in the agent's output or the
#: fake's log; why). The adaptation of what agents send across vendors is not in
#: this tree yet. strict, and only a ``KnownRefusal`` counts: a pass flips them,
#: any other failure fails.
_THINKING_LOST = (
    "Expected `thinking` or `redacted_thinking`, but found `tool_use`",
    "Codex sends back its reasoning items, but the Anthropic thinking the gateway turned "
    "into them does not come back as a signed thinking block, so the Anthropic fake "
    "refuses the second turn",
)
_GEMINI_PARTS = (
    "the number of function response parts is equal to the number of function call parts",
    "Codex's tool results reach Gemini in another count than the function calls of the "
    "turn they answer, and the Gemini fake refuses the turn",
)
_REASONING_ITEM = (
    "was provided without its required 'reasoning' item",
    "Gemini CLI's function call reaches the Responses upstream without the reasoning item "
    "it was made with, and the Responses fake refuses the second turn",
)
_EMPTY_ANSWER = (
    "",  # no refusal: the run ends without the answer
    "every Gemini function call reaches Claude Code with the tool-use id 'call_0', so the "
    "second round reuses the first's id and Claude Code ends the turn without an answer",
)
EXPECTED_REFUSALS: dict[tuple[str, str], tuple[str, str]] = {
    ("codex", "anthropic"): _THINKING_LOST,
    ("codex", "gemini"): _GEMINI_PARTS,
    ("gemini-cli", "responses"): _REASONING_ITEM,
    ("claude-code", "gemini"): _EMPTY_ANSWER,
}

PAIRINGS = [
    pytest.param(
        agent,
        kind,
        id=f"{agent}-{kind}",
        marks=[
            pytest.mark.xfail(
                strict=True, raises=KnownRefusal, reason=EXPECTED_REFUSALS[agent, kind][1]
            )
        ]
        if (agent, kind) in EXPECTED_REFUSALS
        else [],
    )
    for agent in PINS["agents"]
    for kind in PINS["upstreams"]
]


@pytest.fixture(scope="module")
def bin_dir() -> Path:
    return install()


@pytest.mark.timeout(400)
@pytest.mark.parametrize(("agent", "kind"), PAIRINGS)
def test_agent_tool_loop(
    agent: str, kind: str, served: Served, bin_dir: Path, tmp_path: Path
) -> None:
    up = PINS["upstreams"][kind]
    started = served.start_loop(kind, tmp_path)
    loop = started.loop

    run = run_agent(
        agent, bin_dir, tmp_path, started.project, served.url, up["model"], LOOP["prompt"]
    )

    refusals = started.refusals
    expected = EXPECTED_REFUSALS.get((agent, kind))
    if expected is not None and expected[0] in "\n".join([run.stdout, run.stderr, *refusals]):
        if expected[0] or LOOP["answer"] not in run.stdout:
            raise KnownRefusal(expected[1])
    assert not refusals, f"the {kind} fake refused: {refusals}\n{run.describe()}"
    assert not loop.unreadable, loop.unreadable
    assert run.returncode == 0, run.describe()
    assert LOOP["answer"] in run.stdout, f"{run.describe()}\nturns: {loop.turns}"
    final = loop.turns[-1]
    assert final.answer == LOOP["answer"]
    assert not any(turn.unpaired for turn in loop.turns), loop.turns
    # Both results reached the model, in order, each with the call it answers.
    read, shell = final.results[:2]
    assert LOOP["file"] in read.arguments and "PLUM-4417" in read.text
    assert "expr 17" in shell.arguments and "sum=391" in shell.text
    assert read.call_id != shell.call_id
