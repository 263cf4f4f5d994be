"""``tokenwire serve --certfile --keyfile``: TLS 1.3 and HTTP/2 by ALPN (§3)."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.gateway.gateway_http import MEDIA, body, events_of, request_of, text_of
from tests.gateway.gateway_procs import Gateway

import tokenwire
from tokenwire import events as ev
from tokenwire.testing import wait_for_file
from tokenwire.testing.certs import self_signed


@pytest.fixture(scope="module")
def tls_gateway(tmp_path_factory: pytest.TempPathFactory, record_dir: Path) -> Iterator[Gateway]:
    pytest.importorskip("cryptography", reason="certificates are made with cryptography")
    workdir = tmp_path_factory.mktemp("tls")
    config = (
        '[[models]]\nname = "recorder"\nprovider = "python"\n'
        'factory = "gateway_plugins:Recorder"\n'
        f'options = {{ record_dir = "{record_dir}", interval_ms = 20 }}\n'
    )
    with Gateway(workdir, config=config, tls=self_signed(workdir)) as gw:
        yield gw


def test_http2_over_tls(tls_gateway: Gateway) -> None:
    payload = body("demo", "Is this HTTP/2?", metadata={"request_id": "h2"})
    with tls_gateway.client(http2=True, timeout=20.0) as client:
        health = client.get("/healthz")
        assert health.http_version == "HTTP/2"
        ssl_object = health.extensions["network_stream"].get_extra_info("ssl_object")
        assert ssl_object.version() == "TLSv1.3"
        response = client.post("/v1/stream", json=payload, headers={"content-type": MEDIA})
    assert response.http_version == "HTTP/2"
    assert response.status_code == 200
    report = tokenwire.validate(response.content, request_of(payload))
    assert report.ok, report.violations
    assert text_of(events_of(response.content))


def test_http2_multiplexes_streams(tls_gateway: Gateway) -> None:

    async def run() -> list[httpx.Response]:
        async with tls_gateway.async_client(http2=True, timeout=20.0) as client:
            payloads = [
                body("demo", f"stream {i}", parameters={"max_tokens": 20}) for i in range(5)
            ]
            return await asyncio.gather(
                *(
                    client.post("/v1/stream", json=p, headers={"content-type": MEDIA})
                    for p in payloads
                )
            )

    responses = asyncio.run(run())
    for response in responses:
        assert response.http_version == "HTTP/2"
        assert tokenwire.validate(response.content).ok
        assert sum(isinstance(e, ev.ContentDelta) for e in events_of(response.content)) == 20


def test_http2_stream_reset_cancels_generation(tls_gateway: Gateway, record_dir: Path) -> None:
    # Closing one HTTP/2 stream early (RST_STREAM) cancels that generation; the
    # connection goes on serving.
    request_id = f"h2-reset-{uuid.uuid4().hex}"

    async def run() -> tuple[float, int]:
        async with tls_gateway.async_client(http2=True, timeout=20.0) as client:
            payload = body("recorder", "go", metadata={"request_id": request_id})
            async with client.stream(
                "POST", "/v1/stream", json=payload, headers={"content-type": MEDIA}
            ) as response:
                assert response.http_version == "HTTP/2"
                seen = 0
                async for chunk in response.aiter_raw():
                    seen += chunk.count(b"event: content.delta")
                    if seen >= 3:
                        break
                reset_at = time.time()
            after = await client.get("/healthz")
            return reset_at, after.status_code

    reset_at, status = asyncio.run(run())
    assert status == 200
    path = record_dir / f"{request_id}.json"
    record = wait_for_file(path, json.loads, timeout=5, what="the provider's cancel")
    assert "cancelled_at" in record
    latency = record["cancelled_at"] - reset_at
    print(f"h2 reset -> cancelled: {latency * 1000:.2f} ms")
    assert latency < 0.1
