"""The toolkit alone on a real server: the provider example of docs/reference/config.md
under granian.

``StreamEndpoint`` needs no gateway: the printed example, saved as a module and
served by ``granian --interface asgi``, streams incrementally, answers lifespan,
refuses with JSON, and cancels its provider when the client hangs up.
"""

from __future__ import annotations

import json
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.server.test_server_docs import _example

import tokenwire
from tokenwire.testing import processes, wait_for_file

GRANIAN = Path(sys.executable).parent / "granian"

SLOW = """
import asyncio, time
from tokenwire import events
from tokenwire.server import StreamEndpoint

CANCELLED = []

class Slow:
    async def generate(self, request):
        try:
            for i in range(10_000):
                await asyncio.sleep(0.02)  # a paced model: the pacing is the behaviour
                yield events.ContentDelta(v="1.0", seq=0, index=0, role="assistant",
                                          delta=events.Delta(text=f" {i}"))
        except asyncio.CancelledError:
            with open(request.metadata["record"], "w") as f:
                f.write(repr(time.time()))
            raise

slow = StreamEndpoint(Slow())
shout = app


async def app(scope, receive, send):
    await (slow if scope.get("path") == "/slow" else shout)(scope, receive, send)
"""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    workdir = tmp_path_factory.mktemp("toolkit")
    (workdir / "docs_example.py").write_text(_example("provider") + SLOW)
    port = processes.free_port()
    argv = [str(GRANIAN), "--interface", "asgi", "--host", "127.0.0.1", "--port", str(port)]
    argv += ["--log-level", "warning", "--working-dir", str(workdir), "docs_example:app"]
    # Any answer on "/" means it serves (the example refuses a GET there).
    with processes.ServedProcess(argv, port, ready_path="/", ready_status=None, timeout_s=30):
        yield f"http://127.0.0.1:{port}"


def _body(**fields: object) -> bytes:
    raw = {"version": "1.0", "stream": True, "model": "any"}
    raw["messages"] = [{"role": "user", "content": "streams on a real server"}]  # type: ignore[assignment]
    raw.update(fields)  # type: ignore[arg-type]
    return json.dumps(raw).encode()


def test_example_streams_on_granian(served: str) -> None:
    headers = {"content-type": "application/llm-request+json"}
    response = httpx.post(served, content=_body(), headers=headers, timeout=20)
    assert response.status_code == 200
    assert tokenwire.validate(response.content).ok
    assert b"STREAMS ON A REAL SERVER" not in response.content  # one word per event
    assert response.content.count(b"event: content.delta") == 5


def test_example_refuses_with_json(served: str) -> None:
    response = httpx.post(served, content=b"{}", timeout=20)
    assert response.status_code == 415
    assert response.json()["error"]["code"] == "unsupported_media_type"


def test_hang_up_cancels_on_granian(served: str, tmp_path: Path) -> None:
    record = tmp_path / "cancelled"
    data = _body(metadata={"record": str(record)})
    port = int(served.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(
            b"POST /slow HTTP/1.1\r\nHost: x\r\nContent-Type: application/llm-request+json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(data), data)
        )
        seen = b""
        while seen.count(b"event: content.delta") < 3:
            seen += sock.recv(65536)
        hung_up = time.time()
    cancelled_at = wait_for_file(record, float, timeout=5, what="the provider's cancel")
    assert cancelled_at - hung_up < 0.1
