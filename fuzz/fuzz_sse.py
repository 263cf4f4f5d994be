"""atheris harness: the SSE decoder (and typed event parsing) on arbitrary bytes.

Invariant (h11's): ``sse.Decoder`` returns messages or raises ``FramingError``;
``events.parse`` returns an event or raises a ``ProtocolError``. Anything else
is a finding. The input is also cut into chunks the fuzzer chooses, and the
result must not depend on the cuts.

Run: ``.venv/bin/python fuzz/fuzz_sse.py [libFuzzer flags] [corpus dirs]``
(``fuzz/run.py`` runs it for a bounded time; ``make fuzz``).
"""

from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports():
    from tokenwire import events, sse
    from tokenwire.errors import FramingError, ProtocolError

_LIMITS = (1, 16, 256, 1 << 20)


def _decode(chunks: list[bytes], limit: int) -> list[sse.Message] | str:
    decoder = sse.Decoder(max_event_bytes=limit)
    out: list[sse.Message] = []
    try:
        for chunk in chunks:
            out += decoder.feed(chunk)
        out += decoder.close()
    except FramingError as exc:
        return f"FramingError at {exc.offset}"
    return out


def test_one_input(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    limit = _LIMITS[fdp.ConsumeIntInRange(0, len(_LIMITS) - 1)]
    cuts = sorted(fdp.ConsumeIntListInRange(fdp.ConsumeIntInRange(0, 8), 0, 1 << 16))
    body = fdp.ConsumeBytes(fdp.remaining_bytes())
    chunks, start = [], 0
    for cut in cuts:
        cut = min(cut, len(body))
        chunks.append(body[start:cut])
        start = max(start, cut)
    chunks.append(body[start:])
    whole = _decode([body], limit)
    split = _decode(chunks, limit)
    if whole != split:
        raise AssertionError(f"the result depends on the cuts: {whole!r} != {split!r}")
    if isinstance(whole, list):
        for message in whole:
            try:
                events.parse(message.event, message.data)
            except ProtocolError:
                pass


def main() -> None:
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
