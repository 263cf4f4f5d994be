"""Decode cost per event: the binary binding (docs/binary.md) against SSE, across event sizes.

For each size of ``content.delta`` text (a 4-character token, a 256-character
sentence, a 16 KiB tool-sized block), one body of N events in each binding,
cut into the same random 1-4096-byte chunks (fixed seed), decoded to typed
events, best of R interleaved runs:

1. SSE: ``tokenwire.iter_events`` (sse.Decoder + events.parse)
2. frames, JSON payload: ``binary.iter_events`` (binary.Decoder + events.parse_envelope)
3. frames, MessagePack payload: ``binary.iter_events(payload="msgpack")``
4. framing alone, no JSON: ``sse.Decoder`` vs ``binary.Decoder`` (the O(n)
   scan for the blank line against the O(1) jump to the next head, §6.1/§6.2)

Prints ns per event and the ratios, and rewrites the "## binary" section of
bench/RESULTS.md.

With ``--transports``: first token and events per second through the gateway
over SSE, frames over HTTP, WebSocket and WebTransport, side by side in one
run (``_transports.py``), into the "## binary-transports" section.

Run: ``.venv/bin/python bench/binary.py [--events N] [--repeat R] [--no-write]``
or ``.venv/bin/python bench/binary.py --transports [--runs N] [--no-write]``
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable, Iterable

import tokenwire
from _common import header, md_table, write_section
from tokenwire import binary, events, sse
from tokenwire.testing.processes import loadavg

SEED = 20261201
SIZES = {"4 B token": 4, "256 B sentence": 256, "16 KiB block": 16 * 1024}


def stream(n: int, size: int) -> list[events.Event]:
    rng = random.Random(SEED + size)
    alphabet = 'abcdefghij klmnopqrstuvwxyz.,"é東🙂'
    out: list[events.Event] = [events.StreamStart(v="1.0", seq=0, model="bench", created=1)]
    for seq in range(1, n + 1):
        text = "".join(rng.choice(alphabet) for _ in range(size))
        out.append(
            events.ContentDelta(
                v="1.0", seq=seq, index=0, role="assistant", delta=events.Delta(text=text)
            )
        )
    out.append(events.StreamEnd(v="1.0", seq=n + 1))
    return out


def chunked(body: bytes) -> list[bytes]:
    rng = random.Random(SEED)
    out, at = [], 0
    while at < len(body):
        step = rng.randint(1, 4096)
        out.append(body[at : at + step])
        at += step
    return out


def best(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return min(times)


def count(it: Iterable[object]) -> int:
    n = 0
    for _ in it:
        n += 1
    return n


def frames_only(chunks: list[bytes]) -> int:
    decoder = binary.Decoder()
    return sum(len(decoder.feed(c)) for c in chunks)


def sse_only(chunks: list[bytes]) -> int:
    decoder = sse.Decoder()
    return sum(len(decoder.feed(c)) for c in chunks) + len(decoder.close())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--transports", action="store_true", help="per transport, via a gateway")
    parser.add_argument("--runs", type=int, default=15, help="streams per transport")
    args = parser.parse_args()
    if args.transports:
        transports(args.runs, write=not args.no_write)
        return
    load_before = loadavg()
    rows = []
    for label, size in SIZES.items():
        n = args.events if size < 1024 else max(args.events // 20, 200)
        evs = stream(n, size)
        sse_body = chunked(b"".join(events.dump(e) for e in evs))
        json_body = chunked(b"".join(binary.encode_event(e) for e in evs))
        mp_body = chunked(b"".join(binary.encode_event(e, payload="msgpack") for e in evs))
        assert count(tokenwire.iter_events(sse_body)) == len(evs)
        assert list(binary.iter_events(json_body)) == list(tokenwire.iter_events(sse_body))
        assert list(binary.iter_events(mp_body, payload="msgpack")) == list(
            binary.iter_events(json_body)
        )
        runs: dict[str, Callable[[], object]] = {
            "sse": lambda b=sse_body: count(tokenwire.iter_events(b)),
            "json": lambda b=json_body: count(binary.iter_events(b)),
            "msgpack": lambda b=mp_body: count(binary.iter_events(b, payload="msgpack")),
            "sse framing": lambda b=sse_body: sse_only(b),
            "frames framing": lambda b=json_body: frames_only(b),
        }
        got = {name: [] for name in runs}  # type: dict[str, list[float]]
        for _ in range(args.repeat):  # interleaved, so that load hits all alike
            for name, fn in runs.items():
                got[name].append(best(fn, 1))
        ns = {name: min(t) / len(evs) * 1e9 for name, t in got.items()}
        sizes = [sum(map(len, b)) / len(evs) for b in (sse_body, json_body, mp_body)]
        rows.append(
            [
                label,
                f"{sizes[0]:,.0f} / {sizes[1]:,.0f} / {sizes[2]:,.0f}",
                f"{ns['sse']:,.0f}",
                f"{ns['json']:,.0f} ({ns['sse'] / ns['json']:.2f}x)",
                f"{ns['msgpack']:,.0f} ({ns['sse'] / ns['msgpack']:.2f}x)",
                f"{ns['sse framing']:,.0f}",
                f"{ns['frames framing']:,.0f} ({ns['sse framing'] / ns['frames framing']:.2f}x)",
            ]
        )
        print(label, {k: round(v) for k, v in ns.items()}, file=sys.stderr)
    columns = [
        "delta text",
        "bytes/event SSE / frames / msgpack",
        "SSE ns/event",
        "frames+JSON ns/event (speed-up)",
        "frames+msgpack ns/event (speed-up)",
        "SSE framing only",
        "frames framing only (speed-up)",
    ]
    lines = [
        "## binary",
        "",
        f"Decode CPU per event (process_time, best of {args.repeat} interleaved runs), "
        f"{args.events:,} events per body (a 20th of that for 16 KiB), random 1-4096-byte "
        "chunks, typed events out. Speed-up is SSE's time over the binding's.",
        "",
        *header("bench/binary.py", load_before),
        "",
        *md_table(columns, rows),
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if not args.no_write:
        write_section("binary", text, keep="what it says")


def transports(runs: int, *, write: bool) -> None:
    from _transports import WORDS, measure

    load_before = loadavg()
    rows = measure(runs)
    columns = ["transport", "first token ms (median)", "events/s (median)", "events/stream"]
    lines = [
        "## binary-transports",
        "",
        "Through `tokenwire serve` on TLS (one worker) in front of a fake OpenAI upstream "
        f"streaming {WORDS:,} words at once, read with `tokenwire.Client` on each transport, "
        f"interleaved stream by stream, {runs} streams each after one warm-up; the "
        "connection of each transport is kept between its streams. First token: request "
        "to the first `content.delta`; events/s: a stream's events over request to "
        "`stream.end`.",
        "",
        *header("bench/binary.py", load_before),
        "",
        *md_table(columns, rows),
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if write:
        write_section("binary-transports", text, keep="what it says")


if __name__ == "__main__":
    main()
