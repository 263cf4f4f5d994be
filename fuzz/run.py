"""Run the atheris harnesses for a bounded time each and record what they did.

For each harness (``fuzz_sse.py``, ``fuzz_request.py``, ``fuzz_detect.py``): seed a corpus under
``bench/_work/fuzz/<name>/corpus`` (ignored by git) from the repository's
vectors, give libFuzzer a dictionary of the format's tokens, run for
``--seconds`` with ``-print_final_stats=1``, and collect executions per second,
coverage and any finding (crash inputs land in ``bench/_work/fuzz/<name>/``).
Then rewrite the "## fuzz" section of bench/RESULTS.md (``--no-write`` to skip).

Run: ``.venv/bin/python fuzz/run.py [--seconds 60] [--no-write]`` (``make fuzz``).
Exits 1 when a harness found something.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "bench" / "_work" / "fuzz"
sys.path.insert(0, str(ROOT / "bench"))

from _common import header, loadavg, md_table, pkg_version, write_section  # noqa: E402

SSE_DICT = [
    "data:", "data: ", "event:", "event: ", "id:", "id: ", "retry:", ":", "\n", "\r", "\r\n",
    "\n\n", "\ufeff", "content.delta", "stream.start", "stream.end", "usage", "error",
    '{"v":"1.0","seq":0,"type":"content.delta","index":0,"delta":{"text":"x"}}',
]  # fmt: skip
REQUEST_DICT = [
    '"version"', '"1.0"', '"stream"', "true", "false", "null", '"model"', '"messages"',
    '"role"', '"user"', '"assistant"', '"system"', '"tool"', '"content"', '"type"', '"text"',
    '"image"', '"document"', '"audio"', '"media_type"', '"data"', '"tools"', '"name"',
    '"parameters"', '"max_tokens"', '"temperature"', '"top_p"', '"stop_sequences"',
    '"metadata"', '"request_id"', '"extensions"', '"tool_calls"', '"tool_call_id"',
    '"arguments"', '"id"', "{", "}", "[", "]", ":", ",", '"\\u0000"', "1e999", "-0",
    # tool schemas (toolschema.py): references, patterns, bounds, drafts
    '"$ref"', '"#/$defs/a"', '"http://127.0.0.1/x"', '"$defs"', '"pattern"', '"^(a+)+$"',
    '"(a)\\\\1"', '"patternProperties"', '"additionalProperties"', '"minItems"',
    '"minLength"', '"uniqueItems"', '"$schema"', '"properties"', '"required"', '"anyOf"',
    '"vendor:name"', '"image/png"', '"iVBORw0KGgo="',
]  # fmt: skip


def _dict_file(path: Path, tokens: list[str]) -> Path:
    """A libFuzzer dictionary: one quoted token a line, non-printable bytes as ``\\xNN``."""

    def quote(token: str) -> str:
        out = []
        for byte in token.encode("utf-8"):
            ch = chr(byte)
            printable = 0x20 <= byte < 0x7F and ch not in '"\\'
            out.append(ch if printable else f"\\x{byte:02X}")
        return '"' + "".join(out) + '"'

    path.write_text("\n".join(quote(token) for token in tokens) + "\n")
    return path


def _seed_sse(corpus: Path) -> None:
    n = 0
    for vector in sorted((ROOT / "tests" / "vectors" / "sse").glob("*.json")):
        cases = json.loads(vector.read_text(encoding="utf-8"))
        for case in cases.get("cases", []) if isinstance(cases, dict) else cases:
            chunks = case.get("chunks") if isinstance(case, dict) else None
            if isinstance(chunks, list) and all(isinstance(c, str) for c in chunks):
                raw = "".join(chunks).encode("utf-8", "surrogateescape")
                (corpus / f"sse-{n}").write_bytes(b"\x00\x00" + raw)
                n += 1
    from tokenwire import events as ev
    from tokenwire.writer import Writer

    w = Writer(model="m", request_id="r")
    body = b"".join(map(ev.dump, w.start() + w.text("Hé 🙂") + w.usage(1, 2) + w.end()))
    (corpus / "stream").write_bytes(b"\x03\x00" + body)


def _seed_request(corpus: Path) -> None:
    n = 0
    for name in ("valid.json", "invalid.json"):
        path = ROOT / "tests" / "vectors" / "request" / name
        if not path.exists():
            continue
        for case in json.loads(path.read_text(encoding="utf-8")):
            body = case.get("raw") if "raw" in case else json.dumps(case.get("body"))
            if isinstance(body, str):
                (corpus / f"req-{n}").write_bytes(body.encode())
                n += 1


DETECT_DICT = [
    "data: ", "event: ", "\n\n", "\x1e", "\x00\x00\x00\x00\x05", "[DONE]", "{", "}", "[", "]",
    '"type"', '"message_start"', '"response.created"', '"message-start"', '"candidates"',
    '"choices"', '"model"', '"modelVersion"', '"error"', '"status"', '"sequence_number"',
    '"target"', '"update"', '"seq"', '"v"', '"stream.start"', "\ufeff", '"\\"',
]  # fmt: skip


def _seed_detect(corpus: Path) -> None:
    for vector in sorted((ROOT / "tests" / "vectors" / "convert").glob("*.json")):
        case = json.loads(vector.read_text(encoding="utf-8"))
        body = bytes.fromhex(case["hex"]) if "hex" in case else case["text"].encode()
        (corpus / f"detect-{vector.stem}").write_bytes(body)


HARNESSES = {
    "sse": ("fuzz_sse.py", SSE_DICT, _seed_sse, "sse.Decoder (+ events.parse), any cuts"),
    "request": ("fuzz_request.py", REQUEST_DICT, _seed_request, "request.parse (+ round trip)"),
    "detect": ("fuzz_detect.py", DETECT_DICT, _seed_detect, "convert's format detection"),
}

_STAT = re.compile(r"^stat::(\w+):\s+(\d+)", re.M)
_COV = re.compile(r"cov: (\d+) ft: (\d+) corp: (\d+)")


def run(name: str, seconds: int) -> dict[str, object]:
    script, tokens, seed, what = HARNESSES[name]
    work = WORK / name
    corpus = work / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    seed(corpus)
    dictionary = _dict_file(work / "tokens.dict", tokens)
    argv = [
        sys.executable,
        str(ROOT / "fuzz" / script),
        f"-max_total_time={seconds}",
        "-print_final_stats=1",
        f"-dict={dictionary}",
        f"-artifact_prefix={work}/",
        "-timeout=10",
        "-rss_limit_mb=2048",
        str(corpus),
    ]
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, check=False)
    log = proc.stdout + proc.stderr
    (work / "last.log").write_text(log)
    stats = {k: int(v) for k, v in _STAT.findall(log)}
    cov = _COV.findall(log)
    crashes = sorted(p.name for p in work.glob("crash-*")) + sorted(
        p.name for p in work.glob("timeout-*")
    )
    return {
        "name": name,
        "what": what,
        "exit": proc.returncode,
        "execs": stats.get("number_of_executed_units", 0),
        "execs_per_s": stats.get("average_exec_per_sec", 0),
        "coverage": int(cov[-1][0]) if cov else 0,
        "features": int(cov[-1][1]) if cov else 0,
        "corpus": int(cov[-1][2]) if cov else 0,
        "peak_rss_mb": stats.get("peak_rss_mb", 0),
        "findings": crashes,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=int, default=60, help="run time per harness")
    ap.add_argument("--only", choices=sorted(HARNESSES), help="run one harness")
    ap.add_argument("--no-write", action="store_true", help="do not rewrite bench/RESULTS.md")
    args = ap.parse_args()
    load_before = loadavg()
    results = []
    for name in [args.only] if args.only else list(HARNESSES):
        print(f"fuzzing {name} for {args.seconds} s...", flush=True)
        result = run(name, args.seconds)
        print(json.dumps(result), flush=True)
        results.append(result)
    rows = [
        [
            f"`fuzz/{HARNESSES[str(r['name'])][0]}`: {r['what']}",
            f"{r['execs']:,}",
            f"{r['execs_per_s']:,}",
            f"{r['coverage']} / {r['features']}",
            f"{r['corpus']}",
            ", ".join(map(str, r["findings"])) or "none",  # type: ignore[call-overload]
        ]
        for r in results
    ]
    table = md_table(
        ["harness", "executions", "execs/s", "coverage / features", "corpus", "findings"],
        rows,
        "lrrrrl",
    )
    print("\n".join(table))
    if not args.no_write:
        text = [
            "## fuzz",
            "",
            f"atheris {pkg_version('atheris')} (libFuzzer) harnesses, {args.seconds} s each on "
            "one core, seeded from the repository's vectors with a dictionary of the format's "
            "tokens; the invariant is h11's: output, or the library's own protocol error, "
            "never anything else (the decoder's result must also not depend on how the input "
            "is cut; a parsed request must survive `parse(dumps(req))`). Coverage counts "
            "instrumented Python edges only (msgspec's C decoder is not instrumented). The "
            "hypothesis fuzz tests in `tests/fuzz/` (decoder, event parsing, validator, request "
            "parser, vendor ingress, all eight translators, Connect/SignalR framers) run in "
            "`make test`; these long runs do not.",
            "",
            *header("fuzz/run.py", load_before),
            "",
            *table,
            "",
        ]
        write_section("fuzz", "\n".join(text))
        print("wrote the '## fuzz' section of bench/RESULTS.md")
    return 1 if any(r["findings"] or r["exit"] not in (0,) for r in results) else 0


if __name__ == "__main__":
    raise SystemExit(main())
