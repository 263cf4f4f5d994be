"""The ``tokenwire`` command. Each subcommand lives in its own module under
``tokenwire.cli`` and is imported only when it runs, so ``tokenwire validate``
never pays for the gateway's imports.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Final

import click

__all__ = ["COMMANDS", "main"]

#: Subcommand -> (module, one-line help). A module exposes ``command``, a click command.
COMMANDS: Final[dict[str, tuple[str, str]]] = {
    "serve": ("serve", "Run the gateway (the built-in demo model, or the models of a config)."),
    "chat": ("chat", "Chat with a standard endpoint, tokens rendered live."),
    "validate": ("validate", "Check a recorded stream against every rule of the draft."),
    "convert": ("convert", "Turn a captured vendor response into the standard stream."),
    "check": ("check", "Run the conformance suite against a live endpoint."),
    "bench": ("bench", "Run the decode and gateway benchmarks on this machine."),
    "keys": ("keys", "Create inbound keys for the gateway ([[keys]] in its config)."),
}


def _available() -> dict[str, tuple[str, str]]:
    found = {}
    for name, (mod, help_) in COMMANDS.items():
        if importlib.util.find_spec(f"{__name__}.{mod}") is not None:
            found[name] = (mod, help_)
    return found


class _LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(_available())

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = _available().get(cmd_name)
        if entry is None:
            return None
        module = importlib.import_module(f"{__name__}.{entry[0]}")
        command: click.Command = module.command
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, help_) for name, (_, help_) in _available().items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="tokenwire")
def main() -> None:
    """tokenwire: the LLM-Stream standard, its gateway and its tools."""
