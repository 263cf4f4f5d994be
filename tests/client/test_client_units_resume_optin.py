"""`Client(resume=True)` opts the request in to resumable streams."""

from __future__ import annotations

from tokenwire.client._common import RESUMABLE, prepare_request
from tokenwire.request import build


def test_resume_sets_the_extension_and_a_request_id() -> None:
    req = prepare_request(None, {"model": "demo", "messages": "hi"}, resume=True)
    assert req.extension(RESUMABLE) is True
    assert req.request_id


def test_an_explicit_choice_is_kept_and_no_resume_adds_nothing() -> None:
    off = build(model="demo", messages="hi", extensions={RESUMABLE: False})
    assert prepare_request(off, {}, resume=True).extension(RESUMABLE) is False
    plain = prepare_request(None, {"model": "demo", "messages": "hi"}, resume=False)
    assert plain.extension(RESUMABLE) is None
