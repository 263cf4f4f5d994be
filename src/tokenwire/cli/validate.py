"""``tokenwire validate [FILE] [--request REQ.json] [--json] [--strict]``.

A stream that fails and looks like a vendor capture (``_detect.detect``) gets
one more line on stderr: the ``tokenwire convert --from VENDOR`` to run first.
"""

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
from ._detect import HEAD_BYTES, UnknownFormat, detect

_CHUNK = 64 * 1024


def _read(stream: BinaryIO, head: bytearray) -> Iterator[bytes]:
    """The input in chunks; its first ``HEAD_BYTES`` are kept in ``head`` on the way."""
    while chunk := stream.read(_CHUNK):
        if len(head) < HEAD_BYTES:
            head += chunk[: HEAD_BYTES - len(head)]
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
    head = bytearray()
    chunks = _read(file, head)
    first = next(chunks, b"")
    if framing == "auto":
        framing = "binary" if binary.looks_like_frames(first) else "sse"
    report = validate(
        itertools.chain((first,), chunks),
        request,
        max_event_bytes=max_event_bytes,
        framing="binary" if framing == "binary" else "sse",
        payload=payload,
    )
    failed = not report.ok or (strict and bool(report.warnings))
    if as_json:
        sys.stdout.write(msgspec.json.encode(report).decode() + "\n")
    else:
        _print(report, empty=not head)
    if not report.ok and framing != "binary":
        # Frames are this standard's own binding: a broken one is a broken LLM-Stream,
        # and its framing violation says where; its control bytes also read as a
        # vendor's binary envelope (a Connect message starts 0x00), so no vendor hint.
        _suggest_convert(bytes(head), getattr(file, "name", "-"))
    sys.exit(1 if failed else 0)


def _suggest_convert(head: bytes, name: str) -> None:
    """A vendor capture is no LLM-Stream: say which ``convert`` turns it into one."""
    try:
        found = detect(head)
    except UnknownFormat:
        return
    if found.vendor == "standard":
        return
    source = "" if name in ("-", "<stdin>") else f" {name}"
    click.echo(
        f"tokenwire validate: this is a vendor capture ({found.vendor}: {found.reason}), "
        f"not an LLM-Stream; convert it first: tokenwire convert --from {found.vendor}"
        f"{source} | tokenwire validate",
        err=True,
    )


def _print(report: Report, *, empty: bool) -> None:
    for v in report.violations:
        click.echo(str(v))
    if empty:
        click.echo("tokenwire validate: the input is empty (no bytes)", err=True)
    verdict = "conformant" if report.ok else "NOT conformant"
    n_err, n_warn = len(report.errors), len(report.warnings)
    # The verdict goes to stderr, so stdout is exactly one line per violation.
    click.echo(f"{report.events} events: {verdict} ({n_err} errors, {n_warn} warnings)", err=True)
