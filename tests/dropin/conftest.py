"""Issue 23: one gateway in front of the strict fakes of four vendors, and the demo.

Models: ``oa`` (OpenAI Chat), ``resp`` (OpenAI Responses), ``claude``
(Anthropic), ``gem`` (Gemini), each on its own fake; ``claude-down`` and
``oa-down`` on fakes that refuse every request before any stream (529, 429);
``demo`` is built in. The fakes answer what the request asks: a tool call
when tools are declared, JSON when a JSON response format is asked for, text
otherwise (``script_for``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from tests.gateway.gateway_procs import Gateway

from tokenwire.testing.upstream import (
    FakeUpstream,
    Fault,
    RecordedRequest,
    Script,
    ScriptedToolCall,
)

TEXT = "It is sunny in Vienna today."
JSON_TEXT = '{"city": "Vienna", "celsius": 21}'
ARGS = {"city": "Vienna"}
QUESTION = "What is the weather in Vienna?"
WEATHER_TOOL = {
    "name": "get_weather",
    "description": "Get the current weather for a city",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}


def _declares_tools(body: dict[str, Any]) -> bool:
    return bool(body.get("tools"))


def _wants_json(body: dict[str, Any]) -> bool:
    fmt = body.get("response_format")
    return isinstance(fmt, dict) and fmt.get("type") in ("json_schema", "json_object")


def script_for(request: RecordedRequest) -> Script:
    """What the fake model answers ``request``."""
    try:
        body = msgspec.json.decode(request.body)
    except msgspec.DecodeError:
        body = {}
    if not isinstance(body, dict):
        body = {}
    if _declares_tools(body):
        return Script(text="", tool_calls=[ScriptedToolCall("get_weather", ARGS, id="call_w1")])
    if _wants_json(body):
        return Script(text=JSON_TEXT, input_tokens=9)
    return Script(text=TEXT, input_tokens=9)


class Served:
    """The gateway and its fakes."""

    def __init__(self, gateway: Gateway, fakes: dict[str, FakeUpstream]) -> None:
        self.gateway = gateway
        self.fakes = fakes

    @property
    def url(self) -> str:
        return self.gateway.url

    def last_body(self, model: str) -> dict[str, Any]:
        """The body the fake behind ``model`` last received (its count requests too)."""
        fake = self.fakes[model]
        return msgspec.json.decode(fake.requests[-1].body)  # type: ignore[no-any-return]


_VENDORS = {
    "oa": "openai",
    "resp": "openai-responses",
    "claude": "anthropic",
    "gem": "gemini",
}


def _base_url(vendor: str, url: str) -> str:
    return f"{url}/v1" if vendor == "openai" else url


@pytest.fixture(scope="session")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    fakes = {name: FakeUpstream(vendor, script_for) for name, vendor in _VENDORS.items()}
    fakes["claude-down"] = FakeUpstream("anthropic", fault=Fault(kind="status", status=529))
    fakes["oa-down"] = FakeUpstream("openai", fault=Fault(kind="status", status=429))
    vendors = {**_VENDORS, "claude-down": "anthropic", "oa-down": "openai"}
    for fake in fakes.values():
        fake.start()
    try:
        config = "".join(
            f'[[models]]\nname = "{name}"\nprovider = "{vendors[name]}"\n'
            f'base_url = "{_base_url(vendors[name], fake.url)}"\n'
            f'upstream_model = "{name}-up"\n'
            for name, fake in fakes.items()
        )
        workdir: Path = tmp_path_factory.mktemp("dropin")
        with Gateway(workdir, config=config) as gateway:
            yield Served(gateway, fakes)
    finally:
        for fake in fakes.values():
            fake.stop()
