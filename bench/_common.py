"""What the benches under bench/ share, on top of ``tokenwire.testing``.

``tokenwire.testing.processes`` (``/proc`` probes, server processes, the fake
upstream process) and ``tokenwire.testing.loadgen`` (the raw streaming client)
hold the measuring tools, so that the installed ``tokenwire bench`` command has
them too; this module adds what only
the repository's benches need: the RESULTS.md section writer and the header
lines every section carries (date, machine, load, command).
"""

from __future__ import annotations

import datetime
import os
import platform
import shlex
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from tokenwire.testing.processes import loadavg, machine

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "RESULTS.md"


def write_section(name: str, section: str, path: Path = RESULTS, keep: str | None = None) -> None:
    """Replace the ``## name`` section of RESULTS.md (or append it), keeping the others.

    ``keep`` names a ``### `` subsection written by hand (an analysis the bench
    cannot produce): when the old section has it, it is carried over to the end
    of the new one.
    """
    text = path.read_text() if path.exists() else "# Benchmark results\n"
    head = f"## {name}\n"
    if not section.endswith("\n"):
        section += "\n"
    if text.startswith(head) or f"\n{head}" in text:
        start = 0 if text.startswith(head) else text.index(f"\n{head}") + 1
        nxt = text.find("\n## ", start + len(head))
        old = text[start : nxt + 1 if nxt != -1 else len(text)]
        if keep is not None and f"\n### {keep}" in old:
            section = section.rstrip("\n") + "\n\n" + old[old.index(f"\n### {keep}") + 1 :]
            section = section.rstrip("\n") + "\n"
        text = text[:start] + section + ("\n" + text[nxt + 1 :] if nxt != -1 else "")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text)


def command(script: str) -> str:
    """The command line that ran this bench, as a user would type it from the checkout."""
    exe = sys.executable
    if exe.startswith(str(ROOT)):
        exe = os.path.relpath(exe, ROOT)
    return shlex.join([exe, script, *sys.argv[1:]])


def pkg_version(name: str) -> str:
    """A distribution's version in this interpreter ("?" when it is not installed)."""
    try:
        return version(name)
    except PackageNotFoundError:
        return "?"


def header(script: str, load_before: str) -> list[str]:
    """The bullet lines every section starts with."""
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return [
        f"- date: {now}",
        f"- python: {platform.python_version()}, granian {pkg_version('granian')}, "
        f"httpx {pkg_version('httpx')}, uvloop {pkg_version('uvloop')}",
        f"- machine: {machine()}; load average before the run: {load_before}, after: "
        f"{loadavg()} (other work shares these CPUs)",
        f"- command: `{command(script)}`",
    ]


def md_table(columns: list[str], rows: list[list[str]], align: str = "") -> list[str]:
    """A Markdown table; ``align`` is one letter per column, ``l`` or ``r`` (default r)."""
    align = align or "l" + "r" * (len(columns) - 1)
    marks = ["---" if a == "l" else "---:" for a in align]
    out = ["| " + " | ".join(columns) + " |", "| " + " | ".join(marks) + " |"]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return out
