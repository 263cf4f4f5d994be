"""Hostile tool schemas (issue 16): never fetched, bounded, and the §8.2 check fails closed.

Each test expects a clear error or violation, never a hang, and records every
way the process could reach the network: a local HTTP server that a fetch
would hit, plus ``urllib.request.urlopen`` and ``socket.socket.connect``.
"""

from __future__ import annotations

import http.server
import json
import socket
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from click.testing import CliRunner

from tokenwire import events, lifecycle, request, toolschema
from tokenwire.cli.validate import command as validate_command
from tokenwire.errors import InvalidRequest
from tokenwire.writer import Writer

CATASTROPHIC = "^(a+)+$"


class _Recorder(http.server.BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 - the http.server name
        self.hits.append(self.path)
        body = b'{"type": "string"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def network(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """A schema server on 127.0.0.1 (port 0) and a record of every outgoing attempt."""
    _Recorder.hits = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    attempts: list[object] = []
    real_connect = socket.socket.connect

    def connect(self: socket.socket, address: Any) -> Any:
        attempts.append(("connect", address))
        return real_connect(self, address)

    def urlopen(*args: Any, **kwargs: Any) -> Any:
        attempts.append(("urlopen", args))
        raise AssertionError("urlopen called")

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    url = f"http://127.0.0.1:{server.server_address[1]}/schema.json"
    try:
        yield {"url": url, "attempts": attempts, "hits": _Recorder.hits}
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def body(parameters: dict[str, Any]) -> dict[str, Any]:
    return {
        "version": "1.0",
        "stream": True,
        "model": "demo",
        "messages": [{"role": "user", "content": "call t"}],
        "tools": [{"name": "t", "description": "a tool", "parameters": parameters}],
    }


def unchecked(parameters: dict[str, Any]) -> request.Request:
    """A Request built without request.parse, as a careless caller could."""
    return msgspec.convert(body(parameters), request.Request)


def stream_with_call(arguments: dict[str, Any]) -> bytes:
    writer = Writer(model="demo")
    out = writer.tool_call(id="call_1", name="t", arguments=arguments, index=0)
    out += writer.stop(0, "tool_use") + writer.usage(1, 1) + writer.end()
    return b"".join(map(events.dump, out))


def remote(url: str) -> dict[str, Any]:
    return {"type": "object", "properties": {"city": {"$ref": url}}}


def test_a_remote_ref_is_refused_when_the_request_arrives(network: dict[str, Any]) -> None:
    with pytest.raises(InvalidRequest) as info:
        request.parse(json.dumps(body(remote(network["url"]))))
    assert info.value.path == "tools[0].parameters.properties.city.$ref"
    assert info.value.status_hint == 400
    with pytest.raises(InvalidRequest):  # the client's constructor checks the same
        request.build(model="demo", messages="hi", tools=body(remote(network["url"]))["tools"])
    assert network["hits"] == [] and network["attempts"] == []


def test_the_validator_never_fetches_a_remote_ref(network: dict[str, Any]) -> None:
    report = lifecycle.validate(
        stream_with_call({"city": "Paris"}), unchecked(remote(network["url"]))
    )
    rules = [v.rule for v in report.violations]
    assert rules == ["invalid-arguments"]
    assert "unusable" in report.violations[0].message
    assert network["hits"] == [] and network["attempts"] == []


def test_the_registry_refuses_retrieval_even_past_check_schema(network: dict[str, Any]) -> None:
    # Defence in depth: a validator built the way compile_checker builds it,
    # but on a schema that never went through check_schema.
    import referencing

    cls = toolschema._safe_class("Draft202012Validator")
    registry = referencing.Registry(retrieve=toolschema._refuse_retrieval)  # type: ignore[call-arg]
    checker = toolschema.Checker(cls(remote(network["url"]), registry=registry))
    error = checker.first_error({"city": "Paris"})
    assert error is not None and "could not be checked" in error
    assert network["hits"] == [] and network["attempts"] == []


def test_tokenwire_validate_never_fetches_a_remote_ref(
    network: dict[str, Any], tmp_path: Path
) -> None:
    req = tmp_path / "req.json"
    req.write_text(json.dumps(body(remote(network["url"]))))
    stream = tmp_path / "stream.sse"
    stream.write_bytes(stream_with_call({"city": "Paris"}))
    result = CliRunner().invoke(validate_command, [str(stream), "--request", str(req)])
    assert result.exit_code == 1
    assert "only local references" in result.output
    assert network["hits"] == [] and network["attempts"] == []


@pytest.mark.timeout(60)  # a hang guard: the check itself is linear
def test_a_catastrophic_pattern_gives_a_prompt_clear_rejection() -> None:
    parameters = {
        "type": "object",
        "properties": {"x": {"type": "string", "pattern": CATASTROPHIC}},
    }
    req = request.parse(json.dumps(body(parameters)))  # RE2 compiles it: accepted
    report = lifecycle.validate(stream_with_call({"x": "a" * 30 + "!"}), req)
    assert [v.rule for v in report.violations] == ["invalid-arguments"]
    assert "does not match" in report.violations[0].message
    assert lifecycle.validate(stream_with_call({"x": "a" * 30}), req).ok


@pytest.mark.parametrize(
    "parameters",
    [
        {"type": "object", "properties": {"x": {"type": "strin"}}},  # slightly invalid
        {"$schema": "https://example.com/custom", "type": "object"},  # unsupported draft
        {"properties": {"x": {"type": "string", "pattern": "(a)\\1"}}},  # not linear-time
        {"properties": {"x": {"$ref": "#/$defs/nowhere"}}},  # unresolvable local ref
    ],
)
def test_an_unusable_schema_rejects_the_call_fail_closed(parameters: dict[str, Any]) -> None:
    # Before issue 16 a schema jsonschema refused turned argument checking off.
    report = lifecycle.validate(stream_with_call({"x": "anything"}), unchecked(parameters))
    assert [v.rule for v in report.violations] == ["invalid-arguments"]
    assert not report.ok


def test_an_amplifying_schema_is_refused_at_parse() -> None:
    parameters = {
        "type": "object",
        "properties": {"xs": {"type": "array", "minItems": 10**9, "items": {"type": "string"}}},
        "required": ["xs"],
    }
    with pytest.raises(InvalidRequest) as info:
        request.parse(json.dumps(body(parameters)))
    assert info.value.path == "tools[0].parameters.properties.xs.minItems"


def test_the_recorder_sees_what_stock_jsonschema_would_fetch(network: dict[str, Any]) -> None:
    # The control: jsonschema's default registry does try to fetch a remote
    # $ref (which is why tokenwire never uses it), and the fixture records it.
    import jsonschema

    schema = remote(network["url"])
    with pytest.raises(Exception):  # noqa: B017 - whatever the fetch failure becomes
        list(jsonschema.Draft202012Validator(schema).iter_errors({"city": "Paris"}))
    assert network["attempts"]
