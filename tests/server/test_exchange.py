"""``Exchange``: one request's head, read once from its ASGI scope."""

from __future__ import annotations

import pytest

from tokenwire.errors import InvalidRequest
from tokenwire.server.exchange import (
    ACCOUNT_KEY,
    CONTEXT_KEY,
    MAX_QUERY,
    Exchange,
    content_length,
)
from tokenwire.server.outbox import StreamAccount


def _scope(**extra: object) -> dict[str, object]:
    return {
        "type": "http",
        "method": "POST",
        "path": "/v1beta/models/gem:streamGenerateContent",
        "headers": [
            (b"content-type", b"application/json"),
            (b"accept", b"text/event-stream"),
            (b"content-length", b"12"),
            (b"anthropic-beta", b"tools-2026"),
            (b"authorization", b"Bearer sk-secret"),
        ],
        "query_string": b"alt=sse&key=k",
        "path_params": {"model": "gem"},
        **extra,
    }


def test_the_head_is_read_once_into_what_the_layers_ask_for() -> None:
    context, account = object(), StreamAccount()
    exchange = Exchange.from_scope(_scope(**{CONTEXT_KEY: context, ACCOUNT_KEY: account}))
    assert (exchange.method, exchange.path) == ("POST", "/v1beta/models/gem:streamGenerateContent")
    assert (exchange.content_type, exchange.accept) == (b"application/json", b"text/event-stream")
    assert exchange.length == 12 and exchange.length_error is None
    assert exchange.path_params == {"model": "gem"}
    assert exchange.query == {"alt": "sse", "key": "k"}
    assert exchange.context is context and exchange.account is account
    assert exchange.offer is None


def test_only_the_named_headers_are_forwarded() -> None:
    exchange = Exchange.from_scope(_scope())
    assert exchange.forwarded((b"anthropic-beta", b"anthropic-version")) == {
        "anthropic-beta": "tools-2026"
    }
    assert exchange.forwarded(()) == {}


def test_a_long_query_is_read_only_up_to_its_bound() -> None:
    far = b"a=1&" + b"x" * MAX_QUERY + b"&late=1"
    assert Exchange.from_scope(_scope(query_string=far)).query == {"a": "1"}


@pytest.mark.parametrize(
    ("values", "expected"),
    [([], None), ([b"0"], 0), ([b"42"], 42), ([b"7", b"7"], 7)],
)
def test_content_length_is_one_decimal_number(values: list[bytes], expected: int | None) -> None:
    assert content_length([(b"content-length", v) for v in values]) == expected


@pytest.mark.parametrize("values", [[b"+5"], [b" 5"], [b"5x"], [b""], [b"5", b"6"]])
def test_any_other_content_length_is_refused(values: list[bytes]) -> None:
    with pytest.raises(InvalidRequest):
        content_length([(b"content-length", v) for v in values])
    exchange = Exchange(headers=[(b"content-length", v) for v in values])
    assert exchange.length is None and exchange.length_error is not None
