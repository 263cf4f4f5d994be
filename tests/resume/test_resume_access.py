"""Resume tokens and the credential binding (gateway/resume/access.py), pure."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tokenwire.gateway.resume import StreamInfo
from tokenwire.gateway.resume.access import (
    allowed,
    credential_digest,
    new_token,
    presented_token,
    token_digest,
)

VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "resume"
CASES: list[dict[str, Any]] = json.loads((VECTORS / "credential.json").read_text())["cases"]


def _headers(raw: dict[str, str]) -> list[tuple[bytes, bytes]]:
    return [(k.encode(), v.encode()) for k, v in raw.items()]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["name"])
def test_same_caller(case: dict[str, Any]) -> None:
    a, b = credential_digest(_headers(case["a"])), credential_digest(_headers(case["b"]))
    assert (a == b) is case["same"]
    token = new_token()
    info = StreamInfo("m", 0, "me", token_digest(token), a)
    with_token = [(b"tokenwire-resume-token", token.encode()), *_headers(case["b"])]
    assert allowed(info, with_token) is case["same"]


def test_tokens() -> None:
    tokens = {new_token() for _ in range(100)}
    assert len(tokens) == 100 and all(len(t) == 43 for t in tokens)
    token = tokens.pop()
    assert token not in token_digest(token) and len(token_digest(token)) == 64
    assert presented_token([(b"tokenwire-resume-token", b" t ")]) == b"t"
    # Two tokens, or an empty one, are no token.
    assert presented_token([(b"tokenwire-resume-token", b"a")] * 2) is None
    assert presented_token([(b"tokenwire-resume-token", b"")]) is None
    info = StreamInfo("m", 0, "me", token_digest(token), "")
    assert not allowed(info, [])
    assert not allowed(StreamInfo("m", 0, "me"), [(b"tokenwire-resume-token", b"")])
    # A stream stored without a token digest opens for no token at all.
    assert not allowed(StreamInfo("m", 0, "me"), [(b"tokenwire-resume-token", token.encode())])
