"""atheris harness: ``tokenwire convert``'s format detection on arbitrary bytes.

Invariant (h11's): ``_detect.detect`` returns a ``Detected`` or raises
``UnknownFormat`` (whose message is one line of text, no raw bytes);
``capture_model`` returns a string or ``None``; ``JSONLinesFramer`` returns
bytes. Anything else is a finding: a ``RecursionError`` on deep JSON (issue
25) was one.

Run: ``.venv/bin/python fuzz/fuzz_detect.py [libFuzzer flags] [corpus dirs]``
(``fuzz/run.py`` runs it for a bounded time; ``make fuzz``).
"""

from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports():
    from tokenwire.cli._detect import (
        HEAD_BYTES,
        JSONLinesFramer,
        UnknownFormat,
        capture_model,
        detect,
    )


def test_one_input(data: bytes) -> None:
    head = data[:HEAD_BYTES]
    try:
        found = detect(head)
    except UnknownFormat as exc:
        message = str(exc)
        if "\n" in message or "\\x" in message:
            raise AssertionError(f"the message shows raw bytes: {message[:200]!r}") from None
    else:
        assert isinstance(found.vendor, str) and found.reason
    model = capture_model(head)
    assert model is None or isinstance(model, str)
    framer = JSONLinesFramer(done=True, max_line_bytes=1 << 12)
    out = framer.feed(data) + framer.close()
    assert isinstance(out, bytes)


def main() -> None:
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
