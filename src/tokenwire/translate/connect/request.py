"""A standard request -> one Connect server-streaming request envelope."""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from ... import request as rq
from .. import _protowire as pw
from .._base import VendorRequest
from .framing import (
    FLAG_COMPRESSED,
    MEDIA_TYPES,
    SERVICE_PATHS,
    codec_and_mapping,
    compress,
    encode_envelope,
)

_encode_json = msgspec.json.Encoder().encode


# --- the request --------------------------------------------------------------------


def _prompt(req: rq.Request) -> str:
    """The text-mapping prompt: the last user message's text."""
    for message in reversed(req.messages):
        if message.role == "user":
            return message.text
    return ""


def build_request(
    req: rq.Request,
    *,
    base_url: str,
    service_path: str | None = None,
    codec: str | None = None,
    mapping: str | None = None,
    compression: str | None = None,
    timeout_ms: int | None = None,
    api_key: str | None = None,
    headers: Mapping[str, str] | None = None,
    upstream_model: str | None = None,
) -> VendorRequest:
    """The Connect server-streaming request for ``req``: one envelope and its headers.

    ``mapping="text"`` sends ``ChatRequest{prompt}`` (demo-chat.proto) with the
    last user message's text; ``mapping="standard"`` sends
    ``StreamRequest{request}`` carrying the §4 envelope as JSON text.
    ``compression="gzip"`` compresses the request message (flag 0x01) and says so
    in ``Connect-Content-Encoding``. ``upstream_model`` is accepted for the
    gateway's generic HTTP provider and unused: neither message has a model
    field (the standard mapping carries ``req.model`` inside the envelope).
    Raises ``ValueError`` for an unknown codec, mapping or compression.
    """
    codec, mapping = codec_and_mapping(codec, mapping)
    if mapping == "standard":
        request_json = rq.dumps(req).decode("utf-8")
        if codec == "proto":
            message = pw.field_string(1, request_json)
        else:
            message = _encode_json({"request": request_json})
    elif codec == "proto":
        message = pw.field_string(1, _prompt(req))
    else:
        message = _encode_json({"prompt": _prompt(req)})
    out_headers = {
        "content-type": MEDIA_TYPES[codec],
        "connect-protocol-version": "1",
        "connect-accept-encoding": "gzip",
    }
    flags = 0
    if compression and compression != "identity":
        message = compress(message, compression)
        flags = FLAG_COMPRESSED
        out_headers["connect-content-encoding"] = compression
    if timeout_ms is not None:
        out_headers["connect-timeout-ms"] = str(int(timeout_ms))
    if api_key:
        out_headers["authorization"] = f"Bearer {api_key}"
    out_headers.update(headers or {})
    path = service_path or SERVICE_PATHS[mapping]
    if not path.startswith("/"):
        path = "/" + path
    return VendorRequest(
        method="POST",
        url=base_url.rstrip("/") + path,
        headers=out_headers,
        body=encode_envelope(message, flags=flags),
    )
