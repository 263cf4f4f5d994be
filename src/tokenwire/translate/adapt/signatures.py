"""Reasoning that crosses vendors keeps its seal: signatures the gateway mints.

A client of one format sends its earlier turns' reasoning back the way its
own vendor sealed it: Anthropic ``thinking`` blocks with a ``signature``,
Responses ``reasoning`` items with ``encrypted_content``, Gemini parts with a
``thoughtSignature``. When the answer came from an upstream of another format,
that upstream's seal (or none, for an OpenAI-compatible server streaming
``reasoning_content``) cannot go in those fields as it is. ``Minter`` puts a
token the gateway mints there instead:

    tw1.<base64url JSON of what the upstream bound the reasoning with>.<HMAC>

and ``rebind`` opens it on the next turn: the reasoning part is bound to the
upstream's vendor again, with the upstream's own seal, so that upstream gets
it back as it expects (``reasoning_content``, its signature, its encrypted
item). The HMAC-SHA256, with the gateway's key, covers the payload and, for an
Anthropic client (whose signature sits on the thinking text itself), the text:
an altered thinking block is refused as Anthropic refuses one.

Pure: the key is a parameter; the events in and out are the standard's.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from typing import Any, Final

import msgspec

from ... import events as ev
from ...errors import InvalidRequest
from ...request import Request
from .. import _extensions as x

__all__ = ["PREFIX", "Minter", "mint", "open_token", "rebind"]

PREFIX: Final = "tw1."
#: The client formats whose reasoning carries a seal, and the part field it is in.
_FIELD: Final = {
    "anthropic": x.SIGNATURE,
    "gemini": x.SIGNATURE,
    "openai-responses": x.REDACTED,
}
#: What a reasoning seal of an upstream is made of (in ``tokenwire.block`` events).
_SEALS: Final = (x.SIGNATURE, x.REDACTED, x.ITEM_ID, x.TOOL_CALL_ID, x.VENDOR)

_encode = msgspec.json.Encoder(order="sorted").encode
_decode = msgspec.json.decode


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _mac(key: bytes, payload: bytes, text: str | None) -> str:
    message = b"tw1\0" + payload
    if text is not None:
        message += b"\0" + text.encode("utf-8")
    return _b64(hmac.new(key, message, hashlib.sha256).digest())


def mint(key: bytes, client: str, seal: dict[str, Any], text: str) -> str:
    """The token for reasoning ``text`` an upstream sealed with ``seal`` (``{}``: unsealed)."""
    payload = _encode(seal)
    covered = text if client == "anthropic" else None
    return f"{PREFIX}{_b64(payload)}.{_mac(key, payload, covered)}"


def open_token(key: bytes, client: str, token: str, text: str) -> dict[str, Any]:
    """The seal inside ``token``. Raises ``ValueError`` when it is not the gateway's
    or the thinking text was altered."""
    body, _, mac = token.removeprefix(PREFIX).partition(".")
    try:
        payload = _unb64(body)
    except ValueError:
        raise ValueError("not a token of this gateway") from None
    covered = text if client == "anthropic" else None
    if not hmac.compare_digest(mac, _mac(key, payload, covered)):
        raise ValueError("the signature does not match its reasoning (altered, or another key)")
    seal = _decode(payload)
    if not isinstance(seal, dict):
        raise ValueError("not a token of this gateway")
    return seal


class Minter:
    """Standard events in, the same events out, with every reasoning seal bound to
    another vendor replaced by a token in the ``client`` format's own field.

    A reasoning block gets its token before its ``content.stop``; a seal on a
    tool call's block (Gemini signs function calls) gets one there too.
    """

    def __init__(self, client: str, key: bytes) -> None:
        self.client = client
        self.key = key
        self._texts: dict[int, list[str]] = {}
        self._seals: dict[int, dict[str, Any]] = {}

    def feed(self, event: ev.Event) -> list[ev.Event]:
        """The events to encode for ``event``."""
        if self.client not in _FIELD:
            return [event]
        if isinstance(event, ev.ContentDelta) and event.reasoning:
            self._texts.setdefault(event.index, []).append(event.delta.text)
            return [event]
        if isinstance(event, ev.UnknownEvent) and event.type == x.BLOCK:
            body = x.fields(event)
            vendor = body.get(x.VENDOR) if body is not None else None
            if (
                body is not None
                and isinstance(body.get("index"), int)
                and vendor is not None
                and vendor != self.client
                and (x.SIGNATURE in body or x.REDACTED in body)
            ):
                seal: dict[str, Any] = {k: body[k] for k in _SEALS if k in body}
                self._seals.setdefault(body["index"], {}).update(seal)
                return []  # sealed for another vendor: the token stands in for it
            return [event]
        if isinstance(event, ev.ContentStop) and (
            event.index in self._texts or event.index in self._seals
        ):
            return [self._token_event(event.index), event]
        return [event]

    def _token_event(self, index: int) -> ev.UnknownEvent:
        text = "".join(self._texts.pop(index, ()))
        seal = self._seals.pop(index, {})
        body: dict[str, Any] = {"index": index}
        if self.client == "openai-responses":
            body[x.REASONING] = True
            body[x.ITEM_ID] = f"rs_tw{secrets.token_hex(12)}"
        elif self.client == "gemini" and x.TOOL_CALL_ID not in seal:
            body[x.REASONING] = True  # a thought part of its own
        if x.TOOL_CALL_ID in seal:
            body[x.TOOL_CALL_ID] = seal[x.TOOL_CALL_ID]
        body[_FIELD[self.client]] = mint(self.key, self.client, seal, text)
        body[x.VENDOR] = self.client
        return x.extension(x.BLOCK, body)


def rebind(request: Request, client: str, key: bytes) -> Request:
    """``request`` with each reasoning part the gateway minted a token for bound to
    its upstream's vendor again (its own seal restored; unsealed text unbound).

    Raises ``InvalidRequest`` for a token that does not match its reasoning.
    """
    field = _FIELD.get(client)
    history = request.extension(x.REASONING_HISTORY)
    if field is None or not isinstance(history, list):
        return request
    changed = False
    out = []
    for i, entry in enumerate(history):
        parts = entry.get("parts") if isinstance(entry, dict) else None
        if not isinstance(parts, list):
            out.append(entry)
            continue
        new_parts: list[Any] = []
        thoughts: list[int] = []  # Gemini: unsigned thought parts before the token
        for k, part in enumerate(parts):
            token = part.get(field) if isinstance(part, dict) else None
            if not (isinstance(token, str) and token.startswith(PREFIX)):
                if client == "gemini" and _unsigned_thought(part, client):
                    thoughts.append(len(new_parts))
                new_parts.append(part)
                continue
            text = part.get("text")
            if client == "gemini" and not text and thoughts:
                # The Gemini encoder sends the token on a part of its own after
                # the thought's text parts: they are its text.
                text = "".join(new_parts[j]["text"] for j in thoughts)
                new_parts = [p for j, p in enumerate(new_parts) if j not in thoughts]
            thoughts = []
            try:
                seal = open_token(key, client, token, text if isinstance(text, str) else "")
            except ValueError as exc:
                raise InvalidRequest(
                    f"earlier reasoning (turn {entry.get('message')}, part {k}): {exc}; send "
                    "reasoning back exactly as the gateway gave it",
                    path=f'extensions["{x.REASONING_HISTORY}"][{i}].parts[{k}]',
                ) from None
            kept = {"type": x.REASONING, **seal}
            if isinstance(text, str) and text:
                kept["text"] = text
            new_parts.append(kept)
            changed = True
        out.append({**entry, "parts": new_parts})
    if not changed:
        return request
    extensions = {**(request.extensions or {}), x.REASONING_HISTORY: out}
    return msgspec.structs.replace(request, extensions=extensions)


def _unsigned_thought(part: Any, client: str) -> bool:
    return (
        isinstance(part, dict)
        and isinstance(part.get("text"), str)
        and part.get(x.VENDOR) == client
        and x.SIGNATURE not in part
    )
