"""The parallel parse of a passthrough stream still drives keys, limits and the log.

The upstream's bytes go to the client untouched, and the same chunks, parsed
into the standard, report the stream's usage: a key's token budget is charged
with it, as for a translated stream, so a spent budget refuses the next call.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import anthropic
import pytest
from tests.passthrough.conftest import UPSTREAM_MODEL, Fakes

from tokenwire.gateway.policy.keys import hash_key
from tokenwire.testing.processes import ServedProcess, gateway_config, serve_gateway

KEY = "tw-passthrough-test-key"


@pytest.fixture(scope="module")
def limited(fakes: Fakes) -> Iterator[ServedProcess]:
    models = {
        "anthropic-pt": {
            "provider": "anthropic",
            "base_url": fakes.upstream["anthropic"].url,
            "upstream_model": UPSTREAM_MODEL,
        }
    }
    # The fake answers 21 input + 3 output tokens: one call spends the budget.
    keys = f'\n[[keys]]\nid = "budgeted"\nhash = "{hash_key(KEY)}"\ntoken_budget = 20\n'
    with serve_gateway(gateway_config(models) + keys) as served:
        yield served


def test_a_passthrough_streams_usage_spends_the_keys_budget(limited: ServedProcess) -> None:
    client = anthropic.Anthropic(base_url=limited.url, api_key=KEY, max_retries=0)
    try:
        params = {
            "model": "anthropic-pt",
            "max_tokens": 64,
            "tools": [{"type": "web_search_20250305", "name": "web_search"}],
            "messages": [{"role": "user", "content": "Search"}],
        }
        with client.messages.stream(**params) as stream:  # type: ignore[arg-type]
            message = stream.get_final_message()
        assert message.usage.input_tokens == 21
        # The charge lands in the background once the stream is over: wait for it
        # (bounded), each try a real call that is either served or refused.
        deadline = time.monotonic() + 30
        refused = None
        while refused is None and time.monotonic() < deadline:
            try:
                with client.messages.stream(**params) as stream:  # type: ignore[arg-type]
                    stream.get_final_message()
            except anthropic.RateLimitError as exc:
                refused = exc
        assert refused is not None, "the budget was never charged"
        assert "budget" in str(refused.body)
    finally:
        client.close()
