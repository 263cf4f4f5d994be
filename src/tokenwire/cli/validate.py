"""``tokenwire validate [FILE] [--request REQ.json] [--json] [--strict]``.

A stream that fails and is no LLM-Stream gets a line on stderr first, before
the violations: for a vendor capture (``_detect.detect``) the ``tokenwire
convert --from VENDOR`` to run, for a request body the gateway to send it to,
for anything else what the input looks like.
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
from ._detect import HEAD_BYTES, UnknownFormat, detect, show_input

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
    # What to do comes first: a vendor capture or an input that is no stream at all
    # breaks every rule, and the rules it breaks say less than what it is.
    hint = None if report.ok else input_hint(bytes(head), getattr(file, "name", "-"), report)
    if hint is not None and not as_json:
        click.echo(hint, err=True)
    if as_json:
        sys.stdout.write(msgspec.json.encode(report).decode() + "\n")
    else:
        _print(report, empty=not head)
    if hint is not None and as_json:
        click.echo(hint, err=True)
    sys.exit(1 if failed else 0)


def input_hint(head: bytes, name: str, report: Report) -> str | None:
    """What a failing input is when it is no LLM-Stream, and what to do with it:
    the ``convert`` to run for a vendor capture, the gateway to send a request
    body to, or what else the input looks like. ``None`` for a stream that is one."""
    source = "" if name in ("-", "<stdin>") else f" {name}"
    try:
        found = detect(head)
    except UnknownFormat:
        found = None
    if found is not None and found.vendor != "standard":
        return (
            f"tokenwire validate: this is a vendor capture ({found.vendor}: {found.reason}), "
            f"not an LLM-Stream; convert it first: tokenwire convert --from {found.vendor}"
            f"{source} | tokenwire validate"
        )
    if report.events or not head.strip():
        return None  # a stream with broken rules (the lines say which), or empty input
    if _is_request_body(head):
        return (
            'tokenwire validate: this is a request body (JSON with "messages"), not a '
            "stream; send it to a gateway and validate the answer: curl -sN "
            "http://127.0.0.1:8080/v1/stream -H 'Content-Type: application/llm-request+json' "
            f"-d @{source.strip() or 'request.json'} | tokenwire validate"
        )
    return (
        f"tokenwire validate: the input is {show_input(head)}, not a stream; validate takes "
        "the body of an LLM-Stream answer (lines 'event: TYPE' and 'data: {...}'), "
        "e.g. curl -sN http://127.0.0.1:8080/v1/stream ... | tokenwire validate"
    )


def _is_request_body(head: bytes) -> bool:
    text = head.removeprefix(b"\xef\xbb\xbf").lstrip()
    return text.startswith(b"{") and b'"messages"' in text


def _print(report: Report, *, empty: bool) -> None:
    for v in report.violations:
        click.echo(str(v))
    if empty:
        click.echo("tokenwire validate: the input is empty (no bytes)", err=True)
    verdict = "conformant" if report.ok else "NOT conformant"
    n_err, n_warn = len(report.errors), len(report.warnings)
    # The verdict goes to stderr, so stdout is exactly one line per violation.
    click.echo(f"{report.events} events: {verdict} ({n_err} errors, {n_warn} warnings)", err=True)
