"""The Responses WebSocket mode's messages: what a client sends, the events only the mode has.

Pure: text in, typed values out; values in, JSON text out. A client sends
``response.create`` (the ``POST /v1/responses`` body, plus ``stream_id``,
without ``stream`` and ``background``) and ``response.steer``. The server's
own events are ``error`` (with the HTTP ``status`` an HTTP request would have
had) and ``response.steer.accepted|pending|failed``; every other event is the
HTTP stream's, tagged with the turn's ``stream_id``.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from ...errors import TokenwireError

__all__ = [
    "ClientEventError",
    "Create",
    "Steer",
    "error_event",
    "input_items",
    "parse_client_event",
    "steer_event",
    "steer_problem",
    "tagged",
]

_decode = msgspec.json.Decoder(dict[str, Any]).decode
_encode = msgspec.json.encode

#: What ``response.steer`` carries (the SDK sends exactly these).
_STEER_FIELDS: Final = frozenset({"type", "input", "previous_response_id"})


class ClientEventError(TokenwireError, ValueError):
    """A client event the mode refuses; ``param`` names the field (``None``: the whole event)."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


class Create(msgspec.Struct, frozen=True, kw_only=True):
    """A ``response.create``: the HTTP body it becomes, its lane, the response it continues."""

    body: dict[str, Any]
    stream_id: str | None = None
    previous_response_id: str | None = None


class Steer(msgspec.Struct, frozen=True, kw_only=True):
    """A ``response.steer``: user input for the response ``previous_response_id`` continues into."""

    input: Any
    previous_response_id: str


def parse_client_event(text: str | bytes) -> Create | Steer:
    """The client's event. Raises ``ClientEventError`` naming the field it cannot take."""
    try:
        event = _decode(text)
    except msgspec.DecodeError as exc:
        raise ClientEventError(f"each message is one JSON object: {exc}") from None
    kind = event.get("type")
    if kind == "response.create":
        return _create(event)
    if kind == "response.steer":
        return _steer(event)
    raise ClientEventError(
        f"unknown event type {kind!r}: send response.create or response.steer", "type"
    )


def _optional_str(event: dict[str, Any], key: str) -> str | None:
    value = event.get(key)
    if value is not None and (not isinstance(value, str) or not value):
        raise ClientEventError(f"{key} must be a non-empty string", key)
    return value


def _create(event: dict[str, Any]) -> Create:
    stream_id = _optional_str(event, "stream_id")
    previous = _optional_str(event, "previous_response_id")
    if event.get("background"):
        raise ClientEventError(
            "background responses are not served over WebSocket; use POST /v1/responses",
            "background",
        )
    if event.get("stream") is False:
        raise ClientEventError("a WebSocket response always streams: omit stream", "stream")
    if event.get("conversation") is not None and previous is not None:
        raise ClientEventError(
            "conversation and previous_response_id cannot both be given", "conversation"
        )
    body = {
        key: value
        for key, value in event.items()
        if key not in ("type", "stream_id", "previous_response_id", "stream", "background")
    }
    return Create(body=body, stream_id=stream_id, previous_response_id=previous)


def _steer(event: dict[str, Any]) -> Steer:
    extra = sorted(set(event) - _STEER_FIELDS)
    if extra:
        # The SDK: "This event accepts only type, previous_response_id, and input."
        raise ClientEventError(f"response.steer takes no {extra[0]}", extra[0])
    previous = _optional_str(event, "previous_response_id")
    if previous is None:
        raise ClientEventError("response.steer needs previous_response_id", "previous_response_id")
    return Steer(input=event.get("input"), previous_response_id=previous)


def input_items(value: Any, param: str = "input") -> list[Any]:
    """``input`` as a list of items (a string is one user message). Raises ``ClientEventError``."""
    if value is None:
        return []
    if isinstance(value, str):
        return [{"type": "message", "role": "user", "content": value}]
    if isinstance(value, list):
        return value
    raise ClientEventError(f"{param} must be a string or an array of input items", param)


def steer_problem(value: Any) -> str | None:
    """Why ``value`` is not steering input (user messages only, as the SDK documents)."""
    if isinstance(value, str):
        return None if value else "input is empty"
    if not isinstance(value, list) or not value:
        return "input must be a string or a non-empty array of user messages"
    for i, item in enumerate(value):
        if not isinstance(item, dict) or item.get("role") != "user":
            return f"input[{i}]: steering takes only messages with the user role"
        if item.get("type", "message") != "message" or set(item) - {"type", "role", "content"}:
            return f"input[{i}]: a steering message has only type, role and content"
    return None


def error_event(
    code: str,
    message: str,
    *,
    status: int,
    param: str | None = None,
    kind: str = "invalid_request_error",
    stream_id: str | None = None,
) -> str:
    """The mode's ``error`` event (openai's ``ResponseWsError``)."""
    event: dict[str, Any] = {
        "type": "error",
        "status": status,
        "error": {"type": kind, "code": code, "message": message, "param": param},
    }
    if stream_id is not None:
        event["stream_id"] = stream_id
    return _encode(event).decode()


def steer_event(kind: str, sequence_number: int, stream_id: str | None, **fields: Any) -> str:
    """A ``response.steer.<kind>`` event."""
    event: dict[str, Any] = {
        "type": f"response.steer.{kind}",
        "sequence_number": sequence_number,
        **fields,
    }
    if stream_id is not None:
        event["stream_id"] = stream_id
    return _encode(event).decode()


def tagged(data: str, stream_id: str | None) -> str:
    """The HTTP stream's event ``data`` (a JSON object) with the lane's ``stream_id`` in it."""
    if stream_id is None:
        return data
    head = _encode({"stream_id": stream_id}).decode()[:-1]  # '{"stream_id":"..."'
    body = data.lstrip()
    if not body.startswith("{"):  # pragma: no cover - the Responses encoder writes objects
        return data
    rest = body[1:].lstrip()
    return head + ("}" if rest.startswith("}") else "," + rest)
