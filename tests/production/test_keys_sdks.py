"""Inbound keys through each ingress and its real SDK, against a real ``tokenwire serve``.

openai, anthropic and google-genai must raise their own authentication (401)
and rate-limit (429) exceptions, as against the vendor; ``/v1/stream`` answers
the standard's JSON error; a key limited to some models gets 403; no key ever
reaches the log.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.gateway.gateway_http import body, events_of, post, text_of
from tests.gateway.gateway_procs import Gateway
from tests.production.conftest import Keys, start, table

from tokenwire.gateway.policy.keys import new_key
from tokenwire.testing.processes import free_port

KEYS = Keys()
GOOD = KEYS.add("good")
ONLY_OTHER = KEYS.add("only-other", models=["other"])
RL = {
    vendor: KEYS.add(f"rl-{vendor}", requests_per_minute=1)
    for vendor in ("openai", "anthropic", "gemini", "standard")
}
BUDGET = KEYS.add("budget", token_budget=1)


@pytest.fixture(scope="module")
def metrics_port() -> int:
    """``[metrics] listen``: the metrics' own port, taken as the gateway starts (one
    taken at import is minutes old by then, and another process may hold it)."""
    return free_port()


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, metrics_port: int) -> Iterator[Gateway]:
    workdir: Path = tmp_path_factory.mktemp("keys")
    config = KEYS.toml() + "\n" + table("models", {"name": "other", "provider": "demo"}, array=True)
    config += "\n" + table("metrics", {"listen": f"127.0.0.1:{metrics_port}"})
    gw = start(workdir, config)
    try:
        yield gw
    finally:
        gw.stop()


def _openai(gw: Gateway, key: str):  # type: ignore[no-untyped-def]
    import openai

    return openai.OpenAI(base_url=gw.url + "/v1", api_key=key, max_retries=0)


def _anthropic(gw: Gateway, key: str):  # type: ignore[no-untyped-def]
    import anthropic

    return anthropic.Anthropic(base_url=gw.url, api_key=key, max_retries=0)


def _genai(gw: Gateway, key: str):  # type: ignore[no-untyped-def]
    from google import genai
    from google.genai import types

    return genai.Client(api_key=key, http_options=types.HttpOptions(base_url=gw.url))


def _openai_stream(gw: Gateway, key: str, model: str = "demo") -> str:
    with _openai(gw, key) as client:
        stream = client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": "hi"}], stream=True
        )
        return "".join(c.choices[0].delta.content or "" for c in stream if c.choices)


def _anthropic_stream(gw: Gateway, key: str, model: str = "demo") -> str:
    with _anthropic(gw, key) as client:
        with client.messages.stream(
            model=model, max_tokens=64, messages=[{"role": "user", "content": "hi"}]
        ) as stream:
            return "".join(stream.text_stream)


def _genai_stream(gw: Gateway, key: str, model: str = "demo") -> str:
    client = _genai(gw, key)
    try:
        chunks = client.models.generate_content_stream(model=model, contents="hi")
        return "".join(chunk.text or "" for chunk in chunks)
    finally:
        client.close()


def test_openai_sdk_authenticates_and_is_refused_like_openai(gateway: Gateway) -> None:
    import openai

    assert _openai_stream(gateway, GOOD)
    with pytest.raises(openai.AuthenticationError) as bad:
        _openai_stream(gateway, new_key())
    assert bad.value.status_code == 401
    assert bad.value.code == "invalid_api_key"
    with pytest.raises(openai.PermissionDeniedError) as denied:
        _openai_stream(gateway, ONLY_OTHER)
    assert denied.value.status_code == 403
    assert _openai_stream(gateway, ONLY_OTHER, model="other")
    assert _openai_stream(gateway, RL["openai"])
    with pytest.raises(openai.RateLimitError) as limited:
        _openai_stream(gateway, RL["openai"])
    assert limited.value.status_code == 429
    assert int(limited.value.response.headers["retry-after"]) >= 1


def test_a_route_the_gateway_lacks_answers_the_sdk_in_its_shape_with_or_without_a_key(
    gateway: Gateway,
) -> None:
    import openai

    # The gateway serves no embeddings: the refused key and the missing route are
    # both OpenAI errors, each the exception the SDK raises for its status.
    with _openai(gateway, new_key()) as client, pytest.raises(openai.AuthenticationError) as bad:
        client.embeddings.create(model="demo", input="hi")
    assert bad.value.code == "invalid_api_key"
    with _openai(gateway, GOOD) as client, pytest.raises(openai.NotFoundError) as missing:
        client.embeddings.create(model="demo", input="hi")
    assert missing.value.code == "not_found"
    assert missing.value.type == "invalid_request_error"  # OpenAI's shape, not the standard's
    assert "/v1/embeddings" in missing.value.message


def test_anthropic_sdk_authenticates_and_is_refused_like_anthropic(gateway: Gateway) -> None:
    import anthropic

    assert _anthropic_stream(gateway, GOOD)
    with pytest.raises(anthropic.AuthenticationError) as bad:
        _anthropic_stream(gateway, new_key())
    assert bad.value.status_code == 401
    assert bad.value.body["error"]["type"] == "authentication_error"  # type: ignore[index]
    with pytest.raises(anthropic.PermissionDeniedError):
        _anthropic_stream(gateway, ONLY_OTHER)
    assert _anthropic_stream(gateway, RL["anthropic"])
    with pytest.raises(anthropic.RateLimitError) as limited:
        _anthropic_stream(gateway, RL["anthropic"])
    assert limited.value.status_code == 429
    assert int(limited.value.response.headers["retry-after"]) >= 1


def test_genai_sdk_is_refused_like_gemini(gateway: Gateway) -> None:
    from google.genai import errors

    with pytest.raises(errors.ClientError) as bad:
        _genai_stream(gateway, new_key())
    assert bad.value.code == 401
    assert bad.value.status == "UNAUTHENTICATED"
    with pytest.raises(errors.ClientError) as denied:
        _genai_stream(gateway, ONLY_OTHER)
    assert denied.value.code == 403
    assert denied.value.status == "PERMISSION_DENIED"
    # The first request is admitted and streams (the Gemini route); the second is over
    # the key's one request per minute.
    assert _genai_stream(gateway, RL["gemini"])
    with pytest.raises(errors.ClientError) as limited:
        _genai_stream(gateway, RL["gemini"])
    assert limited.value.code == 429
    assert limited.value.status == "RESOURCE_EXHAUSTED"


def test_standard_route_answers_the_standard_json_error(
    gateway: Gateway, metrics_port: int
) -> None:
    with gateway.client(timeout=10.0) as client:
        missing = post(client, body("demo", "hi"))
        assert missing.status_code == 401
        assert missing.json()["error"]["code"] == "unauthorized"
        assert missing.headers["www-authenticate"].startswith("Bearer")
        auth = {"authorization": f"Bearer {GOOD}"}
        ok = post(client, body("demo", "hi"), headers=auth)
        assert ok.status_code == 200
        assert text_of(events_of(ok.content))
        # x-api-key works on every route too.
        assert post(client, body("demo", "hi"), headers={"x-api-key": GOOD}).status_code == 200
        denied = post(client, body("demo", "hi"), headers={"authorization": f"Bearer {ONLY_OTHER}"})
        assert denied.status_code == 403
        assert denied.json()["error"]["code"] == "model_not_allowed"
        rl = {"authorization": f"Bearer {RL['standard']}"}
        assert post(client, body("demo", "hi"), headers=rl).status_code == 200
        limited = post(client, body("demo", "hi"), headers=rl)
        assert limited.status_code == 429
        assert limited.json()["error"]["code"] == "rate_limited"
        assert int(limited.headers["retry-after"]) >= 1
        # Open routes stay open.
        assert client.get("/healthz").status_code == 200
        assert client.get("/v1/models").status_code == 401
        assert client.get("/v1/models", headers=auth).status_code == 200
        # With keys, /metrics is not on the serving port: on its own listener.
        assert client.get("/metrics", headers=auth).status_code == 404
    with httpx.Client(base_url=f"http://127.0.0.1:{metrics_port}", timeout=10.0) as scraper:
        metrics = scraper.get("/metrics").text
        assert scraper.get("/v1/models").status_code == 404
        assert scraper.post("/metrics").status_code == 405
        assert scraper.head("/metrics").status_code == 200
        assert 'tokenwire_requests_refused_total{code="unauthorized",status="401"}' in metrics
        assert 'tokenwire_requests_refused_total{code="rate_limited",status="429"}' in metrics


def test_token_budget_is_spent_by_usage(gateway: Gateway) -> None:
    headers = {"authorization": f"Bearer {BUDGET}"}
    with gateway.client(timeout=10.0) as client:
        assert post(client, body("demo", "hi"), headers=headers).status_code == 200
        # The usage is charged when the stream ends, a moment after the response.
        refused = None
        for _ in range(200):
            refused = post(client, body("demo", "hi"), headers=headers)
            if refused.status_code == 429:
                break
        assert refused is not None and refused.status_code == 429
        assert refused.json()["error"]["code"] == "budget_exceeded"


def test_keys_never_reach_the_log(gateway: Gateway) -> None:
    with gateway.client(timeout=10.0) as client:
        post(client, body("demo", "hi"), headers={"authorization": f"Bearer {GOOD}"})
        post(client, body("demo", "hi"), headers={"authorization": "Bearer tw-not-a-key"})
    log = gateway.stderr()
    assert '"key_id":"good"' in log
    for secret in KEYS.secrets.values():
        assert secret not in log
    assert "tw-not-a-key" not in log
