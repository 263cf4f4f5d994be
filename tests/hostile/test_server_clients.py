"""Hostile clients against a real ``tokenwire serve`` on 127.0.0.1 (one worker).

- 50 clients POST a stream request and never read: the worker's memory stays
  bounded while they hang, the write deadline ends every stream and closes
  its connection, and the memory goes back;
- slowloris: a request head that never completes has its connection closed;
  a body trickled or never finished gets ``408``;
- over the memory budget a new stream gets ``503 overloaded`` with ``Retry-After``;
- SIGTERM ends the server while streams are producing.

Every wait is on a condition with a generous bound (``hostile_procs.DEADLINE_S``).
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator

import httpx
import pytest
from tests.hostile import hostile_procs as hp

from tokenwire.testing import processes

CLIENTS = 50
#: The worker's growth while 50 clients hang may not exceed this: each holds
#: at most one outbox high-water mark (256 KiB) plus the HTTP server's buffers.
BOUND_MIB = 100


@pytest.fixture(scope="module")
def gateway() -> Iterator[processes.ServedProcess]:
    server = {"header_timeout_s": 2, "body_timeout_s": 2, "write_timeout_s": 3}
    with hp.serve(server) as gw:
        yield gw


def sockets(gw: processes.ServedProcess) -> int:
    return processes.open_sockets(gw.worker())


def stall_wave(gw: processes.ServedProcess, idle_sockets: int) -> float:
    """``CLIENTS`` clients POST a stream and never read; returns the peak RSS (MiB)
    once the write deadline has ended every stream and its connection."""
    request = hp.body()
    clients = []
    peak = hp.rss_mib(gw)
    try:
        for _ in range(CLIENTS):
            sock = hp.connect(gw.port, rcvbuf=4096)
            sock.sendall(hp.head(request) + request)
            clients.append(sock)
            peak = max(peak, hp.rss_mib(gw))

        def all_ended() -> bool:
            nonlocal peak
            peak = max(peak, hp.rss_mib(gw))
            return sockets(gw) <= idle_sockets

        hp.wait_for(all_ended, "the never-reading clients' connections are closed")
    finally:
        for sock in clients:
            sock.close()
    return peak


def test_clients_that_never_read_are_ended_and_their_memory_reused(
    gateway: processes.ServedProcess,
) -> None:
    # Warm up: the first streams allocate what every later one reuses.
    for _ in range(3):
        response = httpx.post(
            gateway.url + "/v1/stream",
            content=hp.body("demo"),
            headers={"content-type": hp.MEDIA_TYPE},
            timeout=60,
        )
        assert response.status_code == 200
    idle_sockets = sockets(gateway)
    baseline = hp.rss_mib(gateway)
    # The write deadline ends each stream and drops its connection.
    peak = stall_wave(gateway, idle_sockets)
    after = hp.rss_mib(gateway)
    growth = peak - baseline
    print(
        f"baseline {baseline:.1f} MiB, peak +{growth:.1f}, after the wave +{after - baseline:.1f}"
    )
    assert growth < BOUND_MIB, f"{CLIENTS} stalled clients grew the worker by {growth:.1f} MiB"
    assert httpx.get(gateway.url + "/healthz", timeout=60).status_code == 200

    # What the first wave freed serves the second: no stalled stream leaks.
    peak2 = stall_wave(gateway, idle_sockets)
    after2 = hp.rss_mib(gateway)
    print(f"second wave: peak +{peak2 - baseline:.1f}, after +{after2 - baseline:.1f} MiB")
    assert after2 - after <= max(8.0, 0.5 * growth), "the second wave kept memory the first freed"


def test_a_request_head_that_never_completes_is_closed(gateway: processes.ServedProcess) -> None:
    with hp.connect(gateway.port) as sock:
        sock.sendall(b"POST /v1/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Ty")
        # The server answers nothing and closes the connection (header_timeout_s).
        assert hp.read_until_closed(sock) == b""


def test_a_head_trickled_a_byte_at_a_time_is_closed(gateway: processes.ServedProcess) -> None:
    head = hp.head(hp.body())
    with hp.connect(gateway.port) as sock:
        deadline = time.monotonic() + hp.DEADLINE_S
        closed = False
        for byte in head:
            try:
                sock.sendall(bytes([byte]))
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            if hp.is_closed(sock) or time.monotonic() > deadline:
                closed = True
                break
            time.sleep(0.25)  # slowloris: a byte now and then, never a whole head
        assert closed or hp.read_until_closed(sock) == b""


@pytest.mark.parametrize("sent", [0, 10])
def test_a_body_that_never_arrives_gets_408(gateway: processes.ServedProcess, sent: int) -> None:
    request = hp.body()
    with hp.connect(gateway.port) as sock:
        sock.sendall(hp.head(request) + request[:sent])
        response = hp.read_until_closed(sock)
    assert hp.status_of(response) == 408, response[:200]
    payload = json.loads(response.split(b"\r\n\r\n", 1)[1])
    assert payload["error"]["code"] == "request_timeout"


def test_a_body_trickled_slower_than_the_deadline_gets_408(
    gateway: processes.ServedProcess,
) -> None:
    request = hp.body()
    with hp.connect(gateway.port) as sock:
        sock.sendall(hp.head(request))
        response = b""
        for byte in request:
            try:
                sock.sendall(bytes([byte]))
            except (BrokenPipeError, ConnectionResetError):
                break
            if hp.is_closed(sock):
                break
            sock.setblocking(False)
            try:
                response += sock.recv(65536)
            except BlockingIOError:
                pass
            finally:
                sock.setblocking(True)
            if response:
                break
            time.sleep(0.2)  # the trickle, slower than the deadline: the behaviour under test
        response += hp.read_until_closed(sock)
    assert hp.status_of(response) == 408, response[:200]


def test_over_the_memory_budget_new_streams_get_503() -> None:
    server = {"write_timeout_s": 60, "memory_budget_bytes": 65536}
    with hp.serve(server) as gw:
        request = hp.body()
        with hp.connect(gw.port, rcvbuf=4096) as stalled:
            stalled.sendall(hp.head(request) + request)

            def refused() -> bool:
                response = httpx.post(
                    gw.url + "/v1/stream",
                    content=hp.body("demo"),
                    headers={"content-type": hp.MEDIA_TYPE},
                    timeout=60,
                )
                if response.status_code != 503:
                    return False
                assert response.headers["retry-after"].isdigit()
                assert response.json()["error"]["code"] == "overloaded"
                return True

            hp.wait_for(refused, "a new stream is refused while a stalled one holds the budget")
        assert httpx.get(gw.url + "/healthz", timeout=60).status_code == 200


def test_sigterm_ends_the_server_while_streams_produce() -> None:
    with hp.serve({"drain_s": 0, "shutdown_timeout_s": 2}) as gw:
        request = hp.body()
        readers = []
        for rcvbuf in (4096, None, None):
            sock = hp.connect(gw.port, rcvbuf=rcvbuf)
            sock.sendall(hp.head(request) + request)
            readers.append(sock)
        try:
            for sock in readers:
                assert sock.recv(12) == b"HTTP/1.1 200"
            proc = gw.proc
            assert proc is not None
            pids = gw.pids()
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)  # liveness bound, not a timing threshold
            except subprocess.TimeoutExpired:
                pytest.fail("tokenwire serve ignored SIGTERM for 30 s")
            hp.wait_for(lambda: not any(_alive(pid) for pid in pids), "every worker is gone")
        finally:
            for sock in readers:
                sock.close()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_idle_header_limit_does_not_cut_a_streaming_response(
    gateway: processes.ServedProcess,
) -> None:
    # header_timeout_s is 2 s: a stream that outlives it, read by its client, is whole.
    body = hp.body("demo", extensions={"tokenwire:demo": {"delay_ms": 50, "tokens": 60}})
    with httpx.Client(timeout=60) as client:
        response = client.post(
            gateway.url + "/v1/stream", content=body, headers={"content-type": hp.MEDIA_TYPE}
        )
    assert response.status_code == 200
    assert response.text.rstrip().endswith("}")
    assert "event: stream.end" in response.text


def test_serve_flags_override_the_config_in_the_workers() -> None:
    port = processes.free_port()
    argv = processes.gateway_argv(None, port) + ["--body-timeout", "1.5", "--write-timeout", "7"]
    with processes.ServedProcess(argv, port) as gw:
        request = hp.body()
        with hp.connect(gw.port) as sock:
            sock.sendall(hp.head(request) + request[:3])
            response = hp.read_until_closed(sock)
    assert hp.status_of(response) == 408
    assert b"within 1.5 s" in response


@pytest.mark.parametrize(
    "key",
    [
        "header_timeout_s",
        "body_timeout_s",
        "write_timeout_s",
        "idle_timeout_s",
        "shutdown_timeout_s",
    ],
)
def test_a_timeout_that_is_not_positive_is_a_config_error(key: str) -> None:
    from tokenwire.gateway.config import ConfigError, parse

    with pytest.raises(ConfigError, match=f"server.{key}"):
        parse({"server": {key: 0.0}})


@pytest.mark.parametrize("key", ["stream_budget_bytes", "memory_budget_bytes", "send_buffer_bytes"])
def test_a_budget_below_one_byte_is_a_config_error(key: str) -> None:
    from tokenwire.gateway.config import ConfigError, parse

    with pytest.raises(ConfigError, match=f"server.{key}"):
        parse({"server": {key: 0}})
