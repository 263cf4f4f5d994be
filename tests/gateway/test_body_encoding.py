"""``gateway.body_encoding``: compressed request bodies decoded within a limit."""

from __future__ import annotations

import gzip
import zlib

import pytest
from tests.agents.clis import require

from tokenwire.gateway.body_encoding import BodyDecodeError, decode_body, supported_encodings

OPENERS = supported_encodings()
TEXT = b'{"model": "m", "messages": []}' * 10


def test_each_coding_round_trips_and_stacked_codings_undo_in_reverse() -> None:
    assert decode_body(gzip.compress(TEXT), ["gzip"], 1 << 20, OPENERS) == TEXT
    assert decode_body(zlib.compress(TEXT), ["deflate"], 1 << 20, OPENERS) == TEXT
    stacked = gzip.compress(zlib.compress(TEXT))  # deflate applied first, then gzip
    assert decode_body(stacked, ["deflate", "gzip"], 1 << 20, OPENERS) == TEXT


def test_zstd_several_frames_are_one_body() -> None:
    zstandard = require("zstandard", "zstd bodies need it (the server extra)")
    frames = zstandard.ZstdCompressor().compress(TEXT[:50]) + zstandard.ZstdCompressor().compress(
        TEXT[50:]
    )
    assert decode_body(frames, ["zstd"], 1 << 20, OPENERS) == TEXT


@pytest.mark.parametrize("coding", ["gzip", "deflate", "zstd"])
def test_a_bomb_stops_at_the_limit(coding: str) -> None:
    if coding not in OPENERS:
        require("zstandard", "zstd bodies need it (the server extra)")
    huge = b"\0" * (8 << 20)
    if coding == "gzip":
        bomb = gzip.compress(huge)
    elif coding == "deflate":
        bomb = zlib.compress(huge)
    else:
        bomb = require("zstandard", "zstd bodies need it").ZstdCompressor().compress(huge)
    with pytest.raises(BodyDecodeError) as failed:
        decode_body(bomb, [coding], 1 << 20, OPENERS)
    assert failed.value.status == 413
    assert str(1 << 20) in failed.value.message and coding in failed.value.message


@pytest.mark.parametrize("coding", ["gzip", "deflate"])
def test_truncated_or_garbled_data_is_a_400_naming_the_coding(coding: str) -> None:
    packed = gzip.compress(TEXT) if coding == "gzip" else zlib.compress(TEXT)
    for broken in (packed[:-6], b"not compressed at all"):
        with pytest.raises(BodyDecodeError) as failed:
            decode_body(broken, [coding], 1 << 20, OPENERS)
        assert failed.value.status == 400
        assert f"not valid {coding}" in failed.value.message
