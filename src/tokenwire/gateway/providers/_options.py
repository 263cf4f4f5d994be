"""Checks of a model's ``[models.options]`` that the streaming providers share."""

from __future__ import annotations

from collections.abc import Mapping, Set
from typing import Any, overload

__all__ = ["check_known", "positive_number", "required_url", "string_headers"]


def check_known(options: Mapping[str, Any], known: Set[str], what: str) -> None:
    """Raise ``ValueError`` naming the ``options`` not in ``known`` (``what``: "Connect")."""
    unknown = set(options) - known
    if unknown:
        names = ", ".join(sorted(known))
        raise ValueError(f"unknown {what} option(s) {sorted(unknown)} (known: {names})")


def required_url(options: Mapping[str, Any], key: str, provider: str) -> str:
    """The non-empty string ``options[key]``, or ``ValueError`` naming the provider."""
    url = options.get(key)
    if not isinstance(url, str) or not url:
        raise ValueError(f"options.{key} is required for provider {provider!r}")
    return url


@overload
def positive_number(options: Mapping[str, Any], key: str, default: float) -> float: ...
@overload
def positive_number(
    options: Mapping[str, Any], key: str, default: float | None
) -> float | None: ...
def positive_number(options: Mapping[str, Any], key: str, default: float | None) -> float | None:
    """``options[key]`` (or ``default``) as a float > 0; ``None`` stays ``None``."""
    value = options.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ValueError(f"options.{key} must be a number > 0")
    return float(value)


def string_headers(options: Mapping[str, Any]) -> dict[str, str]:
    """``options.headers`` with keys and values as strings."""
    return {str(k): str(v) for k, v in dict(options.get("headers") or {}).items()}
