"""Fixtures of the passthrough tests: strict fakes and one real ``tokenwire serve``.

Each vendor has two fakes: the gateway's upstream (``upstreams``) and a
second one the SDK talks to directly (``direct``), so a test can hold what the
SDK sent and what the gateway passed on side by side. The gateway renames the
model (``<vendor>-pt`` -> ``UPSTREAM_MODEL``) and nothing else, so the two fakes
must record the same bytes and stream the same bytes back.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tokenwire.testing.processes import ServedProcess, gateway_config, serve_gateway
from tokenwire.testing.upstream import FakeUpstream, Fault, RecordedRequest, Script

#: The model name every fake sees: the client's direct calls use it, and the
#: gateway renames its own model names to it.
UPSTREAM_MODEL = "fake-upstream-model"


def script_for(request: RecordedRequest) -> Script:
    """The fakes' answer: a short text (the fakes add their server-tool items)."""
    return Script(text="Done, as asked.", input_tokens=21)


class Fakes:
    """One fake per vendor for the gateway (``upstream``) and one for direct calls."""

    def __init__(self) -> None:
        self.upstream: dict[str, FakeUpstream] = {}
        self.direct: dict[str, FakeUpstream] = {}
        #: Upstreams that cut the connection mid-stream (after 3 events).
        self.cut: dict[str, FakeUpstream] = {}
        #: Upstreams that answer every request 529 (Anthropic's overloaded), no stream.
        self.down: dict[str, FakeUpstream] = {}

    def start(self) -> None:
        for vendor in ("anthropic", "openai-responses", "openai"):
            self.upstream[vendor] = FakeUpstream(vendor, script_for).start()
            self.direct[vendor] = FakeUpstream(vendor, script_for).start()
            self.cut[vendor] = FakeUpstream(
                vendor, script_for, fault=Fault(kind="cut", after_events=3)
            ).start()
            self.down[vendor] = FakeUpstream(
                vendor, script_for, fault=Fault(kind="status", status=529)
            ).start()

    def stop(self) -> None:
        for fake in [
            *self.upstream.values(),
            *self.direct.values(),
            *self.cut.values(),
            *self.down.values(),
        ]:
            fake.stop()

    def last(self, vendor: str) -> tuple[RecordedRequest, RecordedRequest]:
        """The last request each of the vendor's two fakes received: (direct, via gateway)."""
        return self.direct[vendor].requests[-1], self.upstream[vendor].requests[-1]


@pytest.fixture(scope="session")
def fakes() -> Iterator[Fakes]:
    fakes = Fakes()
    fakes.start()
    try:
        yield fakes
    finally:
        fakes.stop()


def _models(fakes: Fakes) -> dict[str, dict[str, Any]]:
    up = fakes.upstream
    return {
        "anthropic-pt": {
            "provider": "anthropic",
            "base_url": up["anthropic"].url,
            "upstream_model": UPSTREAM_MODEL,
        },
        "responses-pt": {
            "provider": "openai-responses",
            "base_url": up["openai-responses"].url,
            "upstream_model": UPSTREAM_MODEL,
        },
        "chat-pt": {
            "provider": "openai",
            "base_url": up["openai"].url + "/v1",
            "upstream_model": UPSTREAM_MODEL,
        },
        "anthropic-cut": {
            "provider": "anthropic",
            "base_url": fakes.cut["anthropic"].url,
            "upstream_model": UPSTREAM_MODEL,
        },
        # Overloaded: alone (its status and body reach the client) and with a fallback.
        "anthropic-529": {
            "provider": "anthropic",
            "base_url": fakes.down["anthropic"].url,
            "upstream_model": UPSTREAM_MODEL,
        },
        "anthropic-down": {
            "provider": "anthropic",
            "base_url": fakes.down["anthropic"].url,
            "upstream_model": UPSTREAM_MODEL,
            "fallbacks": ["anthropic-pt"],
        },
        "responses-cut": {
            "provider": "openai-responses",
            "base_url": fakes.cut["openai-responses"].url,
            "upstream_model": UPSTREAM_MODEL,
        },
        # Across vendors: an Anthropic or Responses body for an OpenAI Chat upstream.
        "cross": {
            "provider": "openai",
            "base_url": up["openai"].url + "/v1",
            "upstream_model": UPSTREAM_MODEL,
        },
    }


@pytest.fixture(scope="session")
def gateway(fakes: Fakes) -> Iterator[ServedProcess]:
    with serve_gateway(gateway_config(_models(fakes))) as served:
        yield served
