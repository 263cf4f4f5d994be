"""``tokenwire check URL``: the conformance suite, as a table, JSON and JUnit.

URL is the endpoint's base URL, ``host:port`` or its stream URL (the one
grammar of ``tokenwire.client.stream_url``). A gateway key comes from
``--api-key`` or ``TOKENWIRE_API_KEY`` (``Authorization: Bearer``), any other
credential from ``--header``; credentials are sent, never written: reports
and saved exchanges carry ``[redacted]`` instead (``conformance.redact_headers``).
"""

from __future__ import annotations

import ssl
import sys
import textwrap
from pathlib import Path
from xml.etree import ElementTree as ET

import click
import httpx
import msgspec
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from ..client import stream_url
from ..client._common import STREAM_PATH
from ..client._flow import with_api_key
from ..client._frames import SyncFramesTransport
from ..client._transports import FramesFactory
from ..client._url import endpoint
from ..conformance import (
    PROBES,
    ProbeResult,
    Target,
    misdirected,
    reachable,
    redact_url,
    run,
)
from ._headers import parse_header

_STYLE = {"pass": "green", "fail": "bold red", "warn": "yellow", "not-exercised": "dim"}


@click.command()
@click.argument("url")
@click.option("--model", default="demo", show_default=True, help="Model to request.")
@click.option(
    "--api-key",
    envvar="TOKENWIRE_API_KEY",
    show_envvar=True,
    help="The gateway key, sent as 'Authorization: Bearer KEY' (never written).",
)
@click.option(
    "--header",
    "headers",
    multiple=True,
    help="Extra header 'K: V' (repeatable); credentials are never written to reports.",
)
@click.option("--only", multiple=True, help=f"Run only these probes: {', '.join(PROBES)}.")
@click.option("--strict", is_flag=True, help="SHOULD failures fail the run too.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Write a JSON report.")
@click.option("--junit", "junit_path", type=click.Path(dir_okay=False), help="Write JUnit XML.")
@click.option("--save", "save_dir", type=click.Path(file_okay=False), help="Save raw exchanges.")
@click.option("--timeout", default=30.0, show_default=True, help="Seconds per request.")
@click.option(
    "--binding",
    type=click.Choice(["sse", "binary"]),
    default=None,
    help="The answer's binding to probe: SSE, or the binary binding's frames (docs/binary.md). "
    "Default: sse over http, binary over ws and webtransport.",
)
@click.option(
    "--transport",
    type=click.Choice(["http", "ws", "webtransport"]),
    default="http",
    show_default=True,
    help="How the requests travel: HTTP, or the binary binding's WebSocket or WebTransport.",
)
@click.option(
    "--frames-url",
    help="The WebSocket or WebTransport URL (default for ws: URL's /v1/ws; "
    "webtransport needs it: https://HOST:PORT/v1/wt).",
)
@click.option(
    "--cafile",
    type=click.Path(exists=True, dir_okay=False),
    help="A CA certificate (PEM) to trust, for a gateway on a private certificate.",
)
def command(
    url: str,
    model: str,
    api_key: str | None,
    headers: tuple[str, ...],
    only: tuple[str, ...],
    strict: bool,
    json_path: str | None,
    junit_path: str | None,
    save_dir: str | None,
    timeout: float,
    binding: str | None,
    transport: str,
    frames_url: str | None,
    cafile: str | None,
) -> None:
    """Judge the endpoint at URL against the LLM-Stream draft.

    URL is a base URL (http://127.0.0.1:8080) or the stream URL
    (http://127.0.0.1:8080/v1/stream). Exits 1 when a MUST fails (or, with
    --strict, a SHOULD), 2 when nothing answers at URL, it is no LLM-Stream
    endpoint (404, 405) or it does not serve the model, else 0.

    --binding binary probes the binary binding's frames with the same probes
    and verdicts; --transport ws or webtransport sends them over its WebSocket
    or WebTransport (the standard's request type, answered in frames: the
    Content-Type and Accept probes are not exercised there).
    """
    try:
        url = stream_url(url)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="URL") from None
    if binding is None:
        binding = "sse" if transport == "http" else "binary"
    elif binding == "sse" and transport != "http":
        raise click.BadParameter(
            f"{transport} carries the binary binding only", param_hint="--binding"
        )
    sent = with_api_key(dict(parse_header(h) for h in headers), api_key)
    target = Target(
        url=url,
        model=model,
        headers=sent,
        timeout_s=timeout,
        binding=binding,  # type: ignore[arg-type]
        transport=transport,  # type: ignore[arg-type]
    )
    try:
        http = probe_client(target, frames_url=frames_url, cafile=cafile)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--frames-url") from None
    with http:
        _check(target, http, only, strict, json_path, junit_path, save_dir)


def _check(
    target: Target,
    http: httpx.Client,
    only: tuple[str, ...],
    strict: bool,
    json_path: str | None,
    junit_path: str | None,
    save_dir: str | None,
) -> None:
    url = target.url
    unreachable = reachable(target, client=http)
    if unreachable is not None:
        # One line instead of a table of identical failures.
        click.echo(f"tokenwire check: cannot reach {redact_url(url)}: {unreachable}", err=True)
        sys.exit(2)
    wrong = misdirected(target, client=http)
    if wrong is not None:
        # A wrong URL or an unknown model: one line, not a table of identical failures.
        click.echo(f"tokenwire check: {wrong}", err=True)
        sys.exit(2)
    url = redact_url(url)  # as shown in the table and the JUnit suite name
    console = Console(stderr=False)
    results: list[ProbeResult] = []
    try:
        with console.status("probing…") as status:
            for result in run(
                target,
                only=list(only) or None,
                client=http,
                progress=lambda n: status.update(f"probe {n}…"),
            ):
                results.append(result)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    # A table where it fits; below WIDE columns one block per probe, so that
    # nothing is broken mid-word (an 80-column table folded names).
    wide = console.width >= WIDE
    console.print(_table(url, results) if wide else _blocks(url, results, console.width))
    if save_dir:
        _save(Path(save_dir), results)
    if json_path:
        Path(json_path).write_bytes(msgspec.json.format(msgspec.json.encode(results)))
    if junit_path:
        _junit(Path(junit_path), url, results)
    failed = [r for r in results if r.verdict == "fail" or (strict and r.verdict == "warn")]
    counts = {v: sum(r.verdict == v for r in results) for v in _STYLE}
    console.print(" · ".join(f"{n} {v}" for v, n in counts.items() if n))
    sys.exit(1 if failed else 0)


def probe_client(target: Target, *, frames_url: str | None, cafile: str | None) -> httpx.Client:
    """The httpx client the probes send with: over HTTP, or the binding's own transport.

    Raises ``ValueError`` when WebTransport has no ``frames_url``.
    """
    verify: ssl.SSLContext | bool = ssl.create_default_context(cafile=cafile) if cafile else True
    timeout = httpx.Timeout(target.timeout_s)
    if target.transport == "http":
        return httpx.Client(timeout=timeout, verify=verify)
    base = endpoint(target.url).base
    factory = FramesFactory(
        target.transport,
        base,
        frames_url,
        stream_path=STREAM_PATH,
        resume_path="/v1/streams/{request_id}",
        max_frame_bytes=1 << 20,
        http2=False,
        cafile=cafile,
    )
    return httpx.Client(timeout=timeout, transport=SyncFramesTransport(factory.build))


def _table(url: str, results: list[ProbeResult]) -> Table:
    table = Table(title=f"LLM-Stream conformance: {url}")
    for col in ("probe", "verdict", "draft", "level", "seen", "TTFE ms", "events/s"):
        # Only "seen" wraps, at spaces: names and figures stay whole.
        table.add_column(
            col, no_wrap=col != "seen", overflow="fold" if col == "seen" else "ellipsis"
        )
    for r in results:
        table.add_row(
            r.id,
            f"[{_STYLE[r.verdict]}]{r.verdict}[/]",
            f"§{r.section}",
            r.level.upper(),
            r.seen,
            "" if r.ttfe_ms is None else f"{r.ttfe_ms:.1f}",
            "" if r.events_per_s is None else f"{r.events_per_s:.0f}",
        )
    return table


#: The narrowest terminal the table is drawn on.
WIDE = 110


def _blocks(url: str, results: list[ProbeResult], width: int) -> Group:
    """The table's content for a narrow terminal: a line per probe, then what was seen.

    ``seen`` wraps at spaces (and never at hyphens), indented under the probe;
    only a word wider than the whole line would be cut.
    """
    ids = max((len(r.id) for r in results), default=0)
    verdicts = max((len(r.verdict) for r in results), default=0)
    indent = " " * (verdicts + 2)
    parts: list[RenderableType] = [Text(f"LLM-Stream conformance: {url}", "bold")]
    for r in results:
        line = Text(no_wrap=False)
        line.append(f"{r.verdict:<{verdicts}}  ", _STYLE[r.verdict])
        line.append(f"{r.id:<{ids}}  §{r.section} {r.level.upper()}")
        figures = []
        if r.ttfe_ms is not None:
            figures.append(f"TTFE {r.ttfe_ms:.1f} ms")
        if r.events_per_s is not None:
            figures.append(f"{r.events_per_s:.0f} events/s")
        if figures:
            line.append("  " + ", ".join(figures), "dim")
        parts.append(line)
        for row in textwrap.wrap(
            r.seen, width=max(20, width - len(indent)), break_on_hyphens=False
        ):
            parts.append(Text(indent + row))
    return Group(*parts)


def _save(folder: Path, results: list[ProbeResult]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for r in results:
        for n, ex in enumerate(r.exchanges):
            (folder / f"{r.id}.{n}.json").write_bytes(msgspec.json.format(msgspec.json.encode(ex)))
            (folder / f"{r.id}.{n}.response.txt").write_text(ex.response_body)


def _junit(path: Path, url: str, results: list[ProbeResult]) -> None:
    suite = ET.Element(
        "testsuite",
        name=f"llm-stream-conformance {url}",
        tests=str(len(results)),
        failures=str(sum(r.verdict == "fail" for r in results)),
        skipped=str(sum(r.verdict == "not-exercised" for r in results)),
    )
    for r in results:
        case = ET.SubElement(suite, "testcase", classname=f"§{r.section}", name=r.id)
        if r.ttfe_ms is not None:
            case.set("time", f"{r.ttfe_ms / 1000:.3f}")
        if r.verdict == "fail":
            ET.SubElement(case, "failure", message=r.seen, type=r.level.upper())
        elif r.verdict == "warn":
            ET.SubElement(case, "system-out").text = f"SHOULD: {r.seen}"
        elif r.verdict == "not-exercised":
            ET.SubElement(case, "skipped", message=r.seen)
    ET.ElementTree(suite).write(path, encoding="utf-8", xml_declaration=True)
