"""`tokenwire check --binding binary --transport http|ws|webtransport` against the gateway.

The same probes and verdict table as for SSE, the answers read from frames
(docs/binary.md); over WebSocket and WebTransport, which carry only the
standard's request type and answer in frames, the Content-Type and Accept
probes are not exercised.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.gateway.gateway_procs import Gateway

pytest.importorskip("aioquic", reason="the webtransport extra (aioquic)")
from tokenwire.testing.certs import webtransport_tls


class Served:
    def __init__(self, gateway: Gateway, wt_port: int, ca: Path) -> None:
        self.gateway, self.wt_port, self.ca = gateway, wt_port, ca


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    pytest.importorskip("cryptography", reason="certificates are made with cryptography")
    workdir = tmp_path_factory.mktemp("check-binary")
    tls = webtransport_tls(workdir)
    with Gateway(workdir, config=tls.server_toml, tls=(tls.cert, tls.key, tls.ca)) as gateway:
        yield Served(gateway, tls.port, tls.ca)


def check(served: Served, tmp_path: Path, *args: str) -> dict[str, str]:
    """Run ``tokenwire check`` with ``args``; the verdict of each probe."""
    report = tmp_path / f"report{len(list(tmp_path.iterdir()))}.json"
    argv = [sys.executable, "-m", "tokenwire", "check", served.gateway.url]
    argv += ["--cafile", str(served.ca), "--json", str(report), *args]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return {r["id"]: r["verdict"] for r in json.loads(report.read_text())}


def test_frames_get_the_same_verdicts_as_sse_on_every_transport(
    served: Served, tmp_path: Path
) -> None:
    sse = check(served, tmp_path)
    assert set(sse.values()) == {"pass"}, sse
    assert check(served, tmp_path, "--binding", "binary") == sse
    # What only HTTP headers can ask (another Content-Type, the SSE profile) is not
    # exercised over the binding's own transports.
    not_exercised = {**sse, "unsupported-media-type": "not-exercised"}
    not_exercised["accept-profile"] = "not-exercised"
    assert check(served, tmp_path, "--transport", "ws") == not_exercised
    frames_url = f"https://localhost:{served.wt_port}/v1/wt"
    wt = check(served, tmp_path, "--transport", "webtransport", "--frames-url", frames_url)
    assert wt == not_exercised


def test_webtransport_needs_its_url(served: Served) -> None:
    argv = [sys.executable, "-m", "tokenwire", "check", served.gateway.url]
    argv += ["--transport", "webtransport"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "--frames-url" in done.stderr, done.stderr
