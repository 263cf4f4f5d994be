"""The request cycle's state tables: what an app may send when, and when a 100 is due."""

from __future__ import annotations

import asyncio
import itertools
import logging
from typing import Any

import pytest
from tests.server.http1.wire import Wire, split_responses

from tokenwire.server.http1.states import (
    REQUEST,
    RESPONSE,
    CycleMisuse,
    Request,
    RequestEvent,
    Response,
    ResponseEvent,
    next_request,
    next_response,
)


def test_a_100_is_due_only_before_any_body_byte_or_response() -> None:
    """No row leads back to AWAITING_CONTINUE: once left, a 100 is never written."""
    assert Request.AWAITING_CONTINUE not in REQUEST.values()
    for event in (RequestEvent.BODY, RequestEvent.ENDED, RequestEvent.RESPONSE_STARTED):
        assert next_request(Request.AWAITING_CONTINUE, event) is not Request.AWAITING_CONTINUE


def test_done_is_final_and_every_missing_row_is_refused_by_name() -> None:
    for state, event in itertools.product(Response, ResponseEvent):
        if (state, event) in RESPONSE:
            continue
        with pytest.raises(CycleMisuse, match=f"{event.value} while the response is {state.value}"):
            next_response(state, event)
    assert not [row for row in RESPONSE if row[0] is Response.DONE]
    for state, event in itertools.product(Request, RequestEvent):
        if (state, event) not in REQUEST:
            with pytest.raises(CycleMisuse, match=state.value):
                next_request(state, event)


@pytest.mark.parametrize(
    ("messages", "says", "statuses"),
    [
        # Started, never ended: the connection is cut, no response passes for whole.
        (["start", "start"], "http.response.start while the response is held", []),
        (["body"], "the last http.response.body while the response is idle", [500]),
        (
            ["start", "body", "body"],
            "the last http.response.body while the response is done",
            [200],
        ),
    ],
    ids=["start-twice", "body-before-start", "body-after-the-last"],
)
def test_an_app_sending_out_of_order_is_told_what_it_did(
    messages: list[str], says: str, statuses: list[int]
) -> None:
    raised: list[str] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        try:
            for kind in messages:
                if kind == "start":
                    await send({"type": "http.response.start", "status": 200, "headers": []})
                else:
                    await send({"type": "http.response.body", "body": b"x"})
        except CycleMisuse as exc:
            raised.append(str(exc))
            raise

    async def main() -> list[Any]:
        wire = Wire(app)
        wire.transport.feed(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n")
        await wire.idle()
        return split_responses(bytes(wire.transport.written))

    logger = logging.getLogger("tokenwire.h1server")
    logger.disabled = True  # the server logs the app's error; here it is the point
    try:
        responses = asyncio.run(main())
    finally:
        logger.disabled = False
    assert raised == [says]
    assert [status for status, _, _ in responses] == statuses
