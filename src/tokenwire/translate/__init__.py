"""Vendor formats <-> the standard (§7.1).

Each vendor is described by one ``VendorFormat`` record (``_contract.py``):
its stream translator, request builder, HTTP error mapping, optional
ingress and reverse encoder, transport and fake upstream. ``registry`` maps
names to records; ``get(name)`` and ``formats()`` read it.

``translator(name, model=..., request_id=...)`` returns a sans-I/O
``StreamTranslator`` for one vendor response body; ``vendor_request(name, req,
...)`` builds that vendor's HTTP request from a standard request.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ..request import Request
from ._base import SSETranslator, StreamTranslator, VendorRequest
from ._contract import (
    TRANSPORTS,
    EncodeEvent,
    HTTPErrorMapping,
    Registry,
    RequestBuilder,
    Transport,
    VendorFormat,
    VendorIngress,
    formats,
    get,
    registry,
    status_error,
    vendor_table,
)
from ._routes import error_body_for, vendor_of

__all__ = [
    "TRANSPORTS",
    "VENDORS",
    "EncodeEvent",
    "HTTPErrorMapping",
    "Registry",
    "RequestBuilder",
    "SSETranslator",
    "StreamTranslator",
    "Transport",
    "VendorFormat",
    "VendorIngress",
    "VendorRequest",
    "error_body_for",
    "formats",
    "get",
    "registry",
    "status_error",
    "translator",
    "vendor_of",
    "vendor_request",
    "vendor_table",
]

#: Vendor name -> module that implements it (nothing imported; see ``registry``).
VENDORS: Final[Mapping[str, str]] = registry.modules


def translator(
    name: str, *, model: str, request_id: str | None = None, **options: Any
) -> StreamTranslator:
    """A new ``StreamTranslator`` for vendor ``name``.

    ``options`` go to the vendor's translator (``reasoning=True``, a SignalR
    ``mapping``, a Connect ``codec``...). Raises ``ValueError`` for an unknown name.
    """
    return get(name).new_translator(model=model, request_id=request_id, **options)


def vendor_request(name: str, req: Request, **options: Any) -> VendorRequest:
    """The vendor's HTTP request for the standard request ``req``.

    ``options`` are the vendor's (``base_url``, ``api_key``, ``upstream_model``...).
    Raises ``ValueError`` for an unknown name, ``InvalidRequest`` for what the
    vendor cannot take.
    """
    return get(name).build_request(req, **options)
