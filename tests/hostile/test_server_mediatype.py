"""Media types per RFC 9110: the shared vectors in tests/vectors/mediatype/.

``content-type.json``: what ``mediatype.parse`` reads (or the offset it
refuses at), and that ``media_type_essence`` agrees on every valid value.
``accept.json``: the ranges ``parse_accept`` reads, with ``q`` as weight, and
whether ``wants_standard`` asks for the §7.3 standard stream (``q=0`` never
does). ``request-type.json``: which well-formed types an endpoint refuses
with 415 (another §9.1 ``version``, a charset other than UTF-8).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tokenwire import mediatype
from tokenwire.server.negotiate import media_type_essence, wants_standard

VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "mediatype"


def cases(name: str) -> list[Any]:
    data = json.loads((VECTORS / name).read_text())
    return [pytest.param(case, id=case["name"]) for case in data["cases"]]


@pytest.mark.parametrize("case", cases("content-type.json"))
def test_content_type(case: dict[str, Any]) -> None:
    if "error_offset" in case:
        with pytest.raises(mediatype.MediaTypeError) as caught:
            mediatype.parse(case["value"])
        assert caught.value.offset == case["error_offset"], str(caught.value)
        return
    parsed = mediatype.parse(case["value"])
    assert parsed.essence == case["essence"]
    assert [list(p) for p in parsed.params] == case["params"]
    # The helper the endpoints use agrees, from str and from header bytes.
    assert media_type_essence(case["value"]) == case["essence"]
    assert media_type_essence(case["value"].encode("latin-1")) == case["essence"]


@pytest.mark.parametrize("case", cases("accept.json"))
def test_accept(case: dict[str, Any]) -> None:
    if "error_offset" in case:
        with pytest.raises(mediatype.MediaTypeError) as caught:
            mediatype.parse_accept(case["value"])
        assert caught.value.offset == case["error_offset"], str(caught.value)
    else:
        ranges = mediatype.parse_accept(case["value"])
        got = [[r.media_type.essence, [list(p) for p in r.media_type.params], r.q] for r in ranges]
        assert got == case["ranges"]
    assert wants_standard(case["value"]) is case["standard"]
    assert wants_standard(case["value"].encode()) is case["standard"]


@pytest.mark.parametrize("case", cases("request-type.json"))
def test_request_type(case: dict[str, Any]) -> None:
    problem = mediatype.request_type_problem(mediatype.parse(case["value"]))
    if case["problem"] is None:
        assert problem is None
        return
    status, words = case["problem"]
    assert problem is not None
    assert problem[0] == status
    for word in words:
        assert word in problem[1], problem[1]


def test_values_over_the_size_limit_are_refused_unread() -> None:
    huge = "text/plain; a=" + "b" * mediatype.MAX_FIELD_BYTES
    with pytest.raises(mediatype.MediaTypeError, match="limit"):
        mediatype.parse(huge)
    with pytest.raises(mediatype.MediaTypeError, match="limit"):
        mediatype.parse_accept(huge)
    assert wants_standard("text/event-stream; profile=llm-stream-1.0, " + huge) is False


def test_media_type_essence_of_garbage_still_names_what_was_sent() -> None:
    # The endpoint's 415 message quotes it: the text before the first ';'.
    assert media_type_essence("Text/Plain ; =") == "text/plain"
    assert media_type_essence(None) == ""
