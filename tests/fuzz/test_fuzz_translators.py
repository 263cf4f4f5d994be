"""Fuzz every translator: whatever it is fed, a conformant standard stream, no exception.

Each vendor's seed bodies (tests/vectors/fuzz/translator-seeds.json: text with
multi-byte UTF-8, fragmented tool calls, in-stream errors, CRLF, truncation,
compression) are mutated byte by byte and cut anywhere; pure noise is fed too.
``StreamTranslator.feed``/``close`` promise never to raise: a vendor error, a
framing problem or a cut becomes ``error`` + ``stream.end``. So the output
must start with ``stream.start``, end with ``stream.end`` and pass the
lifecycle validator.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.fuzz.fuzz_inputs import FUZZ, chunked, mutated, seeds

import tokenwire
from tokenwire import events as ev
from tokenwire.translate import VENDORS, translator

SEEDS = seeds()
FIXTURES = Path(__file__).resolve().parents[2].parent / "shared" / "vendor-fixtures"
#: The shared recordings per translator (raw SSE bodies only; read in place).
FIXTURE_FOLDERS = {"openai": "openai-chat", "anthropic": "anthropic", "gemini": "gemini"}


def _translate(vendor: str, options: dict[str, Any], chunks: list[bytes]) -> list[ev.Event]:
    t = translator(vendor, model="fuzz", request_id="fuzz-1", **options)
    out: list[ev.Event] = []
    for chunk in chunks:
        out += t.feed(chunk)
    return out + t.close()


def _check(out: list[ev.Event]) -> None:
    assert out, "a translator always produces a stream"
    assert isinstance(out[0], ev.StreamStart)
    assert isinstance(out[-1], ev.StreamEnd)
    report = tokenwire.validate([b"".join(map(ev.dump, out))])
    assert report.ok, [str(v) for v in report.violations]


def test_every_translator_has_seeds() -> None:
    assert {seed["vendor"] for seed in SEEDS} == set(VENDORS)


@pytest.mark.parametrize("seed", SEEDS, ids=[f"{s['vendor']}-{s['name']}" for s in SEEDS])
def test_each_seed_translates_cleanly(seed: dict[str, Any]) -> None:
    _check(_translate(seed["vendor"], seed["options"], [seed["body"]]))


@pytest.mark.parametrize("vendor", sorted({s["vendor"] for s in SEEDS}))
@FUZZ
@given(data=st.data())
def test_mutated_vendor_streams_still_end_well(vendor: str, data: st.DataObject) -> None:
    seed = data.draw(st.sampled_from([s for s in SEEDS if s["vendor"] == vendor]))
    body = data.draw(mutated(seed["body"]))
    _check(_translate(vendor, seed["options"], data.draw(chunked(body))))


@pytest.mark.parametrize("vendor", sorted(VENDORS))
@FUZZ
@given(noise=st.binary(max_size=400), data=st.data())
def test_noise_still_ends_well(vendor: str, noise: bytes, data: st.DataObject) -> None:
    options = data.draw(st.sampled_from([s["options"] for s in SEEDS if s["vendor"] == vendor]))
    _check(_translate(vendor, options, data.draw(chunked(noise))))


def _recordings() -> list[tuple[str, Path]]:
    return [
        (vendor, path)
        for vendor, folder in sorted(FIXTURE_FOLDERS.items())
        for path in sorted((FIXTURES / folder).glob("raw-sse-*.sse"))
    ]


@FUZZ
@given(data=st.data())
def test_mutated_recordings_still_end_well(data: st.DataObject) -> None:
    """The shared vendor recordings as seeds too (read in place, never copied)."""
    found = _recordings()
    if not found:
        reason = f"vendor recordings not found at {FIXTURES}"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason} (CI=true: the recordings are required)")
        pytest.skip(reason)
    vendor, path = data.draw(st.sampled_from(found))
    body = data.draw(mutated(path.read_bytes()))
    _check(_translate(vendor, {}, data.draw(chunked(body))))
