"""The gateway's parts in-process: config, providers, metrics, logs, ingress, app."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from pathlib import Path
from typing import Any

import msgspec
import pytest
from tests.server.server_asgi import Exchange

from tokenwire import events as ev
from tokenwire import request as rq
from tokenwire.errors import InvalidRequest, RequestTooLarge
from tokenwire.gateway import app as gateway_app
from tokenwire.gateway import config as cfg
from tokenwire.gateway import ingress, providers
from tokenwire.gateway.telemetry import logs
from tokenwire.gateway.telemetry.metrics import Metrics
from tokenwire.server import StreamRecord
from tokenwire.server.exchange import Exchange as RequestExchange

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "reference" / "config.md"


# --- config ----------------------------------------------------------------------------


def test_default_config_serves_demo_only() -> None:
    config = cfg.load(None)
    assert config.model_names == ["demo"]
    assert config.server.host == "127.0.0.1" and config.server.port == 8080


def test_demo_is_always_served() -> None:
    config = cfg.parse({"models": [{"name": "slow", "provider": "demo", "delay_ms": 10}]})
    assert config.model_names == ["slow", "demo"]
    own = cfg.parse({"models": [{"name": "demo", "provider": "demo", "delay_ms": 5}]})
    assert own.model_names == ["demo"] and own.models[0].delay_ms == 5


@pytest.mark.parametrize(
    ("data", "where"),
    [
        ({"server": {"port": "80"}}, "server.port"),
        ({"server": {"port": 70000}}, "server.port"),
        ({"server": {"workers": 0}}, "server.workers"),
        ({"server": {"certfile": "c.pem"}}, "server.certfile"),
        ({"server": {"keepalive_s": 0}}, "server.keepalive_s"),
        ({"models": [{"name": "x", "provider": "nope"}]}, "models[0].provider"),
        ({"models": [{"name": "x", "provider": "openai"}]}, "models[0].base_url"),
        ({"models": [{"name": "x", "provider": "python"}]}, "models[0].factory"),
        ({"models": [{"name": "", "provider": "demo"}]}, "models[0].name"),
        ({"models": [{"name": "x", "provider": "demo", "delay_ms": -1}]}, "models[0].delay_ms"),
        ({"models": [{"name": "x", "provider": "demo", "typo": 1}]}, "models[0]"),
        (
            {"models": [{"name": "x", "provider": "demo"}, {"name": "x", "provider": "demo"}]},
            "models[1].name",
        ),
        (
            {"models": [{"name": "x", "provider": "openai", "base_url": "u", "api_key": "sk-1"}]},
            "models[0].api_key",
        ),
    ],
)
def test_config_errors_name_the_key(data: dict[str, Any], where: str) -> None:
    with pytest.raises(cfg.ConfigError) as info:
        cfg.parse(data)
    assert str(info.value).startswith(where), str(info.value)


def test_keys_come_from_the_environment() -> None:
    model = cfg.ModelConfig(name="x", provider="openai", base_url="u", api_key_env="MY_KEY")
    assert model.api_key({"MY_KEY": "sk-test"}) == "sk-test"
    assert model.api_key({}) is None


def test_load_reports_file_problems(tmp_path: Path) -> None:
    with pytest.raises(cfg.ConfigError, match="No such file"):
        cfg.load(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[server\nport = 1")
    with pytest.raises(cfg.ConfigError, match="invalid TOML"):
        cfg.load(bad)
    wrong = tmp_path / "wrong.toml"
    wrong.write_text('[[models]]\nname = "x"\nprovider = "nope"\n')
    with pytest.raises(cfg.ConfigError, match=r"wrong\.toml: models\[0\]\.provider"):
        cfg.load(wrong)


def test_the_documented_configs_parse() -> None:
    blocks = re.findall(r"```toml\n(.*?)```", DOC.read_text(), re.DOTALL)
    assert len(blocks) >= 2
    import tomllib

    for block in blocks:
        config = cfg.parse(tomllib.loads(block))
        assert "demo" in config.model_names


# --- providers -------------------------------------------------------------------------


def test_python_factory_errors() -> None:
    with pytest.raises(ValueError, match="module:callable"):
        providers.load_factory("nocolon")
    with pytest.raises(ValueError, match="cannot import"):
        providers.load_factory("no.such.module:thing")
    with pytest.raises(ValueError, match="no attribute"):
        providers.load_factory("json:no_such_thing")
    with pytest.raises(ValueError, match="not callable"):
        providers.load_factory("json.decoder:NaN")
    for factory in ("json:dumps", "builtins:dict"):  # fails when called / not a provider
        config = cfg.parse({"models": [{"name": "p", "provider": "python", "factory": factory}]})
        with pytest.raises(ValueError, match="model 'p'"):
            providers.build_providers(config, providers.UpstreamClients())


def test_missing_api_key_answers_an_error_without_calling_upstream(
    caplog: pytest.LogCaptureFixture,
) -> None:
    config = cfg.parse(
        {
            "models": [
                {
                    "name": "x",
                    "provider": "openai",
                    "base_url": "http://127.0.0.1:9/v1",
                    "api_key_env": "TOKENWIRE_TEST_SURELY_UNSET",
                }
            ]
        }
    )
    with caplog.at_level(logging.WARNING, logger="tokenwire.gateway"):
        built = providers.build_providers(config, providers.UpstreamClients())
    assert "TOKENWIRE_TEST_SURELY_UNSET" in caplog.text

    async def collect() -> list[ev.Event]:
        return [e async for e in built["x"].generate(rq.build(model="x", messages="hi"))]

    (event,) = asyncio.run(collect())
    assert isinstance(event, ev.ErrorEvent) and event.code == "internal_error"
    # The variable's name (never a value) says what to set; the 401 is what vendor
    # routes answer (tests/test_cli_next_steps.py: the SDKs do not retry it).
    assert event.message.startswith("the gateway answers HTTP 401: ")
    assert "set TOKENWIRE_TEST_SURELY_UNSET in the gateway's environment" in event.message


@pytest.mark.parametrize(
    ("status", "code"),
    [
        (429, "rate_limited"),
        (503, "overloaded"),
        (529, "overloaded"),
        (504, "overloaded"),
        (401, "internal_error"),
    ],
)
def test_status_error_mapping(status: int, code: str) -> None:
    assert providers.status_error(status)[0] == code


# --- metrics -----------------------------------------------------------------------------


def _record(model: str | None = "demo", status: int = 200, **fields: Any) -> StreamRecord:
    record = StreamRecord("/v1/stream")
    record.model, record.status = model, status
    for key, value in fields.items():
        setattr(record, key, value)
    record.ended = record.started + 0.5
    return record


def _sample(metrics: Metrics, name: str, **labels: str) -> float | None:
    value = metrics.registry.get_sample_value(name, labels)
    return value


def test_metrics_count_streams_and_rejections() -> None:
    metrics = Metrics(["demo"])
    ok = _record(events=12, first_event=None)
    ok.first_event = ok.started + 0.01
    metrics.opened(ok)
    assert _sample(metrics, "tokenwire_streams_active", model="demo") == 1
    metrics.closed(ok)
    failed = _record(events=3, error_code="overloaded")
    metrics.opened(failed)
    metrics.closed(failed)
    gone = _record(model="unlisted", events=2, disconnected=True)
    metrics.opened(gone)
    metrics.closed(gone)
    metrics.closed(_record(model=None, status=404, error_code="model_not_found"))
    metrics.closed(_record(model=None, status=499))  # client left mid-upload: not a rejection

    assert _sample(metrics, "tokenwire_streams_active", model="demo") == 0
    assert _sample(metrics, "tokenwire_streams_started_total", model="demo") == 2
    assert _sample(metrics, "tokenwire_streams_completed_total", model="demo", outcome="ok") == 1
    assert _sample(metrics, "tokenwire_streams_completed_total", model="demo", outcome="error") == 1
    other = {"model": "other", "outcome": "disconnected"}
    assert _sample(metrics, "tokenwire_streams_completed_total", **other) == 1
    assert _sample(metrics, "tokenwire_events_total", model="demo") == 15
    assert _sample(metrics, "tokenwire_stream_errors_total", model="demo", code="overloaded") == 1
    assert _sample(metrics, "tokenwire_stream_errors_total", model="demo", code="rate_limited") == 0
    rejected = {"status": "404", "code": "model_not_found"}
    assert _sample(metrics, "tokenwire_requests_rejected_total", **rejected) == 1
    assert _sample(metrics, "tokenwire_time_to_first_event_seconds_count", model="demo") == 1
    assert _sample(metrics, "tokenwire_stream_duration_seconds_count", model="demo") == 2
    assert b"tokenwire_streams_started_total" in metrics.render()


def test_two_gateways_do_not_share_metrics() -> None:
    a, b = Metrics(["demo"]), Metrics(["demo"])
    a.opened(_record())
    assert _sample(b, "tokenwire_streams_started_total", model="demo") == 0


# --- logs ----------------------------------------------------------------------------------


def test_log_line_is_redacted_by_default() -> None:
    request = rq.build(model="demo", messages="SECRET question", metadata={"request_id": "r1"})
    record = _record(request=request, events=4, error_code="internal_error")
    record.error_message = "quotes SECRET"
    try:
        raise RuntimeError("SECRET in the exception")
    except RuntimeError as exc:
        record.exception = exc
    line = logs.RequestLog().line(record)
    text = json.dumps(line)
    assert "SECRET" not in text
    assert line["request_id"] == "r1" and line["exception"] == "RuntimeError"
    assert any("test_gateway_units.py" in frame for frame in line["traceback"])


def test_log_content_adds_prompt_completion_and_messages() -> None:
    log = logs.RequestLog(log_content=True)
    request = rq.build(model="demo", messages="SECRET question")
    record = _record(request=request)
    record.error_message = "the message"
    tee = log.opened(record)
    assert tee is not None
    tee.write(
        [
            ev.ContentDelta(v="1.0", seq=1, index=0, role="assistant", delta=ev.Delta(text="Hi ")),
            ev.ToolCall(v="1.0", seq=2, index=1, id="c1", name="f", arguments="{}"),
        ]
    )
    line = log.line(record, log._transcripts[id(record)])
    assert line["prompt"] == [{"role": "user", "content": "SECRET question"}]
    assert line["completion"] == "Hi "
    assert line["tool_calls"] == [{"id": "c1", "name": "f", "arguments": "{}"}]
    assert line["error_message"] == "the message"


def test_log_writes_one_json_line(caplog: pytest.LogCaptureFixture) -> None:
    log = logs.RequestLog()
    with caplog.at_level(logging.INFO, logger=logs.LOGGER_NAME):
        log.closed(_record())
    (message,) = [r.getMessage() for r in caplog.records if r.name == logs.LOGGER_NAME]
    assert json.loads(message)["status"] == 200


def test_configure_is_idempotent() -> None:
    logger = logs.configure()
    count = len(logger.handlers)
    assert logs.configure() is logger and len(logger.handlers) == count


# --- ingress ---------------------------------------------------------------------------------


def test_decode_json_body_limits() -> None:
    assert ingress.decode_json_body(b'{"a": [1, {"b": 2}]}') == {"a": [1, {"b": 2}]}
    with pytest.raises(RequestTooLarge):
        ingress.decode_json_body(b'{"a": ' + b"[" * 65 + b"]" * 65 + b"}")
    with pytest.raises(RequestTooLarge):
        ingress.decode_json_body(b'{"a": ' + b"[" * 5000 + b"]" * 5000 + b"}")
    wide = b'{"a": [' + b",".join([b"[1]"] * 500) + b"]}"
    assert len(ingress.decode_json_body(wide)["a"]) == 500  # many brackets, shallow: fine
    with pytest.raises(InvalidRequest, match="UTF-8"):
        ingress.decode_json_body(b'{"a": "\xff"}')
    with pytest.raises(InvalidRequest, match="JSON object"):
        ingress.decode_json_body(b"[1]")
    with pytest.raises(InvalidRequest, match="not valid JSON"):
        ingress.decode_json_body(b"{")


def test_ingress_streams_or_answers_whole() -> None:
    # Issue 23: without "stream": true the answer is whole; a non-boolean is refused.
    from tokenwire.gateway.answers import HeldStream, WholeAnswer

    body = b'{"model": "demo", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]'
    for parser in (ingress.OpenAIChatIngress(), ingress.AnthropicMessagesIngress()):
        assert isinstance(parser.parse(body + b"}", RequestExchange())[1], WholeAnswer)
        assert isinstance(
            parser.parse(body + b', "stream": true}', RequestExchange())[1], HeldStream
        )
        with pytest.raises(InvalidRequest) as info:
            parser.parse(body + b', "stream": "yes"}', RequestExchange())
        assert info.value.path == "stream"


def test_openai_ingress_include_usage() -> None:
    body = {
        "model": "demo",
        "stream": True,
        "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": "hi"}],
    }
    request, encode = ingress.OpenAIChatIngress().parse(
        msgspec.json.encode(body), RequestExchange()
    )
    assert request.model == "demo" and request.messages[0].text == "hi"
    encode(ev.StreamStart(v="1.0", seq=0, model="demo", created=1))
    encode(ev.Usage(v="1.0", seq=1, input_tokens=2, output_tokens=3))
    tail = encode(ev.StreamEnd(v="1.0", seq=2))
    assert b'"total_tokens":5' in tail and tail.endswith(b"data: [DONE]\n\n")


# --- the app --------------------------------------------------------------------------------


def test_app_routes_answer_json() -> None:
    app = gateway_app.build_app()
    x = Exchange(method="GET", content_type=None)
    x.scope["path"] = "/v1/models"
    x.run(app)
    assert x.status == 200
    assert x.json()["data"][0]["id"] == "demo"
    for method, path, status in [
        ("GET", "/nope", 404),
        ("DELETE", "/v1/stream", 405),
        ("GET", "/v1/chat/completions", 405),
    ]:
        x = Exchange(method=method, content_type=None)
        x.scope["path"] = path
        x.run(app)
        assert x.status == status
        assert x.headers["content-type"] == "application/json"
        assert x.json()["error"]["code"] in ("not_found", "method_not_allowed")


def test_app_stream_routes_answer_500_for_an_escaping_exception(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The stream routes skip Starlette's error middleware: the gateway answers
    # a bug that escapes an endpoint as that middleware did (a JSON 500, no
    # detail on the wire) and re-raises it for the server to log.
    app = gateway_app.build_app()

    async def broken(*_args: Any) -> None:
        raise RuntimeError("secret detail")

    monkeypatch.setattr(app.state.gateway.chat_completions, "_handle", broken)
    body = b'{"model": "demo", "stream": true, "messages": [{"role": "user", "content": "hi"}]}'
    x = Exchange(body, content_type="application/json")
    x.scope["path"] = "/v1/chat/completions"
    with pytest.raises(RuntimeError, match="secret detail"):
        x.run(app)
    assert x.status == 500
    assert x.json() == {
        "error": {"code": "internal_error", "message": "internal error", "path": None}
    }
    assert b"secret" not in x.body


def test_app_from_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = tmp_path / "g.toml"
    path.write_text('[[models]]\nname = "slow"\nprovider = "demo"\ndelay_ms = 5\n')
    monkeypatch.setenv(gateway_app.CONFIG_ENV, str(path))
    monkeypatch.setenv(gateway_app.LOG_CONTENT_ENV, "1")
    app = gateway_app.app_from_env()
    gateway = app.state.gateway
    assert gateway.config.model_names == ["slow", "demo"]
    assert gateway.log.log_content is True
    monkeypatch.setenv(gateway_app.CONFIG_ENV, "")
    monkeypatch.setenv(gateway_app.LOG_CONTENT_ENV, "0")
    plain = gateway_app.app_from_env().state.gateway
    assert plain.config.model_names == ["demo"] and plain.log.log_content is False


def test_signalr_and_connect_models_build_their_binding_providers() -> None:
    from tokenwire.gateway.providers.connect import ConnectProvider
    from tokenwire.gateway.providers.signalr import SignalRProvider

    config = cfg.parse(
        {
            "models": [
                {
                    "name": "copilot",
                    "provider": "signalr",
                    "options": {"hub_url": "ws://127.0.0.1:9/hub", "method": "Chat"},
                },
                {
                    "name": "cursor",
                    "provider": "connect",
                    "base_url": "http://127.0.0.1:9",
                    "options": {"service_path": "/demo.v1.ChatService/StreamChat"},
                },
            ]
        }
    )
    built = providers.build_providers(config, providers.UpstreamClients())
    assert isinstance(built["copilot"], SignalRProvider)
    assert isinstance(built["cursor"], ConnectProvider)
    with pytest.raises(cfg.ConfigError, match="provider"):
        cfg.parse({"models": [{"name": "x", "provider": "nope"}]})
