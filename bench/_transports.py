"""First token and events per second through the gateway, per transport of the standard.

One ``tokenwire serve`` on TLS (a certificate made here) with WebTransport on,
in front of a fake OpenAI upstream that streams ``WORDS`` words at once; the
tokenwire client reads each stream over SSE, frames over HTTP, frames over
WebSocket and frames over WebTransport, the four interleaved stream by stream
so that load hits them alike. First token: from the request to the first
``content.delta`` (a new connection per transport, kept for its later streams);
events/s: a stream's events over the time from the request to ``stream.end``.
Medians over the runs. Used by ``bench/binary.py --transports``.
"""

from __future__ import annotations

import os
import ssl
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tokenwire import events
from tokenwire.client import Client
from tokenwire.testing import processes
from tokenwire.testing.certs import webtransport_tls
from tokenwire.testing.upstream import FakeUpstream, Script

WORDS = 2000
TRANSPORTS: dict[str, dict[str, Any]] = {
    "SSE (HTTP/1.1)": {"transport": "http"},
    "frames over HTTP/1.1": {"transport": "http", "binding": "binary"},
    "frames over WebSocket": {"transport": "ws"},
    "frames over WebTransport": {"transport": "webtransport"},
}


def _one(client: Client, model: str) -> tuple[float, float, int]:
    """(first token ms, events/s, events) of one stream."""
    start = time.perf_counter()
    first = None
    count = 0
    with client.stream(model=model, messages="go") as stream:
        for event in stream:
            count += 1
            if first is None and isinstance(event, events.ContentDelta):
                first = time.perf_counter() - start
    took = time.perf_counter() - start
    assert first is not None
    return first * 1000, count / took, count


def measure(runs: int) -> list[list[str]]:
    text = " ".join(f"w{i}" for i in range(WORDS))
    with (
        tempfile.TemporaryDirectory(prefix="tokenwire-bench-") as tmp,
        FakeUpstream("openai", Script(text=text, delay_s=0)) as upstream,
    ):
        tls = webtransport_tls(Path(tmp))
        wt_port, ca = tls.port, tls.ca
        config = Path(tmp) / "gateway.toml"
        config.write_text(
            tls.server_toml + '[[models]]\nname = "fast"\nprovider = "openai"\n'
            f'base_url = "{upstream.url}/v1"\nupstream_model = "up"\n'
        )
        port = processes.free_port()
        context = ssl.create_default_context(cafile=str(ca))
        argv = processes.gateway_argv(str(config), port)
        with processes.ServedProcess(argv, port, tls=context, env=dict(os.environ)):
            base = f"https://127.0.0.1:{port}"
            clients = {
                name: Client(
                    base,
                    cafile=str(ca),
                    frames_url=f"https://localhost:{wt_port}/v1/wt"
                    if options["transport"] == "webtransport"
                    else None,
                    **options,
                )
                for name, options in TRANSPORTS.items()
            }
            got: dict[str, list[tuple[float, float, int]]] = {name: [] for name in TRANSPORTS}
            try:
                for client in clients.values():
                    _one(client, "fast")  # warm: the connection, the gateway's paths
                for _ in range(runs):
                    for name, client in clients.items():
                        got[name].append(_one(client, "fast"))
            finally:
                for client in clients.values():
                    client.close()
    rows = []
    for name, results in got.items():
        first = statistics.median(r[0] for r in results)
        rate = statistics.median(r[1] for r in results)
        rows.append([name, f"{first:.1f}", f"{rate:,.0f}", str(results[0][2])])
        print(name, f"first {first:.1f} ms, {rate:,.0f} events/s", file=sys.stderr)
    return rows
