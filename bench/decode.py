"""Decode benchmark: tokenwire's SSE decoder + typed events against its peers.

Builds one LLM-Stream body (stream.start, N content.delta events with short
text tokens, content.stop, usage, stream.end), cuts it into random 1-4096-byte
chunks with a fixed seed, and times, best of several repeats:

1. ``tokenwire.iter_events``: sse.Decoder + events.parse (msgspec, typed)
2. httpx-sse: ``EventSource.iter_sse`` over an httpx.Response streaming the
   chunks (its own iter_text + SSELineDecoder + SSEDecoder path), + json.loads
3. httpx-sse's decoders alone (incremental UTF-8 decoder + SSELineDecoder +
   SSEDecoder, the same loop as ``_iter_sse_lines``/``iter_sse`` without the
   httpx.Response machinery), + json.loads
4. openai-python: ``openai._streaming.SSEDecoder().iter_bytes``, + json.loads
5. the lower bound: ``b"".join(chunks).split(b"\\n\\n")`` and orjson.loads of
   each data payload, cut out by slicing

and rewrites the "## decode" section of bench/RESULTS.md.

Run: ``.venv/bin/python bench/decode.py [--events N] [--repeat R] [--no-write] [--crlf]``
(``--crlf``: the same body with CRLF line ends, Gemini's framing; printed only)
"""

from __future__ import annotations

import argparse
import codecs
import json
import random
import sys
import time
from collections.abc import Callable, Iterator

import httpx
import httpx_sse
import orjson
from httpx_sse._decoders import SSEDecoder as HttpxSSEDecoder
from httpx_sse._decoders import SSELineDecoder as HttpxSSELineDecoder
from openai._streaming import SSEDecoder as OpenAISSEDecoder

import tokenwire
from _common import RESULTS, ROOT, header, md_table, pkg_version, write_section
from tokenwire import events, sse
from tokenwire._bench import loadavg

SEED = 20240601

# Short text tokens as an LLM emits them: mostly ASCII words with a leading
# space, some punctuation, a newline, a quoted word (JSON escapes) and a few
# non-ASCII ones (2-byte Latin, 3-byte CJK, 4-byte emoji).
TOKENS = [
    " the", " a", " of", " to", " and", " model", " stream", " token", "ing", "s",
    ",", ".", " is", " in", " that", " it", " for", " with", " data", " event",
    "\n", "\n\n", " \"SSE\"", " 42", " café", " 東京", " 🙂", " über", "-", ":",
]  # fmt: skip

HTTPX_FULL = "httpx-sse EventSource.iter_sse + json.loads"
HTTPX_DECODERS = "httpx-sse decoders only + json.loads"
OPENAI = "openai SSEDecoder.iter_bytes + json.loads"
LOWER = "lower bound: split(b'\\n\\n') + orjson.loads"
TARGET_VS_HTTPX_SSE = 3.0  # at least this many times httpx-sse's events/s
TARGET_VS_LOWER_BOUND = 1.5  # at most this many times the lower bound's time


def build_body(n: int, rnd: random.Random) -> bytes:
    """The SSE bytes of one complete stream with ``n`` content.delta events."""
    frames = [
        events.dump(
            events.StreamStart(v="1.0", seq=0, model="demo", created=1_700_000_000, request_id="r1")
        )
    ]
    for i in range(n):
        delta = events.Delta(text=rnd.choice(TOKENS))
        frames.append(
            events.dump(
                events.ContentDelta(v="1.0", seq=i + 1, index=0, role="assistant", delta=delta)
            )
        )
    frames.append(
        events.dump(events.ContentStop(v="1.0", seq=n + 1, index=0, stop_reason="end_turn"))
    )
    frames.append(events.dump(events.Usage(v="1.0", seq=n + 2, input_tokens=12, output_tokens=n)))
    frames.append(events.dump(events.StreamEnd(v="1.0", seq=n + 3, request_id="r1")))
    return b"".join(frames)


def cut(body: bytes, rnd: random.Random) -> list[bytes]:
    """``body`` in random 1-4096-byte chunks."""
    chunks = []
    i = 0
    while i < len(body):
        k = rnd.randint(1, 4096)
        chunks.append(body[i : i + k])
        i += k
    return chunks


# --- the implementations; each returns the number of events it decoded -----


def run_tokenwire(chunks: list[bytes]) -> int:
    n = 0
    for _ in tokenwire.iter_events(chunks):
        n += 1
    return n


def run_tokenwire_local(chunks: list[bytes]) -> int:
    # The loop tokenwire.iter_events runs, for a tree where it does not exist yet.
    dec = sse.Decoder()
    parse = events.parse
    n = 0
    for c in chunks:
        for m in dec.feed(c):
            parse(m.event, m.data)
            n += 1
    for m in dec.close():
        parse(m.event, m.data)
        n += 1
    return n


def run_tokenwire_sse_only(chunks: list[bytes]) -> int:
    dec = sse.Decoder()
    n = 0
    for c in chunks:
        n += len(dec.feed(c))
    return n + len(dec.close())


def run_httpx_sse(chunks: list[bytes]) -> int:
    response = httpx.Response(
        200, headers={"content-type": "text/event-stream"}, content=iter(chunks)
    )
    loads = json.loads
    n = 0
    for ev in httpx_sse.EventSource(response).iter_sse():
        loads(ev.data)
        n += 1
    return n


def run_httpx_sse_decoders(chunks: list[bytes]) -> int:
    # httpx_sse._api._iter_sse_lines + EventSource.iter_sse, fed by the same
    # incremental UTF-8 decoder httpx's iter_text uses (errors="replace").
    text_decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    lines = HttpxSSELineDecoder()
    decoder = HttpxSSEDecoder()
    loads = json.loads
    n = 0

    def iter_lines() -> Iterator[str]:
        for chunk in chunks:
            text = text_decoder.decode(chunk)
            if text:
                yield from lines.decode(text)
        yield from lines.flush()

    for line in iter_lines():
        ev = decoder.decode(line.rstrip("\n"))
        if ev is not None:
            loads(ev.data)
            n += 1
    return n


def run_openai(chunks: list[bytes]) -> int:
    loads = json.loads
    n = 0
    for ev in OpenAISSEDecoder().iter_bytes(iter(chunks)):
        loads(ev.data)
        n += 1
    return n


def run_lower_bound(chunks: list[bytes]) -> int:
    loads = orjson.loads
    n = 0
    body = b"".join(chunks)
    if b"\r\n" in body:  # --crlf: the same bytes with CRLF line ends
        body = body.replace(b"\r\n", b"\n")
    for block in body.split(b"\n\n"):
        if block:
            loads(block[block.rfind(b"\ndata: ") + 7 :])
            n += 1
    return n


def time_all(
    rows: list[tuple[str, Callable[[list[bytes]], int]]], chunks: list[bytes], repeat: int
) -> tuple[dict[str, float], dict[str, float], dict[str, int]]:
    """Best wall (perf_counter) and CPU (process_time) seconds of each implementation.

    The implementations take turns, round after round, so that a burst of load
    from elsewhere on the machine does not fall on one of them only.
    """
    wall = {name: float("inf") for name, _ in rows}
    cpu = dict(wall)
    counts: dict[str, int] = {}
    for _ in range(repeat):
        for name, fn in rows:
            c0 = time.process_time()
            t0 = time.perf_counter()
            counts[name] = fn(chunks)
            wall[name] = min(wall[name], time.perf_counter() - t0)
            cpu[name] = min(cpu[name], time.process_time() - c0)
    return wall, cpu, counts


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=100_000, help="content.delta events (100000)")
    ap.add_argument("--repeat", type=int, default=7, help="repeats per implementation, best kept")
    ap.add_argument("--no-write", action="store_true", help="do not rewrite bench/RESULTS.md")
    ap.add_argument(
        "--crlf",
        action="store_true",
        help="CRLF line ends (Gemini's framing); implies --no-write",
    )
    args = ap.parse_args()
    args.no_write = args.no_write or args.crlf

    rnd = random.Random(SEED)
    body = build_body(args.events, rnd)
    if args.crlf:
        body = body.replace(b"\n", b"\r\n")
    chunks = cut(body, rnd)
    expected = args.events + 4

    if hasattr(tokenwire, "iter_events"):
        tw_name, tw_fn = "tokenwire.iter_events (sse.Decoder + events.parse)", run_tokenwire
    else:
        tw_name = "tokenwire local loop (sse.Decoder + events.parse; no iter_events yet)"
        tw_fn = run_tokenwire_local
    rows: list[tuple[str, Callable[[list[bytes]], int]]] = [
        (tw_name, tw_fn),
        (HTTPX_FULL, run_httpx_sse),
        (HTTPX_DECODERS, run_httpx_sse_decoders),
        (OPENAI, run_openai),
        (LOWER, run_lower_bound),
        ("(info) tokenwire sse.Decoder alone, no JSON", run_tokenwire_sse_only),
    ]
    load_before = loadavg()
    times, cpu, counts = time_all(rows, chunks, args.repeat)
    for name, count in counts.items():
        if count != expected:
            print(f"FAIL: {name} decoded {count} events, expected {expected}", file=sys.stderr)
            return 1

    def ratios_of(t: dict[str, float]) -> tuple[float, float, float, float, float]:
        tw = t[tw_name]
        full = t[HTTPX_FULL] / tw
        dec = t[HTTPX_DECODERS] / tw
        return min(full, dec), full, dec, tw / t[LOWER], t[OPENAI] / tw

    table = md_table(
        ["implementation", "best wall time (s)", "events/s", "time vs tokenwire", "best CPU (s)"],
        [
            [
                name,
                f"{times[name]:.3f}",
                f"{expected / times[name]:,.0f}",
                f"{times[name] / times[tw_name]:.2f}x",
                f"{cpu[name]:.3f}",
            ]
            for name, _ in rows
        ],
    )
    speedup_httpx, vs_full, vs_dec, vs_lower, vs_openai = ratios_of(times)
    cpu_httpx, _, _, cpu_lower, cpu_openai = ratios_of(cpu)
    met_httpx = speedup_httpx >= TARGET_VS_HTTPX_SSE
    met_lower = vs_lower <= TARGET_VS_LOWER_BOUND
    ratios = [
        f"- tokenwire vs httpx-sse: **{speedup_httpx:.2f}x** the events/s of the faster "
        f"httpx-sse variant ({vs_full:.2f}x vs EventSource.iter_sse, {vs_dec:.2f}x vs its "
        f"decoders alone); target >= {TARGET_VS_HTTPX_SSE:g}x: "
        f"**{'met' if met_httpx else 'NOT met'}**",
        f"- tokenwire time / lower-bound time: **{vs_lower:.2f}x**; target <= "
        f"{TARGET_VS_LOWER_BOUND:g}x: **{'met' if met_lower else 'NOT met'}**",
        f"- tokenwire vs openai-python: **{vs_openai:.2f}x** the events/s",
        f"- the same ratios on CPU time (process_time, less sensitive to other load on the "
        f"machine): {cpu_httpx:.2f}x httpx-sse, {cpu_lower:.2f}x the lower bound, "
        f"{cpu_openai:.2f}x openai",
    ]
    print(f"{expected:,} events, {len(body):,} bytes in {len(chunks):,} chunks of 1-4096 bytes")
    print("\n".join(table))
    print("\n".join(ratios))

    if not args.no_write:
        versions = ", ".join(
            f"{name} {pkg_version(name)}" for name in ("msgspec", "httpx-sse", "openai", "orjson")
        )
        section = [
            "## decode",
            "",
            f"Decoding {expected:,} LLM-Stream events ({args.events:,} `content.delta` with "
            f"short text tokens, between stream.start and content.stop/usage/stream.end): "
            f"{len(body):,} bytes fed in {len(chunks):,} random 1-4096-byte chunks (seed "
            f"{SEED}); best of {args.repeat} interleaved runs, `time.perf_counter` (CPU time "
            f"from `time.process_time` alongside), GC on.",
            "",
            *header("bench/decode.py", load_before),
            f"- peers: {versions}",
            "",
            *table,
            "",
            *ratios,
        ]
        write_section("decode", "\n".join(section))
        print(f"wrote the '## decode' section of {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
