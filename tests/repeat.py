"""Run test folders again and again and say which tests ever failed: ``make flaky``.

A test that fails one run in four turns a quarter of good submissions away, and
one run of the suite rarely shows it. This runs each folder ``--times`` times
in a fresh pytest process (the way CI runs it) and prints, per folder, how many
runs passed and every test id that failed with its count.

    python tests/repeat.py --times 10 tests/hostile tests/server tests/production

Exit status 1 when any run failed. Not part of ``make test``: ten runs of the
process-level folders take the better part of an hour on two cores.
"""

from __future__ import annotations

import argparse
import collections
import re
import subprocess
import sys
import time
from pathlib import Path

FAILED = re.compile(r"^(?:FAILED|ERROR) (\S+)", re.MULTILINE)


def run_once(folder: str, extra: list[str]) -> tuple[int, list[str], float, str]:
    """One pytest process over ``folder``: exit code, failed test ids, seconds, output."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rfE", "-p", "no:cacheprovider", folder, *extra],
        capture_output=True,
        text=True,
        check=False,
    )
    output = done.stdout + done.stderr
    return done.returncode, FAILED.findall(done.stdout), time.monotonic() - started, output


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+")
    parser.add_argument("--times", type=int, default=10)
    parser.add_argument("--pytest-args", default="", help="more pytest arguments, one string")
    parser.add_argument(
        "--logs", default=".flaky", help="where a failed run's whole output is kept"
    )
    args = parser.parse_args(argv)
    extra = args.pytest_args.split()
    any_failed = False
    for folder in args.folders:
        failures: collections.Counter[str] = collections.Counter()
        passed = 0
        for n in range(1, args.times + 1):
            code, failed, seconds, output = run_once(folder, extra)
            # Exit 1 with no FAILED line (a crash, a collection error) still counts.
            ok = code == 0
            passed += ok
            failures.update(failed or ([] if ok else [f"<exit {code}>"]))
            verdict = "ok"
            if not ok:
                # A flake seen once may not come back: keep what it said.
                log = Path(args.logs) / f"{folder.strip('/').replace('/', '-')}-{n}.log"
                log.parent.mkdir(parents=True, exist_ok=True)
                log.write_text(output)
                verdict = f"FAILED (output in {log})"
            print(f"{folder} run {n}/{args.times}: {verdict} in {seconds:.0f} s")
            sys.stdout.flush()
        any_failed |= passed < args.times
        print(f"{folder}: {passed} of {args.times} runs passed")
        for test_id, count in failures.most_common():
            print(f"  {count}x {test_id}")
    return 1 if any_failed else 0


if __name__ == "__main__":
    sys.exit(main())
