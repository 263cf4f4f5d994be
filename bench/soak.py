"""Keep-alive soak: many sequential streaming requests on one connection, per engine.

For each ``[server] engine`` (``--engine``, default both): one ``tokenwire serve``
(one worker, the demo model) on 127.0.0.1, and two clients, one after the other:

- **raw**: one keep-alive connection sends ``--requests`` streaming ``POST
  /v1/stream`` requests (unpaced: ``delay_ms`` 0), one at a time, head and body
  in separate writes (as httpx writes them) with TCP_NODELAY, reading each chunked response whole;
  every ``--pause-every`` requests it pauses ``--pause-s``, long enough for the
  server's timers and collector to run between requests;
- **httpx**: one ``httpx.AsyncClient`` sends 300 such requests (the demo's own
  pacing), pausing 1.2 s
  after every 50: the shape that once lost one request in 300 to a 408.

Each row counts the answers that were not ``200`` with a whole stream ending in
``stream.end``, and a connection the server closed (the client reconnects and
counts it). Target: none. Writes the "## soak" section of bench/RESULTS.md.

Run: ``.venv/bin/python bench/soak.py [--requests 100000] [--engine h1,granian] [--no-write]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import header, md_table, write_section  # noqa: E402
from tokenwire.testing import processes  # noqa: E402

MEDIA_TYPE = "application/llm-request+json"


def _body(**fields: object) -> bytes:
    request = {
        "version": "1.0",
        "stream": True,
        "model": "demo",
        "messages": [{"role": "user", "content": "soak"}],
        "parameters": {"max_tokens": 4},
    }
    return json.dumps({**request, **fields}).encode()


#: What the httpx client sends: the demo as it comes (paced: the shape of the 408).
PACED = _body()
#: What the raw client sends: unpaced, so that 100,000 fit in minutes.
BODY = _body(extensions={"tokenwire:demo": {"delay_ms": 0}})
HEAD = b"POST /v1/stream HTTP/1.1\r\nHost: a\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n" % (
    MEDIA_TYPE.encode(),
    len(BODY),
)


class Connection:
    """One raw keep-alive connection: a request out, its chunked response in."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = b""

    def _until(self, marker: bytes) -> bytes:
        while marker not in self.buffer:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("the server closed the connection")
            self.buffer += data
        head, _, self.buffer = self.buffer.partition(marker)
        return head

    def _exactly(self, size: int) -> bytes:
        while len(self.buffer) < size:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("the server closed the connection")
            self.buffer += data
        out, self.buffer = self.buffer[:size], self.buffer[size:]
        return out

    def request(self) -> tuple[int, bytes]:
        self.sock.sendall(HEAD)
        self.sock.sendall(BODY)
        head = self._until(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        if b"content-length:" in head.lower():
            size = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
            return status, self._exactly(size)
        parts = []
        while (size := int(self._until(b"\r\n").split(b";")[0], 16)) > 0:
            parts.append(self._exactly(size + 2)[:-2])
        self._until(b"\r\n")
        return status, b"".join(parts)

    def close(self) -> None:
        self.sock.close()


def soak_raw(port: int, requests: int, pause_every: int, pause_s: float) -> dict[str, int]:
    seen: dict[str, int] = {}
    conn = Connection(port)
    try:
        for i in range(requests):
            try:
                status, body = conn.request()
                ok = status == 200 and b"event: stream.end" in body
                what = "200 whole" if ok else f"{status}: {body[:120]!r}"
            except ConnectionError as exc:
                what = f"closed: {exc}"
                conn.close()
                conn = Connection(port)
            seen[what] = seen.get(what, 0) + 1
            if pause_every and (i + 1) % pause_every == 0:
                time.sleep(pause_s)
    finally:
        conn.close()
    return seen


async def soak_httpx(port: int) -> dict[str, int]:
    import httpx

    seen: dict[str, int] = {}
    async with httpx.AsyncClient(timeout=60) as client:
        for i in range(300):
            async with client.stream(
                "POST",
                f"http://127.0.0.1:{port}/v1/stream",
                content=PACED,
                headers={"content-type": MEDIA_TYPE},
            ) as response:
                body = await response.aread()
            ok = response.status_code == 200 and b"event: stream.end" in body
            what = "200 whole" if ok else f"{response.status_code}: {body[:120]!r}"
            seen[what] = seen.get(what, 0) + 1
            if (i + 1) % 50 == 0:
                await asyncio.sleep(1.2)
    return seen


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=100_000)
    ap.add_argument("--pause-every", type=int, default=5000)
    ap.add_argument("--pause-s", type=float, default=1.2)
    ap.add_argument("--engine", default="h1,granian")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    load_before = processes.loadavg()
    rows = []
    failed = 0
    for engine in args.engine.split(","):
        port = processes.free_port()
        env = {**os.environ, "TOKENWIRE_SERVER_ENGINE": engine}
        with processes.ServedProcess(processes.gateway_argv(None, port), port, env=env) as gw:
            t0 = time.perf_counter()
            raw = soak_raw(gw.port, args.requests, args.pause_every, args.pause_s)
            raw_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            via_httpx = asyncio.run(soak_httpx(gw.port))
            httpx_s = time.perf_counter() - t0
        for client, seen, seconds, total in (
            ("raw", raw, raw_s, args.requests),
            ("httpx", via_httpx, httpx_s, 300),
        ):
            bad = total - seen.get("200 whole", 0)
            failed += bad
            other = "; ".join(f"{n}x {what}" for what, n in seen.items() if what != "200 whole")
            rows.append([engine, client, f"{total:,}", str(bad), f"{seconds:.0f}", other or "-"])
            print(f"{engine} {client}: {total} requests, {bad} unexpected ({seconds:.0f} s)", other)
    section = [
        "## soak",
        "",
        "Keep-alive soak: sequential streaming `POST /v1/stream` requests (the demo model, "
        "4 tokens) on one connection to `tokenwire serve`, per `[server] engine` "
        "(`bench/soak.py`, its docstring says how). Target: no unexpected answer "
        "(anything but a 200 whose stream ends in `stream.end`, or a closed connection).",
        "",
        *header("bench/soak.py", load_before),
        f"- raw client: pause {args.pause_s:g} s after every {args.pause_every:,} requests; "
        "httpx: 300 requests, pause 1.2 s after every 50",
        "",
        *md_table(
            ["engine", "client", "requests", "unexpected", "seconds", "what else came"], rows
        ),
    ]
    if not args.no_write:
        write_section("soak", "\n".join(section))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
