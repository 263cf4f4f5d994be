"""``tokenwire validate [FILE] [--request REQ.json] [--json] [--strict]``."""

from __future__ import annotations

import itertools
import sys
from collections.abc import Iterator
from typing import BinaryIO

import click
import msgspec

from .. import binary
from ..errors import InvalidRequest
from ..lifecycle import Report, validate
from ..request import Request
from ..request import parse as parse_request

_CHUNK = 64 * 1024


def _read(stream: BinaryIO) -> Iterator[bytes]:
    while chunk := stream.read(_CHUNK):
        yield chunk


def _load_request(path: str) -> Request:
    with open(path, "rb") as f:
        return parse_request(f.read())


@click.command()
@click.argument("file", type=click.File("rb"), default="-")
@click.option(
    "--request",
    "request_path",
    type=click.Path(exists=True, dir_okay=False),
    help="The request that produced the stream: enables the tool and request_id checks.",
)
@click.option(
    "--framing",
    type=click.Choice(["auto", "sse", "binary"]),
    default="auto",
    show_default=True,
    help="The body's binding: SSE, or docs/binary.md's frames (auto: by the first bytes).",
)
@click.option(
    "--payload",
    type=click.Choice(binary.PAYLOADS),
    default="json",
    show_default=True,
    help="With binary framing: the event bodies' encoding.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--strict", is_flag=True, help="Fail on SHOULD violations too.")
@click.option(
    "--max-event-bytes",
    type=click.IntRange(min=1),
    default=1 << 20,
    show_default=True,
    help="Largest event accepted before a framing error.",
)
def command(
    file: BinaryIO,
    request_path: str | None,
    framing: str,
    payload: binary.Payload,
    as_json: bool,
    strict: bool,
    max_event_bytes: int,
) -> None:
    """Check an LLM-Stream body (FILE, or stdin) against every rule of the draft.

    The body is SSE (§5.1) or the binary binding's frames (docs/binary.md).

    Prints one line per violation (seq, rule, section, message) and exits 0
    only for a conformant stream.
    """
    request = None
    if request_path is not None:
        try:
            request = _load_request(request_path)
        except InvalidRequest as exc:
            raise click.ClickException(f"{request_path}: invalid request: {exc}") from None
    chunks = _read(file)
    head = next(chunks, b"")
    if framing == "auto":
        framing = "binary" if binary.looks_like_frames(head) else "sse"
    report = validate(
        itertools.chain((head,), chunks),
        request,
        max_event_bytes=max_event_bytes,
        framing="binary" if framing == "binary" else "sse",
        payload=payload,
    )
    failed = not report.ok or (strict and bool(report.warnings))
    if as_json:
        sys.stdout.write(msgspec.json.encode(report).decode() + "\n")
    else:
        _print(report)
    sys.exit(1 if failed else 0)


def _print(report: Report) -> None:
    for v in report.violations:
        click.echo(str(v))
    verdict = "conformant" if report.ok else "NOT conformant"
    n_err, n_warn = len(report.errors), len(report.warnings)
    # The verdict goes to stderr, so stdout is exactly one line per violation.
    click.echo(f"{report.events} events: {verdict} ({n_err} errors, {n_warn} warnings)", err=True)
