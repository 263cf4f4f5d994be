"""atheris harness: the request parser (§4) on arbitrary bytes.

Invariant: ``request.parse`` returns a ``Request`` or raises ``InvalidRequest``
(``RequestTooLarge`` included), and a parsed request survives
``parse(dumps(req)) == req``. Anything else is a finding.

Run: ``.venv/bin/python fuzz/fuzz_request.py [libFuzzer flags] [corpus dirs]``
"""

from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports():
    from tokenwire import request as rq
    from tokenwire.errors import InvalidRequest


def test_one_input(data: bytes) -> None:
    try:
        req = rq.parse(data, max_bytes=1 << 16, max_depth=32)
    except InvalidRequest:
        return
    again = rq.parse(rq.dumps(req))
    if again != req:
        raise AssertionError(f"round trip changed the request: {req!r} -> {again!r}")


def main() -> None:
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
