"""Connect with a real peer: the PyPI ``connectrpc`` server as the gateway's upstream.

The server (``connect_servers.py``, code from the real generators) runs under
uvicorn (HTTP/1.1, as the shared captures were made) and hypercorn (HTTP/2 with
prior knowledge). The gateway's Connect provider streams from it with the JSON
and proto codecs, in both mappings, through a clean end, mid-stream errors, a
Cursor-style stream that never ends, and a client that leaves.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from tests.gateway.gateway_procs import Gateway
from tests.peers.conftest import PeerServer
from tests.translate.conftest import FIXTURES_DIR
from tests.translate.test_connect import _events

import tokenwire
from tokenwire import events as ev
from tokenwire import iter_events, validate
from tokenwire import request as rq
from tokenwire.gateway.providers.connect import ConnectProvider
from tokenwire.testing import async_wait_until
from tokenwire.translate import connect

PROTO_FILE = Path(tokenwire.__file__).resolve().parent / "proto" / "llm_stream.proto"
CHAT = "/demo.v1.ChatService/StreamChat"


def tagged(mode: str) -> str:
    """A prompt whose first word picks the server's behaviour, unique per test."""
    return f"{mode} {uuid.uuid4().hex[:8]}"


def request(prompt: str) -> rq.Request:
    messages = [{"role": "user", "content": prompt}]
    return rq.build(model="up", messages=messages, metadata={"request_id": "req-1"})


def generate(provider: ConnectProvider, prompt: str) -> list[ev.Event]:
    async def collect() -> list[ev.Event]:
        return [e async for e in provider.generate(request(prompt))]

    return asyncio.run(collect())


def provider_for(server: PeerServer, **options: Any) -> ConnectProvider:
    return ConnectProvider(model_name="up", options={"base_url": server.url, **options})


def describe(out: list[ev.Event]) -> list[tuple[Any, ...]]:
    rows: list[tuple[Any, ...]] = []
    for e in out:
        if isinstance(e, ev.ContentDelta):
            rows.append(("text", e.index, e.delta.text))
        elif isinstance(e, ev.ContentStop):
            rows.append(("stop", e.index, e.stop_reason))
        elif isinstance(e, ev.ErrorEvent):
            rows.append(("error", e.code))
        elif isinstance(e, ev.ToolCall):
            rows.append(("tool", e.index, e.name, json.loads(e.arguments)))
        elif isinstance(e, ev.Usage):
            rows.append(("usage", e.input_tokens, e.output_tokens))
        else:
            rows.append((e.type,))
    return rows


def assert_valid(out: list[ev.Event]) -> None:
    report = validate([b"".join(map(ev.dump, out))])
    assert report.ok, [str(v) for v in report.violations]


HELLO = [("stream.start",), ("text", 0, "Hel"), ("text", 0, "lo"), ("text", 0, " world")]
CLEAN = [*HELLO, ("stop", 0, "end_turn"), ("stream.end",)]


# --- the server is the one that made the captures ---------------------------------------------


@pytest.mark.parametrize("codec", ["json", "proto"])
@pytest.mark.parametrize("outcome", ["hi", "fail"])
def test_the_server_reproduces_the_shared_captures(
    uvicorn_server: PeerServer, codec: str, outcome: str
) -> None:
    capture = FIXTURES_DIR / "connect" / f"resp-{codec}-{outcome}.bin"
    if not capture.is_file():
        if os.environ.get("CI") == "true":
            pytest.fail(f"vendor recordings not found at {capture} (CI=true)")
        pytest.skip(f"vendor recordings not found at {capture}")
    built = connect.build_request(request(outcome), base_url=uvicorn_server.url, codec=codec)
    # The captures were made without response compression.
    headers = built.headers | {"connect-accept-encoding": "identity"}
    response = httpx.post(built.url, headers=headers, content=built.body, timeout=10)
    assert response.status_code == 200
    assert response.headers["content-type"] == f"application/connect+{codec}"
    assert response.content == capture.read_bytes()


# --- the provider against uvicorn (HTTP/1.1) ----------------------------------------------


@pytest.mark.parametrize("codec", ["json", "proto"])
@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("hi", CLEAN),  # the done: true marker ends it
        ("windsurf", CLEAN),  # only the end-stream envelope ends it
        ("fail", [*HELLO, ("error", "rate_limited"), ("stream.end",)]),  # resource_exhausted
        ("unavailable", [("stream.start",), ("error", "overloaded"), ("stream.end",)]),
    ],
)
def test_provider_text_mapping(
    uvicorn_server: PeerServer, codec: str, mode: str, expected: list[tuple[Any, ...]]
) -> None:
    out = generate(provider_for(uvicorn_server, codec=codec), tagged(mode))
    assert describe(out) == expected
    assert_valid(out)
    if mode == "fail":
        error = out[-2]
        assert isinstance(error, ev.ErrorEvent) and error.message == "quota exceeded mid-stream"


def test_provider_sends_a_gzip_request(uvicorn_server: PeerServer) -> None:
    out = generate(provider_for(uvicorn_server, codec="proto", compression="gzip"), tagged("hi"))
    assert describe(out) == CLEAN


def test_the_server_compresses_its_answer(uvicorn_server: PeerServer) -> None:
    # The provider accepts gzip, so the real server sends flag-0x01 envelopes:
    # every provider test above decodes them.
    built = connect.build_request(request("hi"), base_url=uvicorn_server.url, codec="proto")
    response = httpx.post(built.url, headers=built.headers, content=built.body, timeout=10)
    assert response.headers["connect-content-encoding"] == "gzip"
    envelopes = connect.EnvelopeDecoder().feed(response.content)
    assert [e.flags for e in envelopes] == [1, 1, 1, 1, 3]  # the end-stream too


@pytest.mark.parametrize("codec", ["json", "proto"])
@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("hi", [*HELLO, ("stop", 0, "end_turn"), ("usage", 5, 3), ("stream.end",)]),
        (
            "tool",
            [*HELLO, ("stop", 0, "end_turn"), ("tool", 1, "get_weather", {"city": "Vienna"}),
             ("stop", 1, "tool_use"), ("usage", 5, 3), ("stream.end",)],
        ),
        ("fail", [*HELLO, ("error", "overloaded"), ("stream.end",)]),  # an error event
        ("abort", [*HELLO, ("error", "overloaded"), ("stream.end",)]),  # Connect unavailable
    ],
)  # fmt: skip
def test_provider_standard_mapping(
    uvicorn_server: PeerServer, codec: str, mode: str, expected: list[tuple[Any, ...]]
) -> None:
    provider = provider_for(uvicorn_server, codec=codec, mapping="standard")
    out = generate(provider, tagged(mode))
    assert describe(out) == expected
    assert_valid(out)
    assert isinstance(out[-1], ev.StreamEnd) and out[-1].request_id == "req-1"


def test_provider_non_200_answers(uvicorn_server: PeerServer) -> None:
    cases = [
        # unknown method: HTTP 404, no Connect body -> unimplemented
        (provider_for(uvicorn_server, service_path="/demo.v1.ChatService/Nope"), "HTTP 404"),
        # a bad protocol version: HTTP 400 with a Connect JSON error
        (
            provider_for(uvicorn_server, headers={"connect-protocol-version": "2"}),
            "connect-protocol-version must be '1'",
        ),
        (
            ConnectProvider(
                model_name="up",
                options={"base_url": "http://127.0.0.1:9", "connect_timeout_s": 2},
            ),
            "upstream connection failed",
        ),
    ]
    for provider, message in cases:
        out = generate(provider, "hi")
        assert describe(out) == [("stream.start",), ("error", "internal_error"), ("stream.end",)]
        error = out[1]
        assert isinstance(error, ev.ErrorEvent) and message in error.message


def test_provider_options_are_checked() -> None:
    with pytest.raises(ValueError, match="base_url"):
        ConnectProvider(model_name="m", options={})
    with pytest.raises(ValueError, match="unknown Connect option"):
        ConnectProvider(model_name="m", options={"base_url": "http://h", "codecs": "json"})
    with pytest.raises(ValueError, match="codec"):
        ConnectProvider(model_name="m", options={"base_url": "http://h", "codec": "xml"})
    with pytest.raises(ValueError, match="idle_timeout_s"):
        ConnectProvider(model_name="m", options={"base_url": "http://h", "idle_timeout_s": -1})


# --- HTTP/2 (hypercorn), Cursor-style open streams, and the client leaving ---------------------


@pytest.mark.parametrize("codec", ["json", "proto"])
def test_provider_over_http2(hypercorn_server: PeerServer, codec: str) -> None:
    out = generate(provider_for(hypercorn_server, codec=codec, h2c=True), tagged("hi"))
    assert describe(out) == CLEAN
    assert f"open {CHAT} HTTP/2" in hypercorn_server.lines()


@pytest.mark.parametrize("server_name", ["hypercorn_server", "uvicorn_server"])
def test_cursor_style_stream_ends_on_idle_and_is_closed(
    request: pytest.FixtureRequest, server_name: str
) -> None:
    # The server sends three chunks and then keeps the stream open, without a
    # done marker or END_STREAM. The idle timeout ends the standard stream
    # cleanly, and the provider closes the upstream stream.
    server: PeerServer = request.getfixturevalue(server_name)
    prompt = tagged("hang")
    provider = provider_for(server, idle_timeout_s=0.5, h2c=server_name == "hypercorn_server")
    out = generate(provider, prompt)
    assert describe(out) == CLEAN
    assert_valid(out)
    assert server.wait_for_line(f"closed {prompt}")


@pytest.mark.parametrize("mapping", ["text", "standard"])
@pytest.mark.parametrize("server_name", ["hypercorn_server", "uvicorn_server"])
def test_client_leaving_ends_the_upstream_stream(
    request: pytest.FixtureRequest, server_name: str, mapping: str
) -> None:
    server: PeerServer = request.getfixturevalue(server_name)
    provider = provider_for(server, mapping=mapping, h2c=server_name == "hypercorn_server")
    prompt = tagged("slow")

    async def leave_early() -> int:
        seen = 0

        async def consume() -> None:
            nonlocal seen
            async for _ in provider.generate(request_of(prompt)):
                seen += 1

        task = asyncio.create_task(consume())
        await async_wait_until(lambda: seen >= 6)
        task.cancel()  # what the gateway does when its client hangs up
        with pytest.raises(asyncio.CancelledError):
            await task
        return seen

    assert asyncio.run(leave_early()) >= 6
    # The server's handler was stopped long before its 400 chunks (10 s) were out.
    assert server.wait_for_line(f"closed {prompt}", timeout=5)


def request_of(prompt: str) -> rq.Request:
    return request(prompt)


# --- the hand-written codec against the real protobuf runtime ------------------------------


def _pb() -> Any:
    from tests.peers.connect_gen import llm_stream_pb

    return llm_stream_pb


def _pb_event(event: ev.Event) -> Any:
    from protobuf import Oneof

    pb = _pb()
    match event:
        case ev.StreamStart():
            name = "stream_start"
            body = pb.StreamStart(
                model=event.model, created=event.created, request_id=event.request_id
            )
        case ev.ContentDelta():
            name = "content_delta"
            body = pb.ContentDelta(
                index=event.index,
                role=event.role,
                delta=pb.Delta(text=event.delta.text),
                reasoning=event.reasoning,
            )
        case ev.ContentStop():
            name = "content_stop"
            body = pb.ContentStop(index=event.index, stop_reason=event.stop_reason)
        case ev.ToolCall():
            name = "tool_call"
            body = pb.ToolCall(
                index=event.index, id=event.id, name=event.name, arguments=event.arguments
            )
        case ev.Usage():
            name = "usage"
            body = pb.Usage(input_tokens=event.input_tokens, output_tokens=event.output_tokens)
        case ev.ErrorEvent():
            name, body = "error", pb.Error(code=event.code, message=event.message)
        case ev.StreamEnd():
            name, body = "stream_end", pb.StreamEnd(request_id=event.request_id)
        case ev.UnknownEvent():
            name, body = "unregistered", pb.Unregistered(type=event.type, data=event.data)
    return pb.Event(v=event.v, seq=event.seq, type=Oneof(name, body))


@pytest.mark.usefixtures("connectrpc_peer")
@settings(max_examples=300, deadline=None)
@given(_events())
def test_codec_matches_the_protobuf_runtime(event: ev.Event) -> None:
    message = _pb_event(event)
    # Byte for byte the same binary encoding, and the same proto3 JSON.
    assert connect.encode_event(event, "proto") == message.to_binary()
    assert json.loads(connect.encode_event(event, "json")) == json.loads(message.to_json())
    # And each side reads the other's.
    assert connect.decode_event(message.to_binary(), "proto") == event
    assert connect.decode_event(message.to_json().encode(), "json") == event
    pb = _pb()
    assert pb.Event.from_binary(connect.encode_event(event, "proto")) == message


@pytest.mark.usefixtures("connectrpc_peer")
def test_generated_code_matches_llm_stream_proto() -> None:
    # Every field of the .proto, as the generated module's descriptor has it:
    # regenerate connect_gen when this fails.
    declared = set(
        re.findall(r"^\s+(?:optional\s+)?\w+\s+(\w+)\s*=\s*(\d+);", PROTO_FILE.read_text(), re.M)
    )
    generated = {
        (field.name, str(field.number))
        for message in _pb().desc().messages
        for field in message.fields
    }
    assert declared == generated


# --- end to end: behind a real gateway ------------------------------------------------------


def _model(name: str, server: PeerServer, **options: Any) -> str:
    lines = [
        "[[models]]",
        f'name = "{name}"',
        'provider = "python"',
        'factory = "tokenwire.gateway.providers.connect:ConnectProvider"',
        "[models.options]",
        f'model_name = "{name}"',
        "[models.options.options]",
        f'base_url = "{server.url}"',
    ]
    lines += [f"{key} = {json.dumps(value)}" for key, value in options.items()]
    return "\n".join(lines) + "\n"


def cli_validate(tmp_path: Path, captures: list[bytes]) -> None:
    """``tokenwire validate`` agrees: every capture is conformant (exit status 0)."""
    for i, capture in enumerate(captures):
        (tmp_path / f"capture-{i}.sse").write_bytes(capture)
    script = (
        "import subprocess, sys\n"
        "codes = [subprocess.run([sys.executable, '-m', 'tokenwire', 'validate', p]).returncode"
        " for p in sys.argv[1:]]\n"
        "sys.exit(max(codes))\n"
    )
    files = [str(tmp_path / f"capture-{i}.sse") for i in range(len(captures))]
    check = subprocess.run([sys.executable, "-c", script, *files], capture_output=True, timeout=120)
    assert check.returncode == 0, check.stdout.decode()


def test_gateway_end_to_end_and_disconnect(
    uvicorn_server: PeerServer, hypercorn_server: PeerServer, tmp_path: Path
) -> None:
    config = (
        _model("cursor-json", uvicorn_server, codec="json")
        + _model("cursor-proto-h2", hypercorn_server, codec="proto", h2c=True)
        + _model("standard-h2", hypercorn_server, codec="proto", mapping="standard", h2c=True)
    )
    headers = {"content-type": rq.MEDIA_TYPE, "accept": "text/event-stream"}

    def body(model: str, prompt: str) -> bytes:
        messages = [{"role": "user", "content": prompt}]
        payload = {"version": "1.0", "stream": True, "model": model, "messages": messages}
        return json.dumps(payload).encode()

    with (
        Gateway(tmp_path, config=config) as gateway,
        httpx.Client(base_url=gateway.url, timeout=30) as client,
    ):
        captures: list[bytes] = []
        for model in ("cursor-json", "cursor-proto-h2", "standard-h2"):
            for mode in ("hi", "fail"):
                response = client.post(
                    "/v1/stream", content=body(model, tagged(mode)), headers=headers
                )
                assert response.status_code == 200
                report = validate([response.content])
                assert report.ok, [str(v) for v in report.violations]
                captures.append(response.content)
                events = list(iter_events(response.content))
                text = "".join(e.delta.text for e in events if isinstance(e, ev.ContentDelta))
                assert text == "Hello world"
                errors = [e for e in events if isinstance(e, ev.ErrorEvent)]
                assert bool(errors) == (mode == "fail")
        cli_validate(tmp_path, [captures[0], captures[-1]])

        # The client leaves mid-stream: the gateway cancels the provider, which
        # closes its HTTP/2 connection, and the upstream handler is stopped.
        prompt = tagged("slow")
        with client.stream(
            "POST", "/v1/stream", content=body("cursor-proto-h2", prompt), headers=headers
        ) as response:
            seen = b""
            for chunk in response.iter_raw():
                seen += chunk
                if seen.count(b"event: content.delta") >= 5:
                    break
        assert hypercorn_server.wait_for_line(f"closed {prompt}", timeout=5)
