"""docs/reference/config.md's provider example runs as printed."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import msgspec
from tests.server.server_asgi import Exchange

import tokenwire

DOC = Path(__file__).resolve().parents[2] / "docs" / "reference" / "config.md"


def _example(name: str) -> str:
    match = re.search(rf"<!-- example: {name} -->\n```python\n(.*?)```", DOC.read_text(), re.DOTALL)
    assert match, f"no '{name}' example in {DOC.name}"
    return match.group(1)


def test_provider_example_is_a_working_endpoint() -> None:
    code = _example("provider")
    assert len([line for line in code.splitlines() if line.strip()]) <= 16
    namespace: dict[str, Any] = {"__name__": "docs_example"}
    exec(compile(code, str(DOC), "exec"), namespace)
    body = msgspec.json.encode(
        {
            "version": "1.0",
            "stream": True,
            "model": "anything",
            "messages": [{"role": "user", "content": "hello there"}],
        }
    )
    x = Exchange(body).run(namespace["app"])
    assert x.status == 200
    report = tokenwire.validate(x.body)
    assert report.ok, report.violations
    text = "".join(e.delta.text for e in x.events() if isinstance(e, tokenwire.events.ContentDelta))
    assert text == "HELLO THERE "
