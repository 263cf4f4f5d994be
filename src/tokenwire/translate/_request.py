"""Request-side helpers the vendor modules share."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import InvalidRequest
from ..request import Parameters, Request

__all__ = ["deep_merge", "merge_extensions", "sse_headers", "vendor_parameters"]


def deep_merge(base: dict[str, Any], extra: Mapping[str, Any]) -> None:
    """Deep-merge ``extra`` into ``base``: objects merge, anything else replaces."""
    for key, value in extra.items():
        current = base.get(key)
        if isinstance(current, dict) and isinstance(value, Mapping):
            deep_merge(current, value)
        else:
            base[key] = value


def merge_extensions(
    body: dict[str, Any],
    req: Request,
    keys: Iterable[str],
    *,
    protected: Iterable[str] = ("stream",),
) -> None:
    """§4.7: deep-merge the request's extensions ``keys`` into ``body``, in order.

    Fields in ``protected`` (the translator needs a stream) are never changed.
    Raises ``InvalidRequest`` (path ``extensions["key"]``) for a value that is
    not an object.
    """
    keep = frozenset(protected)
    for key in keys:
        extra = req.extension(key)
        if extra is None:
            continue
        if not isinstance(extra, Mapping):
            raise InvalidRequest(
                "must be an object of vendor request fields", path=f'extensions["{key}"]'
            )
        deep_merge(body, {k: v for k, v in extra.items() if k not in keep})


def sse_headers(auth: dict[str, str], headers: dict[str, str] | None) -> dict[str, str]:
    """JSON in, SSE out, the vendor's auth header, then the caller's headers (lower-cased)."""
    out = {"content-type": "application/json", "accept": "text/event-stream", **auth}
    out.update({k.lower(): v for k, v in (headers or {}).items()})
    return out


def vendor_parameters(
    params: Parameters | None, names: Mapping[str, str], *, keep_empty: bool = False
) -> dict[str, Any]:
    """§4.5 parameters under the vendor's names, in the order of ``names``.

    ``names`` maps a standard parameter (``max_tokens``, ``temperature``,
    ``top_p``, ``stop_sequences``) to the vendor's field. Unset parameters are
    left out, and so is an empty ``stop_sequences`` unless ``keep_empty``.
    """
    if params is None:
        return {}
    out: dict[str, Any] = {}
    for name, field in names.items():
        value = getattr(params, name)
        if value is None or (value == [] and not keep_empty):
            continue
        out[field] = value
    return out
