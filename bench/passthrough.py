"""CPU per chunk: same-vendor passthrough next to translation.

A vendor route in front of an upstream of the same vendor does, per upstream
chunk, either

- translate (before issue 23, and still across vendors): the vendor's
  translator parses the chunk into standard events, the ``Writer`` stamps them
  (as ``StreamEndpoint`` does) and the route's reverse encoder writes each
  event back in the vendor's format; or
- passthrough (``gateway/providers/passthrough.py``): the chunk is kept, the
  same translator parses it and the ``Writer`` stamps the events (they drive
  usage, limits, metrics, traces), and the first event sends the chunk's
  complete SSE events out as they came; no encoder runs.

Both run here in one process, one after the other, on the same bodies (the
fake upstreams' renderers, the bytes the SDK tests check), in the pieces the
upstream sends them: one vendor event per chunk (the fakes and the vendors
flush each event) and, as a second shape, 16 KiB reads. The passthrough's
output is checked to be the input, byte for byte. Sans-I/O: no sockets, so
the figure is the gateway's own CPU per chunk, without the loop and kernel
costs both paths share.

    .venv/bin/python bench/passthrough.py [--chunks 20000] [--repeat 5] [--no-write]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import time
from collections.abc import Callable
from pathlib import Path

import msgspec

from tokenwire import events as ev
from tokenwire.gateway.providers.passthrough import Encoder, Offer
from tokenwire.testing.upstream import RecordedRequest, Script
from tokenwire.translate import get
from tokenwire.writer import Writer

VENDORS = ("anthropic", "openai-responses", "openai")
PIECE = 16 * 1024
#: A request body per vendor (what the ingress parses for its reverse encoder).
BODIES = {
    "anthropic": {
        "model": "bench",
        "max_tokens": 64,
        "stream": True,
        "messages": [{"role": "user", "content": "hi"}],
    },
    "openai-responses": {"model": "bench", "stream": True, "input": "hi"},
    "openai": {"model": "bench", "stream": True, "messages": [{"role": "user", "content": "hi"}]},
}


def events_of(vendor: str, n: int) -> list[bytes]:
    words = " ".join(f"w{i % 997}" for i in range(n))
    module = get(vendor).fake_module()
    request = RecordedRequest(method="POST", path="/", headers={}, body=b"{}")
    return list(module.render(Script(text=words), model="bench", request=request))


def translate(vendor: str, pieces: list[bytes]) -> bytes:
    fmt = get(vendor)
    assert fmt.ingress is not None
    _request, encode = fmt.ingress.parse(BODIES[vendor])
    translator = fmt.new_translator(model="bench")
    writer = Writer(model="bench", estimate_usage=True)
    out = [encode(e) for e in writer.start()]
    add, feed = writer.add, translator.feed
    for piece in pieces:
        for event in feed(piece):
            if event.__class__ is ev.StreamStart:
                continue  # the server sent its own (StreamEndpoint._produce)
            batch = add(event)
            out.append(encode(batch[0]) if len(batch) == 1 else b"".join(map(encode, batch)))
    for event in translator.close() if not writer.ended else ():
        out += [encode(e) for e in add(event)]
    if not writer.ended:
        out += [encode(e) for e in writer.end()]
    return b"".join(out)


def passthrough(vendor: str, pieces: list[bytes]) -> bytes:
    fmt = get(vendor)
    assert fmt.ingress is not None
    raw = msgspec.json.encode(BODIES[vendor])
    _request, vendor_encode = fmt.ingress.parse(BODIES[vendor])
    offer = Offer(vendor, raw, BODIES[vendor], {})
    encode = Encoder(offer, vendor_encode)
    translator = fmt.new_translator(model="bench")
    writer = Writer(model="bench", estimate_usage=True)
    out = [encode(e) for e in writer.start()]
    offer.attempt()  # what the provider does when it takes the offer
    add, feed, push = writer.add, translator.feed, offer.push
    offer.reading()  # as the provider's read loop
    for piece in pieces:
        push(piece)
        for event in feed(piece):
            if event.__class__ is ev.StreamStart:
                continue
            batch = add(event)
            out.append(encode(batch[0]) if len(batch) == 1 else b"".join(map(encode, batch)))
    offer.stopped(ended=translator.done)
    for event in translator.close() if not writer.ended else ():
        out += [encode(e) for e in add(event)]
    if not writer.ended:
        out += [encode(e) for e in writer.end()]
    return b"".join(out)


def best_of_both(
    translate_fn: Callable[[], object], passthrough_fn: Callable[[], object], repeat: int
) -> tuple[float, float]:
    """The least process CPU time of each, the two run in turn (a loaded machine
    slows both alike rather than whichever ran second)."""
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeat):
        for fn, out in ((translate_fn, times[0]), (passthrough_fn, times[1])):
            t = time.process_time()
            fn()
            out.append(time.process_time() - t)
    return min(times[0]), min(times[1])


def run(n: int, repeat: int) -> list[tuple[str, str, int, float, float]]:
    rows = []
    for vendor in VENDORS:
        frames = events_of(vendor, n)
        whole = b"".join(frames)
        shapes = {
            "an event a chunk": frames,
            "16 KiB reads": [whole[i : i + PIECE] for i in range(0, len(whole), PIECE)],
        }
        for shape, pieces in shapes.items():
            assert passthrough(vendor, pieces) == whole, vendor  # the bytes, unchanged
            t_tr, t_pt = best_of_both(
                lambda v=vendor, p=pieces: translate(v, p),
                lambda v=vendor, p=pieces: passthrough(v, p),
                repeat,
            )
            rows.append((vendor, shape, len(pieces), t_tr, t_pt))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chunks", type=int, default=20_000, help="text deltas per body")
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    rows = run(args.chunks, args.repeat)
    lines = [
        "| vendor | chunks | pieces | translate (µs/chunk) | passthrough (µs/chunk) "
        "| passthrough / translate |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for vendor, shape, count, tt, tp in rows:
        lines.append(
            f"| {vendor} | {shape} | {count:,} | {tt / count * 1e6:.2f} | "
            f"{tp / count * 1e6:.2f} | {tp / tt:.2f}x |"
        )
    table = "\n".join(lines)
    print(table)
    if args.no_write:
        return
    section = (
        "## passthrough\n\n"
        "CPU per upstream chunk of a vendor route in front of the same vendor (issue 23 "
        "item 4): translate (translator + Writer + the route's encoder, what it did "
        "before) next to passthrough (the same translator + Writer, the chunk's bytes "
        f"out as they came), in one run; {args.chunks:,} text deltas per body from the "
        "fake upstreams' renderers; process CPU time, the two run in turn, best of "
        f"{args.repeat} each. The passthrough output was checked equal to the upstream's "
        "bytes.\n\n"
        f"- date: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC\n"
        f"- python: {platform.python_version()}; machine: {platform.machine()}, "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start\n"
        f"- command: `.venv/bin/python bench/passthrough.py --chunks {args.chunks}`\n\n"
        f"{table}\n"
    )
    write_section(Path(__file__).with_name("RESULTS.md"), "passthrough", section)


def write_section(path: Path, name: str, section: str) -> None:
    """Replace the ``## name`` section of RESULTS.md, keeping the others."""
    text = path.read_text() if path.exists() else "# Benchmark results\n"
    head = f"## {name}\n"
    if head in text:
        start = text.index(head)
        nxt = text.find("\n## ", start + len(head))
        text = text[:start] + section + (text[nxt + 1 :] if nxt != -1 else "")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text)


if __name__ == "__main__":
    main()
