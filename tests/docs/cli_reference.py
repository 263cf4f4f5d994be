"""docs/reference/cli.md, written from the commands' own ``--help``.

``python -m tests.docs.cli_reference`` rewrites the page; ``test_cli_reference``
fails, naming that command, when the page and the help have drifted apart.
"""

from __future__ import annotations

import sys

from click.testing import CliRunner
from tests.docs.docblocks import ROOT

from tokenwire.cli import COMMANDS, main

PAGE = ROOT / "docs" / "reference" / "cli.md"
WIDTH = 100
#: Commands that are groups: each of their subcommands gets a section of its own.
SUBCOMMANDS = {"keys": ("create",)}

HEAD = """# Reference: the command line

`make run` installs the `tokenwire` command as `.venv/bin/tokenwire` (after
`source .venv/bin/activate`, plain `tokenwire`). Every command takes `-h`/`--help`,
which prints what is below. A URL is the gateway's base URL, `host:port` or its
`/v1/stream` URL alike. Exit status: 0 for success, 1 for a failure the command reports
(a stream that is not conformant, a chat that ended in an error), 2 for a usage error or,
for `check`, an endpoint it cannot judge.

This page is written from the commands themselves (`python -m tests.docs.cli_reference`),
and a test fails when the two differ.
"""


def help_text(*argv: str) -> str:
    result = CliRunner().invoke(
        main, [*argv, "--help"], terminal_width=WIDTH, prog_name="tokenwire"
    )
    assert result.exit_code == 0, result.output
    return result.output.rstrip() + "\n"


def render() -> str:
    """The whole page."""
    parts = [HEAD]
    for name in COMMANDS:
        for argv in [(name,), *((name, sub) for sub in SUBCOMMANDS.get(name, ()))]:
            parts.append(f"\n## `tokenwire {' '.join(argv)}`\n\n```text\n{help_text(*argv)}```\n")
    return "".join(parts)


if __name__ == "__main__":
    PAGE.write_text(render())
    sys.stdout.write(f"wrote {PAGE.relative_to(ROOT)}\n")
