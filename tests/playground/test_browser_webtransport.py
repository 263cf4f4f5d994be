"""The TypeScript client on WebTransport in Chromium, trusting a short-lived certificate.

The test makes a self-signed certificate valid for two days (what
``serverCertificateHashes`` accepts), serves the gateway's WebTransport with it,
and a page (a secure context: http://127.0.0.1, on the TCP port of the same
number, so that its ``Origin`` names the session's host) runs
``new Client({transport: "webtransport", serverCertificateHashes})`` from the
served ``tokenwire.js``: a tool loop, an abort that cancels the generation,
a resume after the session is cut under a stream, and 20 streams on one session.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import socket
import ssl
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.playground.servers import CHROMIUM_ARGS, ensure_chromium, ensure_playwright

from tokenwire.testing import processes, wait_until
from tokenwire.testing.certs import short_lived

pytest.importorskip("aioquic", reason="the webtransport extra (aioquic)")

STATIC = Path(__file__).resolve().parents[2] / "src" / "tokenwire" / "gateway" / "static"
#: The playground's flags, less --disable-quic: WebTransport is HTTP/3.
ARGS = [a for a in CHROMIUM_ARGS if a != "--disable-quic"]

PAGE = """<!doctype html><meta charset="utf-8"><title>wt</title>
<script type="module">
import { Client } from "/tokenwire.js";
window.run = async (wtURL, hash, gatewayURL) => {
  const value = Uint8Array.from(hash.match(/../g).map((h) => parseInt(h, 16)));
  const client = new Client({
    baseURL: gatewayURL, transport: "webtransport", framesURL: wtURL, resume: false,
    serverCertificateHashes: [{ algorithm: "sha-256", value }],
  });
  const collect = async (request, options) => {
    const events = [];
    for await (const e of client.stream(request, options)) events.push(e);
    return events;
  };
  const weather = { name: "get_weather", description: "Weather for a city.",
    parameters: { type: "object", properties: { city: { type: "string" } } } };
  const messages = [{ role: "user", content: "What is the weather in Vienna?" }];
  const first = await collect({ model: "demo", messages, tools: [weather] });
  const call = first.find((e) => e.type === "tool.call");
  messages.push(
    { role: "assistant", content: null,
      tool_calls: [{ id: call.id, name: call.name, arguments: call.arguments }] },
    { role: "tool", tool_call_id: call.id, content: "Vienna: 24C, sunny" });
  const second = await collect({ model: "demo", messages, tools: [weather] });
  const text = (events) => events.filter((e) => e.type === "content.delta")
    .map((e) => e.delta.text).join("");

  const controller = new AbortController();
  let deltas = 0, aborted = "";
  const slow = { model: "demo", messages: [{ role: "user", content: "a long story" }],
    parameters: { max_tokens: 2000 }, metadata: { request_id: `wt-abort-${Date.now()}` },
    extensions: { "tokenwire:demo": { delay_ms: 20 } } };
  try {
    for await (const e of client.stream(slow, { signal: controller.signal })) {
      if (e.type === "content.delta" && ++deltas === 3) controller.abort();
    }
  } catch (exc) { aborted = exc.name; }

  // Resume after a cut: the session closes under a resumable stream; the client
  // resumes it on a new session (RESUME after the last seq it saw).
  const resumable = new Client({
    baseURL: gatewayURL, transport: "webtransport", framesURL: wtURL, resume: true,
    serverCertificateHashes: [{ algorithm: "sha-256", value }],
  });
  const cutSeqs = [];
  let cutText = "";
  const cutRequest = { model: "demo", messages: [{ role: "user", content: "cut me" }],
    parameters: { max_tokens: 80 }, extensions: { "tokenwire:demo": { delay_ms: 5 } } };
  for await (const e of resumable.stream(cutRequest)) {
    cutSeqs.push(e.seq);
    if (e.type === "content.delta") cutText += e.delta.text;
    if (cutSeqs.length === 15) resumable.close(); // the connection goes away mid-stream
  }
  const whole = text(await collect({ ...cutRequest, extensions: {} }));
  resumable.close();

  const many = await Promise.all(Array.from({ length: 20 }, (_, i) =>
    collect({ model: "demo", messages: [{ role: "user", content: `Hello number ${i}` }],
              parameters: { max_tokens: 12 } })));
  client.close();
  return {
    call: [call.name, JSON.parse(call.arguments)],
    answer: text(second),
    aborted, abortedAfter: deltas,
    cut: { seqs: cutSeqs, text: cutText, whole },
    many: many.map((events) => [events.map((e) => e.seq), text(events)]),
  };
};
document.body.dataset.ready = "true";
</script>"""


class _Page(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        if self.path == "/tokenwire.js":
            body, kind = (STATIC / "tokenwire.js").read_bytes(), "text/javascript"
        else:
            body, kind = PAGE.encode(), "text/html"
        self.send_response(200)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def _port_free_on_both() -> int:
    """A port number free on TCP and UDP alike (the page's and the session's)."""
    for _ in range(50):
        port = processes.free_port()
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
            try:
                udp.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise RuntimeError("no port free on both TCP and UDP")


@contextlib.contextmanager
def _page_server(port: int) -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), _Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def test_the_client_on_webtransport_in_chromium() -> None:
    pytest.importorskip("cryptography", reason="certificates are made with cryptography")
    sync_api = ensure_playwright()
    chromium = ensure_chromium()
    with tempfile.TemporaryDirectory(prefix="tw-wt-browser-") as tmp:
        cert, key, digest = short_lived(Path(tmp))
        wt_port = _port_free_on_both()
        config = Path(tmp) / "gateway.toml"
        config.write_text(
            f'[server]\ncertfile = "{cert}"\nkeyfile = "{key}"\nwebtransport_port = {wt_port}\n'
        )
        port = processes.free_port()
        argv = processes.gateway_argv(str(config), port)
        context = ssl.create_default_context(cafile=str(cert))
        with (
            processes.ServedProcess(argv, port, tls=context) as gateway,
            _page_server(wt_port) as page_url,
            sync_api.sync_playwright() as pw,
        ):
            browser = pw.chromium.launch_persistent_context(
                str(Path(tmp) / "profile"), executable_path=chromium, headless=True, args=ARGS
            )
            try:
                page = browser.new_page()
                errors: list[str] = []
                page.on("pageerror", lambda e: errors.append(str(e)))
                page.goto(page_url)
                page.wait_for_selector("body[data-ready=true]", state="attached")
                got = page.evaluate(
                    "([wt, hash, base]) => run(wt, hash, base)",
                    [f"https://127.0.0.1:{wt_port}/v1/wt", digest.hex(), gateway.url],
                )
            finally:
                browser.close()
            # The abort reached the gateway: the 40 s stream (2000 tokens, 20 ms each)
            # stops long before its end (a reset stream is a hang-up: not resumable).
            base = f"https://127.0.0.1:{port}"
            wait_until(lambda: _active(base, context) == 0, timeout=30, what="no stream left")
    assert errors == []
    assert got["call"] == ["get_weather", {"city": "Vienna"}]
    assert "Vienna: 24C, sunny" in got["answer"]
    assert got["aborted"] == "AbortError" and got["abortedAfter"] == 3
    cut = got["cut"]
    assert cut["seqs"] == list(range(len(cut["seqs"]))) and len(cut["seqs"]) > 15
    assert cut["text"] == cut["whole"]  # every delta once, as in a stream never cut
    for i, (seqs, text) in enumerate(got["many"]):
        assert seqs == list(range(len(seqs))) and f"Hello number {i}" in text
    print(json.dumps({k: v for k, v in got.items() if k != "many"}))


def _active(base: str, context: ssl.SSLContext) -> float:
    """``tokenwire_streams_active`` summed over models."""
    text = httpx.get(base + "/metrics", verify=context, timeout=30).text
    return sum(
        float(line.rpartition(" ")[2])
        for line in text.splitlines()
        if line.startswith("tokenwire_streams_active{")
    )
