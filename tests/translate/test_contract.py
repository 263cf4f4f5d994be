"""The vendor contract: one ``VendorFormat`` per vendor, the registry, and what every
format promises (a typed translator, a request builder, an HTTP error mapping, an
optional ingress, a fake), plus the shared batch loop and credential redaction."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import msgspec
import pytest

from tokenwire import events as ev
from tokenwire import request as rq
from tokenwire import translate, validate
from tokenwire.testing.upstream import RENDERERS, RecordedRequest, Script
from tokenwire.translate import (
    StreamTranslator,
    VendorFormat,
    VendorRequest,
    formats,
    registry,
    translator,
    vendor_request,
    vendor_table,
)

ROOT = Path(__file__).resolve().parents[2]
TRANSLATE = ROOT / "src" / "tokenwire" / "translate"
NAMES = list(registry)
SSE_WITH_FAKE = [f.name for f in formats() if f.transport == "http-sse" and f.fake]


def _request() -> rq.Request:
    return rq.build(model="m", messages=[{"role": "user", "content": "hi"}])


# --- the registry ----------------------------------------------------------------


def test_registry_names_every_vendor_with_its_own_record() -> None:
    assert NAMES == list(translate.VENDORS)
    for name in NAMES:
        fmt = translate.get(name)
        assert isinstance(fmt, VendorFormat)
        assert fmt.name == name
        assert fmt.transport in translate.TRANSPORTS
        assert issubclass(fmt.translator, StreamTranslator)
        assert registry[name] is fmt  # loaded once


def test_unknown_vendor_is_a_value_error_naming_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown vendor format 'nope' \(known: anthropic"):
        translate.get("nope")
    with pytest.raises(ValueError, match="unknown vendor format"):
        translator("nope", model="m")


@pytest.mark.parametrize("name", NAMES)
def test_translator_is_the_formats_class(name: str) -> None:
    t = translator(name, model="m", request_id="r1")
    assert type(t) is translate.get(name).translator
    assert not t.done


@pytest.mark.parametrize("name", [n for n in NAMES if n != "signalr"])
def test_vendor_request_uses_the_formats_builder(name: str) -> None:
    built = vendor_request(name, _request(), base_url="http://127.0.0.1:9")
    assert isinstance(built, VendorRequest)
    assert built.url.startswith("http://127.0.0.1:9")
    assert built.body


@pytest.mark.parametrize("name", NAMES)
def test_http_error_maps_to_a_registered_code(name: str) -> None:
    fmt = translate.get(name)
    code, message = fmt.http_error(429, b"not json")
    assert code in ev.ERROR_CODES
    # Connect maps 429 through its own code table (unavailable: docs/bindings.md).
    assert code == ("overloaded" if name == "connect" else "rate_limited")
    assert message
    code, _ = fmt.http_error(500, b"")
    assert code in ev.ERROR_CODES


def test_transports_have_their_formats() -> None:
    assert {f.name for f in registry.by_transport("signalr")} == {"signalr"}
    assert {f.name for f in registry.by_transport("connect")} == {"connect"}
    assert "anthropic" in {f.name for f in registry.by_transport("http-sse")}


@pytest.mark.parametrize("name", [f.name for f in formats() if f.fake])
def test_the_fake_named_by_a_format_renders_its_stream(name: str) -> None:
    fmt = translate.get(name)
    module = fmt.fake_module()
    assert RENDERERS[name] == fmt.fake
    request = RecordedRequest(method="POST", path="/", headers={}, body=b"{}")
    body = b"".join(module.render(Script(text="hello there"), model="m", request=request))
    t = fmt.new_translator(model="m")
    out = t.feed(body) + t.close()
    assert "".join(e.text for e in out if isinstance(e, ev.ContentDelta)) == "hello there"
    assert validate([b"".join(map(ev.dump, out))]).ok


def test_a_format_without_a_fake_says_so() -> None:
    with pytest.raises(LookupError, match="no fake upstream"):
        translate.get("signalr").fake_module()


def test_ingress_parsers_answer_in_the_vendors_format() -> None:
    with_ingress = {f.name: f.ingress for f in formats() if f.ingress is not None}
    assert {name: i.route for name, i in with_ingress.items()} == {
        "openai": "/v1/chat/completions",
        "anthropic": "/v1/messages",
        "openai-responses": "/v1/responses",
        "gemini": "/v1beta/models/{model}:streamGenerateContent",
    }
    body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    # Gemini's body has contents; its model comes from the path (copied in as "model").
    bodies = {
        "openai-responses": {"model": "m", "input": [{"role": "user", "content": "hi"}]},
        "gemini": {"model": "m", "contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
    }
    for name, ingress in with_ingress.items():
        request, encode = ingress.parse(dict(bodies.get(name, body)))
        assert request.model == "m"
        assert request.messages[-1].text == "hi"
        start = ev.StreamStart(v=ev.VERSION, seq=0, model="m", created=0)
        delta = ev.ContentDelta(
            v=ev.VERSION, seq=1, index=0, role="assistant", delta=ev.Delta(text="yo")
        )
        wire = encode(start) + encode(delta)
        assert b"yo" in wire, name


def test_the_docs_vendor_table_is_generated_from_the_registry() -> None:
    doc = (ROOT / "docs" / "translation.md").read_text(encoding="utf-8")
    assert vendor_table() in doc
    for name in NAMES:
        assert f"| `{name}` |" in vendor_table()


# --- layers ------------------------------------------------------------------------


def _imports(path: Path) -> set[str]:
    """Absolute names of the tokenwire modules ``path`` imports (relative ones resolved)."""
    package = ".".join(path.relative_to(ROOT / "src").with_suffix("").parts)
    if path.name == "__init__.py":
        package = package.removesuffix(".__init__")
    else:
        package = package.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                found.add(".".join([*base, *([node.module] if node.module else [])]))
            elif node.module:
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name.startswith("tokenwire")}


def test_translate_imports_nothing_above_it() -> None:
    above = ("tokenwire.gateway", "tokenwire.testing", "tokenwire.server", "tokenwire.client")
    above += ("tokenwire.cli", "tokenwire.conformance")
    for path in sorted(TRANSLATE.rglob("*.py")):
        bad = sorted(n for n in _imports(path) if n.startswith(above))
        assert not bad, f"{path.relative_to(ROOT)} imports {bad}"


def test_no_translate_module_is_over_800_lines() -> None:
    for path in sorted(TRANSLATE.rglob("*.py")):
        lines = path.read_text(encoding="utf-8").count("\n")
        assert lines <= 800, f"{path.relative_to(ROOT)} has {lines} lines"


def test_vendor_packages_keep_their_public_names() -> None:
    for name in ("anthropic", "openai", "connect"):
        module = importlib.import_module(f"tokenwire.translate.{name}")
        for public in module.__all__:
            assert hasattr(module, public), (name, public)
        assert module.FORMAT is translate.get(name)


# --- the shared batch loop ---------------------------------------------------------


def _first_events(name: str, count: int) -> bytes:
    module = translate.get(name).fake_module()
    request = RecordedRequest(method="POST", path="/", headers={}, body=b"{}")
    words = " ".join(f"w{i}" for i in range(20))
    pieces = module.render(Script(text=words), model="m", request=request)
    return b"".join(pieces[:count])


@pytest.mark.parametrize("name", SSE_WITH_FAKE)
def test_a_bad_frame_keeps_the_events_before_it_in_the_same_feed(name: str) -> None:
    # The base class owns the loop: the text already stamped from this chunk
    # comes out, then error + stream.end, with no seq gap.
    good = _first_events(name, 6)  # the stream is far from its end
    t = translator(name, model="m")
    out = t.feed(good + b"data: {not json\n\n" + good)
    assert t.done
    assert [e.seq for e in out] == list(range(len(out)))
    kinds = [type(e) for e in out]
    assert ev.ContentDelta in kinds, name
    # error (then any usage already reported, §5.4) and stream.end, after the text
    assert kinds.index(ev.ErrorEvent) > kinds.index(ev.ContentDelta)
    assert isinstance(out[-1], ev.StreamEnd)
    assert t.feed(b"data: {}\n\n") == [] and t.close() == []


@pytest.mark.parametrize("name", SSE_WITH_FAKE)
def test_whatever_the_split_the_output_is_the_same(name: str) -> None:
    body = _first_events(name, 100)
    whole = translator(name, model="m", created=1)
    expected = whole.feed(body) + whole.close()
    pieces = translator(name, model="m", created=1)
    got: list[ev.Event] = []
    for i in range(0, len(body), 7):
        got += pieces.feed(body[i : i + 7])
    got += pieces.close()
    assert msgspec.json.encode(got) == msgspec.json.encode(expected)


# --- credentials never printed (issue 13) -----------------------------------------

SECRET = "sk-SECRET-0123456789"


def test_vendor_request_repr_redacts_secret_headers_and_query_keys() -> None:
    built = VendorRequest(
        url=f"https://h.example/v1/x?alt=sse&key={SECRET}&Key=b{SECRET}",
        headers={
            "Authorization": f"Bearer {SECRET}",
            "x-api-key": SECRET,
            "X-Goog-Api-Key": SECRET,
            "api-key": SECRET,
            "content-type": "application/json",
        },
        body=SECRET.encode(),
    )
    for text in (repr(built), str(built), f"{built!r}", repr([built])):
        assert SECRET not in text
        assert "<redacted>" in text
        assert "alt=sse" in text and "application/json" in text
    assert built.headers["x-api-key"] == SECRET  # the request itself is untouched


@pytest.mark.parametrize("name", [n for n in NAMES if n != "signalr"])
def test_no_builder_leaks_the_api_key_in_its_repr(name: str) -> None:
    built = vendor_request(name, _request(), base_url="https://h.example", api_key=SECRET)
    assert SECRET in str(built.headers) + built.url  # the key is sent...
    assert SECRET not in repr(built)  # ...but never printed


def test_a_gemini_key_in_the_query_string_is_redacted() -> None:
    built = vendor_request(
        "gemini", _request(), base_url="https://h.example", headers={"x-goog-api-key": SECRET}
    )
    assert SECRET not in repr(built)
    in_query = VendorRequest(url=f"{built.url}&key={SECRET}", headers={}, body=b"")
    assert SECRET not in repr(in_query)
    assert "streamGenerateContent?alt=sse&key=<redacted>" in repr(in_query)
