"""`Client(resume=True)` opts the request in to resumable streams; the default opts out."""

from __future__ import annotations

from tokenwire.client._common import RESUMABLE, prepare_request
from tokenwire.request import build


def test_resume_sets_the_extension_and_a_request_id() -> None:
    req = prepare_request(None, {"model": "demo", "messages": "hi"}, resume=True)
    assert req.extension(RESUMABLE) is True
    assert req.request_id


def test_an_explicit_choice_is_kept_and_no_resume_opts_out() -> None:
    off = build(model="demo", messages="hi", extensions={RESUMABLE: False})
    assert prepare_request(off, {}, resume=True).extension(RESUMABLE) is False
    on = build(model="demo", messages="hi", extensions={RESUMABLE: True})
    assert prepare_request(on, {}, resume=False).extension(RESUMABLE) is True
    # Said explicitly: a gateway whose streams are resumable by default must
    # still cancel the default client's stream on a hang-up.
    plain = prepare_request(None, {"model": "demo", "messages": "hi"}, resume=False)
    assert plain.extension(RESUMABLE) is False
