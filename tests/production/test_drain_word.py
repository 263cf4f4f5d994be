"""The drain keeps its word (docs/gateway.md, "Graceful drain"), on a real ``tokenwire serve``:

- every request arriving on a kept-alive connection during the drain gets 503 with
  ``Retry-After``, until the drain ends: over HTTP/1.1, and as new streams on an
  HTTP/2 connection, whose in-flight stream finishes and which then gets GOAWAY;
- ``shutdown_timeout_s`` never cuts a drain silently: a file that sets one too short
  is refused, one that sets none gets one that fits, and the shipped
  ``examples/production.toml`` drains a 14 s stream intact.

Every wait is on a condition (events received, a log line), never a fixed sleep.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import signal
import socket
import threading
import time
from pathlib import Path
from typing import Any

import h2.config
import h2.connection
import h2.events
import httpx
import msgspec
import pytest
from click.testing import CliRunner
from tests.gateway.gateway_http import MEDIA
from tests.gateway.gateway_procs import Gateway
from tests.production.conftest import start, table

import tokenwire
from tokenwire import events as ev
from tokenwire.gateway import config as gw_config
from tokenwire.testing import wait_until

ROOT = Path(__file__).resolve().parents[2]
#: The key published in examples/production.toml's comments, for trying that file.
EXAMPLE_KEY = "tw-oKJDb7TUlDUN6ilCyKfxTak8nEqcaELW-9TtIf6E_LU"


def _wait(predicate: Any, what: str, timeout: float = 30.0) -> None:
    wait_until(predicate, timeout=timeout, what=what)


def _stream_body(tokens: int, delay_ms: int) -> bytes:
    return msgspec.json.encode(
        {
            "version": "1.0",
            "stream": True,
            "model": "demo",
            "messages": [{"role": "user", "content": "drain"}],
            "extensions": {"tokenwire:demo": {"delay_ms": delay_ms, "tokens": tokens}},
        }
    )


class Streaming(threading.Thread):
    """One paced demo stream read to its end; ``events`` grows as they arrive."""

    def __init__(self, url: str, body: bytes, headers: dict[str, str] | None = None) -> None:
        super().__init__(daemon=True)
        self.url, self.body, self.headers = url, body, headers or {}
        self.events: list[ev.Event] = []
        self.status: int | None = None
        self.failure: BaseException | None = None
        self.raw = b""

    def run(self) -> None:
        try:
            with (
                httpx.Client(base_url=self.url, timeout=60.0) as client,
                client.stream(
                    "POST",
                    "/v1/stream",
                    content=self.body,
                    headers={"content-type": MEDIA, **self.headers},
                ) as response,
            ):
                self.status = response.status_code
                decoder = tokenwire.sse.Decoder()
                for chunk in response.iter_bytes():
                    self.raw += chunk
                    for message in decoder.feed(chunk):
                        self.events.append(ev.parse(message.event, message.data))
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.failure = exc

    def finish(self) -> list[ev.Event]:
        self.join(60)
        assert not self.is_alive(), "the stream hung"
        assert self.failure is None, self.failure
        return self.events


#: RFC 9113 §6.8: the GOAWAY frame type.
GOAWAY = 0x7


#: The in-flight stream's length in tokens (50 ms apart) in the HTTP/1.1 drain test.
TOKENS = 120


def _intact(events: list[ev.Event], deltas: int) -> None:
    assert isinstance(events[-1], ev.StreamEnd)
    assert not [e for e in events if isinstance(e, ev.ErrorEvent)]
    assert len([e for e in events if isinstance(e, ev.ContentDelta)]) == deltas
    assert [e.seq for e in events] == list(range(len(events)))


def test_kept_alive_http1_requests_get_503_until_the_drain_ends(tmp_path: Path) -> None:
    gateway = start(tmp_path, table("server", {"drain_s": 20.0}))
    try:
        # 120 tokens 50 ms apart: a 6 s stream, in flight when SIGTERM comes and
        # through every request below, even on a loaded machine.
        stream = Streaming(gateway.url, _stream_body(TOKENS, 50))
        stream.start()
        _wait(lambda: len(stream.events) >= 3, "the stream's first events")
        kept = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=30)
        kept.request("GET", "/v1/models")
        first = kept.getresponse()
        first.read()
        assert first.status == 200 and not first.will_close
        sock = kept.sock
        assert gateway.proc is not None
        gateway.proc.send_signal(signal.SIGTERM)
        _wait(lambda: "draining" in gateway.stderr(), "the drain's log line")
        # Three requests, each once the stream has moved on, and none racing the
        # drain's end: when the last stream ends the drain is over and the server
        # closes kept-alive connections, which is its word kept, not broken.
        for _ in range(3):
            seen = len(stream.events)
            kept.request("POST", "/v1/stream", _stream_body(5, 0), {"content-type": MEDIA})
            response = kept.getresponse()
            payload = json.loads(response.read())
            assert kept.sock is sock, "the kept-alive connection was not kept"
            assert response.status == 503, payload
            assert response.getheader("retry-after") == "1"
            assert payload["error"]["code"] == "draining"
            _wait(lambda n=seen: len(stream.events) > n, "the stream to move on")
        _intact(stream.finish(), TOKENS)
        assert gateway.proc.wait(timeout=30) == 0
        kept.close()
    finally:
        gateway.stop()


def test_several_workers_keep_the_drains_word(tmp_path: Path) -> None:
    # Each worker is a granian process: each drains its own streams, and its kept-alive
    # connections get 503 until its drain ends (then it closes them and stops).
    gateway = start(tmp_path, table("server", {"drain_s": 20.0}), "--workers", "2")
    try:
        # Sixteen 3 s streams, spread over the workers by the kernel's accept. An idle
        # worker accepts first, so eight could all land on one while the kept-alive
        # connections below went to the other, whose drain then ends at once (seen
        # once in five loaded runs): sixteen keep both workers streaming.
        streams = [Streaming(gateway.url, _stream_body(60, 50)) for _ in range(16)]
        for stream in streams:
            stream.start()
        _wait(lambda: all(len(s.events) >= 3 for s in streams), "every stream's first events")
        kept = []
        for _ in range(6):
            connection = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=30)
            connection.request("GET", "/v1/models")
            first = connection.getresponse()
            first.read()
            assert first.status == 200 and not first.will_close
            kept.append(connection)
        assert gateway.proc is not None
        gateway.proc.send_signal(signal.SIGTERM)
        _wait(lambda: "draining" in gateway.stderr(), "the drain's log line")
        answers: list[list[int | str | None]] = [[] for _ in kept]
        while any(s.is_alive() for s in streams):
            seen = sum(len(s.events) for s in streams)
            for connection, got in zip(kept, answers, strict=True):
                if "closed" in got:
                    continue
                try:
                    connection.request(
                        "POST", "/v1/stream", _stream_body(5, 0), {"content-type": MEDIA}
                    )
                    response = connection.getresponse()
                    payload = json.loads(response.read())
                except (OSError, http.client.HTTPException):
                    got.append("closed")  # its worker's drain is over
                    continue
                assert response.status == 503, payload
                assert response.getheader("retry-after") == "1"
                assert payload["error"]["code"] == "draining"
                got.append(response.status)
            _wait(
                lambda n=seen: (
                    sum(len(s.events) for s in streams) > n
                    or not any(s.is_alive() for s in streams)
                ),
                "the streams",
            )
        # Kept-alive connections were answered 503 while streams were in flight (a
        # worker with none may end its drain, and close its connections, at once).
        assert max(got.count(503) for got in answers) >= 3, answers
        for stream in streams:
            _intact(stream.finish(), 60)
        assert gateway.proc.wait(timeout=30) == 0
        for connection in kept:
            connection.close()
    finally:
        gateway.stop()


class H2Client:
    """A minimal HTTP/2 client over one socket (h2c, prior knowledge), pumped by the test."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        self.conn.initiate_connection()
        self.sock.sendall(self.conn.data_to_send())
        self.status: dict[int, int] = {}
        self.headers: dict[int, dict[str, str]] = {}
        self.data: dict[int, bytes] = {}
        self.ended: set[int] = set()
        self.reset: set[int] = set()
        #: The last stream id of the server's GOAWAY, once it came.
        self.goaway_last: int | None = None
        self.closed = False
        self.buffer = b""

    def post(self, body: bytes) -> int:
        stream_id = self.conn.get_next_available_stream_id()
        self.conn.send_headers(
            stream_id,
            [
                (":method", "POST"),
                (":path", "/v1/stream"),
                (":scheme", "http"),
                (":authority", f"127.0.0.1:{self.port}"),
                ("content-type", MEDIA),
                ("content-length", str(len(body))),
            ],
        )
        self.conn.send_data(stream_id, body, end_stream=True)
        self.sock.sendall(self.conn.data_to_send())
        self.data[stream_id] = b""
        return stream_id

    def pump(self, until: Any, what: str, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while not until():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            assert not self.closed, f"the connection closed before {what}"
            self.sock.settimeout(max(0.05, deadline - time.monotonic()))
            try:
                raw = self.sock.recv(65536)
            except TimeoutError:
                continue
            if not raw:
                self.closed = True
                continue
            self.buffer += raw
            # One frame at a time: after GOAWAY h2 refuses what the server still sends
            # (a PING), and the events of the frames before it must not be lost.
            while len(self.buffer) >= 9:
                size = 9 + int.from_bytes(self.buffer[:3], "big")
                if len(self.buffer) < size:
                    break
                frame, self.buffer = self.buffer[:size], self.buffer[size:]
                if frame[3] == GOAWAY:
                    # RFC 9113 §6.8: the streams up to its last stream id go on. h2
                    # would close the whole connection on it, so it is noted, not fed.
                    self.goaway_last = int.from_bytes(frame[9:13], "big") & 0x7FFFFFFF
                    continue
                for event in self.conn.receive_data(frame):
                    self._on(event)
            with contextlib.suppress(OSError):
                self.sock.sendall(self.conn.data_to_send())

    def _on(self, event: Any) -> None:
        if isinstance(event, h2.events.ResponseReceived):
            headers = {k.decode(): v.decode() for k, v in event.headers}
            self.headers[event.stream_id] = headers
            self.status[event.stream_id] = int(headers[":status"])
        elif isinstance(event, h2.events.DataReceived):
            self.data[event.stream_id] = self.data.get(event.stream_id, b"") + event.data
            self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
        elif isinstance(event, h2.events.StreamEnded):
            self.ended.add(event.stream_id)
        elif isinstance(event, h2.events.StreamReset):
            self.reset.add(event.stream_id)

    def events(self, stream_id: int) -> list[ev.Event]:
        return list(tokenwire.iter_events(self.data[stream_id]))


def test_h2_new_streams_get_503_in_flight_ones_finish_then_goaway(tmp_path: Path) -> None:
    gateway = start(tmp_path, table("server", {"drain_s": 20.0, "cleartext_http2": True}))
    try:
        client = H2Client(gateway.port)
        # 60 tokens 50 ms apart: in flight when SIGTERM comes, done within the drain.
        long = client.post(_stream_body(60, 50))
        client.pump(lambda: client.data[long].count(b"event: ") >= 3, "the first events")
        assert client.status[long] == 200
        assert gateway.proc is not None
        gateway.proc.send_signal(signal.SIGTERM)
        client.pump(lambda: "draining" in gateway.stderr(), "the drain's log line")
        # A new stream on the same connection, during the drain: 503 + Retry-After.
        late = client.post(_stream_body(5, 0))
        client.pump(lambda: late in client.ended or late in client.reset, "the late answer")
        assert client.status.get(late) == 503, client.data.get(late)
        assert client.headers[late]["retry-after"] == "1"
        assert json.loads(client.data[late])["error"]["code"] == "draining"
        # The one in flight finishes whole, and the server says GOAWAY (before or
        # after its last frames: the streams up to GOAWAY's last stream id go on).
        client.pump(lambda: long in client.ended, "the stream's end")
        _intact(client.events(long), 60)
        client.pump(lambda: client.goaway_last is not None or client.closed, "GOAWAY")
        assert client.goaway_last is not None, "the connection closed without GOAWAY"
        assert client.goaway_last >= long
        assert gateway.proc.wait(timeout=30) == 0
        client.sock.close()
    finally:
        gateway.stop()


def test_examples_production_toml_drains_a_14_s_stream_intact(tmp_path: Path) -> None:
    example = (ROOT / "examples" / "production.toml").read_text()
    gateway = Gateway(tmp_path, config=example).start()
    try:
        # The demo's pacing: 200 tokens 70 ms apart, 14 s.
        stream = Streaming(
            gateway.url, _stream_body(200, 70), {"authorization": f"Bearer {EXAMPLE_KEY}"}
        )
        stream.start()
        _wait(lambda: len(stream.events) >= 14, "a second of the stream")  # ~1 s in
        assert stream.status == 200
        assert gateway.proc is not None
        gateway.proc.send_signal(signal.SIGTERM)
        _intact(stream.finish(), 200)
        assert gateway.proc.wait(timeout=60) == 0
        log = gateway.stderr()
        assert "shutdown_timeout" not in log and "drain_time_over" not in log
    finally:
        gateway.stop()


def test_a_shutdown_timeout_that_cuts_the_drain_is_refused() -> None:
    with pytest.raises(gw_config.ConfigError) as refused:
        gw_config.parse({"server": {"drain_s": 30.0, "shutdown_timeout_s": 10.0}})
    assert str(refused.value).startswith("server.shutdown_timeout_s: 10 s would cut the drain")
    assert "at least drain_s + 2 = 32" in str(refused.value)
    # None given: one that fits; one that fits: kept.
    assert gw_config.parse({"server": {"drain_s": 30.0}}).server.shutdown_timeout_s == 32.0
    assert gw_config.parse({}).server.shutdown_timeout_s == 32.0  # drain_s defaults to 30
    fits = {"server": {"drain_s": 2.0, "shutdown_timeout_s": 10.0}}
    assert gw_config.parse(fits).server.shutdown_timeout_s == 10.0
    # examples/production.toml fits as shipped.
    import tomllib

    example = tomllib.loads((ROOT / "examples" / "production.toml").read_text())
    assert "shutdown_timeout_s" in example["server"]
    gw_config.parse(example)


def test_serve_refuses_a_shutdown_timeout_flag_that_cuts_the_drain(tmp_path: Path) -> None:
    from tokenwire.cli import main

    path = tmp_path / "gw.toml"
    path.write_text(table("server", {"drain_s": 30.0}))
    result = CliRunner().invoke(
        main, ["serve", "--config", str(path), "--shutdown-timeout", "10", "--port", "0"]
    )
    assert result.exit_code != 0
    assert "--shutdown-timeout: 10 s would cut the drain" in result.output
