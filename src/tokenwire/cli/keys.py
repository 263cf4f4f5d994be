"""``tokenwire keys create [--id ID] [--model M ...] [--rpm N] [--tpm N] [--budget N]``.

Prints a new inbound key once, and the ``[[keys]]`` entry to paste into the
gateway config: only the key's hash is stored there (docs/gateway.md,
"Production"). The key itself is shown this one time and kept nowhere.
"""

from __future__ import annotations

import json
import secrets

import click

from ..gateway.policy.keys import hash_key, new_key


@click.group()
def command() -> None:
    """Manage the gateway's inbound keys."""


@command.command()
@click.option("--id", "key_id", help="The key's id in logs and limits. [default: random]")
@click.option("--model", "models", multiple=True, help="A model the key may use (repeatable).")
@click.option("--rpm", type=click.FloatRange(min=0, min_open=True), help="Requests per minute.")
@click.option("--tpm", type=click.FloatRange(min=0, min_open=True), help="Tokens per minute.")
@click.option("--budget", type=click.IntRange(min=1), help="Lifetime token budget.")
def create(
    key_id: str | None,
    models: tuple[str, ...],
    rpm: float | None,
    tpm: float | None,
    budget: int | None,
) -> None:
    """Print a new key (once) and the config entry holding its hash."""
    key = new_key()
    key_id = key_id or f"key-{secrets.token_hex(4)}"
    lines = ["[[keys]]", f"id = {json.dumps(key_id)}", f'hash = "{hash_key(key)}"']
    if models:
        lines.append(f"models = {json.dumps(list(models))}")
    if rpm is not None:
        lines.append(f"requests_per_minute = {rpm:g}")
    if tpm is not None:
        lines.append(f"tokens_per_minute = {tpm:g}")
    if budget is not None:
        lines.append(f"token_budget = {budget}")
    click.echo(f"key: {key}")
    click.echo(
        "# Give the key to its user now: it is not stored anywhere and cannot be shown again."
    )
    click.echo("# Add this to the gateway config:")
    click.echo("\n".join(lines))
