"""What the fuzz tests share: their Hypothesis settings, the seed bodies, mutations.

The invariant every fuzz test checks is h11's: for any input, the code under
test returns output, or raises the library's own protocol error
(``tokenwire.errors.ProtocolError``); never anything else. Translators go
further and never raise at all: whatever they are fed, their output is a
conformant standard stream.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "fuzz"

#: Modest for `make test`; ``TOKENWIRE_FUZZ_EXAMPLES=5000`` searches longer locally,
#: and `fuzz/` (atheris) runs the long searches.
FUZZ = settings(
    max_examples=int(os.environ.get("TOKENWIRE_FUZZ_EXAMPLES", "120")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def seeds() -> list[dict[str, Any]]:
    """The translator seeds: ``{"vendor", "name", "options", "body": bytes}``."""
    data = json.loads((VECTORS / "translator-seeds.json").read_text(encoding="utf-8"))
    out = []
    for seed in data["seeds"]:
        body = seed.pop("body", None)
        raw = body.encode() if body is not None else base64.b64decode(seed.pop("body_base64"))
        out.append({**seed, "body": raw})
    return out


@st.composite
def mutated(draw: st.DrawFn, seed: bytes, max_ops: int = 4) -> bytes:
    """``seed`` with a few byte-level mutations: flips, deletions, duplications,
    insertions of random or structural bytes, and truncation."""
    data = bytearray(seed)
    for _ in range(draw(st.integers(0, max_ops))):
        op = draw(st.sampled_from(["flip", "delete", "duplicate", "insert", "truncate"]))
        if not data and op != "insert":
            continue
        i = draw(st.integers(0, max(len(data) - 1, 0)))
        if op == "flip":
            data[i] = draw(st.integers(0, 255))
        elif op == "delete":
            del data[i : i + draw(st.integers(1, 16))]
        elif op == "duplicate":
            j = min(len(data), i + draw(st.integers(1, 64)))
            data[i:i] = data[i:j]
        elif op == "insert":
            piece = draw(
                st.one_of(
                    st.binary(max_size=8),
                    st.sampled_from(
                        [b"\n", b"\r", b"\n\n", b"\x1e", b"\x00", b"data: ", b"event: ",
                         b"{", b"}", b'"', b"[DONE]", b"\xff", b"\xf0\x9f", b"\x02\x00\x00\x00"]
                    ),
                )
            )  # fmt: skip
            data[i:i] = piece
        else:
            del data[i:]
    return bytes(data)


@st.composite
def chunked(draw: st.DrawFn, data: bytes, max_cuts: int = 12) -> list[bytes]:
    """``data`` cut at random offsets (empty chunks included)."""
    cuts = sorted(draw(st.lists(st.integers(0, len(data)), max_size=max_cuts)))
    out, start = [], 0
    for cut in cuts:
        out.append(data[start:cut])
        start = cut
    out.append(data[start:])
    return out


#: JSON values, nested a little: what a hostile request body may hold anywhere.
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=12),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
