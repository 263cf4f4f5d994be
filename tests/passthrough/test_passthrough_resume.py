"""A passthrough request answered in the standard is resumable: the parallel parse
of the upstream's bytes feeds the resume store (docs/scaling.md)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import msgspec
import pytest
from tests.passthrough.conftest import UPSTREAM_MODEL, Fakes

from tokenwire.testing.processes import ServedProcess, gateway_config, serve_gateway

STANDARD = 'text/event-stream; profile="llm-stream-1.0"'


@pytest.fixture(scope="module")
def resumable(fakes: Fakes) -> Iterator[ServedProcess]:
    models = {
        "anthropic-pt": {
            "provider": "anthropic",
            "base_url": fakes.upstream["anthropic"].url,
            "upstream_model": UPSTREAM_MODEL,
        }
    }
    with serve_gateway(gateway_config(models) + "\n[resume]\ndefault = true\n") as served:
        yield served


def _frames(text: str) -> list[dict[str, str]]:
    out = []
    for frame in text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in frame.splitlines() if ": " in line)
        if "data" in fields:
            out.append(fields)
    return out


def test_the_standard_stream_of_a_passthrough_can_be_resumed(
    resumable: ServedProcess, fakes: Fakes
) -> None:
    body = {
        "model": "anthropic-pt",
        "max_tokens": 64,
        "stream": True,
        "tools": [{"type": "web_search_20250305", "name": "web_search"}],
        "messages": [{"role": "user", "content": "Search"}],
    }
    first = httpx.post(
        resumable.url + "/v1/messages",
        json=body,
        headers={"accept": STANDARD, "anthropic-version": "2023-06-01"},
    )
    assert first.status_code == 200
    token = first.headers["tokenwire-resume-token"]
    frames = _frames(first.text)
    start = msgspec.json.decode(frames[0]["data"])
    assert start["type"] == "stream.start"
    # The body went up whole (the server tool was not dropped by the standard's view).
    sent = msgspec.json.decode(fakes.upstream["anthropic"].requests[-1].body)
    assert sent["tools"] == body["tools"]
    # Come back after the second event: the rest, as the first connection got it.
    again = httpx.get(
        f"{resumable.url}/v1/streams/{start['request_id']}",
        headers={"tokenwire-resume-token": token, "last-event-id": frames[1]["id"]},
    )
    assert again.status_code == 200
    assert _frames(again.text) == frames[2:]
    assert msgspec.json.decode(frames[-1]["data"])["type"] == "stream.end"
