"""What the vendors' token-counting endpoints share: body surgery and the answer."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import msgspec

from ._base import VendorRequest

__all__ = ["count_field", "count_request"]

_decode = msgspec.json.Decoder().decode
_encode = msgspec.json.Encoder().encode


def count_request(
    request: VendorRequest,
    url: str,
    keep: Collection[str] | None = None,
    wrap: str | None = None,
    extra: dict[str, Any] | None = None,
) -> VendorRequest:
    """``request`` sent to ``url`` instead, its JSON body cut to the fields in
    ``keep`` (the counting endpoint refuses the others), or wrapped whole as
    ``{wrap: body, **extra}``."""
    body = _decode(request.body)
    if keep is not None:
        body = {k: v for k, v in body.items() if k in keep}
    if wrap is not None:
        body = {wrap: {**body, **(extra or {})}}
    return VendorRequest(method="POST", url=url, headers=request.headers, body=_encode(body))


def count_field(body: bytes, name: str) -> int:
    """The integer field ``name`` of a JSON answer. Raises ``ValueError``."""
    try:
        obj = _decode(body)
    except msgspec.DecodeError:
        raise ValueError("the count answer is not JSON") from None
    value = obj.get(name) if isinstance(obj, dict) else None
    if type(value) is not int or value < 0:
        raise ValueError(f"the count answer has no {name!r}")
    return value
