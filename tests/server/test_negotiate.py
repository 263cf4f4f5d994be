"""Content negotiation as a table (tests/vectors/binary/negotiation.json), and over HTTP.

docs/binary.md section 7: SSE stays the default and frames are chosen only when
``Accept`` prefers them; section 3: frames asked for in a version (or payload)
not served, as the only type, get 406. Media types are case-insensitive.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from tests.server.server_asgi import Exchange

from tokenwire import events as ev
from tokenwire.request import MEDIA_TYPE, Request
from tokenwire.server import StreamEndpoint
from tokenwire.server.negotiate import Binding, Refusal, answer_binding, negotiate

VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "binary" / "negotiation.json"
CASES: list[dict[str, Any]] = json.loads(VECTORS.read_text())["cases"]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_negotiation_vectors(case: dict[str, Any]) -> None:
    decision = negotiate(
        case.get("content_type", MEDIA_TYPE),
        case["accept"],
        request_type=MEDIA_TYPE,
        vendor_types=case.get("vendor_types", ()),
    )
    if "status" in case:
        assert isinstance(decision, Refusal)
        assert decision.status == case["status"]
        assert "llm-stream-frames" in decision.message or decision.status == 415
        return
    assert isinstance(decision, Binding)
    assert decision.answer == case["answer"]
    if case["answer"] == "frames":
        assert decision.payload == case["payload"]
    # The same Accept as bytes (as ASGI gives it) decides the same.
    raw = None if case["accept"] is None else case["accept"].encode()
    again = negotiate(
        case.get("content_type", MEDIA_TYPE).encode(),
        raw,
        request_type=MEDIA_TYPE,
        vendor_types=case.get("vendor_types", ()),
    )
    assert again == decision


def test_a_406_names_what_is_served() -> None:
    refusal = answer_binding("application/llm-stream-frames; version=2.0")
    assert isinstance(refusal, Refusal)
    assert "version=1.0" in refusal.message
    assert dict(refusal.headers)[b"accept"].startswith(b"application/llm-stream-frames")


class _Hello:
    """A provider that says one word."""

    async def generate(self, request: Request) -> AsyncIterator[ev.Event]:
        yield ev.ContentDelta(
            v="1.0", seq=0, index=0, role="assistant", delta=ev.Delta(text="hello")
        )


BODY = json.dumps(
    {
        "version": "1.0",
        "stream": True,
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
    }
).encode()


@pytest.mark.parametrize(
    ("accept", "status", "content_type"),
    [
        ("application/llm-stream-frames; version=2.0", 406, "application/json"),
        ("APPLICATION/LLM-STREAM-FRAMES", 200, "application/llm-stream-frames"),
        ("application/llm-stream-frames, text/event-stream", 200, "text/event-stream"),
    ],
)
def test_the_endpoint_answers_as_negotiated(accept: str, status: int, content_type: str) -> None:
    x = Exchange(BODY, headers={"accept": accept}).run(StreamEndpoint(_Hello()))
    assert x.status == status
    assert x.headers["content-type"].startswith(content_type)
    if status == 406:
        assert x.json()["error"]["code"] == "not_acceptable"
    else:
        assert b"hello" in x.body
