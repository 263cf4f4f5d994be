"""Reasoning that crosses vendors keeps its seal: signatures the gateway mints.

A client of one format sends its earlier turns' reasoning back the way its
own vendor sealed it: Anthropic ``thinking`` blocks with a ``signature``,
Responses ``reasoning`` items with ``encrypted_content``, Gemini parts with a
``thoughtSignature``. When the answer came from an upstream of another format,
that upstream's seal (or none, for an OpenAI-compatible server streaming
``reasoning_content``) cannot go in those fields as it is. ``Minter`` puts a
token the gateway mints there instead:

    base64( b"tw1\0" + HMAC-SHA256 + JSON of what the upstream sealed it with )

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

__all__ = ["PREFIX", "Minter", "is_token", "mint", "open_token", "rebind"]

PREFIX: Final = "dHcxA"  # base64 of the magic bytes b"tw1\0"
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


#: The first bytes of every token: ``PREFIX`` is their base64 (the first 4 characters
#: encode the first 3 bytes, whatever follows).
_MAGIC: Final = b"tw1\0"
_MAC_BYTES: Final = 32


def _mac(key: bytes, payload: bytes, text: str | None) -> bytes:
    message = _MAGIC + payload
    if text is not None:
        message += b"\0" + text.encode("utf-8")
    return hmac.new(key, message, hashlib.sha256).digest()


def mint(key: bytes, client: str, seals: list[dict[str, Any]], text: str) -> str:
    """The token for reasoning ``text`` an upstream sealed with ``seals`` (``[]``:
    unsealed; a Gemini reasoning's call signatures are seals too). Standard
    base64, as the vendors' own seals are (google-genai decodes a
    ``thoughtSignature`` to bytes and encodes it again)."""
    payload = _encode(seals)
    covered = text if client == "anthropic" else None
    return base64.b64encode(_MAGIC + _mac(key, payload, covered) + payload).decode("ascii")


def is_token(value: object) -> bool:
    """Whether ``value`` looks like a token the gateway minted."""
    return isinstance(value, str) and value.startswith(PREFIX)


def open_token(key: bytes, client: str, token: str, text: str) -> list[dict[str, Any]]:
    """The seals inside ``token``. Raises ``ValueError`` when it is not the gateway's
    or the thinking text was altered."""
    # google-genai sends a thoughtSignature back URL-safe, whatever it got.
    standard = token.replace("-", "+").replace("_", "/")
    try:
        raw = base64.b64decode(standard + "=" * (-len(standard) % 4), validate=True)
    except ValueError:
        raise ValueError("not a token of this gateway") from None
    if not raw.startswith(_MAGIC):
        raise ValueError("not a token of this gateway")
    mac = raw[len(_MAGIC) : len(_MAGIC) + _MAC_BYTES]
    payload = raw[len(_MAGIC) + _MAC_BYTES :]
    covered = text if client == "anthropic" else None
    if not hmac.compare_digest(mac, _mac(key, payload, covered)):
        raise ValueError("the signature does not match its reasoning (altered, or another key)")
    try:
        seals = _decode(payload)
    except msgspec.DecodeError:
        raise ValueError("not a token of this gateway") from None
    if not isinstance(seals, list) or not all(isinstance(s, dict) for s in seals):
        raise ValueError("not a token of this gateway")
    return seals


class Minter:
    """Standard events in, the same events out, with every reasoning seal bound to
    another vendor replaced by a token in the ``client`` format's own field.

    A reasoning block gets its token before the first event of another block
    (where the Anthropic and Gemini encoders close it); a seal on a tool call's
    block (Gemini signs function calls) gets one before that block's
    ``content.stop``. A Responses client keeps its reasoning item open until the
    block's own ``content.stop``: the seals of the calls made meanwhile join its
    token, since a reasoning item after a call would start another turn.
    """

    def __init__(self, client: str, key: bytes) -> None:
        self.client = client
        self.key = key
        self._texts: dict[int, list[str]] = {}
        self._seals: dict[int, list[dict[str, Any]]] = {}
        self._open: int | None = None  # the reasoning block being streamed
        self._late = client == "openai-responses"  # flush at the block's own stop

    def feed(self, event: ev.Event) -> list[ev.Event]:
        """The events to encode for ``event``."""
        if self.client not in _FIELD:
            return [event]
        if isinstance(event, ev.ContentDelta) and event.reasoning:
            out = self._flush() if self._open not in (None, event.index) else []
            self._open = event.index
            self._texts.setdefault(event.index, []).append(event.delta.text)
            return [*out, event]
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
                at = self._open if self._late and self._open is not None else body["index"]
                self._seals.setdefault(at, []).append(seal)
                return []  # sealed for another vendor: the token stands in for it
        if self._late:
            if isinstance(event, ev.ContentStop) and event.index == self._open:
                return [*self._flush(), event]
            out = []
        else:
            # The encoder closes a reasoning block at the next event of another
            # block: its token goes out first, inside it.
            out = self._flush()
        if isinstance(event, ev.ContentStop) and event.index in self._seals:
            out.append(self._token_event(event.index))
        elif isinstance(event, ev.StreamEnd):
            out += self._flush()
        return [*out, event]

    def _flush(self) -> list[ev.Event]:
        index, self._open = self._open, None
        return [] if index is None else [self._token_event(index)]

    def _token_event(self, index: int) -> ev.UnknownEvent:
        text = "".join(self._texts.pop(index, ()))
        seals = self._seals.pop(index, [])
        body: dict[str, Any] = {"index": index}
        call = next((s[x.TOOL_CALL_ID] for s in seals if x.TOOL_CALL_ID in s), None)
        if self.client == "openai-responses":
            body[x.REASONING] = True
            body[x.ITEM_ID] = f"rs_tw{secrets.token_hex(12)}"
        elif self.client == "gemini" and call is None:
            body[x.REASONING] = True  # a thought part of its own
        if call is not None and self.client != "openai-responses":
            body[x.TOOL_CALL_ID] = call
        body[_FIELD[self.client]] = mint(self.key, self.client, seals, text)
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
            if not is_token(token):
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
                seals = open_token(key, client, str(token), text if isinstance(text, str) else "")
            except ValueError as exc:
                raise InvalidRequest(
                    f"earlier reasoning (turn {entry.get('message')}, part {k}): {exc}; send "
                    "reasoning back exactly as the gateway gave it",
                    path=f'extensions["{x.REASONING_HISTORY}"][{i}].parts[{k}]',
                ) from None
            new_parts += _parts_of(seals, text if isinstance(text, str) else "")
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


def _parts_of(seals: list[dict[str, Any]], text: str) -> list[dict[str, Any]]:
    """Reasoning parts for a token's seals: the text on the first seal of the
    reasoning itself (not a call's), else on a part of its own, bound to no vendor."""
    parts = [{"type": x.REASONING, **seal} for seal in seals]
    own = next((p for p in parts if x.TOOL_CALL_ID not in p), None)
    if text and own is not None:
        own["text"] = text
    elif text:
        parts.insert(0, {"type": x.REASONING, "text": text})
    return parts
