"""`tokenwire check` passes the project's own gateway: on the demo model, and in
front of each fake vendor upstream (issue 8)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.gateway.gateway_procs import Gateway

from tokenwire.conformance import ProbeResult, Target, run
from tokenwire.testing.upstream import FakeUpstream, RecordedRequest, Script, ScriptedToolCall

#: What each vendor's base_url needs before the path its translator appends.
BASE_PATHS = {
    "openai": "/v1",
    "mistral": "/v1",
    "openai-responses": "",
    "anthropic": "",
    "gemini": "",
    "cohere": "",
}


def weather_model(request: RecordedRequest) -> Script:
    """A scripted model for the probes: calls get_weather when offered it,
    answers the tool result with text, and answers anything else with text."""
    body = request.body
    if b"get_weather" in body and b"Vienna: 24C" not in body:
        return Script(
            tool_calls=[ScriptedToolCall(name="get_weather", arguments={"city": "Vienna"})]
        )
    return Script(text="The weather in Vienna is 24C and sunny.")


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Gateway, list[str]]]:
    fakes = {vendor: FakeUpstream(vendor, weather_model).start() for vendor in BASE_PATHS}
    config = "".join(
        f'[[models]]\nname = "via-{vendor}"\nprovider = "{vendor}"\n'
        f'base_url = "{fake.url}{BASE_PATHS[vendor]}"\nupstream_model = "up"\n\n'
        for vendor, fake in fakes.items()
    )
    workdir: Path = tmp_path_factory.mktemp("check-gateway")
    try:
        with Gateway(workdir, config=config) as gw:
            yield gw, [f"via-{vendor}" for vendor in fakes]
    finally:
        for fake in fakes.values():
            fake.stop()


def verdicts(results: list[ProbeResult]) -> dict[str, str]:
    return {r.id: r.verdict for r in results}


def test_check_passes_the_gateway_on_the_demo_model(gateway: tuple[Gateway, list[str]]) -> None:
    gw, _ = gateway
    results = list(run(Target(url=f"{gw.url}/v1/stream", model="demo")))
    assert verdicts(results) == {r.id: "pass" for r in results}, [r.seen for r in results]


@pytest.mark.parametrize("vendor", list(BASE_PATHS))
def test_check_passes_the_gateway_in_front_of_each_vendor(
    gateway: tuple[Gateway, list[str]], vendor: str
) -> None:
    gw, _ = gateway
    results = list(run(Target(url=f"{gw.url}/v1/stream", model=f"via-{vendor}")))
    failing = {r.id: r.seen for r in results if r.verdict != "pass"}
    assert not failing, failing
