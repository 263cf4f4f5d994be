"""docs/reference/cli.md is the commands' own ``--help``, every command and subcommand."""

from __future__ import annotations

from tests.docs.cli_reference import PAGE, render


def test_the_cli_reference_is_the_help_of_every_command() -> None:
    assert PAGE.read_text() == render(), (
        "docs/reference/cli.md differs from the commands' --help: "
        "run `.venv/bin/python -m tests.docs.cli_reference` and commit the page"
    )
