"""Content negotiation: a request's ``Content-Type`` and ``Accept`` to one binding (pure).

Every route that streams asks one question here: what is the body (the
standard's envelope, or the route's vendor format, §7.2, §7.3), and in what
is the answer written (standard SSE, the binary binding's frames, or the
vendor's own stream)? The answer is a ``Binding``, or a ``Refusal`` that
carries the status the route sends: 415 for a body type it does not take,
406 for an ``Accept`` that names only frames nobody here writes
(docs/binary.md section 3). No I/O, so the rules are tested as a table
(``tests/vectors/binary/negotiation.json``).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Final, Literal

import msgspec

from .. import mediatype
from ..binary import MEDIA_TYPE as FRAMES_MEDIA_TYPE
from ..binary import PAYLOADS, Payload

__all__ = [
    "FRAMES_VERSION",
    "PROFILE",
    "Binding",
    "Refusal",
    "answer_binding",
    "media_type_essence",
    "negotiate",
    "wants_standard",
]

#: §7.3: the Accept profile that asks a dual-format route for the standard stream.
PROFILE: Final = "llm-stream-1.0"
#: §9.1: the one envelope version the frames' ``version`` parameter may name.
FRAMES_VERSION: Final = mediatype.SUPPORTED_VERSION
_EVENT_STREAM_RANGES: Final = frozenset({"text/event-stream", "text/*", "*/*"})
_SUPPORTED_FRAMES: Final = f"{FRAMES_MEDIA_TYPE}; payload=json|msgpack; version={FRAMES_VERSION}"


class Binding(msgspec.Struct, frozen=True):
    """How a request is read and answered.

    ``vendor_body``: the body is in the route's vendor format (else the
    standard's envelope). ``answer``: ``"sse"`` (the standard's events as
    SSE), ``"frames"`` (the binary binding, in ``payload``) or ``"vendor"``
    (the vendor's own stream, for a vendor body that did not ask for the
    standard).
    """

    answer: Literal["sse", "frames", "vendor"]
    vendor_body: bool = False
    payload: Payload = "json"


class Refusal(msgspec.Struct, frozen=True):
    """The request cannot be served as asked: the status, a sentence, extra headers."""

    status: int
    message: str
    headers: tuple[tuple[bytes, bytes], ...] = ()


def media_type_essence(value: str | bytes | None) -> str:
    """The lower-cased ``type/subtype`` of a Content-Type value, without parameters.

    Parsed per RFC 9110 (``mediatype.parse``); a value that does not parse
    still gives its text before the first ``;`` (the caller then refuses it
    as an unsupported type, naming what it got).
    """
    if value is None:
        return ""
    try:
        return mediatype.parse(value).essence
    except mediatype.MediaTypeError:
        text = value.decode("latin-1") if isinstance(value, bytes) else value
        return text.split(";", 1)[0].strip().lower()


def _ranges(accept: str | bytes | None) -> list[mediatype.MediaRange]:
    if not accept:
        return []
    try:
        return mediatype.parse_accept(accept, lenient=True)
    except mediatype.MediaTypeError:  # over the size limit: as if absent
        return []


def wants_standard(accept: str | bytes | None) -> bool:
    """True when Accept asks for ``text/event-stream; profile="llm-stream-1.0"`` (§7.3).

    RFC 9110 §12.5.1: a range with ``q=0`` is "not acceptable", so it does not
    ask for anything; the ``profile`` value is a space-separated list (RFC 6906).
    Invalid list elements are skipped, the others still count.
    """
    return _wants_standard(_ranges(accept))


def _wants_standard(ranges: list[mediatype.MediaRange]) -> bool:
    for media_range in ranges:
        media_type = media_range.media_type
        if media_type.essence != "text/event-stream" or media_range.q <= 0:
            continue
        profile = media_type.param("profile")
        if profile is not None and PROFILE in profile.split():
            return True
    return False


def _frames_payload(media_type: mediatype.MediaType) -> Payload | None:
    """The payload a frames range asks for; ``None`` for what is not written here."""
    payload = (media_type.param("payload") or "json").lower()
    version = media_type.param("version")
    if payload not in PAYLOADS or (version is not None and version != FRAMES_VERSION):
        return None
    return "json" if payload == "json" else "msgpack"


def answer_binding(accept: str | bytes | None) -> Binding | Refusal:
    """The answer's binding for a standard stream: SSE or frames; 406 when neither is acceptable.

    docs/binary.md section 7: SSE stays the default, and frames are chosen
    only when ``Accept`` prefers them: their q-value above 0 and above that
    of ``text/event-stream`` (or a wildcard covering it); equal weights keep
    SSE. Media types are case-insensitive (RFC 9110 §8.3.1). Section 3: an
    ``Accept`` whose only acceptable ranges are frames in a ``version`` or
    ``payload`` not written here gets 406.
    """
    raw = accept if isinstance(accept, bytes) else (accept or "").encode("latin-1", "replace")
    if b"llm-stream-frames" not in raw.lower():
        return _SSE  # the common case: no frames asked for, no need to weigh
    best: tuple[float, Payload] | None = None
    sse_q = 0.0
    asked_frames = False  # a frames range with q > 0, served here or not
    frames_only = True
    for media_range in _ranges(accept):
        media_type, q = media_range.media_type, media_range.q
        if q <= 0:
            continue
        essence = media_type.essence
        if essence == FRAMES_MEDIA_TYPE:
            asked_frames = True
            payload = _frames_payload(media_type)
            if payload is not None and (best is None or q > best[0]):
                best = (q, payload)
            continue
        frames_only = False
        if essence in _EVENT_STREAM_RANGES:
            sse_q = max(sse_q, q)
    if best is not None and best[0] > sse_q:
        return _FRAMES_JSON if best[1] == "json" else _FRAMES_MSGPACK
    if best is None and asked_frames and frames_only:
        return Refusal(
            406,
            f"Accept names only {FRAMES_MEDIA_TYPE} in a form not served here; "
            f"this server writes {_SUPPORTED_FRAMES}, or text/event-stream",
            ((b"accept", f"{_SUPPORTED_FRAMES}, text/event-stream".encode()),),
        )
    return _SSE


_SSE: Final = Binding("sse")
_FRAMES_JSON: Final = Binding("frames", payload="json")
_FRAMES_MSGPACK: Final = Binding("frames", payload="msgpack")


def negotiate(
    content_type: str | bytes | None,
    accept: str | bytes | None,
    *,
    request_type: str,
    vendor_types: Collection[str] = (),
) -> Binding | Refusal:
    """One decision for a POST: how its body is read and its answer written.

    ``request_type`` is the standard's request media type; ``vendor_types``
    the route's vendor body types (§7.3: a dual-format route). A body of
    another type gets 415 naming the accepted ones (§7.2), with
    ``Accept-Post``. A vendor body is answered in the vendor's stream unless
    ``Accept`` asks for the standard (the §7.3 profile) or prefers frames.
    """
    essence = media_type_essence(content_type)
    vendor_body = essence != request_type
    if vendor_body and essence not in vendor_types:
        accepted = [request_type, *sorted(vendor_types)]
        return Refusal(
            415,
            f"Content-Type must be {' or '.join(accepted)}, got {essence or 'none'!r} (§7.2)",
            ((b"accept-post", ", ".join(accepted).encode()),),
        )
    answer = answer_binding(accept)
    if isinstance(answer, Refusal) or not vendor_body:
        return answer
    if answer.answer == "frames":
        return Binding("frames", vendor_body=True, payload=answer.payload)
    if _wants_standard(_ranges(accept)):
        return Binding("sse", vendor_body=True)
    return Binding("vendor", vendor_body=True)
