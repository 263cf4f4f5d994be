"""``tokenwire serve``'s command line: what it refuses before starting a server."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import tomllib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from tests.gateway.gateway_procs import Gateway

import tokenwire
from tokenwire import events as ev
from tokenwire.cli import main
from tokenwire.cli.serve import command
from tokenwire.gateway import config
from tokenwire.gateway.config import ModelConfig
from tokenwire.request import MEDIA_TYPE
from tokenwire.testing import wait_until
from tokenwire.testing.signalr_hub import Script, SignalRHub


def test_serve_is_a_subcommand() -> None:
    result = CliRunner().invoke(main, ["serve", "--help"])
    assert result.exit_code == 0
    for option in ("--config", "--host", "--port", "--workers", "--certfile", "--keyfile"):
        assert option in result.output
    assert "--log-content" in result.output


def test_bad_config_stops_with_the_key_named(tmp_path: Path) -> None:
    path = tmp_path / "g.toml"
    path.write_text('[[models]]\nname = "x"\nprovider = "openai"\n')
    result = CliRunner().invoke(command, ["--config", str(path)])
    assert result.exit_code == 1
    assert "models[0].base_url" in result.output


def test_certfile_needs_keyfile(tmp_path: Path) -> None:
    cert = tmp_path / "cert.pem"
    cert.write_text("not used")
    result = CliRunner().invoke(command, ["--certfile", str(cert)])
    assert result.exit_code == 2
    assert "--keyfile" in result.output


# -- ports (issue 13): never shared silently, the bound one announced ------------------


def serve(*args: str) -> subprocess.Popen[str]:
    """``tokenwire serve`` in its own process group, stdout and stderr piped.

    Not ``processes.ServedProcess``: what the command prints and how it refuses
    (a taken port, a bad config) is what these tests read, so they drive it raw.
    """
    argv = [sys.executable, "-m", "tokenwire", "serve", "--host", "127.0.0.1", *args]
    return subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )


def stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # granian's workers share its group
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()


def assert_one_line_refusal(proc: subprocess.Popen[str], port: int) -> None:
    try:
        out, err = proc.communicate(timeout=60)
    finally:
        stop(proc)
    assert proc.returncode == 1, (out, err)
    assert "Traceback" not in err
    assert out == ""  # no "gateway on ..." line for a server that never ran
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert f"port {port}" in lines[0] and "in use" in lines[0]


def test_a_port_held_by_another_program_is_refused_in_one_line() -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        assert_one_line_refusal(serve("--port", str(port)), port)


def test_port_zero_announces_the_bound_port_and_a_second_serve_there_is_refused() -> None:
    first = serve("--port", "0")
    try:
        assert first.stdout is not None
        line = first.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:(\d+)", line)
        assert match, line
        port = int(match.group(1))
        assert port != 0

        def answers() -> bool:  # the announced port is the one that answers
            assert first.poll() is None, first.stderr.read() if first.stderr else ""
            with contextlib.suppress(httpx.HTTPError):
                return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200
            return False

        wait_until(answers, timeout=60, what="the gateway answering on its announced port")
        # granian listens with SO_REUSEPORT: without the check, this one would share it.
        assert_one_line_refusal(serve("--port", str(port)), port)
        assert first.poll() is None
    finally:
        stop(first)


def test_make_run_takes_port_and_host() -> None:
    root = Path(__file__).resolve().parents[2]
    dry = subprocess.run(
        ["make", "-n", "-s", "run", "PORT=9123", "HOST=::1"],
        cwd=root, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert "tokenwire serve --host ::1 --port 9123" in dry.stdout
    default = subprocess.run(
        ["make", "-n", "-s", "run"], cwd=root, capture_output=True, text=True, timeout=60
    )
    assert "tokenwire serve --host 127.0.0.1 --port 8080" in default.stdout


# -- signalr and connect through first-class config keys (issue 13) ----------------------


def parse_models(toml: str) -> list[ModelConfig]:
    return config.parse(tomllib.loads(toml)).models


def test_binding_keys_reach_the_provider_as_its_options() -> None:
    signalr, connect, _demo = parse_models(
        '[[models]]\nname = "hub"\nprovider = "signalr"\n'
        'hub_url = "wss://hub.example.com/chathub"\nmapping = "copilot"\nnegotiate = true\n'
        'api_key_env = "HUB_TOKEN"\nserver_timeout_s = 20.0\nheaders = { x-client = "t" }\n'
        '[[models]]\nname = "cur"\nprovider = "connect"\nbase_url = "https://api.example.com"\n'
        'codec = "proto"\nmapping = "standard"\nidle_timeout_s = 2.0\ncompression = "gzip"\n'
    )
    assert signalr.options == {
        "hub_url": "wss://hub.example.com/chathub",
        "mapping": "copilot",
        "negotiate": True,
        "server_timeout_s": 20.0,
        "headers": {"x-client": "t"},
        "api_key_env": "HUB_TOKEN",
        "connect_timeout_s": 10.0,
        "reasoning": False,
    }
    assert connect.options == {
        "codec": "proto",
        "mapping": "standard",
        "idle_timeout_s": 2.0,
        "compression": "gzip",
    }


@pytest.mark.parametrize(
    ("entry", "key", "message"),
    [
        ('provider = "signalr"', "models[0].hub_url", "required"),
        ('provider = "signalr"\nhub_url = "ftp://h"', "models[0].hub_url", "ws(s)://"),
        ('provider = "signalr"\nhub_url = "ws://h"\nmapping = "text"', "models[0].mapping",
         "stream or copilot"),
        ('provider = "signalr"\nbase_url = "http://h"\nhub_url = "ws://h"', "models[0].base_url",
         "hub_url"),
        ('provider = "signalr"\nhub_url = "ws://h"\ncodec = "json"', "models[0].codec",
         "only for provider 'connect'"),
        ('provider = "signalr"\nhub_url = "ws://h"\n[models.options]\nhub_url = "ws://h"',
         "models[0].options.hub_url", "also set"),
        ('provider = "connect"\n[models.options]\nbase_url = "http://h"\ncodec = "xml"',
         "models[0].codec", "json or proto"),
        ('provider = "connect"\nbase_url = "http://h"\n[models.options]\napi_key = "k"',
         "models[0].api_key", "api_key_env"),
        ('provider = "signalr"\nhub_url = "ws://h"\naccess_token = "t"', "models[0].access_token",
         "api_key_env"),
        ('provider = "connect"', "models[0].base_url", "required"),
        ('provider = "connect"\nbase_url = "http://h"\ncodec = "xml"', "models[0].codec",
         "json or proto"),
        ('provider = "connect"\nbase_url = "http://h"\nmapping = "stream"', "models[0].mapping",
         "text or standard"),
        ('provider = "connect"\nbase_url = "http://h"\nidle_timeout_s = 0',
         "models[0].idle_timeout_s", "> 0"),
        ('provider = "connect"\nbase_url = "http://h"\nheaders = { Authorization = "Bearer k" }',
         "models[0].headers.Authorization", "api_key_env"),
        ('provider = "openai"\nbase_url = "http://h"\nhub_url = "ws://h"', "models[0].hub_url",
         "only for provider 'signalr', not 'openai'"),
        ('provider = "connect"\nbase_url = "http://h"\nhttp2 = "yes"', "http2", "bool"),
    ],
)  # fmt: skip
def test_binding_keys_are_checked_with_the_key_named(entry: str, key: str, message: str) -> None:
    with pytest.raises(config.ConfigError) as raised:
        parse_models(f'[[models]]\nname = "m"\n{entry}\n')
    assert key in str(raised.value) and message in str(raised.value), str(raised.value)


def stream_text(gw: Gateway, model: str) -> str:
    body = {"version": "1.0", "stream": True, "model": model,
            "messages": [{"role": "user", "content": "hi"}]}  # fmt: skip
    with gw.client(timeout=30) as client:
        r = client.post("/v1/stream", json=body, headers={"content-type": MEDIA_TYPE})
    assert r.status_code == 200, r.text
    report = tokenwire.validate([r.content])
    assert report.ok, [str(v) for v in report.violations]
    return "".join(
        e.delta.text for e in tokenwire.iter_events(r.content) if isinstance(e, ev.ContentDelta)
    )


class ConnectUpstream(BaseHTTPRequestHandler):
    """A Connect server-streaming endpoint: three JSON ChatChunks and a clean end-stream."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        ok = self.path == "/demo.v1.ChatService/StreamChat" and self.headers.get(
            "content-type", ""
        ).startswith("application/connect+json")
        if not ok:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        chunks = [{"text": "Hel"}, {"text": "lo"}, {"done": True}]
        body = b"".join(envelope(0, json.dumps(c).encode()) for c in chunks)
        body += envelope(2, b"{}")
        self.send_response(200)
        self.send_header("Content-Type", "application/connect+json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def envelope(flags: int, message: bytes) -> bytes:
    return bytes([flags]) + len(message).to_bytes(4, "big") + message


def test_signalr_and_connect_are_served_from_their_config_keys(tmp_path: Path) -> None:
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), ConnectUpstream)
    thread = threading.Thread(target=upstream.serve_forever, daemon=True)
    thread.start()
    try:
        with SignalRHub(default=Script(tokens=("Hi", " from", " the hub"))) as hub:
            toml = (
                f'[[models]]\nname = "hub"\nprovider = "signalr"\nhub_url = "{hub.url}"\n'
                "negotiate = true\n"
                f'[[models]]\nname = "cursor"\nprovider = "connect"\n'
                f'base_url = "http://127.0.0.1:{upstream.server_address[1]}"\ncodec = "json"\n'
            )
            config.parse(tomllib.loads(toml))  # the config check passes it
            with Gateway(tmp_path, config=toml) as gw:
                assert stream_text(gw, "hub") == "Hi from the hub"
                assert stream_text(gw, "cursor") == "Hello"
            assert hub.negotiations >= 1
    finally:
        upstream.shutdown()
        upstream.server_close()
        thread.join(5)
