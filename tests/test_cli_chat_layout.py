"""``tokenwire chat`` at 80 columns: its own messages are never cut mid-phrase (issue 25).

A stream's ``error`` event, and the violations after it, are one line each
however long: the terminal folds a long line where it must, the chat never
inserts a line break into its own sentence.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MESSAGE = (
    "the upstream closed the connection after 3 events while the model was still "
    "writing its answer (a long message that does not fit in 80 columns)"
)


def _frame(event: dict[str, Any]) -> bytes:
    return f"event: {event['type']}\nid: {event['seq']}\ndata: {json.dumps(event)}\n\n".encode()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers["content-length"])))
        rid = request["metadata"]["request_id"]
        body = b"".join(
            _frame(e)
            for e in [
                {"v": "1.0", "seq": 0, "type": "stream.start", "model": "m", "created": 1,
                 "request_id": rid},
                {"v": "1.0", "seq": 1, "type": "error", "code": "internal_error",
                 "message": MESSAGE},
                {"v": "1.0", "seq": 2, "type": "stream.end", "request_id": rid},
            ]
        )  # fmt: skip
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        self.wfile.write(body)


@contextmanager
def erroring_endpoint() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_an_error_event_is_one_line_at_80_columns() -> None:
    with erroring_endpoint() as url:
        res = subprocess.run(
            [sys.executable, "-m", "tokenwire", "chat", "--url", url, "hi"],
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "COLUMNS": "80"},
        )
    assert res.returncode == 1, res.stderr
    (line,) = [ln for ln in res.stderr.splitlines() if "internal_error" in ln]
    assert line == f"error internal_error: {MESSAGE}", res.stderr
    assert len(line) > 80
