"""Vendor formats <-> the standard (§7.1).

``translator(name, model=..., request_id=...)`` returns a sans-I/O
``StreamTranslator`` for one vendor response body; ``vendor_request(name, req,
...)`` builds that vendor's HTTP request from a standard request. Each vendor
lives in its own module and registers itself in ``TRANSLATORS`` /
``REQUEST_BUILDERS`` by name.
"""

from __future__ import annotations

import importlib
from typing import Any, Final

from ._base import SSETranslator, StreamTranslator, VendorRequest

__all__ = [
    "VENDORS",
    "SSETranslator",
    "StreamTranslator",
    "VendorRequest",
    "translator",
    "vendor_request",
]

#: Vendor name -> module that implements it (imported on first use).
VENDORS: Final[dict[str, str]] = {
    "openai": "openai",
    "mistral": "mistral",
    "openai-responses": "openai_responses",
    "anthropic": "anthropic",
    "gemini": "gemini",
    "cohere": "cohere",
    "signalr": "signalr",
    "connect": "connect",
}


def _module(name: str) -> Any:
    try:
        modname = VENDORS[name]
    except KeyError:
        known = ", ".join(sorted(VENDORS))
        raise ValueError(f"unknown vendor format {name!r} (known: {known})") from None
    return importlib.import_module(f"{__name__}.{modname}")


def translator(name: str, *, model: str, request_id: str | None = None, **options: Any) -> Any:
    """A new ``StreamTranslator`` for vendor ``name``.

    ``options`` go to the vendor's translator (``reasoning=True``, a SignalR
    ``mapping``, a Connect ``codec``...). Raises ``ValueError`` for an unknown name.
    """
    cls = _module(name).Translator
    return cls(model=model, request_id=request_id, **options)


def vendor_request(name: str, req: Any, **options: Any) -> VendorRequest:
    """The vendor's HTTP request for the standard request ``req``.

    ``options`` are the vendor's (``base_url``, ``api_key``, ``upstream_model``...).
    """
    builder = _module(name).build_request
    result: VendorRequest = builder(req, **options)
    return result
