"""Connect streaming (envelopes, JSON/proto, the standard's binding) -> the standard."""

from __future__ import annotations

import json
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.translate.conftest import assert_conformant, translate_pieces

from tokenwire import events as ev
from tokenwire import request as rq
from tokenwire import validate
from tokenwire.errors import FramingError, TranslationError
from tokenwire.translate import _protowire as pw
from tokenwire.translate import connect, translator, vendor_request
from tokenwire.writer import Writer

VECTORS_DIR = Path(__file__).resolve().parents[1] / "vectors" / "translate" / "connect"
VECTORS = {
    p.stem: json.loads(p.read_text(encoding="utf-8")) for p in sorted(VECTORS_DIR.glob("*.json"))
}


# --- helpers -------------------------------------------------------------------------


def _gzip(data: bytes) -> bytes:
    c = zlib.compressobj(wbits=31)
    return c.compress(data) + c.flush()


def envelope_bytes(spec: dict[str, Any]) -> bytes:
    """One envelope of a vector: ``json`` / ``text`` / ``proto_hex`` message, or ``raw_hex``."""
    if "raw_hex" in spec:
        return bytes.fromhex(spec["raw_hex"])
    if "json" in spec:
        message = json.dumps(spec["json"], ensure_ascii=False).encode()
    elif "text" in spec:
        message = spec["text"].encode()
    else:
        message = bytes.fromhex(spec["proto_hex"])
    if spec.get("gzip"):
        message = _gzip(message)
    if "cut" in spec:
        message = message[: -spec["cut"]]
    return connect.encode_envelope(message, flags=spec["flags"])


def vector_body(vector: dict[str, Any]) -> bytes:
    return b"".join(envelope_bytes(spec) for spec in vector["envelopes"])


def describe(out: list[ev.Event]) -> list[list[Any]]:
    rows: list[list[Any]] = []
    for e in out:
        match e:
            case ev.StreamStart():
                rows.append(["start"])
            case ev.ContentDelta():
                rows.append(["reasoning" if e.reasoning else "text", e.index, e.delta.text])
            case ev.ToolCall():
                rows.append(["tool", e.index, e.id, e.name, json.loads(e.arguments)])
            case ev.ContentStop():
                rows.append(["stop", e.index, e.stop_reason])
            case ev.Usage():
                rows.append(["usage", e.input_tokens, e.output_tokens])
            case ev.ErrorEvent():
                rows.append(["error", e.code])
            case ev.StreamEnd():
                rows.append(["end"])
            case ev.UnknownEvent():
                rows.append(["unknown", e.type])
    return rows


def run(
    body: bytes, pieces: list[int] | None = None, *, after: str = "close", **options: Any
) -> list[ev.Event]:
    """Translate ``body`` cut at the offsets ``pieces``; end with ``close()`` or ``idle()``."""
    cuts = sorted({c for c in pieces or [] if 0 < c < len(body)})
    chunks = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]
    if after == "close":
        return translate_pieces("connect", chunks, **options)
    t = translator("connect", model="test-model", request_id="req-1", created=0, **options)
    out: list[ev.Event] = []
    for chunk in chunks:
        out += t.feed(chunk)
    out += t.idle()
    assert t.close() == [] and t.idle() == []
    return out


def text_of(out: list[ev.Event]) -> str:
    return "".join(e.delta.text for e in out if isinstance(e, ev.ContentDelta))


# --- vectors ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(VECTORS))
def test_vector(name: str) -> None:
    vector = VECTORS[name]
    body = vector_body(vector)
    options = vector.get("options", {})
    after = vector.get("after", "close")
    out = run(body, after=after, **options)
    assert describe(out) == vector["expect"], vector["description"]
    assert_conformant(out)
    assert run(body, list(range(1, len(body))), after=after, **options) == out


# --- recordings (../shared/vendor-fixtures/connect: the real connectrpc 0.13 server) -----


@pytest.mark.fixtures
@pytest.mark.parametrize("codec", ["json", "proto"])
@pytest.mark.parametrize("outcome", ["hi", "fail"])
def test_recorded_connectrpc_bodies(vendor_fixtures: Path, codec: str, outcome: str) -> None:
    body = (vendor_fixtures / "connect" / f"resp-{codec}-{outcome}.bin").read_bytes()
    out = run(body, codec=codec)
    rows = [["start"], ["text", 0, "Hel"], ["text", 0, "lo"], ["text", 0, " world"]]
    if outcome == "hi":
        rows += [["stop", 0, "end_turn"], ["end"]]  # done: true ends it (Cursor-style)
    else:
        rows += [["error", "rate_limited"], ["end"]]  # resource_exhausted
    assert describe(out) == rows
    assert_conformant(out)
    assert run(body, list(range(1, len(body))), codec=codec) == out
    if outcome == "fail":
        error = [e for e in out if isinstance(e, ev.ErrorEvent)][0]
        assert error.message == "quota exceeded mid-stream"


@pytest.mark.fixtures
def test_recorded_trailers_are_kept(vendor_fixtures: Path) -> None:
    body = (vendor_fixtures / "connect" / "resp-json-hi.bin").read_bytes()
    # Without the done marker the end-stream envelope ends the stream (Windsurf-style)
    # and its metadata is kept as the trailers.
    done = connect.encode_envelope(b'{"done":true}')
    t = connect.Translator(model="m", codec="json")
    t.feed(body.replace(done, b""))
    assert t.done and t.trailers == {"x-trailer-demo": ["t1"]}


# --- properties ------------------------------------------------------------------------

_VECTOR_CASES = [
    (vector_body(v), v.get("after", "close"), v.get("options", {})) for v in VECTORS.values()
]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(_VECTOR_CASES), st.lists(st.integers(1, 2000), max_size=8))
def test_any_split_of_a_vector_gives_the_same_events(
    case: tuple[bytes, str, dict[str, Any]], cuts: list[int]
) -> None:
    body, after, options = case
    assert run(body, cuts, after=after, **options) == run(body, after=after, **options)


_texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=8)


@st.composite
def text_streams(draw: st.DrawFn) -> tuple[bytes, str, dict[str, Any]]:
    """A text-mapping body (either codec, some envelopes gzipped) ending with its end
    marker (end-stream, or a done message), the full text and the translator options."""
    codec = draw(st.sampled_from(["json", "proto"]))
    body = b""
    full = ""
    for text in draw(st.lists(_texts, max_size=6)):
        full += text
        message = connect.encode_text_chunk(text, codec=codec)
        if draw(st.booleans()):
            body += connect.encode_envelope(_gzip(message), flags=connect.FLAG_COMPRESSED)
        else:
            body += connect.encode_envelope(message)
    if draw(st.booleans()):
        body += connect.end_stream(metadata={"k": ["v"]})
    else:
        body += connect.encode_envelope(connect.encode_text_chunk(done=True, codec=codec))
    return body, full, {"codec": codec, "encoding": draw(st.sampled_from([None, "gzip"]))}


@settings(max_examples=120, deadline=None)
@given(text_streams(), st.lists(st.integers(1, 500), max_size=6))
def test_any_split_of_a_text_stream_gives_the_same_events(
    case: tuple[bytes, str, dict[str, Any]], cuts: list[int]
) -> None:
    body, full, options = case
    whole = run(body, **options)
    assert text_of(whole) == full
    assert not any(isinstance(e, ev.ErrorEvent) for e in whole)
    assert run(body, cuts, **options) == whole
    assert_conformant(whole)


@settings(max_examples=120, deadline=None)
@given(text_streams(), st.data())
def test_truncation_anywhere_gives_error_and_stream_end(
    case: tuple[bytes, str, dict[str, Any]], data: st.DataObject
) -> None:
    body, full, options = case
    cut = data.draw(st.integers(0, len(body) - 1))
    out = run(body[:cut], **options)
    assert isinstance(out[-2], ev.ErrorEvent) and isinstance(out[-1], ev.StreamEnd)
    assert full.startswith(text_of(out))
    assert_conformant(out)


@settings(max_examples=120, deadline=None)
@given(
    st.binary(max_size=200),
    st.sampled_from(["json", "proto"]),
    st.sampled_from(["text", "standard"]),
    st.sampled_from(["close", "idle"]),
)
def test_arbitrary_bytes_never_raise(data: bytes, codec: str, mapping: str, after: str) -> None:
    out = run(data, after=after, codec=codec, mapping=mapping)
    assert isinstance(out[0], ev.StreamStart) and isinstance(out[-1], ev.StreamEnd)
    assert_conformant(out)


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=120))
def test_arbitrary_proto_messages_never_raise(message: bytes) -> None:
    # Well-framed envelopes whose messages are arbitrary bytes.
    body = connect.encode_envelope(message) + connect.end_stream()
    for mapping in ("text", "standard"):
        out = run(body, codec="proto", mapping=mapping)
        assert_conformant(out)


# -- the standard's binding: encode -> decode is the identity -----------------------------

_counts = st.integers(0, 2**53)
_ids = st.text(st.characters(blacklist_categories=("Cs",)), max_size=6)


def _events() -> st.SearchStrategy[ev.Event]:
    v, seq = st.just("1.0"), _counts
    return st.one_of(
        st.builds(
            ev.StreamStart,
            v=v,
            seq=seq,
            model=_ids,
            created=st.integers(-(2**63), 2**63 - 1),
            request_id=st.none() | _ids,
        ),
        st.builds(
            ev.ContentDelta,
            v=v,
            seq=seq,
            index=st.integers(0, 2**32 - 1),
            role=st.just("assistant"),
            delta=st.builds(ev.Delta, text=_ids),
            reasoning=st.booleans(),
        ),
        st.builds(
            ev.ContentStop,
            v=v,
            seq=seq,
            index=st.integers(0, 2**32 - 1),
            stop_reason=st.sampled_from(sorted(ev.STOP_REASONS)),
        ),
        st.builds(
            ev.ToolCall,
            v=v,
            seq=seq,
            index=st.integers(0, 2**32 - 1),
            id=_ids,
            name=_ids,
            arguments=st.just('{"a": 1}'),
        ),
        st.builds(ev.Usage, v=v, seq=seq, input_tokens=_counts, output_tokens=_counts),
        st.builds(ev.ErrorEvent, v=v, seq=seq, code=_ids, message=_ids),
        st.builds(ev.StreamEnd, v=v, seq=seq, request_id=st.none() | _ids),
        # An unregistered type is still a valid name (events.TYPE_NAME, conformance ruling 13).
        st.builds(
            ev.UnknownEvent,
            type=st.from_regex(ev.TYPE_NAME, fullmatch=True),
            data=st.just('{"x":1}'),
            v=v,
            seq=seq,
        ),
    )


@settings(max_examples=120, deadline=None)
@given(_events(), st.sampled_from(["json", "proto"]))
def test_event_messages_round_trip(event: ev.Event, codec: str) -> None:
    assert connect.decode_event(connect.encode_event(event, codec), codec) == event


@st.composite
def standard_streams(draw: st.DrawFn) -> list[ev.Event]:
    """A conformant standard stream, built with the Writer."""
    w = Writer(model="up", request_id="r", created=1)
    out = w.start()
    for i in range(draw(st.integers(0, 5))):
        kind = draw(st.sampled_from(["text", "tool", "usage"]))
        if kind == "text":
            out += w.text(draw(_texts) or "x", 0)
        elif kind == "tool":
            out += w.tool_call(id=f"c{i}", name="f", arguments={"i": i}, index=1 + i)
            out += w.stop(1 + i, "tool_use")
        else:
            out += w.usage(draw(st.integers(0, 99)), draw(st.integers(0, 99)))
    if draw(st.booleans()):
        out += w.error("overloaded", "later")
    return out + w.end()


@settings(max_examples=120, deadline=None)
@given(standard_streams(), st.sampled_from(["json", "proto"]), st.lists(st.integers(1, 999)))
def test_the_standard_binding_carries_any_stream(
    stream: list[ev.Event], codec: str, cuts: list[int]
) -> None:
    body = b"".join(connect.encode_envelope(connect.encode_event(e, codec)) for e in stream)
    body += connect.end_stream()
    out = run(body, cuts, codec=codec, mapping="standard")
    # Restamped by the translator's writer, but the same events in the same order.
    assert describe(out) == describe(stream)
    assert_conformant(out)


# --- units -----------------------------------------------------------------------------


@settings(deadline=None)
@given(st.integers(-(2**63), 2**64 - 1))
def test_varints_round_trip(value: int) -> None:
    encoded = pw.varint(value)
    assert len(encoded) <= 10
    fields = list(pw.decode_fields(b"\x08" + encoded))
    assert fields[0][:2] == (1, pw.VARINT)
    decoded = fields[0][2]
    assert isinstance(decoded, int)
    assert (pw.to_int64(decoded) if value < 0 else decoded) == value


def test_protowire_encoders_omit_defaults() -> None:
    assert pw.field_varint(1, 0) == b"" and pw.field_bool(2, False) == b""
    assert pw.field_string(1, "") == b"" and pw.field_string(1, None) == b""
    assert pw.field_string(1, "", always=True) == b"\x0a\x00"
    assert pw.field_bool(2, True) == b"\x10\x01"
    with pytest.raises(ValueError):
        pw.varint(2**64)


def test_envelope_decoder_errors_name_the_offset() -> None:
    decoder = connect.EnvelopeDecoder(max_message_bytes=4)
    assert decoder.feed(b"\x00\x00\x00\x00\x01a\x00\x00") == [connect.Envelope(0, b"a")]
    assert decoder.pending == 2
    with pytest.raises(FramingError, match="byte 6"):
        decoder.feed(b"\x00\x00\x09")
    with pytest.raises(FramingError, match="reserved flag bits set \\(0x80\\)"):
        connect.EnvelopeDecoder().feed(b"\x80\x00\x00\x00\x00")
    envelope = connect.Envelope(3, b"")
    assert envelope.end_stream and envelope.compressed


def test_error_code_table() -> None:
    assert connect.error_code("resource_exhausted") == "rate_limited"
    assert connect.error_code("unavailable") == "overloaded"
    assert connect.error_code("canceled") == "cancelled"
    assert connect.error_code("internal") == "internal_error"
    assert connect.error_code(None) == connect.error_code("nope") == "internal_error"
    assert set(connect.ERROR_CODES.values()) <= ev.ERROR_CODES | {"cancelled"}
    assert connect.http_status_code(429) == "unavailable"
    assert connect.http_status_code(418) == "unknown"


def test_error_from_http() -> None:
    body = b'{"code": "invalid_argument", "message": "connect-protocol-version must be \'1\'"}'
    code, message = connect.error_from_http(400, body)
    assert code == "internal_error" and "connect-protocol-version" in message
    assert connect.error_from_http(429, b"")[0] == "overloaded"  # inferred: unavailable
    assert connect.error_from_http(404, b"not json")[0] == "internal_error"  # unimplemented
    assert connect.error_from_http(503, b'{"code":"resource_exhausted"}')[0] == "rate_limited"


def test_translator_options_and_defaults() -> None:
    t = translator("connect", model="m", codec=None, mapping=None)
    assert isinstance(t, connect.Translator) and (t.codec, t.mapping) == ("json", "text")
    with pytest.raises(ValueError, match="codec"):
        translator("connect", model="m", codec="xml")
    with pytest.raises(ValueError, match="mapping"):
        translator("connect", model="m", mapping="cursor")


def test_nothing_raises_past_the_translator(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self: connect.Translator, envelope: connect.Envelope) -> list[ev.Event]:
        if envelope.data == b"boom":
            raise RuntimeError("a bug")
        return self.writer.text("ok")

    monkeypatch.setattr(connect.Translator, "_on_envelope", broken)
    t = connect.Translator(model="m")
    out = t.feed(connect.encode_envelope(b"a") + connect.encode_envelope(b"boom"))
    assert describe(out) == [["start"], ["text", 0, "ok"], ["error", "internal_error"], ["end"]]
    assert t.done and t.feed(b"x") == [] and t.close() == [] and t.idle() == []


def test_decode_event_errors() -> None:
    with pytest.raises(ValueError):
        connect.decode_event(b"", "xml")
    with pytest.raises(ValueError):
        connect.encode_event(ev.StreamEnd(v="1.0", seq=0), "xml")
    assert connect.decode_event(b"", "proto") is None
    assert connect.decode_event(b"{}", "json") is None
    with pytest.raises(TranslationError):
        connect.decode_event(b'{"usage": {"inputTokens": -1}}', "json")
    start = connect.decode_event(
        bytes.fromhex("0a03312e3052110a016d10ffffffffffffffffff011a0172"), "proto"
    )
    assert isinstance(start, ev.StreamStart) and start.created == -1


# --- the request -----------------------------------------------------------------------


def _request() -> rq.Request:
    return rq.build(
        model="m",
        messages=[
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": [{"type": "text", "text": "second"}]},
        ],
        metadata={"request_id": "r1"},
    )


def _single_envelope(body: bytes) -> connect.Envelope:
    envelopes = connect.EnvelopeDecoder().feed(body)
    assert len(envelopes) == 1
    return envelopes[0]


def test_build_request_text_mapping() -> None:
    built = vendor_request(
        "connect", _request(), base_url="https://api.example/", codec="proto", upstream_model="x"
    )
    assert built.url == "https://api.example/demo.v1.ChatService/StreamChat"
    assert built.headers["content-type"] == "application/connect+proto"
    assert built.headers["connect-protocol-version"] == "1"
    envelope = _single_envelope(built.body)
    assert envelope.flags == 0
    assert list(pw.decode_fields(envelope.data)) == [(1, pw.LEN, b"second")]

    built = connect.build_request(
        _request(),
        base_url="http://h",
        service_path="x.v1.S/M",
        compression="gzip",
        timeout_ms=1500,
        api_key="k",
        headers={"x-extra": "1"},
    )
    assert built.url == "http://h/x.v1.S/M"
    assert built.headers["content-type"] == "application/connect+json"
    assert built.headers["connect-content-encoding"] == "gzip"
    assert built.headers["connect-timeout-ms"] == "1500"
    assert built.headers["authorization"] == "Bearer k"
    assert built.headers["x-extra"] == "1"
    envelope = _single_envelope(built.body)
    assert envelope.compressed
    assert json.loads(zlib.decompress(envelope.data, 31)) == {"prompt": "second"}


@pytest.mark.parametrize("codec", ["json", "proto"])
def test_build_request_standard_mapping(codec: str) -> None:
    req = _request()
    built = connect.build_request(req, base_url="http://h", codec=codec, mapping="standard")
    assert built.url == "http://h/tokenwire.llmstream.v1.LLMStreamService/Stream"
    data = _single_envelope(built.body).data
    if codec == "json":
        text = json.loads(data)["request"]
    else:
        ((number, _, value),) = list(pw.decode_fields(data))
        assert number == 1 and isinstance(value, bytes)
        text = value.decode()
    assert rq.parse(text.encode()) == req


def test_build_request_refuses_unknown_options() -> None:
    with pytest.raises(ValueError):
        connect.build_request(_request(), base_url="http://h", codec="xml")
    with pytest.raises(ValueError):
        connect.build_request(_request(), base_url="http://h", mapping="x")
    with pytest.raises(ValueError):
        connect.build_request(_request(), base_url="http://h", compression="br")


# --- the CLI ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "args", "status"),
    [
        ("json-windsurf-end-stream", [], 0),
        ("proto-windsurf", ["--codec", "proto"], 0),
        ("standard-proto-full", ["--codec", "proto", "--mapping", "standard"], 0),
        ("standard-json-full", ["--mapping", "standard"], 0),
        ("gzip-when-none-named", [], 0),
        ("error-resource-exhausted", [], 1),
        ("cut-inside-message", [], 1),
    ],
)
def test_convert_cli(tmp_path: Path, name: str, args: list[str], status: int) -> None:
    capture = tmp_path / f"{name}.bin"
    body = vector_body(VECTORS[name])
    capture.write_bytes(body)
    result = subprocess.run(
        [sys.executable, "-m", "tokenwire", "convert", "--from", "connect", *args, str(capture)],
        capture_output=True,
        timeout=60,
    )
    assert result.returncode == status, result.stderr.decode()
    report = validate([result.stdout])
    assert report.ok, [str(v) for v in report.violations]
    types = [
        json.loads(line[len("data: ") :])["type"]
        for line in result.stdout.decode().splitlines()
        if line.startswith("data: ")
    ]
    expected = run(body, **VECTORS[name].get("options", {}))
    assert types == [e.type for e in expected]
