"""Plugins (``provider = "python"``): a ``"module:callable"`` factory that returns a provider."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

__all__ = ["load_factory"]


def load_factory(spec: str) -> Callable[..., Any]:
    """The callable named by ``"package.module:attribute"``.

    Raises ``ValueError`` when the spec is malformed, the module cannot be
    imported, or the attribute is missing or not callable.
    """
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"factory must be 'module:callable', got {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"cannot import {module_name!r}: {exc}") from None
    target: Any = module
    for part in attribute.split("."):
        target = getattr(target, part, None)
        if target is None:
            raise ValueError(f"{module_name!r} has no attribute {attribute!r}")
    if not callable(target):
        raise ValueError(f"{spec!r} is not callable")
    return target  # type: ignore[no-any-return]
