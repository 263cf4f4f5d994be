"""Translator cost per chunk, this checkout against a base commit, in one process, interleaved.

The base's ``tokenwire`` package is exported (``git archive``) and imported under
another name, so both run on the same bodies (``bench/translate.py``'s ``body``),
alternately, best of ``--rounds``; prints a table of seconds and ratios. Used for
issue 24 (budget: within 10% of the base per chunk).

    .venv/bin/python -m bench.translate_ab --base <commit> [--chunks 100000] [--rounds 9]
"""

from __future__ import annotations

import argparse
import importlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

from bench.translate import VENDORS, body

ROOT = Path(__file__).resolve().parents[1]


def export_base(commit: str, into: Path) -> ModuleType:
    """``tokenwire`` at ``commit`` as the package ``tokenwire_base`` (absolute imports renamed)."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", commit, "src/tokenwire"],
        check=True,
        capture_output=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    (into / "src" / "tokenwire").rename(into / "tokenwire_base")
    for path in (into / "tokenwire_base").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        renamed = text.replace("from tokenwire.", "from tokenwire_base.").replace(
            "import tokenwire\n", "import tokenwire_base as tokenwire\n"
        )
        if renamed != text:
            path.write_text(renamed, encoding="utf-8")
    sys.path.insert(0, str(into))
    return importlib.import_module("tokenwire_base.translate")


def run(module: ModuleType, vendor: str, pieces: list[bytes]) -> int:
    t = module.translator(vendor, model="bench")
    out = 0
    for piece in pieces:
        out += len(t.feed(piece))
    return out + len(t.close())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True, help="the commit to compare against")
    ap.add_argument("--chunks", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--vendors", default=",".join(VENDORS))
    args = ap.parse_args()
    import tokenwire.translate as new

    with tempfile.TemporaryDirectory() as tmp:
        old = export_base(args.base, Path(tmp))
        assert old.__file__ is not None and old.__file__.startswith(tmp)
        print(
            f"load average {os.getloadavg()[0]:.1f}; {args.chunks:,} chunks; best of {args.rounds}"
        )
        print(
            "| vendor | before (s) | after (s) | per chunk before | per chunk after "
            "| after vs before |"
        )
        print("|---|---:|---:|---:|---:|---:|")
        for vendor in args.vendors.split(","):
            pieces = body(vendor, args.chunks)
            assert run(old, vendor, pieces) == run(new, vendor, pieces)  # the same events
            before, after = [], []
            for _ in range(args.rounds):
                for module, times in ((old, before), (new, after)):
                    start = time.perf_counter()
                    run(module, vendor, pieces)
                    times.append(time.perf_counter() - start)
            b, a = min(before), min(after)
            n = args.chunks
            print(
                f"| {vendor} | {b:.3f} | {a:.3f} | {b / n * 1e6:.2f} µs | {a / n * 1e6:.2f} µs "
                f"| {a / b:.2f}x |",
                flush=True,
            )
        print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
