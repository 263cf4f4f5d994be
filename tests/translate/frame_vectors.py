"""Shared checks for the translator vectors of tests/vectors/translate/<vendor>/
written in the structured-frames format (Gemini, Cohere, OpenAI Responses)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.translate.conftest import assert_conformant, translate_pieces

from tokenwire import events as ev


def load_vectors(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text(encoding="utf-8")) for p in sorted(folder.glob("*.json"))]


def vector_body(vector: dict[str, Any]) -> bytes:
    """The vendor body of a vector: structured frames written with its ``eol``, raw as is."""
    eol = vector["eol"]
    out = []
    for frame in vector["frames"]:
        if "raw" in frame:
            out.append(frame["raw"])
            continue
        if frame.get("event"):
            out.append(f"event: {frame['event']}{eol}")
        data = json.dumps(frame["data"], ensure_ascii=False, separators=(",", ":"))
        out.append(f"data: {data}{eol}{eol}")
    return "".join(out).encode()


def vector_options(vector: dict[str, Any]) -> dict[str, Any]:
    options = vector["options"]
    return {"request_id": options["request_id"], "reasoning": options["reasoning"]}


def check_vector(vendor: str, vector: dict[str, Any]) -> None:
    out = translate_pieces(vendor, [vector_body(vector)], **vector_options(vector))
    assert_conformant(out)
    expect = vector["expect"]
    why = vector["description"]
    assert [e.type for e in out] == expect["types"], why
    answer = [e for e in out if isinstance(e, ev.ContentDelta) and not e.reasoning]
    thought = [e for e in out if isinstance(e, ev.ContentDelta) and e.reasoning]
    assert "".join(e.text for e in answer) == expect["text"], why
    assert "".join(e.text for e in thought) == expect["reasoning"], why
    # Reasoning never shares a block with the answer.
    assert not {e.index for e in answer} & {e.index for e in thought}, why
    calls = [
        {"id": e.id, "name": e.name, "arguments": json.loads(e.arguments)}
        for e in out
        if isinstance(e, ev.ToolCall)
    ]
    assert calls == expect["tool_calls"], why
    assert [e.stop_reason for e in out if isinstance(e, ev.ContentStop)] == expect["stop_reasons"]
    usage = [[e.input_tokens, e.output_tokens] for e in out if isinstance(e, ev.Usage)]
    assert usage == ([] if expect["usage"] is None else [expect["usage"]]), why
    errors = [e.code for e in out if isinstance(e, ev.ErrorEvent)]
    assert errors == ([] if expect["error"] is None else [expect["error"]]), why
