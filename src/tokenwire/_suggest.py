""" "Did you mean": the closest known name to a misspelt one.

One pure function, used by the gateway's unknown-model error and by the
config loader's unknown-key error. No I/O, standard library only.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable
from typing import Final

__all__ = ["did_you_mean", "suggest"]

#: How many known names an error lists at most.
MAX_LISTED: Final = 12


def suggest(name: str, known: Iterable[str]) -> str | None:
    """The known name closest to ``name`` (case aside), or ``None`` when none is close."""
    names = list(dict.fromkeys(known))
    by_lower = {n.lower(): n for n in names}
    if name.lower() in by_lower and by_lower[name.lower()] != name:
        return by_lower[name.lower()]
    found = difflib.get_close_matches(name.lower(), list(by_lower), n=1, cutoff=0.6)
    return by_lower[found[0]] if found else None


def did_you_mean(
    name: str,
    known: Iterable[str],
    *,
    listing: str | None = None,
    quote: Callable[[str], str] = repr,
) -> str:
    """``": did you mean 'x'?"`` for the closest known name, plus ``" (<listing>: a, b, c)"``
    when ``listing`` is given; ``""`` when there is nothing to say. ``quote`` renders
    the suggestion as the rest of the message quotes names."""
    names = list(dict.fromkeys(known))
    best = suggest(name, names)
    out = f": did you mean {quote(best)}?" if best is not None else ""
    if listing is not None and names:
        shown = ", ".join(names[:MAX_LISTED]) + (", …" if len(names) > MAX_LISTED else "")
        out += f" ({listing}: {shown})"
    return out
