"""``--header 'Name: value'`` for ``tokenwire chat`` and ``tokenwire check``."""

from __future__ import annotations

import click

__all__ = ["parse_header"]


def parse_header(value: str, option: str = "--header") -> tuple[str, str]:
    """``(name, value)`` of ``'Name: value'``; a usage error naming ``option`` otherwise."""
    name, sep, val = value.partition(":")
    if not sep or not name.strip() or any(c.isspace() for c in name.strip()):
        raise click.BadParameter(f"{value!r} is not 'Name: value'", param_hint=option)
    return name.strip(), val.strip()
