"""The public names are all exported (the README's examples run in tests/docs/, against a
real gateway)."""

from __future__ import annotations

import types
from pathlib import Path

import tokenwire

ROOT = Path(__file__).parents[1]


def test_all_is_complete() -> None:
    # Submodules imported elsewhere (tokenwire.server, .translate...) show up as
    # attributes too; only the names defined or re-exported here count.
    public = {
        n
        for n in dir(tokenwire)
        if not n.startswith("_")
        and not (
            isinstance(getattr(tokenwire, n), types.ModuleType)
            and n not in ("binary", "errors", "events", "lifecycle", "request", "sse", "writer")
        )
    }
    lazy = {"Client", "AsyncClient"}
    assert set(tokenwire.__all__) - lazy <= public
    modules = {"annotations", "TYPE_CHECKING", "Any"}
    assert public - set(tokenwire.__all__) - modules == set()
