"""A raw upstream that replays exact vendor bodies, picked by a marker in the request.

The gateway's vendor providers send the conversation upstream; the last user
message ``"replay:<name>"`` selects which body this server answers with. Each
body is a list of chunks, each written as one HTTP chunk (or ``body`` cut at
the byte offsets ``splits``), so a vector controls exactly where the bytes
split; ``cut`` drops the connection without ending the chunked body.
"""

from __future__ import annotations

import re
import socket
import threading
from pathlib import Path
from typing import Any

_MARKER = re.compile(rb"replay:([A-Za-z0-9_.-]+)")


class Replay:
    """A tiny threaded HTTP/1.1 server on 127.0.0.1 serving ``bodies[name]``."""

    def __init__(self, bodies: dict[str, dict[str, Any]]) -> None:
        self.bodies = bodies
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.requests: list[tuple[str, bytes]] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def start(self) -> Replay:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.sock.close()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
            head, _, body = data.partition(b"\r\n\r\n")
            length = int(re.search(rb"(?i)content-length:\s*(\d+)", head).group(1))  # type: ignore[union-attr]
            while len(body) < length:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                body += chunk
            path = head.split(b" ")[1].decode()
            self.requests.append((path, body))
            match = _MARKER.search(body)
            spec = self.bodies.get(match.group(1).decode()) if match else None
            if spec is None:
                conn.sendall(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
                return
            status = spec.get("status", 200)
            ctype = spec.get("content_type", "text/event-stream")
            conn.sendall(
                f"HTTP/1.1 {status} X\r\ncontent-type: {ctype}\r\n"
                "transfer-encoding: chunked\r\nconnection: close\r\n\r\n".encode()
            )
            for raw in pieces(spec):
                if raw:
                    conn.sendall(b"%x\r\n%s\r\n" % (len(raw), raw))
            if not spec.get("cut", False):
                conn.sendall(b"0\r\n\r\n")


def pieces(spec: dict[str, Any]) -> list[bytes]:
    """The body's pieces: ``chunks`` as given, or ``body`` cut at the byte offsets ``splits``."""
    if "chunks" in spec:
        return [piece.encode() for piece in spec["chunks"]]
    raw = spec["body"].encode()
    cuts = [0, *spec.get("splits", []), len(raw)]
    return [raw[a:b] for a, b in zip(cuts, cuts[1:], strict=False)]


def fixture_body(path: Path) -> dict[str, Any]:
    """A recorded vendor body (an exact ``.sse`` file) as one replay spec."""
    return {"chunks": [path.read_bytes().decode()]}
