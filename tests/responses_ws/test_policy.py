"""Every turn of a Responses WebSocket is a request: the key, its models and its budget are
checked on each ``response.create``; a refused turn leaves the socket open.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.gateway.gateway_procs import Gateway
from tests.production.conftest import Keys, start, table
from tests.responses_ws.helpers import client, turn

from tokenwire.testing.waiting import wait_until

KEYS = Keys()
BUDGET = KEYS.add("ws-budget", token_budget=400)  # a few demo turns
LIMITED = KEYS.add("ws-limited", models=["demo"])


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    workdir: Path = tmp_path_factory.mktemp("responses-ws-keys")
    config = KEYS.toml() + "\n" + table("models", {"name": "other", "provider": "demo"}, array=True)
    gw = start(workdir, config)
    try:
        yield gw
    finally:
        gw.stop()


def test_a_budget_spent_mid_socket_refuses_the_next_turn(gateway: Gateway) -> None:
    with client(gateway.url, BUDGET).responses.connect() as conn:
        _, first = turn(conn, model="demo", input="hi")
        assert first.type == "response.completed", first  # the budget had room

        def refused() -> object:
            # The usage is charged as each stream ends; a turn may also be cut
            # mid-stream when the budget runs out (response.failed). Until refused:
            _, last = turn(conn, model="demo", input="hi")
            return last if last.type == "error" else None

        error = wait_until(refused, what="the turn the spent budget refuses")
        # The HTTP route's own refusal, status and body, as an error event.
        assert (error.status, error.error.code) == (429, "budget_exceeded")
        # The socket stays open: the next turn is answered (refused again, by the budget).
        _, again = turn(conn, model="demo", input="hi")
        assert (again.type, again.status) == ("error", 429)


def test_the_key_models_are_checked_on_every_turn(gateway: Gateway) -> None:
    with client(gateway.url, LIMITED).responses.connect() as conn:
        _, other = turn(conn, model="other", input="hi")
        assert (other.type, other.status, other.error.code) == ("error", 403, "model_not_allowed")
        _, ok = turn(conn, model="demo", input="hi")
        assert ok.type == "response.completed"


def test_a_socket_without_a_valid_key_gets_each_turn_refused(gateway: Gateway) -> None:
    with client(gateway.url, "tw-not-a-key").responses.connect() as conn:
        for _ in range(2):
            _, last = turn(conn, model="demo", input="hi")
            assert (last.type, last.status) == ("error", 401)


def test_a_turn_without_generation_is_checked_too(gateway: Gateway) -> None:
    # generate: false is checked as the count route checks a request (the key);
    # the turn that generates from it is checked as any turn (the key's models).
    with client(gateway.url, "tw-not-a-key").responses.connect() as conn:
        _, refused = turn(conn, model="demo", input="hi", generate=False)
        assert (refused.type, refused.status) == ("error", 401)
    with client(gateway.url, LIMITED).responses.connect() as conn:
        _, prepared = turn(conn, model="other", input="hi", generate=False)
        assert prepared.type == "response.completed"
        _, other = turn(
            conn, model="other", input="more", previous_response_id=prepared.response.id
        )
        assert (other.type, other.status, other.error.code) == ("error", 403, "model_not_allowed")
