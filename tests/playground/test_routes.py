"""The playground's HTTP routes against the real gateway process: the page and its
policy, the static files, and ``POST /v1/convert``."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.playground.conftest import FIXTURES, VECTORS, replay_cases
from tests.playground.servers import ServerProcess, unavailable

from tokenwire import iter_events, validate
from tokenwire.gateway import playground
from tokenwire.translate import VENDORS

STATIC = Path(playground.__file__).parent / "static"
CASES = replay_cases()


@pytest.fixture
def http(server: ServerProcess) -> Any:
    with httpx.Client(base_url=server.url, timeout=20.0) as client:
        yield client


# --- the page and its policy --------------------------------------------------------------


def csp_directives(header: str) -> dict[str, list[str]]:
    out = {}
    for part in header.split(";"):
        name, *values = part.split()
        out[name] = values
    return out


def test_page_is_served_with_a_strict_policy(http: httpx.Client) -> None:
    r = http.get("/")
    assert r.status_code == 200
    assert r.headers["content-type"] == "text/html; charset=utf-8"
    assert r.headers["x-content-type-options"] == "nosniff"
    csp = csp_directives(r.headers["content-security-policy"])
    assert csp["default-src"] == ["'self'"]
    assert csp["script-src"] == ["'self'"]  # no 'unsafe-inline', no 'unsafe-eval'
    assert csp["style-src"] == ["'self'"]
    assert csp["connect-src"] == ["'self'"]
    assert csp["img-src"] == ["'self'", "data:"]
    assert csp["frame-ancestors"] == ["'none'"]
    assert csp["object-src"] == ["'none'"]
    assert "unsafe" not in r.headers["content-security-policy"]


class _Inline(HTMLParser):
    """Collects what a strict CSP would refuse: inline scripts, styles, handlers, remote URLs."""

    def __init__(self) -> None:
        super().__init__()
        self.problems: list[str] = []
        self.loads: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        names = dict(attrs)
        if tag == "style":
            self.problems.append("<style> element")
        if tag == "script":
            if not names.get("src"):
                self.problems.append("inline <script>")
            self._in_script = True
        for name, value in attrs:
            if name == "style" or name.startswith("on"):
                self.problems.append(f"<{tag} {name}=...>")
            if name in ("src", "href") and value:
                self.loads.append(value)

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False


def test_page_has_no_inline_code_and_loads_only_its_own_files(http: httpx.Client) -> None:
    parser = _Inline()
    parser.feed(http.get("/").text)
    assert parser.problems == []
    assert parser.loads, "the page loads its CSS and modules"
    for url in parser.loads:
        assert url.startswith("/static/"), url  # no CDN, nothing off-origin
        assert http.get(url).status_code == 200, url


@pytest.mark.parametrize(
    ("name", "content_type"),
    [
        ("tokenwire.js", "text/javascript; charset=utf-8"),
        ("app.js", "text/javascript; charset=utf-8"),
        ("chart.js", "text/javascript; charset=utf-8"),
        ("app.css", "text/css; charset=utf-8"),
        ("index.html", "text/html; charset=utf-8"),
        ("favicon.svg", "image/svg+xml"),
    ],
)
def test_static_files_have_their_content_types(
    http: httpx.Client, name: str, content_type: str
) -> None:
    r = http.get(f"/static/{name}")
    assert r.status_code == 200
    assert r.headers["content-type"] == content_type
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.content == (STATIC / name).read_bytes()
    etag = r.headers["etag"]
    again = http.get(f"/static/{name}", headers={"If-None-Match": etag})
    assert again.status_code == 304 and again.content == b""


@pytest.mark.parametrize(
    "path",
    ["/static/missing.js", "/static/..%2f..%2fpyproject.toml", "/static/%2e%2e/playground.py"],
)
def test_static_serves_nothing_else(http: httpx.Client, path: str) -> None:
    r = http.get(path)
    assert r.status_code == 404
    assert r.headers["content-type"] == "application/json"
    assert r.json()["error"]["code"] == "not_found"


def test_static_modules_build_no_html_from_strings() -> None:
    # Model text must only ever become DOM text: no HTML sinks in the page's code.
    sinks = re.compile(
        r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|new Function"
    )
    for path in STATIC.glob("*.js"):
        assert not sinks.search(path.read_text()), path.name


# --- /v1/convert ------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=[c["file"] for c in CASES])
def test_convert_replay_vectors(http: httpx.Client, case: dict[str, Any]) -> None:
    body = (VECTORS / case["file"]).read_bytes()
    r = http.post(f"/v1/convert?from={case['format']}&model=replay", content=body)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/event-stream")
    assert r.headers["cache-control"] == "no-cache"
    events = list(iter_events([r.content]))
    assert [e.type for e in events] == case["types"]
    text = "".join(e.delta.text for e in events if e.type == "content.delta")
    assert text == case["text"]
    report = validate(r.content)
    assert [v.rule for v in report.violations] == case["rules"]
    assert report.ok is (case["verdict"] == "conformant")
    if case["format"] == "standard":
        assert r.content == body  # passed through byte for byte
        assert r.headers["x-tokenwire-conformant"] == str(report.ok).lower()
        assert r.headers["x-tokenwire-violations"] == ",".join(dict.fromkeys(case["rules"]))
    else:
        assert events[0].model == "replay"


def test_convert_options(http: httpx.Client) -> None:
    body = (VECTORS / "openai-text.sse").read_bytes()
    r = http.post("/v1/convert?from=openai&model=m1&request_id=r-9", content=body)
    events = list(iter_events([r.content]))
    assert events[0].model == "m1"
    assert events[0].request_id == events[-1].request_id == "r-9"


def test_convert_without_model_says_unknown(http: httpx.Client) -> None:
    r = http.post(
        "/v1/convert?from=anthropic", content=(VECTORS / "anthropic-text-tool.sse").read_bytes()
    )
    assert next(iter(iter_events([r.content]))).model == "unknown"


@pytest.mark.parametrize("query", ["", "?from=", "?from=nope", "?from=OpenAI"])
def test_convert_refuses_an_unknown_format(http: httpx.Client, query: str) -> None:
    r = http.post(f"/v1/convert{query}", content=b"data: {}\n\n")
    assert r.status_code == 400
    error = r.json()["error"]
    assert error["code"] == "invalid_request"
    assert error["path"] == "from"
    for known in ("standard", *VENDORS):
        assert known in error["message"]


def test_convert_refuses_an_option_the_vendor_does_not_take(http: httpx.Client) -> None:
    r = http.post("/v1/convert?from=openai&codec=proto", content=b"")
    assert r.status_code == 400
    assert r.json()["error"]["path"] == "from"


def test_convert_size_limit(http: httpx.Client) -> None:
    limit = playground.MAX_CAPTURE_BYTES
    big = b"data: " + b"x" * limit + b"\n\n"
    r = http.post("/v1/convert?from=openai", content=big)
    assert r.status_code == 413
    assert r.json()["error"]["code"] == "request_too_large"

    def chunks() -> Any:  # no Content-Length: the limit is checked while reading
        for start in range(0, len(big), 1 << 20):
            yield big[start : start + (1 << 20)]

    r = http.post("/v1/convert?from=openai", content=chunks())
    assert r.status_code == 413


def test_convert_empty_capture_is_an_error_stream(http: httpx.Client) -> None:
    r = http.post("/v1/convert?from=anthropic", content=b"")
    assert r.status_code == 200
    types = [e.type for e in iter_events([r.content])]
    assert types == ["stream.start", "error", "stream.end"]
    assert validate(r.content).ok


def test_convert_is_post_only(http: httpx.Client) -> None:
    assert http.get("/v1/convert?from=openai").status_code == 405


# --- the shared vendor recordings, read in place ----------------------------------------------

FIXTURE_DIRS = {"openai": "openai-chat", "anthropic": "anthropic", "gemini": "gemini"}


def fixture_files() -> list[tuple[str, Path]]:
    return [
        (vendor, path)
        for vendor, folder in sorted(FIXTURE_DIRS.items())
        for path in sorted((FIXTURES / folder).glob("raw-sse-*.sse"))
    ]


@pytest.mark.fixtures
def test_convert_shared_recordings(http: httpx.Client) -> None:
    if not FIXTURES.is_dir():
        unavailable(f"the shared vendor recordings are not at {FIXTURES}")
    files = fixture_files()
    if not files:
        unavailable(f"no raw-sse-*.sse recordings under {FIXTURES}")
    for vendor, path in files:
        r = http.post(f"/v1/convert?from={vendor}", content=path.read_bytes())
        assert r.status_code == 200, path
        report = validate(r.content)
        assert report.ok, (path, [str(v) for v in report.violations])
        types = [e.type for e in iter_events([r.content])]
        assert types[0] == "stream.start" and types[-1] == "stream.end", path
