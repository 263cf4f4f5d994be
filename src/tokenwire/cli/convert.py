"""``tokenwire convert --from VENDOR [FILE] [--request REQ.json] [--reasoning]``.

Turns a captured vendor response body (FILE, or stdin) into the standard
LLM-Stream SSE body on stdout, event by event as the input is read (§7.1).
Exit status: 0 when the translated stream is clean, 1 when it carries an
``error`` event (a vendor error, a truncated capture...), 2 on usage errors.
"""

from __future__ import annotations

import sys
from typing import Any, BinaryIO

import click

from .. import events
from ..errors import InvalidRequest
from ..request import Request
from ..request import parse as parse_request
from ..translate import VENDORS, translator

_CHUNK = 64 * 1024


def _load_request(path: str) -> Request:
    try:
        with open(path, "rb") as f:
            return parse_request(f.read())
    except InvalidRequest as exc:
        raise click.BadParameter(f"invalid request: {exc}", param_hint="--request") from None


@click.command()
@click.argument("file", type=click.File("rb"), default="-")
@click.option(
    "--from",
    "vendor",
    required=True,
    type=click.Choice(sorted(VENDORS)),
    help="The vendor format of the capture.",
)
@click.option(
    "--request",
    "request_path",
    type=click.Path(exists=True, dir_okay=False),
    help="The standard request that produced it: gives the model, request_id and "
    'the "tokenwire:reasoning" extension.',
)
@click.option("--model", help="The model for stream.start (default: the request's, or 'unknown').")
@click.option("--request-id", help="The request_id to echo (default: the request's).")
@click.option("--reasoning", is_flag=True, help="Carry reasoning text on its own marked block.")
@click.option("--mapping", help="Passed to the translator (SignalR: the target mapping).")
@click.option("--codec", help="Passed to the translator (Connect: json or proto).")
@click.option("--created", type=int, help="Fix stream.start's created time (reproducible output).")
def command(
    file: BinaryIO,
    vendor: str,
    request_path: str | None,
    model: str | None,
    request_id: str | None,
    reasoning: bool,
    mapping: str | None,
    codec: str | None,
    created: int | None,
) -> None:
    """Convert a captured VENDOR response body (FILE, or stdin) to the standard stream.

    Writes the LLM-Stream SSE body to stdout. Exits 0 for a clean stream,
    1 when it carries an error event, 2 on usage errors.
    """
    request = _load_request(request_path) if request_path is not None else None
    options: dict[str, Any] = {}
    if reasoning or (request is not None and request.extension("tokenwire:reasoning") is True):
        options["reasoning"] = True
    if mapping is not None:
        options["mapping"] = mapping
    if codec is not None:
        options["codec"] = codec
    if created is not None:
        options["created"] = created
    try:
        t = translator(
            vendor,
            model=model or (request.model if request is not None else "unknown"),
            request_id=request_id or (request.request_id if request is not None else None),
            **options,
        )
    except ImportError:
        raise click.UsageError(f"the {vendor!r} translator is not available") from None
    except TypeError as exc:  # an option this vendor's translator does not take
        raise click.UsageError(f"--from {vendor}: {exc}") from None

    out = sys.stdout.buffer
    failed = False
    while True:
        chunk = file.read(_CHUNK)
        produced = t.feed(chunk) if chunk else t.close()
        for event in produced:
            failed = failed or isinstance(event, events.ErrorEvent)
            out.write(events.dump(event))
        out.flush()
        if not chunk:
            break
    sys.exit(1 if failed else 0)
