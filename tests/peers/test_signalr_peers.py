"""SignalR with real peers.

First the official clients (npm ``@microsoft/signalr`` on node, PyPI
``signalrcore``) against the project's test hub, which shows the hub speaks the
real protocol; then the gateway's SignalR provider against that hub, alone and
behind a real ``tokenwire serve``, including the client leaving mid-stream.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.gateway.gateway_procs import Gateway
from tests.peers.conftest import PEERS, ROOT

from tokenwire import events as ev
from tokenwire import iter_events, validate
from tokenwire import request as rq
from tokenwire.gateway.providers.signalr import SignalRProvider
from tokenwire.testing import async_wait_until, eventually
from tokenwire.testing.signalr_hub import Script, SignalRHub

# signalrcore subscribes to a stream's items only after its StreamInvocation is
# sent, so an item the hub writes at once can beat the subscription on a loaded
# machine. The scripts it reads pause before each item; the other peers need not.
SCRIPTS = {
    "fail": Script(error="boom", delay_s=0.1),
    "limited": Script(error="rate_limited: too many requests"),
    "closed": Script(close_error="Server is shutting down."),
    "dropped": Script(drop=True),
    "tool": Script(tool_call=("call_1", "get_weather", '{"city":"Vienna"}'), usage=(9, 4)),
    "strings": Script(item="string", delay_s=0.1),
    "copilot": Script(mode="copilot", rewrite="Hello there, friend"),
    "throttled": Script(mode="copilot", result="Throttled"),
    "slow": Script(tokens=("tick",) * 200, delay_s=0.05),
    "silent": Script(delay_s=3.0),
}


@pytest.fixture
def hub() -> Iterator[SignalRHub]:
    # A short ping interval also lets signalrcore's stop() return quickly: its
    # reader thread only notices the closed socket when a frame arrives.
    with SignalRHub(scripts=SCRIPTS, ping_interval_s=0.2) as running:
        yield running


@pytest.fixture
def strict_hub() -> Iterator[SignalRHub]:
    with SignalRHub(scripts=SCRIPTS, require_negotiate=True, ping_interval_s=0.2) as running:
        yield running


def wait_until(predicate: Callable[[], bool], timeout: float = 10.0) -> bool:
    return eventually(predicate, timeout=timeout)


# --- the official clients against the test hub ---------------------------------------------


def run_js(modules: Path, url: str, prompt: str, mode: str) -> dict[str, Any]:
    result = subprocess.run(
        ["node", str(PEERS / "signalr_js_client.js"), url, prompt, mode],
        env=dict(os.environ, NODE_PATH=str(modules)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    out: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return out


@pytest.mark.parametrize("mode", ["negotiate", "skip"])
def test_microsoft_js_client_streams_from_the_hub(
    signalr_js: Path, hub: SignalRHub, mode: str
) -> None:
    out = run_js(signalr_js, hub.url, "hi", mode)
    assert out == {"items": [{"text": "Hel"}, {"text": "lo"}, {"text": " world"}], "error": None,
                   "echo": "ping-back"}  # fmt: skip
    received = hub.received
    assert received[0] == {"protocol": "json", "version": 1}
    assert {"type": 6} in received  # the client's keep-alive
    stream = next(m for m in received if m.get("type") == 4)
    assert stream["target"] == "StreamChat" and stream["arguments"] == ["hi"]
    assert stream["invocationId"] == "0"
    assert received[-1] == {"type": 7}  # stop() sends Close
    assert hub.outcomes == [("0", "completed")]
    if mode == "negotiate":
        assert hub.negotiations == 1 and "?id=" in hub.connections[0]
    else:
        assert hub.negotiations == 0


def test_microsoft_js_client_sees_a_completion_error(signalr_js: Path, hub: SignalRHub) -> None:
    out = run_js(signalr_js, hub.url, "fail", "negotiate")
    assert out["items"] == [{"text": "Hel"}, {"text": "lo"}, {"text": " world"}]
    assert out["error"] == "Error: boom"


def test_microsoft_js_client_needs_negotiate_on_a_strict_hub(
    signalr_js: Path, strict_hub: SignalRHub
) -> None:
    assert run_js(signalr_js, strict_hub.url, "hi", "negotiate")["error"] is None
    assert "failed" in run_js(signalr_js, strict_hub.url, "hi", "skip")


def run_signalrcore(url: str, prompt: str, mode: str) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, str(PEERS / "signalrcore_client.py"), url, prompt, mode],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    out: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return out


@pytest.mark.parametrize("mode", ["negotiate", "skip"])
def test_signalrcore_streams_from_the_hub(
    signalrcore_peer: None, hub: SignalRHub, mode: str
) -> None:
    out = run_signalrcore(hub.url, "strings", mode)
    assert out == {"opened": True, "items": ["Hel", "lo", " world"], "completed": True,
                   "errors": []}  # fmt: skip
    # signalrcore's handshake says version 0: the hub accepts 0 and 1.
    assert hub.received[0] == {"protocol": "json", "version": 0}
    stream = next(m for m in hub.received if m.get("type") == 4)
    assert stream["arguments"] == ["strings"] and stream["streamIds"] == []
    assert hub.negotiations == (1 if mode == "negotiate" else 0)


def test_signalrcore_sees_a_completion_error(signalrcore_peer: None, hub: SignalRHub) -> None:
    out = run_signalrcore(hub.url, "fail", "skip")
    assert out["items"] == [{"text": "Hel"}, {"text": "lo"}, {"text": " world"}]
    assert out["errors"] == ["boom"] and not out["completed"]


# --- the hub itself, with a raw WebSocket -------------------------------------------------


def test_hub_protocol_details(hub: SignalRHub) -> None:
    import websockets

    async def talk() -> list[str]:
        frames = []
        # Another protocol is refused in the handshake, and the socket closed.
        async with websockets.connect(hub.ws_url) as ws:
            await ws.send('{"protocol":"messagepack","version":1}\x1e')
            frames.append(await ws.recv())
            with pytest.raises(websockets.ConnectionClosed):
                await ws.recv()
        # Several records in one frame: an invocation answered with a result,
        # then a stream.
        async with websockets.connect(hub.ws_url) as ws:
            await ws.send(
                '{"protocol":"json","version":1}\x1e'
                '{"type":1,"invocationId":"a","target":"Echo","arguments":[7]}\x1e'
            )
            frames.append(await ws.recv())
            frames.append(await ws.recv())
        return frames

    refused, handshake, result = asyncio.run(talk())
    assert json.loads(refused.rstrip("\x1e")) == {
        "error": "Requested protocol 'messagepack' is not available."
    }
    assert handshake == '{}\x1e{"type":6}\x1e'
    assert json.loads(result.rstrip("\x1e")) == {"type": 3, "invocationId": "a", "result": 7}
    # Negotiate, version 0 and 1; an unknown path is a 404.
    v0 = httpx.post(hub.url + "/negotiate").json()
    assert "connectionToken" not in v0 and v0["negotiateVersion"] == 0
    v1 = httpx.post(hub.url + "/negotiate?negotiateVersion=1").json()
    assert v1["availableTransports"][0]["transport"] == "WebSockets" and v1["connectionToken"]
    assert httpx.get(hub.url.replace("/chathub", "/other")).status_code == 404


def test_prompt_of_reads_every_argument_shape() -> None:
    from tokenwire.testing.signalr_hub import prompt_of

    standard = json.loads(rq.dumps(request("from the request")))
    parts = {"messages": [{"role": "user", "content": [{"type": "text", "text": "parts"}]}]}
    assert prompt_of(["plain"]) == "plain"
    assert prompt_of([standard]) == "from the request"
    assert prompt_of([parts]) == "parts"
    assert prompt_of([{"message": {"text": "copilot"}}]) == "copilot"
    assert prompt_of([]) == prompt_of("x") == prompt_of([3]) == ""


# --- the gateway's provider against the hub -----------------------------------------------


def request(prompt: str, request_id: str = "req-1") -> rq.Request:
    return rq.build(
        model="hub",
        messages=[{"role": "user", "content": prompt}],
        metadata={"request_id": request_id},
    )


def generate(provider: SignalRProvider, prompt: str) -> list[ev.Event]:
    async def collect() -> list[ev.Event]:
        return [e async for e in provider.generate(request(prompt))]

    return asyncio.run(collect())


def provider_for(hub: SignalRHub, **options: Any) -> SignalRProvider:
    return SignalRProvider(model_name="hub", options={"hub_url": hub.url, **options})


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


def test_provider_negotiates_and_streams(strict_hub: SignalRHub) -> None:
    out = generate(provider_for(strict_hub, negotiate=True), "hi")
    assert describe(out) == [*HELLO, ("stop", 0, "end_turn"), ("stream.end",)]
    assert_valid(out)
    assert strict_hub.negotiations == 1
    stream = next(m for m in strict_hub.received if m.get("type") == 4)
    assert stream["target"] == "StreamChat"
    assert rq.parse(json.dumps(stream["arguments"][0]).encode()) == request("hi")
    # Finished cleanly: Close, no CancelInvocation.
    assert wait_until(lambda: strict_hub.received[-1] == {"type": 7})
    assert not any(m.get("type") == 5 for m in strict_hub.received)


@pytest.mark.parametrize(
    ("prompt", "options", "expected"),
    [
        ("strings", {}, [*HELLO, ("stop", 0, "end_turn"), ("stream.end",)]),
        ("fail", {}, [*HELLO, ("error", "internal_error"), ("stream.end",)]),
        ("limited", {}, [*HELLO, ("error", "rate_limited"), ("stream.end",)]),
        ("closed", {}, [*HELLO, ("error", "internal_error"), ("stream.end",)]),
        ("dropped", {}, [*HELLO, ("error", "internal_error"), ("stream.end",)]),
        (
            "tool",
            {},
            [*HELLO, ("tool", 1, "get_weather", {"city": "Vienna"}), ("usage", 9, 4),
             ("stop", 0, "end_turn"), ("stop", 1, "tool_use"), ("stream.end",)],
        ),
        (
            "copilot",
            {"mapping": "copilot"},
            [*HELLO, ("stop", 0, "content_filter"), ("text", 1, "Hello there, friend"),
             ("stop", 1, "end_turn"), ("stream.end",)],
        ),
        ("throttled", {"mapping": "copilot"}, [*HELLO, ("error", "rate_limited"), ("stream.end",)]),
    ],
)  # fmt: skip
def test_provider_outcomes(
    hub: SignalRHub, prompt: str, options: dict[str, Any], expected: list[tuple[Any, ...]]
) -> None:
    out = generate(provider_for(hub, **options), prompt)
    assert describe(out) == expected
    assert_valid(out)
    if options.get("mapping") == "copilot":
        stream = next(m for m in hub.received if m.get("type") == 4)
        assert stream["target"] == "chat"
        assert stream["arguments"][0]["message"]["text"] == prompt


def test_provider_gives_up_on_a_silent_hub() -> None:
    # No keep-alive pings from this hub: after the handshake it says nothing.
    with SignalRHub(scripts=SCRIPTS, ping_interval_s=None) as quiet:
        out = generate(provider_for(quiet, server_timeout_s=0.3), "silent")
    assert describe(out) == [("stream.start",), ("error", "overloaded"), ("stream.end",)]


def test_provider_connection_failures(hub: SignalRHub, strict_hub: SignalRHub) -> None:
    refused = SignalRProvider(
        model_name="hub", options={"hub_url": "ws://127.0.0.1:9/chathub", "connect_timeout_s": 2}
    )
    cases = [
        (refused, "hub connection failed"),
        (provider_for(strict_hub), "refused the WebSocket (HTTP 404)"),  # no negotiated id
        (SignalRProvider(model_name="hub", options={"hub_url": hub.url + "/x", "negotiate": True}),
         "negotiate answered HTTP 404"),
    ]  # fmt: skip
    for provider, message in cases:
        out = generate(provider, "hi")
        assert describe(out) == [("stream.start",), ("error", "internal_error"), ("stream.end",)]
        error = out[1]
        assert isinstance(error, ev.ErrorEvent) and message in error.message


def test_provider_options_are_checked() -> None:
    with pytest.raises(ValueError, match="hub_url"):
        SignalRProvider(model_name="m", options={})
    with pytest.raises(ValueError, match="unknown SignalR option"):
        SignalRProvider(model_name="m", options={"hub_url": "ws://h", "hub": 1})
    with pytest.raises(ValueError, match="mapping"):
        SignalRProvider(model_name="m", options={"hub_url": "ws://h", "mapping": "x"})
    with pytest.raises(ValueError, match="server_timeout_s"):
        SignalRProvider(model_name="m", options={"hub_url": "ws://h", "server_timeout_s": 0})


@pytest.mark.parametrize("how", ["aclose", "cancel"])
def test_client_leaving_cancels_the_invocation_and_closes(hub: SignalRHub, how: str) -> None:
    provider = provider_for(hub)

    async def leave_early() -> list[ev.Event]:
        seen: list[ev.Event] = []
        if how == "aclose":
            stream = provider.generate(request("slow"))
            async for event in stream:
                seen.append(event)
                if len(seen) == 4:
                    break
            await stream.aclose()  # what the server does when the client hung up
            return seen

        async def consume() -> None:
            async for event in provider.generate(request("slow")):
                seen.append(event)

        task = asyncio.create_task(consume())
        await async_wait_until(lambda: len(seen) >= 4)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return seen

    seen = asyncio.run(leave_early())
    assert len(seen) >= 4
    # The hub got CancelInvocation (type 5) then Close (type 7), stopped the stream,
    # and the socket closed.
    assert wait_until(lambda: ("0", "cancelled") in hub.outcomes)
    assert wait_until(lambda: [m.get("type") for m in hub.received][-2:] == [5, 7])
    assert wait_until(lambda: hub.disconnects == 1)


# --- end to end: behind a real gateway ------------------------------------------------------


def gateway_config(hub: SignalRHub) -> str:
    return f"""
[[models]]
name = "hub"
provider = "python"
factory = "tokenwire.gateway.providers.signalr:SignalRProvider"
[models.options]
model_name = "hub"
[models.options.options]
hub_url = "{hub.url}"
negotiate = true

[[models]]
name = "copilot"
provider = "python"
factory = "tokenwire.gateway.providers.signalr:SignalRProvider"
[models.options]
model_name = "copilot"
[models.options.options]
hub_url = "{hub.ws_url}"
mapping = "copilot"
"""


def body(model: str, prompt: str) -> bytes:
    payload = {
        "version": "1.0",
        "stream": True,
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "metadata": {"request_id": f"e2e-{prompt}"},
    }
    return json.dumps(payload).encode()


HEADERS = {"content-type": rq.MEDIA_TYPE, "accept": "text/event-stream"}


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


def test_gateway_end_to_end_and_disconnect(strict_hub: SignalRHub, tmp_path: Path) -> None:
    with Gateway(tmp_path, config=gateway_config(strict_hub)) as gateway:
        with httpx.Client(base_url=gateway.url, timeout=30) as client:
            captures: list[bytes] = []
            for model, prompt in (("hub", "hi"), ("hub", "tool"), ("copilot", "copilot")):
                response = client.post("/v1/stream", content=body(model, prompt), headers=HEADERS)
                assert response.status_code == 200
                report = validate([response.content])
                assert report.ok, [str(v) for v in report.violations]
                captures.append(response.content)
                events = list(iter_events(response.content))
                assert isinstance(events[0], ev.StreamStart) and events[0].model == model
                assert events[-1] == ev.StreamEnd(
                    v="1.0", seq=events[-1].seq, request_id=f"e2e-{prompt}"
                )
            cli_validate(tmp_path, [captures[0], captures[-1]])

            # The client leaves mid-stream: the upstream invocation is cancelled and
            # its WebSocket closed.
            before = strict_hub.disconnects
            with client.stream(
                "POST", "/v1/stream", content=body("hub", "slow"), headers=HEADERS
            ) as response:
                seen = b""
                for chunk in response.iter_raw():
                    seen += chunk
                    if seen.count(b"event: content.delta") >= 3:
                        break
            assert wait_until(lambda: ("0", "cancelled") in strict_hub.outcomes)
            assert wait_until(lambda: strict_hub.disconnects == before + 1)
            assert wait_until(lambda: [m.get("type") for m in strict_hub.received][-2:] == [5, 7])
