"""The fenced code blocks and inline commands of the Markdown docs, with their lines.

A block's info string is its language and, optionally, ``no-run`` with the reason:

    ```sh no-run: needs a real OpenAI key
    ```text            (an output sample or a synopsis: never run)

Languages and what the docs test does with them:

- ``sh``/``bash``/``shell``: run with bash (``set -e -o pipefail``), ``.venv/bin`` first
  on PATH; ``make TARGET`` lines are checked against the Makefile instead of run;
  ``tokenwire serve`` lines start their own gateway for the rest of the block;
- ``python``: run with the venv's python;
- ``js``: run with node (an ES module);
- ``toml``: loaded with the gateway's config loader; ``json``: parsed; ``yaml``: parsed;
- ``text``, ``mermaid``, ``proto``, ``abnf``: samples, diagrams, schemas and grammars, not run.

A block without a language is an error: every block says what it is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: Languages whose blocks are never run: output samples and synopses, diagrams, schemas.
NOT_RUN = frozenset({"text", "mermaid", "proto", "abnf"})
SHELL = frozenset({"sh", "bash", "shell"})
#: Every language the docs test knows what to do with.
KNOWN = NOT_RUN | SHELL | {"python", "js", "toml", "json", "yaml"}

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")
_INLINE = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")


@dataclass(frozen=True)
class Block:
    """One fenced block: where it is, its info string, its text (fence indent removed)."""

    path: Path
    line: int  # 1-based line of the opening fence
    language: str
    no_run: str | None  # the reason given after ``no-run``, "" when none was given
    text: str

    @property
    def where(self) -> str:
        shown = self.path.relative_to(ROOT) if self.path.is_relative_to(ROOT) else self.path
        return f"{shown}:{self.line}"


def doc_files() -> list[Path]:
    """README.md, CONTRIBUTING.md and every Markdown file under docs/, in a stable order."""
    return [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").rglob("*.md"))]


def blocks(path: Path) -> list[Block]:
    """The fenced code blocks of one Markdown file."""
    out: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        indent, fence, info = m["indent"], m["fence"], m["info"].strip()
        body: list[str] = []
        j = i + 1
        while j < len(lines):
            close = lines[j].strip()
            if close.startswith(fence) and close.strip(fence[0]) == "":
                break
            line = lines[j]
            body.append(line[len(indent) :] if line.startswith(indent) else line.lstrip())
            j += 1
        language, _, rest = info.partition(" ")
        no_run: str | None = None
        rest = rest.strip()
        if rest.startswith("no-run"):
            no_run = rest.removeprefix("no-run").lstrip(":").strip()
        out.append(Block(path, i + 1, language.lower(), no_run, "\n".join(body) + "\n"))
        i = j + 1
    return out


def inline_commands(path: Path) -> list[tuple[int, str]]:
    """``(line, text)`` of inline code spans outside blocks that are commands:
    ``tokenwire SUBCOMMAND ...`` and ``make TARGET``."""
    out: list[tuple[int, str]] = []
    in_block: str | None = None
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        m = _FENCE.match(line)
        if m is not None:
            if in_block is None:
                in_block = m["fence"]
            elif line.strip().startswith(in_block):
                in_block = None
            continue
        if in_block is not None:
            continue
        for span in _INLINE.findall(line):
            span = span.strip()
            if re.match(r"^(tokenwire [a-z]|make [a-z])", span):
                out.append((n, span))
    return out
