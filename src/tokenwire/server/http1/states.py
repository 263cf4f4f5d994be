"""One request cycle's two sides as state tables (as h11's ``_state`` keeps them).

A cycle is a request body going to the app and a response coming from it. Each
side is an enum, and each move is a row of its table: ``(state, event) ->
state``. A move that is not a row is the app (or the server) misusing the
cycle, refused with a message that names the state and the event. What the
protocol once kept as nine booleans is derived from these two states, so no
combination of them can be one the protocol never meant.

Request side (body bytes toward the app)::

    AWAITING_CONTINUE --body/ended/continue_sent/response_started--> RECEIVING/COMPLETE
    RECEIVING --body--> RECEIVING --ended--> COMPLETE --last_given--> DELIVERED

Response side (the app's ``send``)::

    IDLE --start--> HELD --more--> SENDING --more--> SENDING --last--> DONE
                    HELD --last--> DONE

The ``100 Continue`` is due only in ``AWAITING_CONTINUE``: once a body byte has
arrived, or the response has started, none is (RFC 9110 §10.1.1), so one can
never be written into the middle of a response.
"""

from __future__ import annotations

import enum
from typing import Final, TypeVar

from ...errors import LocalProtocolError

_S = TypeVar("_S", bound=enum.Enum)
_E = TypeVar("_E", bound=enum.Enum)


class Request(enum.Enum):
    __hash__ = object.__hash__  # a table row per send: not Enum's hash of the name

    AWAITING_CONTINUE = "awaiting 100-continue"  # Expect: 100-continue, no body byte yet
    RECEIVING = "receiving"  # the body is arriving
    COMPLETE = "complete"  # the whole body is in; the app has not had its last message
    DELIVERED = "delivered"  # the app had the body's last message


class RequestEvent(enum.Enum):
    __hash__ = object.__hash__  # a table row per send: not Enum's hash of the name

    BODY = "a body byte arrived"
    ENDED = "the body ended"
    CONTINUE_SENT = "the 100 Continue was written"
    RESPONSE_STARTED = "the response started"
    LAST_GIVEN = "the app got the body's last message"


class Response(enum.Enum):
    __hash__ = object.__hash__  # a table row per send: not Enum's hash of the name

    IDLE = "idle"  # the app has sent nothing
    HELD = "held"  # http.response.start came; the head waits for the first body
    SENDING = "sending"  # the head is written; more body is to come
    DONE = "done"  # the last body message is written


class ResponseEvent(enum.Enum):
    __hash__ = object.__hash__  # a table row per send: not Enum's hash of the name

    START = "http.response.start"
    MORE = "http.response.body with more_body"
    LAST = "the last http.response.body"


R, RE = Request, RequestEvent
REQUEST: Final[dict[tuple[Request, RequestEvent], Request]] = {
    (R.AWAITING_CONTINUE, RE.BODY): R.RECEIVING,
    (R.AWAITING_CONTINUE, RE.ENDED): R.COMPLETE,
    (R.AWAITING_CONTINUE, RE.CONTINUE_SENT): R.RECEIVING,
    (R.AWAITING_CONTINUE, RE.RESPONSE_STARTED): R.RECEIVING,
    (R.RECEIVING, RE.BODY): R.RECEIVING,
    (R.RECEIVING, RE.ENDED): R.COMPLETE,
    (R.RECEIVING, RE.RESPONSE_STARTED): R.RECEIVING,
    (R.COMPLETE, RE.RESPONSE_STARTED): R.COMPLETE,
    (R.COMPLETE, RE.LAST_GIVEN): R.DELIVERED,
    (R.DELIVERED, RE.RESPONSE_STARTED): R.DELIVERED,
}

S, SE = Response, ResponseEvent
RESPONSE: Final[dict[tuple[Response, ResponseEvent], Response]] = {
    (S.IDLE, SE.START): S.HELD,
    (S.HELD, SE.MORE): S.SENDING,
    (S.HELD, SE.LAST): S.DONE,
    (S.SENDING, SE.MORE): S.SENDING,
    (S.SENDING, SE.LAST): S.DONE,
}
del R, RE, S, SE


class CycleMisuse(LocalProtocolError, RuntimeError):
    """A move the cycle's table has no row for (an ASGI app sending out of order).

    Ours to fix, so a ``LocalProtocolError``; a ``RuntimeError`` too, which is what
    ASGI servers raise for an app's out-of-order message."""


def next_request(state: Request, event: RequestEvent) -> Request:
    """The request side after ``event``; ``CycleMisuse`` when it has no row."""
    return _advance(REQUEST, state, event, "the request body is")


def next_response(state: Response, event: ResponseEvent) -> Response:
    """The response side after ``event``; ``CycleMisuse`` when it has no row."""
    return _advance(RESPONSE, state, event, "the response is")


def _advance(table: dict[tuple[_S, _E], _S], state: _S, event: _E, side: str) -> _S:
    after = table.get((state, event))
    if after is None:
        raise CycleMisuse(f"{event.value} while {side} {state.value}")
    return after
