"""Checks of a model's ``[models.options]`` that the streaming providers share."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence, Set
from typing import Any, overload

__all__ = ["check_known", "one_of", "positive_number", "required_url", "secret", "string_headers"]


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


def one_of(options: Mapping[str, Any], key: str, choices: Sequence[str]) -> str:
    """``options[key]`` as one of ``choices`` (the first when absent or empty), else
    ``ValueError`` listing them: "options.mapping must be text or standard, got 'x'"."""
    value = str(options.get(key) or choices[0])
    if value not in choices:
        raise ValueError(f"options.{key} must be {' or '.join(choices)}, got {value!r}")
    return value


def secret(options: Mapping[str, Any], key: str, *env_keys: str) -> str | None:
    """``options[key]`` as given, else the environment variable named by the first of
    ``env_keys`` that is set in ``options`` (a key may come from either: §8.1 keeps
    neither in logs); ``None`` when there is neither."""
    value = options.get(key)
    env = next((options[k] for k in env_keys if options.get(k)), None)
    if value is None and env:
        value = os.environ.get(str(env))
    return None if value is None else str(value)
