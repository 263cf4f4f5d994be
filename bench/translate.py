"""Translator throughput next to the bare SSE decode (issue 5).

For each SSE vendor, the fake upstream's renderer (``tokenwire.testing``, the
same bytes the SDK-fidelity tests check against the real SDKs) writes a
recording-like body of N text chunks. The body is cut into 16 KiB pieces and,
in one run, timed three ways:

- framing: ``sse.Decoder`` alone, the floor;
- bare decode: ``sse.Decoder`` + ``msgspec.json.decode`` of every payload into
  plain Python objects, i.e. what reading the vendor stream costs at all;
- translate: the vendor's ``Translator`` (framing, typed vendor JSON, standard
  events stamped by the Writer).

Target: translation at most 2x the bare decode. The ratio to framing alone is
printed too.

    .venv/bin/python bench/translate.py [--chunks 100000] [--repeat 5]
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

from tokenwire import sse
from tokenwire.testing.upstream import RecordedRequest, Script
from tokenwire.translate import get, registry, translator

#: Every SSE vendor with a fake upstream, from the registry.
VENDORS = [f.name for f in registry.by_transport("http-sse") if f.fake is not None]
PIECE = 16 * 1024
TARGET = 2.0


def body(vendor: str, n: int) -> list[bytes]:
    words = " ".join(f"w{i % 997}" for i in range(n))
    module = get(vendor).fake_module()
    request = RecordedRequest(method="POST", path="/", headers={}, body=b"{}")
    raw = b"".join(module.render(Script(text=words), model="bench", request=request))
    return [raw[i : i + PIECE] for i in range(0, len(raw), PIECE)]


def best(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def frame_only(pieces: list[bytes]) -> None:
    dec = sse.Decoder(max_event_bytes=8 << 20)
    for p in pieces:
        dec.feed(p)
    dec.close()


def frame_and_json(pieces: list[bytes]) -> None:
    dec = sse.Decoder(max_event_bytes=8 << 20)
    decode = msgspec.json.decode
    for p in pieces:
        for m in dec.feed(p):
            if m.data != "[DONE]":
                decode(m.data)
    dec.close()


def translate(vendor: str, pieces: list[bytes]) -> int:
    t = translator(vendor, model="bench")
    out = 0
    for p in pieces:
        out += len(t.feed(p))
    return out + len(t.close())


def run(n: int, repeat: int) -> list[tuple[str, int, float, float, float]]:
    rows = []
    for vendor in VENDORS:
        pieces = body(vendor, n)
        count = translate(vendor, pieces)
        t_frame = best(lambda p=pieces: frame_only(p), repeat)
        t_bare = best(lambda p=pieces: frame_and_json(p), repeat)
        t_tr = best(lambda v=vendor, p=pieces: translate(v, p), repeat)
        rows.append((vendor, count, t_frame, t_bare, t_tr))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chunks", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    rows = run(args.chunks, args.repeat)
    lines = [
        "| vendor | events | framing (s) | bare decode (s) | translate (s) | events/s "
        "| vs bare decode | ≤ 2x? | vs framing |",
        "|---|---:|---:|---:|---:|---:|---:|:-:|---:|",
    ]
    for vendor, count, tf, tb, tt in rows:
        ratio = tt / tb
        lines.append(
            f"| {vendor} | {count:,} | {tf:.3f} | {tb:.3f} | {tt:.3f} | {count / tt:,.0f} | "
            f"{ratio:.2f}x | {'yes' if ratio <= TARGET else 'no'} | {tt / tf:.2f}x |"
        )
    table = "\n".join(lines)
    print(table)
    if args.no_write:
        return
    load = os.getloadavg()[0]
    section = (
        "## translate\n\n"
        f"{args.chunks:,} text chunks per vendor from the fake upstreams' renderers, fed in "
        f"16 KiB pieces; best of {args.repeat}.\n\n"
        f"- date: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC\n"
        f"- python: {platform.python_version()}; machine: {platform.machine()}, "
        f"{os.cpu_count()} CPUs, load average {load:.1f} at the start\n"
        f"- command: `.venv/bin/python bench/translate.py --chunks {args.chunks}`\n\n"
        f"{table}\n"
    )
    write_section(Path(__file__).with_name("RESULTS.md"), "translate", section)


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
