"""docs/client.md's Python examples run as printed, against a gateway."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tests.client.client_servers import ServerProcess

DOC = Path(__file__).resolve().parents[2] / "docs" / "client.md"


def example(name: str) -> str:
    match = re.search(rf"<!-- example: {name} -->\n```python\n(.*?)```", DOC.read_text(), re.S)
    assert match, f"no '{name}' example in {DOC.name}"
    return match[1]


@pytest.mark.parametrize("name", ["client-cancel", "client-resume"])
def test_example_runs(name: str, gateway: ServerProcess) -> None:
    # The docs use the gateway's documented address; the test's gateway has its own port.
    code = example(name).replace("http://127.0.0.1:8080", gateway.url)
    exec(compile(code, f"docs/client.md ({name})", "exec"), {"__name__": "docs_example"})


BLOCKS = re.findall(r"^```python\n(.*?)^```", DOC.read_text(), re.S | re.M)


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_every_python_block_runs(index: int, gateway: ServerProcess) -> None:
    code = BLOCKS[index].replace("http://127.0.0.1:8080", gateway.url)
    exec(compile(code, f"docs/client.md (block {index})", "exec"), {"__name__": "docs_example"})
