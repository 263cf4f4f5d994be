"""``tokenwire convert [--from VENDOR] [FILE] [--request REQ.json] [--reasoning]``.

Turns a captured vendor response body (FILE, or stdin) into the standard
LLM-Stream SSE body on stdout, event by event as the input is read (§7.1).
Without ``--from`` the format is detected from the first 64 KiB
(``_detect.detect``). Raw SSE bodies and JSON-lines recordings (one vendor
JSON chunk per line, the SSE framing stripped) are both read.
Exit status: 0 when the translated stream is clean, 1 when it carries an
``error`` event (a vendor error, a truncated capture...), 2 on usage errors
(and on input whose format cannot be told).
"""

from __future__ import annotations

import sys
from typing import Any, BinaryIO, Final

import click

from .. import binary, events
from ..errors import InvalidRequest, RemoteProtocolError
from ..request import Request
from ..request import parse as parse_request
from ..translate import VENDORS, translator
from ._detect import (
    HEAD_BYTES,
    JSONLinesFramer,
    UnknownFormat,
    capture_model,
    detect,
    detect_framing,
)

_CHUNK = 64 * 1024

#: Vendors whose SSE stream ends with ``data: [DONE]`` (JSON-lines recordings drop it).
_DONE_MARKER: Final = frozenset({"openai", "mistral"})
#: Vendors whose stream is SSE, so a JSON-lines recording can be reframed.
_SSE_VENDORS: Final = frozenset(VENDORS) - {"signalr", "connect"}
#: What each format looks like, for the message when a conversion fails.
_EXPECTED: Final = {
    "openai": "SSE data: lines of chat.completion.chunk JSON ending in data: [DONE]",
    "mistral": "SSE data: lines of chat.completion.chunk JSON ending in data: [DONE]",
    "openai-responses": "SSE events response.created ... response.completed",
    "anthropic": "SSE events message_start ... message_stop",
    "gemini": "SSE data: lines of GenerateContentResponse JSON (candidates)",
    "cohere": "SSE data: lines of v2 chat events message-start ... message-end",
    "signalr": "the hub's frames: the handshake answer {} then JSON records, each ending in 0x1E",
    "connect": "Connect envelopes: a flags byte, a 4-byte length, then the message",
}


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
    type=click.Choice(sorted(VENDORS)),
    help="The vendor format of the capture. [default: detected from the content]",
)
@click.option(
    "--request",
    "request_path",
    type=click.Path(exists=True, dir_okay=False),
    help="The standard request that produced it: gives the model, request_id and "
    'the "tokenwire:reasoning" extension.',
)
@click.option(
    "--model",
    help="The model for stream.start (default: the request's, else the capture's, else 'unknown').",
)
@click.option("--request-id", help="The request_id to echo (default: the request's).")
@click.option("--reasoning", is_flag=True, help="Carry reasoning text on its own marked block.")
@click.option("--mapping", help="Passed to the translator (SignalR: the target mapping).")
@click.option("--codec", help="Passed to the translator (Connect: json or proto).")
@click.option("--created", type=int, help="Fix stream.start's created time (reproducible output).")
@click.option(
    "--to",
    "framing",
    type=click.Choice(["sse", "binary"]),
    default="sse",
    show_default=True,
    help="The output's binding: SSE, or the binary frames of docs/binary.md.",
)
def command(
    file: BinaryIO,
    vendor: str | None,
    request_path: str | None,
    model: str | None,
    request_id: str | None,
    reasoning: bool,
    mapping: str | None,
    codec: str | None,
    created: int | None,
    framing: str,
) -> None:
    """Convert a captured vendor response body (FILE, or stdin) to the standard stream.

    The format (--from) is detected from the content when not given: SSE or
    JSON lines of any SSE vendor, SignalR records, Connect envelopes; a
    standard stream in the binary binding is re-framed as is. Writes the
    LLM-Stream body to stdout, SSE or (--to binary) binary frames. Exits 0
    for a clean stream, 1 when it carries an error event, 2 on usage errors.
    """
    request = _load_request(request_path) if request_path is not None else None
    head = file.read(HEAD_BYTES)
    if not head.removeprefix(b"\xef\xbb\xbf").strip():
        what = "no bytes" if not head else "only whitespace"
        raise click.UsageError(f"the input is empty ({what}): nothing to convert")
    dump = binary.encode_event if framing == "binary" else events.dump
    if vendor is None and binary.looks_like_frames(head):
        sys.exit(_reframe(head, file, dump))
    options: dict[str, Any] = {}
    if vendor is None:
        try:
            found = detect(head)
        except UnknownFormat as exc:
            raise click.UsageError(f"{exc}. Name the format with --from.") from None
        if found.vendor == "standard":
            raise click.UsageError(
                "the input is already an LLM-Stream (it has stream.start): "
                "check it with tokenwire validate"
            )
        vendor = found.vendor
        options.update(found.options)
        click.echo(f"tokenwire convert: reading {vendor} ({found.reason})", err=True)
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
            model=model
            or (request.model if request is not None else None)
            or capture_model(head)  # the capture's own
            or "unknown",
            request_id=request_id or (request.request_id if request is not None else None),
            **options,
        )
    except ImportError:
        raise click.UsageError(f"the {vendor!r} translator is not available") from None
    except TypeError as exc:  # an option this vendor's translator does not take
        raise click.UsageError(f"--from {vendor}: {exc}") from None

    framer: JSONLinesFramer | None = None
    if vendor in _SSE_VENDORS and detect_framing(head) == "jsonl":
        framer = JSONLinesFramer(done=vendor in _DONE_MARKER)

    out = sys.stdout.buffer
    failed = False
    chunk = head
    while True:
        if framer is not None:
            body = framer.feed(chunk) if chunk else framer.close()
            produced = t.feed(body) if chunk else t.feed(body) + t.close()
        else:
            produced = t.feed(chunk) if chunk else t.close()
        for event in produced:
            failed = failed or isinstance(event, events.ErrorEvent)
            out.write(dump(event))
        out.flush()
        if not chunk:
            break
        chunk = file.read(_CHUNK)
    if failed:
        _explain(vendor, head)
    sys.exit(1 if failed else 0)


def _reframe(head: bytes, file: BinaryIO, dump: Any) -> int:
    """A standard stream in the binary binding, written out in the chosen one.

    Returns the exit status: 1 when it carries an ``error`` event or its frames
    break (the break is reported; what came before it is written).
    """
    click.echo("tokenwire convert: reading the standard stream in binary frames", err=True)
    out = sys.stdout.buffer

    def chunks() -> Any:
        chunk = head
        while chunk:
            yield chunk
            chunk = file.read(_CHUNK)

    failed = False
    try:
        for event in binary.iter_events(chunks()):
            failed = failed or isinstance(event, events.ErrorEvent)
            out.write(dump(event))
    except RemoteProtocolError as exc:
        click.echo(f"tokenwire convert: {exc}", err=True)
        failed = True
    out.flush()
    return 1 if failed else 0


def _explain(vendor: str, head: bytes) -> None:
    """After a failed conversion: what the format should look like, and a better guess."""
    click.echo(f"tokenwire convert: the {vendor} stream ends with an error event", err=True)
    try:
        found = detect(head)
    except UnknownFormat:
        click.echo(f"  expected {vendor}: {_EXPECTED[vendor]}", err=True)
        return
    if found.vendor != vendor:
        click.echo(f"  expected {vendor}: {_EXPECTED[vendor]}", err=True)
        hint = "leave --from out" if found.vendor == "standard" else f"try --from {found.vendor}"
        click.echo(f"  the input looks like {found.vendor} ({found.reason}): {hint}", err=True)
