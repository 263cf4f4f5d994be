"""Every exception class in the package is in the one tree (errors.py).

The httpx habit: the tree is drawn once, in ``errors.py``'s docstring, and a
test keeps the drawing and the code together. Every exception class that any
module of ``tokenwire`` defines descends from ``TokenwireError``, so a caller
can catch everything tokenwire raises with one ``except``; every public one
(no leading underscore) is named in the drawing.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import tokenwire
from tokenwire import errors


def _exception_classes() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(tokenwire.__path__, "tokenwire."):
        if info.name.endswith("__main__"):
            continue  # running it is the CLI
        module = importlib.import_module(info.name)
        for obj in vars(module).values():
            if (
                inspect.isclass(obj)
                and issubclass(obj, BaseException)
                and obj.__module__ == module.__name__
            ):
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return found


def test_the_walk_finds_the_tree() -> None:
    found = _exception_classes()
    assert "tokenwire.errors.FramingError" in found
    assert "tokenwire.gateway.resume.store.StreamNotFound" in found


def test_every_exception_descends_from_tokenwire_error() -> None:
    outside = [
        f"{name} ({', '.join(b.__name__ for b in cls.__bases__)})"
        for name, cls in _exception_classes().items()
        if not issubclass(cls, errors.TokenwireError)
    ]
    assert not outside, f"exception classes outside the tree: {outside}"


def test_every_public_exception_is_drawn_in_errors_docstring() -> None:
    drawing = errors.__doc__ or ""
    missing = [
        name
        for name, cls in _exception_classes().items()
        if not cls.__name__.startswith("_") and cls.__name__ not in drawing
    ]
    assert not missing, f"draw these in tokenwire/errors.py's tree: {missing}"
