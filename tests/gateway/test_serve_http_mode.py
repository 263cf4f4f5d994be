"""Which HTTP versions ``tokenwire serve`` speaks: HTTP/1.1 in cleartext, h2c only when asked.

§3: HTTP/2 SHOULD be preferred, and TLS is required in production: with TLS,
ALPN offers ``h2`` and ``http/1.1``. Without TLS, HTTP/2 exists only with prior
knowledge (h2c), which no browser speaks; granian detecting it costs ~12 KiB
per connection (bench/RESULTS.md, "load"), so it is off unless
``[server] cleartext_http2 = true``.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from tests.gateway.gateway_http import MEDIA, body, events_of, request_of, text_of
from tests.gateway.gateway_procs import Gateway

import tokenwire
from tokenwire.cli.serve import command as serve_command
from tokenwire.cli.serve import http_mode
from tokenwire.gateway import config
from tokenwire.testing.certs import self_signed

#: The HTTP/2 client connection preface (RFC 9113 §3.4) and an empty SETTINGS frame.
H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes.fromhex("000000040000000000")
H2C_CONFIG = "[server]\ncleartext_http2 = true\n"


def h2c_answer(port: int) -> bytes:
    """What the server sends back to an HTTP/2 prior-knowledge preface, until it closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(H2_PREFACE)
        data = b""
        try:
            while len(data) < 9 and (chunk := sock.recv(4096)):
                data += chunk
        except ConnectionResetError:
            pass
        return data


def is_h2_settings(data: bytes) -> bool:
    """Whether ``data`` starts with an HTTP/2 frame of type SETTINGS (the server preface)."""
    return len(data) >= 9 and data[3] == 0x04


def stream_over(client: httpx.Client, text: str) -> httpx.Response:
    payload = body("demo", text, parameters={"max_tokens": 5})
    response = client.post("/v1/stream", json=payload, headers={"content-type": MEDIA})
    assert response.status_code == 200
    report = tokenwire.validate(response.content, request_of(payload))
    assert report.ok, report.violations
    assert text_of(events_of(response.content))
    return response


@pytest.mark.parametrize(
    "args", [(), ("--workers", "2")], ids=["one process (embedded)", "supervisor + workers"]
)
def test_cleartext_serves_http1_only(tmp_path: Path, args: tuple[str, ...]) -> None:
    with Gateway(tmp_path, args=args) as gw:
        with gw.client(timeout=20.0) as client:
            assert stream_over(client, "Hello").http_version == "HTTP/1.1"
        # An h2c prior-knowledge connection is not spoken: no HTTP/2 SETTINGS comes back.
        assert not is_h2_settings(h2c_answer(gw.port))
        with (
            httpx.Client(base_url=gw.url, http1=False, http2=True, timeout=20.0) as h2c,
            pytest.raises(httpx.RemoteProtocolError),
        ):
            h2c.get("/healthz")
        assert gw.alive()


def test_cleartext_http2_option_speaks_h2c(tmp_path: Path) -> None:
    with Gateway(tmp_path, config=H2C_CONFIG) as gw:
        assert is_h2_settings(h2c_answer(gw.port))
        with httpx.Client(base_url=gw.url, http1=False, http2=True, timeout=20.0) as h2c:
            assert stream_over(h2c, "Hello over h2c").http_version == "HTTP/2"
        with gw.client(timeout=20.0) as client:  # HTTP/1.1 still served on the same port
            assert stream_over(client, "Hello").http_version == "HTTP/1.1"


@pytest.fixture(scope="module")
def tls_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    pytest.importorskip("cryptography", reason="certificates are made with cryptography")
    workdir = tmp_path_factory.mktemp("tls-mode")
    with Gateway(workdir, tls=self_signed(workdir)) as gw:
        yield gw


def alpn_of(gw: Gateway, offered: list[str]) -> str | None:
    context = gw.ssl_context()
    assert isinstance(context, ssl.SSLContext)
    context.set_alpn_protocols(offered)
    with (
        socket.create_connection(("127.0.0.1", gw.port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        return tls.selected_alpn_protocol()


def test_tls_negotiates_http2_by_alpn(tls_gateway: Gateway) -> None:
    assert alpn_of(tls_gateway, ["h2", "http/1.1"]) == "h2"
    assert alpn_of(tls_gateway, ["http/1.1"]) == "http/1.1"
    with tls_gateway.client(http2=True, timeout=20.0) as client:
        assert stream_over(client, "Hello over TLS").http_version == "HTTP/2"
    with tls_gateway.client(timeout=20.0) as client:
        assert stream_over(client, "Hello").http_version == "HTTP/1.1"


@pytest.mark.parametrize(
    ("tls", "cleartext_http2", "mode"),
    [(False, False, "1"), (False, True, "auto"), (True, False, "auto")],
)
def test_http_mode(tls: bool, cleartext_http2: bool, mode: str) -> None:
    assert http_mode(tls=tls, cleartext_http2=cleartext_http2) == mode


def test_cleartext_http2_must_be_a_bool() -> None:
    with pytest.raises(config.ConfigError, match=r"^server\.cleartext_http2: Expected `bool`"):
        config.parse({"server": {"cleartext_http2": "yes"}})


def test_cleartext_http2_with_tls_in_the_config_is_refused() -> None:
    server = {"cleartext_http2": True, "certfile": "c.pem", "keyfile": "k.pem"}
    with pytest.raises(config.ConfigError, match=r"^server\.cleartext_http2: only without TLS"):
        config.parse({"server": server})


def test_cleartext_http2_with_tls_flags_is_refused(tmp_path: Path) -> None:
    conf = tmp_path / "gateway.toml"
    conf.write_text(H2C_CONFIG)
    for name in ("cert.pem", "key.pem"):
        (tmp_path / name).write_text("")
    result = CliRunner().invoke(
        serve_command,
        ["--config", str(conf), "--port", "0"]
        + ["--certfile", str(tmp_path / "cert.pem"), "--keyfile", str(tmp_path / "key.pem")],
    )
    assert result.exit_code == 1
    assert "server.cleartext_http2: only without TLS" in result.output
