"""One gateway in front of five strict fake upstreams, for the agent tests.

The models and their upstream formats are in ``tests/vectors/agents/clis.json``
(``upstreams``): Anthropic, OpenAI Chat, OpenAI Responses, Gemini, and an
OpenAI-compatible server that streams ``reasoning_content`` (the Chat fake
with a script that thinks, the model set to send earlier reasoning back).
Each test sets its fake's script (``Served.script``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests.agents.clis import PINS
from tests.agents.loop import LoopSpec, ToolLoop
from tests.dropin import conftest as dropin
from tests.gateway.gateway_procs import Gateway

from tokenwire.testing.upstream import FakeUpstream, Script


@dataclass
class LoopRun:
    """One tool loop scripted on one upstream's fake, in a fresh project directory."""

    project: Path
    fake: FakeUpstream
    loop: ToolLoop
    refused_before: int

    @property
    def refusals(self) -> list[str]:
        """What the fake refused since the loop started."""
        return self.fake.errors[self.refused_before :]


class Served(dropin.Served):
    """The gateway and the fake behind each upstream kind (``PINS["upstreams"]``)."""

    def start_loop(self, kind: str, workdir: Path) -> LoopRun:
        """The loop of ``PINS["loop"]`` on ``kind``'s fake, with its notes file in
        ``workdir/project``."""
        loop_pins = PINS["loop"]
        project = workdir / "project"
        project.mkdir()
        (project / loop_pins["file"]).write_text(loop_pins["file_text"])
        spec = LoopSpec(
            project=project,
            file=loop_pins["file"],
            command=loop_pins["command"],
            code_pattern=loop_pins["code_pattern"],
            output_pattern=loop_pins["output_pattern"],
            title=loop_pins["title"],
        )
        fake = self.fakes[kind]
        loop = ToolLoop(fake.vendor, spec, thinking=PINS["upstreams"][kind]["thinking"])
        fake.script = loop
        return LoopRun(project, fake, loop, len(fake.errors))


def gateway_config(fakes: dict[str, FakeUpstream]) -> str:
    """The ``[[models]]`` of the gateway: each upstream's model on its fake."""
    out = []
    for kind, up in PINS["upstreams"].items():
        url = fakes[kind].url + ("/v1" if up["provider"] == "openai" else "")
        out.append(
            f'[[models]]\nname = "{up["model"]}"\nprovider = "{up["provider"]}"\n'
            f'base_url = "{url}"\nupstream_model = "{up["model"]}"\n'
            + ("send_reasoning = true\n" if up.get("send_reasoning") else "")
        )
    return "".join(out)


@pytest.fixture(scope="session")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    fakes = {
        kind: FakeUpstream(up["provider"], Script(text="no loop scripted"))
        for kind, up in PINS["upstreams"].items()
    }
    for fake in fakes.values():
        fake.start()
    try:
        workdir: Path = tmp_path_factory.mktemp("agents-gateway")
        with Gateway(workdir, config=gateway_config(fakes)) as gateway:
            yield Served(gateway, fakes)
    finally:
        for fake in fakes.values():
            fake.stop()
