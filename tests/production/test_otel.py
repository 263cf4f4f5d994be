"""OpenTelemetry through a real OTLP/HTTP exporter: a real ``tokenwire serve`` exports to a
receiver in this test (an HTTP server on 127.0.0.1 decoding the protobuf requests)."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.gateway.gateway_http import body, events_of, post, text_of
from tests.gateway.gateway_procs import Gateway
from tests.production.conftest import IN_CI, start, table

from tokenwire.testing import wait_until
from tokenwire.testing.upstream import FakeUpstream, Script

try:
    import opentelemetry.sdk  # noqa: F401
except ImportError:  # pragma: no cover - the dev extra has it; in CI nothing skips
    if IN_CI:
        raise
    pytest.skip("the otel extra (opentelemetry-sdk) is not installed", allow_module_level=True)

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (  # noqa: E402
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (  # noqa: E402
    ExportTraceServiceRequest,
)

PROMPT = "my secret prompt words"
CLIENT_TRACE = "0af7651916cd43dd8448eb211c80319c"
CLIENT_SPAN = "b7ad6b7169203331"


class Receiver:
    """An OTLP/HTTP collector: keeps every span and metric name it is sent."""

    def __init__(self) -> None:
        self.spans: list[Any] = []
        self.metric_names: set[str] = set()
        self.lock = threading.Lock()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                data = self.rfile.read(int(self.headers["content-length"]))
                if self.path == "/v1/traces":
                    request = ExportTraceServiceRequest()
                    request.ParseFromString(data)
                    with receiver.lock:
                        for resource in request.resource_spans:
                            for scope in resource.scope_spans:
                                receiver.spans.extend(scope.spans)
                elif self.path == "/v1/metrics":
                    metrics = ExportMetricsServiceRequest()
                    metrics.ParseFromString(data)
                    with receiver.lock:
                        for resource in metrics.resource_metrics:
                            for scope in resource.scope_metrics:
                                receiver.metric_names.update(m.name for m in scope.metrics)
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def wait_span(self, name: str, timeout: float = 20.0) -> Any:
        def found() -> list[Any]:
            with self.lock:
                return [s for s in self.spans if s.name == name]

        return wait_until(found, timeout=timeout, what=lambda: f"a span {name!r}: {self.spans}")[-1]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _attributes(span: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in span.attributes:
        value = kv.value
        kind = value.WhichOneof("value")
        if kind == "array_value":
            out[kv.key] = [getattr(v, v.WhichOneof("value")) for v in value.array_value.values]
        else:
            out[kv.key] = getattr(value, kind)
    return out


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    made = Receiver()
    try:
        yield made
    finally:
        made.close()


def _config(receiver: Receiver, fake: FakeUpstream) -> str:
    model = {
        "name": "traced",
        "provider": "openai",
        "base_url": fake.url + "/v1",
        "upstream_model": "gpt-upstream",
    }
    return (
        table("telemetry", {"enabled": True, "endpoint": receiver.url, "export_interval_s": 0.2})
        + "\n"
        + table("models", model, array=True)
    )


def test_spans_follow_genai_conventions_and_carry_the_trace_upstream(
    receiver: Receiver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
    with FakeUpstream("openai", Script(text="traced answer", input_tokens=7)) as fake:
        gateway = start(tmp_path, _config(receiver, fake))
        try:
            traceparent = f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"
            with gateway.client(timeout=20.0) as client:
                response = post(
                    client, body("traced", PROMPT), headers={"traceparent": traceparent}
                )
            assert text_of(events_of(response.content)) == "traced answer"
            span = receiver.wait_span("chat traced")
            # The client's trace continues through the gateway...
            assert span.trace_id.hex() == CLIENT_TRACE
            assert span.parent_span_id.hex() == CLIENT_SPAN
            # ...and on to the upstream, with the gateway's span as the parent.
            sent = fake.requests[-1].headers["traceparent"]
            assert sent == f"00-{CLIENT_TRACE}-{span.span_id.hex()}-01"
            attrs = _attributes(span)
            assert attrs["gen_ai.operation.name"] == "chat"
            assert attrs["gen_ai.request.model"] == "traced"
            assert attrs["gen_ai.response.model"] == "traced"
            assert attrs["gen_ai.usage.input_tokens"] == 7
            assert attrs["gen_ai.usage.output_tokens"] == 2
            assert attrs["gen_ai.response.finish_reasons"] == ["end_turn"]
            assert attrs["gen_ai.response.time_to_first_chunk"] > 0
            assert span.kind == span.SPAN_KIND_SERVER
            # No prompt content without log_content.
            assert not any(PROMPT in str(value) for value in attrs.values())
            assert "gen_ai.input.messages" not in attrs
            wanted = {
                "gen_ai.server.request.duration",
                "gen_ai.server.time_to_first_token",
                "gen_ai.client.token.usage",
            }
            wait_until(
                lambda: wanted <= receiver.metric_names,
                timeout=20.0,
                what=lambda: f"{wanted} among {receiver.metric_names}",
            )
        finally:
            gateway.stop()


def test_prompt_content_is_in_spans_only_with_log_content(
    receiver: Receiver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
    with FakeUpstream("openai", Script(text="traced answer")) as fake:
        gateway = Gateway(tmp_path, config=_config(receiver, fake), args=("--log-content",))
        gateway.start()
        try:
            with gateway.client(timeout=20.0) as client:
                post(client, body("traced", PROMPT))
            attrs = _attributes(receiver.wait_span("chat traced"))
            assert PROMPT in attrs["gen_ai.input.messages"]
            assert attrs["gen_ai.output.messages"] == "traced answer"
        finally:
            gateway.stop()


def test_telemetry_follows_the_standard_variables() -> None:
    from tokenwire.gateway.config.production import TelemetryConfig
    from tokenwire.gateway.telemetry.otel import enabled

    off = TelemetryConfig()
    assert not enabled(off, {})
    assert enabled(off, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"})
    assert enabled(off, {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"})
    assert not enabled(TelemetryConfig(enabled=True), {"OTEL_SDK_DISABLED": "true"})
    assert not enabled(TelemetryConfig(enabled=False), {"OTEL_EXPORTER_OTLP_ENDPOINT": "x"})


def test_the_clients_traceparent_goes_upstream_without_telemetry(tmp_path: Path) -> None:
    traceparent = f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"
    with FakeUpstream("openai", Script(text="plain")) as fake:
        model = {"name": "plain", "provider": "openai", "base_url": fake.url + "/v1"}
        gateway = start(tmp_path, table("models", model, array=True))
        try:
            with gateway.client(timeout=20.0) as client:
                post(
                    client,
                    body("plain", "hi"),
                    headers={"traceparent": traceparent, "tracestate": "vendor=1"},
                )
            assert fake.requests[-1].headers["traceparent"] == traceparent
            assert fake.requests[-1].headers["tracestate"] == "vendor=1"
        finally:
            gateway.stop()
