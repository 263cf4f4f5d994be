"""Extensions benchmark: what checking tokenwire extensions 1.0 costs the validator.

Builds three streams with the Writer and times ``lifecycle.validate`` on each,
best of several repeats:

1. text only: N ``content.delta`` (the hot path: no schema is ever touched);
2. reasoning: N reasoning deltas, each followed by a ``tokenwire.block`` with a
   signature (a worst case: real streams have one per thinking block);
3. tool deltas: N ``tokenwire.tool_delta`` fragments of one call, then its ``tool.call``.

Each extension event is checked against its JSON Schema (``tokenwire.schemas``):
valid ones by the direct keyword check, so ``jsonschema`` runs only to explain a
failure. Also prints the per-event cost of that check against a full
``jsonschema`` validation. Rewrites the "## extensions" section of bench/RESULTS.md.

Run: ``.venv/bin/python bench/extensions.py [--events N] [--repeat R] [--no-write]``
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import header, md_table, write_section  # noqa: E402
from tokenwire import events, lifecycle, schemas  # noqa: E402
from tokenwire.testing.processes import loadavg  # noqa: E402
from tokenwire.translate import _extensions as x  # noqa: E402
from tokenwire.writer import Writer  # noqa: E402


def best(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def streams(n: int) -> dict[str, bytes]:
    w = Writer(model="m")
    text: list[events.Event] = []
    for _ in range(n):
        text += w.text(" tok")
    text += w.usage(1, 1) + w.end()
    w = Writer(model="m")
    reasoning: list[events.Event] = []
    for _ in range(n):
        reasoning += w.text(" tok", 0, reasoning=True)
        body = {"index": 0, x.REASONING: True, x.SIGNATURE: "s" * 40, x.VENDOR: "anthropic"}
        reasoning += w.add(x.extension(x.BLOCK, body))
    reasoning += w.usage(1, 1) + w.end()
    w = Writer(model="m")
    deltas: list[events.Event] = w.tool_delta(0, "call_1", "f", '{"q": "')
    for _ in range(n):
        deltas += w.tool_delta(0, "call_1", "f", "ab")
    deltas += w.tool_call(id="call_1", name="f", arguments='{"q": "' + "ab" * n + '"}', index=0)
    deltas += w.usage(1, 1) + w.end("tool_use")
    return {
        "text only": b"".join(map(events.dump, text)),
        "reasoning + tokenwire.block each": b"".join(map(events.dump, reasoning)),
        "tokenwire.tool_delta": b"".join(map(events.dump, deltas)),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    load_before = loadavg()
    rows = []
    base = None
    for name, body in streams(args.events).items():
        report = lifecycle.validate(body)
        assert report.violations == [], report.violations
        seconds = best(lambda body=body: lifecycle.validate(body), args.repeat)
        count = report.events
        base = base or seconds / count
        per = seconds / count
        rows.append(
            [name, f"{count:,}", f"{seconds:.3f}", f"{per * 1e6:.2f}", f"{per / base:.2f}x"]
        )
    obj = {
        "v": "1.0",
        "seq": 3,
        "type": x.BLOCK,
        "index": 0,
        x.REASONING: True,
        x.SIGNATURE: "s" * 40,
        x.VENDOR: "anthropic",
    }
    full = schemas._validator(schemas.EXTENSIONS_SCHEMA, x.BLOCK)
    k = 2000
    fast_us = best(lambda: [schemas.extension_error(x.BLOCK, obj) for _ in range(k)], 3) / k * 1e6
    full_us = best(lambda: [full.is_valid(obj) for _ in range(k)], 3) / k * 1e6
    lines = [
        "## extensions",
        "",
        "`lifecycle.validate` on streams built with the Writer; best of "
        f"{args.repeat}. Extension events are checked against their JSON Schema.",
        "",
        *header("bench/extensions.py", load_before),
        "",
        *md_table(["stream", "events", "validate (s)", "µs/event", "vs text only"], rows),
        "",
        f"One `tokenwire.block` checked: {fast_us:.1f} µs (direct keyword check) against "
        f"{full_us:.1f} µs for a full `jsonschema` validation ({full_us / fast_us:.0f}x).",
    ]
    print("\n".join(lines))
    if not args.no_write:
        write_section("extensions", "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
