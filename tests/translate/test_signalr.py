"""SignalR JSON hub protocol -> the standard: vectors, recordings, splits, truncation, CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.translate.conftest import assert_conformant, translate_pieces

from tokenwire import events as ev
from tokenwire import request as rq
from tokenwire import validate
from tokenwire.translate import signalr, translator, vendor_request

VECTORS_DIR = Path(__file__).resolve().parents[1] / "vectors" / "translate" / "signalr"
VECTORS = {
    p.stem: json.loads(p.read_text(encoding="utf-8")) for p in sorted(VECTORS_DIR.glob("*.json"))
}
RS = "\x1e"


# --- helpers -------------------------------------------------------------------------


def vector_body(vector: dict[str, Any]) -> bytes:
    """The received bytes: each record (an object, or raw text) + 0x1E, then ``tail``."""
    parts = []
    for record in vector["records"]:
        text = record if isinstance(record, str) else json.dumps(record, ensure_ascii=False)
        parts.append(text + RS)
    return ("".join(parts) + vector.get("tail", "")).encode("utf-8")


def describe(out: list[ev.Event]) -> list[list[Any]]:
    """Events in the vectors' terms: ["start"], ["text", i, t], ["stop", i, r], ..."""
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


def run(body: bytes, pieces: list[int] | None = None, **options: Any) -> list[ev.Event]:
    """Translate ``body`` cut at ``pieces`` (offsets), or whole."""
    cuts = sorted(set(pieces or []))
    chunks = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]
    return translate_pieces("signalr", chunks, **options)


def text_of(out: list[ev.Event]) -> str:
    return "".join(e.delta.text for e in out if isinstance(e, ev.ContentDelta))


# --- vectors ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(VECTORS))
def test_vector(name: str) -> None:
    vector = VECTORS[name]
    body = vector_body(vector)
    out = run(body, **vector.get("options", {}))
    assert describe(out) == vector["expect"], vector["description"]
    assert_conformant(out)
    # Byte by byte gives exactly the same events.
    assert run(body, list(range(1, len(body))), **vector.get("options", {})) == out


def test_vectors_cover_the_hard_cases() -> None:
    # Each hard case of the issue has at least one vector of its own.
    for needed in (
        "stream-text-objects",
        "stream-string-items",
        "handshake-error",
        "completion-error",
        "close-with-error",
        "truncated-mid-record",
        "copilot-cumulative",
        "copilot-rewrite",
        "copilot-shrink",
    ):
        assert needed in VECTORS


# --- recordings (../shared/vendor-fixtures/signalr) --------------------------------------


def server_frames(capture: Path) -> bytes:
    """The S->C frames of a probe capture, concatenated (each line is a Python repr)."""
    out = b""
    for line in capture.read_text(encoding="utf-8").splitlines():
        if line.startswith("S->C "):
            frame = line[len("S->C ") :].strip()
            assert frame[0] == frame[-1] == "'"
            out += frame[1:-1].replace("\\x1e", RS).encode("utf-8")
    return out


@pytest.mark.fixtures
@pytest.mark.parametrize(
    "name",
    ["microsoft-signalr-js-10.0.11-stream-capture.txt", "signalrcore-1.0.2-stream-capture.txt"],
)
def test_recorded_probe_hub_streams(vendor_fixtures: Path, name: str) -> None:
    body = server_frames(vendor_fixtures / "signalr" / name)
    assert body.startswith(b"{}" + RS.encode())
    out = run(body)
    assert describe(out) == [
        ["start"],
        ["text", 0, "Hel"],
        ["text", 0, "lo"],
        ["text", 0, " world"],
        ["stop", 0, "end_turn"],
        ["end"],
    ]
    assert_conformant(out)
    assert run(body, list(range(1, len(body)))) == out


@pytest.mark.fixtures
def test_recorded_pyrit_copilot_frames(vendor_fixtures: Path) -> None:
    body = (vendor_fixtures / "signalr" / "pyrit-m365-copilot-raw-frames.txt").read_bytes()
    out = run(body, mapping="copilot")
    # The test lists the Completion before the final StreamItem: the stream ends there.
    assert describe(out) == [["start"], ["text", 0, "Apple"], ["stop", 0, "end_turn"], ["end"]]
    assert_conformant(out)
    # In wire order (final item, then Completion), the final text's tail is sent too.
    records = body.split(RS.encode())
    completion, final_item = records[3], records[4]
    reordered = RS.encode().join([*records[:3], final_item, completion, b""])
    out = run(reordered, mapping="copilot")
    assert text_of(out) == (
        "Apple. \n\nWould you like me to list more fruits or give you some interesting facts "
        "about apples?"
    )
    assert_conformant(out)


# --- properties ------------------------------------------------------------------------

_VECTOR_BODIES = [(vector_body(v), v.get("options", {})) for v in VECTORS.values()]

_text = st.text(
    alphabet=st.one_of(
        st.characters(blacklist_categories=("Cs",)), st.sampled_from('\x1e\u2028{}"\\')
    ),
    max_size=8,
)


@st.composite
def stream_records(draw: st.DrawFn) -> tuple[list[dict[str, Any]], str]:
    """A hub's answer in the stream mapping, ending with a Completion; and the full text."""
    records: list[dict[str, Any]] = [{}]
    full = ""
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["string", "text", "delta", "ping", "other", "ack"]))
        if kind == "ping":
            records.append({"type": 6})
        elif kind == "other":
            records.append({"type": 1, "target": "Notify", "arguments": [draw(_text)]})
        elif kind == "ack":
            records.append({"type": 2, "invocationId": "other", "item": draw(_text)})
        else:
            text = draw(_text)
            full += text
            item: Any = {"string": text, "text": {"text": text}, "delta": {"delta": text}}[kind]
            records.append({"type": 2, "invocationId": "0", "item": item})
    records.append({"type": 3, "invocationId": "0"})
    return records, full


def wire(records: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + RS for r in records).encode()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(_VECTOR_BODIES), st.lists(st.integers(0, 4000), max_size=8))
def test_any_split_of_a_vector_gives_the_same_events(
    case: tuple[bytes, dict[str, Any]], cuts: list[int]
) -> None:
    body, options = case
    assert run(body, [c for c in cuts if 0 < c < len(body)], **options) == run(body, **options)


@settings(max_examples=120, deadline=None)
@given(stream_records(), st.lists(st.integers(1, 2000), max_size=6))
def test_any_split_of_a_stream_gives_the_same_events(
    case: tuple[list[dict[str, Any]], str], cuts: list[int]
) -> None:
    records, full = case
    body = wire(records)
    whole = run(body, invocation_id="0")
    assert text_of(whole) == full
    assert isinstance(whole[-1], ev.StreamEnd) and not any(
        isinstance(e, ev.ErrorEvent) for e in whole
    )
    assert run(body, [c for c in cuts if c < len(body)], invocation_id="0") == whole
    assert_conformant(whole)


@settings(max_examples=120, deadline=None)
@given(stream_records(), st.data())
def test_truncation_anywhere_gives_error_and_stream_end(
    case: tuple[list[dict[str, Any]], str], data: st.DataObject
) -> None:
    records, full = case
    body = wire(records)
    cut = data.draw(st.integers(0, len(body) - 1))
    out = run(body[:cut], invocation_id="0")
    assert isinstance(out[-2], ev.ErrorEvent) and isinstance(out[-1], ev.StreamEnd)
    assert full.startswith(text_of(out))
    assert_conformant(out)


@settings(max_examples=120, deadline=None)
@given(st.binary(max_size=200), st.sampled_from(["stream", "copilot"]))
def test_arbitrary_bytes_never_raise(data: bytes, mapping: str) -> None:
    for body in (data, b"{}\x1e" + data):
        out = run(body, mapping=mapping)
        assert isinstance(out[0], ev.StreamStart) and isinstance(out[-1], ev.StreamEnd)
        assert_conformant(out)


@settings(max_examples=120, deadline=None)
@given(st.lists(st.text(max_size=6), min_size=1, max_size=6))
def test_copilot_growing_snapshots_send_exactly_the_final_text(pieces: list[str]) -> None:
    snapshots = ["".join(pieces[: i + 1]) for i in range(len(pieces))]
    records: list[dict[str, Any]] = [{}]
    for snapshot in snapshots:
        message = {"text": snapshot, "author": "bot", "messageId": "m"}
        records.append({"type": 1, "target": "update", "arguments": [{"messages": [message]}]})
    records.append({"type": 3, "invocationId": "0"})
    out = run(wire(records), mapping="copilot")
    assert text_of(out) == snapshots[-1]
    assert {e.index for e in out if isinstance(e, ev.ContentDelta)} <= {0}


@settings(max_examples=120, deadline=None)
@given(st.lists(st.text(alphabet="ab ", max_size=5), min_size=1, max_size=8))
def test_copilot_any_snapshots_end_with_the_final_text(snapshots: list[str]) -> None:
    # Whatever the rewrites, the last block's text has the final snapshot as a
    # prefix (a shrink sends nothing), and the stream stays conformant.
    records: list[dict[str, Any]] = [{}]
    for snapshot in snapshots:
        message = {"text": snapshot, "author": "bot", "messageId": "m"}
        records.append({"type": 1, "target": "update", "arguments": [{"messages": [message]}]})
    records.append({"type": 3, "invocationId": "0"})
    out = run(wire(records), mapping="copilot")
    assert_conformant(out)
    deltas = [e for e in out if isinstance(e, ev.ContentDelta)]
    last = max((e.index for e in deltas), default=0)
    assert "".join(e.delta.text for e in deltas if e.index == last).startswith(snapshots[-1])
    stops = {e.index: e.stop_reason for e in out if isinstance(e, ev.ContentStop)}
    assert all(stops[i] == "content_filter" for i in stops if i != last)


# --- API -------------------------------------------------------------------------------


def test_translator_options_and_defaults() -> None:
    t = translator("signalr", model="m", mapping=None)
    assert isinstance(t, signalr.Translator) and t.mapping == "stream"
    assert translator("signalr", model="m", mapping="copilot").mapping == "copilot"
    with pytest.raises(ValueError, match="mapping"):
        translator("signalr", model="m", mapping="bing")
    with pytest.raises(TypeError):
        translator("signalr", model="m", codec="json")


def test_nothing_raises_past_the_translator(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self: signalr.Translator, raw: bytes) -> list[ev.Event]:
        if b"boom" in raw:
            raise RuntimeError("a bug")
        return self.writer.text("ok")

    monkeypatch.setattr(signalr.Translator, "_on_record", broken)
    t = signalr.Translator(model="m")
    out = t.feed(b"a\x1eboom\x1e")
    # What the first record produced is kept; the bug becomes error + stream.end.
    assert describe(out) == [["start"], ["text", 0, "ok"], ["error", "internal_error"], ["end"]]
    assert t.done and t.feed(b"more\x1e") == [] and t.close() == []


def test_record_helpers_are_the_hub_protocol() -> None:
    assert signalr.handshake_request() == b'{"protocol":"json","version":1}\x1e'
    assert signalr.ping() == b'{"type":6}\x1e'
    assert signalr.cancel_invocation("0") == b'{"type":5,"invocationId":"0"}\x1e'
    assert signalr.close_message() == b'{"type":7}\x1e'
    assert json.loads(signalr.close_message("x", allow_reconnect=False)[:-1]) == {
        "type": 7,
        "error": "x",
        "allowReconnect": False,
    }
    assert json.loads(signalr.completion("1", error="e")[:-1]) == {
        "type": 3,
        "invocationId": "1",
        "error": "e",
    }
    assert json.loads(signalr.stream_item("1", {"text": "a"})[:-1])["item"] == {"text": "a"}
    assert signalr.error_code("rate_limited: slow") == ("rate_limited", "slow")
    assert signalr.error_code("cancelled:") == ("cancelled", "cancelled")
    assert signalr.error_code("Error: x") == ("internal_error", "Error: x")


def test_record_decoder_limits_and_offsets() -> None:
    decoder = signalr.RecordDecoder(max_record_bytes=4)
    decoder.push(b"ab\x1ecd")
    assert decoder.next_record() == b"ab" and decoder.next_record() is None
    assert decoder.pending == 2
    decoder.push(b"efg")
    with pytest.raises(Exception, match="byte 3"):
        decoder.next_record()


def test_build_request_is_handshake_then_stream_invocation() -> None:
    req = rq.build(
        model="m",
        messages=[{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}],
        metadata={"request_id": "r1"},
    )
    built = vendor_request("signalr", req, hub_url="https://hub.example/chathub")
    assert built.method == "GET" and built.url == "wss://hub.example/chathub"
    records = built.body.split(b"\x1e")
    assert json.loads(records[0]) == {"protocol": "json", "version": 1}
    invocation = json.loads(records[1])
    assert invocation["type"] == 4 and invocation["invocationId"] == "0"
    assert invocation["target"] == "StreamChat"
    assert rq.parse(json.dumps(invocation["arguments"][0]).encode()) == req
    assert records[2] == b""

    copilot = signalr.build_request(req, hub_url="ws://h/c", mapping="copilot", invocation_id="7")
    invocation = json.loads(copilot.body.split(b"\x1e")[1])
    assert invocation["target"] == "chat" and invocation["invocationId"] == "7"
    assert invocation["arguments"][0]["message"]["text"] == "hi"
    with pytest.raises(ValueError):
        signalr.build_request(req, hub_url="ws://h/c", mapping="nope")


# --- the CLI ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "args", "status"),
    [
        ("stream-text-objects", [], 0),
        ("copilot-cumulative", ["--mapping", "copilot"], 0),
        ("completion-error", [], 1),
    ],
)
def test_convert_cli(tmp_path: Path, name: str, args: list[str], status: int) -> None:
    capture = tmp_path / f"{name}.txt"
    capture.write_bytes(vector_body(VECTORS[name]))
    result = subprocess.run(
        [sys.executable, "-m", "tokenwire", "convert", "--from", "signalr", *args, str(capture)],
        capture_output=True,
        timeout=60,
    )
    assert result.returncode == status, result.stderr.decode()
    report = validate([result.stdout])
    assert report.ok, [str(v) for v in report.violations]
    expected = run(vector_body(VECTORS[name]), **VECTORS[name].get("options", {}))
    out_text = "".join(
        json.loads(line[len("data: ") :])["delta"]["text"]
        for line in result.stdout.decode().splitlines()
        if line.startswith("data: ") and '"content.delta"' in line
    )
    assert out_text == text_of(expected)


def test_an_item_failing_half_way_keeps_the_events_it_made() -> None:
    # Found by tests/fuzz: an item with usage and an unregistered stop_reason.
    # The usage was stamped before the stop failed; it must still go out, or
    # the stream has a seq gap where it was.
    records = [
        {},
        {"type": 6},
        {"type": 2, "invocationId": "0", "item": "Hi"},
        {
            "type": 2,
            "invocationId": "0",
            "item": {"usage": {"input_tokens": 2, "output_tokens": 3}, "stop_reason": "nd_turn"},
        },
        {"type": 3, "invocationId": "0"},
    ]
    body = "".join(json.dumps(r) + RS for r in records).encode()
    out = translate_pieces("signalr", [body], mapping="stream")
    assert_conformant(out)
    assert [type(e).__name__ for e in out] == [
        "StreamStart",
        "ContentDelta",
        "Usage",
        "ErrorEvent",
        "StreamEnd",
    ]
    assert "nd_turn" in out[3].message  # type: ignore[union-attr]
