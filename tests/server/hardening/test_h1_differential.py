"""The h1 engine parses random requests as h11 does: the same verdict for each.

h11 (a pure-Python HTTP/1.1 implementation of RFC 9112) is the reference: a
request it accepts must reach the app with the same method, target, header
fields and body; a request it refuses must be refused before the app sees it.
Where the h1 engine is stricter on purpose (smuggling shapes that RFC 9112 lets
a server refuse: bare LF line ends, obs-fold, a Transfer-Encoding in HTTP/1.0),
the expected verdict is a refusal, and ``STRICTER`` says why.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.server.hardening.recorder import Recorder
from tests.server.http1.wire import Wire, split_responses

#: Shapes h11 accepts that the h1 engine refuses, and why.
STRICTER = {
    "bare_lf": "RFC 9112 §2.2: a bare LF line end is one parser's line and another's byte",
    "obs_fold": "RFC 9112 §5.2: a server may refuse obs-fold with 400; unfolding is ambiguous",
    "te_http10": "RFC 9112 §6.1: Transfer-Encoding in HTTP/1.0 is faulty framing",
    "cl_and_te": "RFC 9112 §6.3: a server may refuse Content-Length with Transfer-Encoding "
    "(the CL.TE smuggling shape) instead of letting Transfer-Encoding win",
    "ctl_in_value": "RFC 9110 §5.5: a control character (DEL, 0x01) is no field-vchar",
}

Verdict = tuple[str, Any]

_TOKEN = st.text("abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=8)
_CLEAN_VALUE = st.text("abcXYZ019 \t-_;=,/:\x80\xff", max_size=10)
#: Mostly clean values; one in five holds NUL, DEL or another control.
_VALUE = st.one_of(
    _CLEAN_VALUE, _CLEAN_VALUE, _CLEAN_VALUE, _CLEAN_VALUE, st.text("ab \x00\x7f\x01", max_size=6)
)


@st.composite
def requests(draw: st.DrawFn) -> tuple[bytes, set[str]]:
    """A request's bytes, and which ``STRICTER`` shapes it holds."""
    shapes: set[str] = set()
    method = draw(st.sampled_from(["GET", "POST", "PUT", "HEAD", "DELETE"]))
    target = "/" + draw(st.text("abz09-._~%/?=&", max_size=12))
    version = draw(st.sampled_from(["1.1", "1.1", "1.1", "1.0"]))
    body = draw(st.binary(max_size=20))
    fields: list[tuple[str, str]] = []
    for _ in range(draw(st.sampled_from([1, 1, 1, 1, 1, 0, 2]))):
        fields.append(("Host", draw(st.sampled_from(["a", "example.com", "h:80"]))))
    good = ["none", "cl", "cl", "chunked", "chunked"]
    framing = draw(st.sampled_from([*good, "cl+te", "cl*2", "te*2", "te?"]))
    if framing in ("cl", "cl+te", "cl*2"):
        fields.append(("Content-Length", draw(st.sampled_from([str(len(body)), f"+{len(body)}"]))))
    if framing == "cl*2":
        fields.append(("Content-Length", draw(st.sampled_from([str(len(body)), "99"]))))
    if framing in ("chunked", "cl+te", "te*2"):
        fields.append(("Transfer-Encoding", "chunked"))
    if framing == "cl+te":
        shapes.add("cl_and_te")
    if framing == "te*2":
        fields.append(("Transfer-Encoding", "chunked"))
    if framing == "te?":
        fields.append(
            ("Transfer-Encoding", draw(st.sampled_from(["gzip", "chunked, gzip", "gzip, chunked"])))
        )
    for _ in range(draw(st.integers(0, 3))):
        fields.append((f"X-{draw(_TOKEN)}", draw(_VALUE)))
    fields = draw(st.permutations(fields))
    if any(c in value for _, value in fields for c in "\x7f\x01"):
        shapes.add("ctl_in_value")
    fold = draw(st.integers(0, 20)) == 0 and bool(fields)
    if fold:
        shapes.add("obs_fold")
    bare_lf = draw(st.integers(0, 20)) == 0
    if bare_lf:
        shapes.add("bare_lf")
    if version == "1.0" and any(n == "Transfer-Encoding" for n, _ in fields):
        shapes.add("te_http10")
    eol = "\n" if bare_lf else "\r\n"
    head = f"{method} {target} HTTP/{version}{eol}"
    for i, (name, value) in enumerate(fields):
        head += f"{name}: {value}{eol}"
        if fold and i == 0:
            head += f" folded{eol}"
    head += eol
    if "Transfer-Encoding" in head and framing != "te?":
        chunked = (b"%x\r\n" % len(body) + body + b"\r\n" if body else b"") + b"0\r\n\r\n"
        return head.encode("latin-1") + chunked, shapes
    return head.encode("latin-1") + body, shapes


def h11_verdict(data: bytes) -> Verdict:
    """``("accept", served)``, ``("refuse", None)`` or ``("incomplete", None)``."""
    conn = h11.Connection(h11.SERVER)
    conn.receive_data(data)
    request: h11.Request | None = None
    body = b""
    try:
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA or event is h11.PAUSED:
                return "incomplete", None
            if isinstance(event, h11.Request):
                request = event
            elif isinstance(event, h11.Data):
                body += bytes(event.data)
            elif isinstance(event, h11.EndOfMessage):
                assert request is not None
                headers = [(bytes(n), bytes(v).strip()) for n, v in request.headers]
                target = bytes(request.target)
                # ASGI cannot tell "/?" from "/" (query_string b""): nor can the app.
                target = target[:-1] if target.endswith(b"?") else target
                return "accept", (request.method.decode(), target, headers, body)
    except h11.RemoteProtocolError:
        return "refuse", None


def h1_verdict(data: bytes) -> Verdict:
    app = Recorder()

    async def main() -> Verdict:
        wire = Wire(app)
        wire.transport.feed(data)
        await wire.idle()
        if app.served:
            method, target, headers, body = app.served[0]
            return "accept", (method, target, [(n, v.strip()) for n, v in headers], body)
        responses = split_responses(bytes(wire.transport.written))
        if responses and responses[0][0] >= 400:
            return "refuse", None
        return "incomplete", None

    return asyncio.run(main())


@settings(
    max_examples=300,
    deadline=None,  # one example is milliseconds; a loaded machine must not fail it
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
@given(requests())
def test_h1_verdicts_match_h11(case: tuple[bytes, set[str]]) -> None:
    data, shapes = case
    expected = h11_verdict(data)
    got = h1_verdict(data)
    if shapes and expected[0] == "accept":
        # h11 accepts what the h1 engine refuses on purpose (STRICTER).
        assert got == ("refuse", None), (data, shapes)
        return
    assert got == expected, data
