"""Errors that say what to do: each message's exact wording, asserted once, names the next step.

A model whose upstream key is not set answers a status the official SDKs do not
retry (401), naming the variable to set on the gateway, and ``serve`` says so at
start-up; ``validate`` says what its input is when it is no stream; ``check``
tells an unknown model from a wrong URL; connection and file errors say what to
try and where.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import httpx2
import openai
import pytest

from tokenwire._suggest import connection_hint
from tokenwire.cli.serve import banner
from tokenwire.gateway.config import parse
from tokenwire.testing.processes import (
    ServedProcess,
    free_port,
    gateway_argv,
    gateway_config,
    serve_gateway,
)

ROOT = Path(__file__).resolve().parents[1]
KEY_ENV = "TOKENWIRE_TEST_UNSET_KEY"
# Never called (port 9): a model without its key refuses before any upstream request.
NO_KEY = gateway_config(
    {
        "gpt": {"provider": "openai", "base_url": "http://127.0.0.1:9/v1", "api_key_env": KEY_ENV},
        "claude": {
            "provider": "anthropic",
            "base_url": "http://127.0.0.1:9",
            "api_key_env": KEY_ENV,
        },
    }
)
MISSING = (
    'the gateway answers HTTP 401: model "{model}" has no upstream key; set '
    f"{KEY_ENV} in the gateway's environment and restart it"
)


def cli(*argv: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(
        [sys.executable, "-m", "tokenwire", *argv],
        capture_output=True,
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},
    )
    out, err = res.stdout.decode(errors="replace"), res.stderr.decode(errors="replace")
    return subprocess.CompletedProcess(res.args, res.returncode, out, err)


@pytest.fixture(scope="module")
def no_key(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedProcess]:
    folder = tmp_path_factory.mktemp("no-key")
    (folder / "gateway.toml").write_text(NO_KEY)
    env = {k: v for k, v in os.environ.items() if k != KEY_ENV}
    port = free_port()
    served = ServedProcess(
        gateway_argv(str(folder / "gateway.toml"), port),
        port,
        env=env,
        stdout_path=folder / "stdout",
    )
    with served:
        yield served


@pytest.fixture(scope="module")
def demo() -> Iterator[ServedProcess]:
    with serve_gateway() as served:
        yield served


@contextlib.contextmanager
def counting(http: Any = httpx) -> Iterator[tuple[Any, list[str]]]:
    """An HTTP client (of ``http``: the SDK's httpx or httpx2) that lists what it sends."""
    sent: list[str] = []
    with http.Client(event_hooks={"request": [lambda r: sent.append(str(r.url))]}) as client:
        yield client, sent


# -- a model without its upstream key -----------------------------------------------------


def test_the_openai_sdk_gets_a_401_it_does_not_retry_naming_the_variable(
    no_key: ServedProcess,
) -> None:
    with counting() as (http, sent), pytest.raises(openai.AuthenticationError) as raised:
        sdk = openai.OpenAI(base_url=f"{no_key.url}/v1", api_key="unused", http_client=http)
        sdk.chat.completions.create(
            model="gpt", messages=[{"role": "user", "content": "Hi"}], stream=True
        )
    assert raised.value.status_code == 401
    assert raised.value.body["message"] == MISSING.format(model="gpt")  # type: ignore[index]
    assert len(sent) == 1, sent  # the SDK's two retries of a 500 are gone


def test_the_anthropic_sdk_gets_the_same_refusal_in_its_own_shape(no_key: ServedProcess) -> None:
    with counting(httpx2) as (http, sent), pytest.raises(anthropic.AuthenticationError) as raised:
        sdk = anthropic.Anthropic(base_url=no_key.url, api_key="unused", http_client=http)
        sdk.messages.create(
            model="claude", max_tokens=16, messages=[{"role": "user", "content": "Hi"}]
        )
    assert raised.value.body["error"]["type"] == "authentication_error"  # type: ignore[index]
    assert KEY_ENV in str(raised.value)
    assert len(sent) == 1, sent


def test_serve_names_each_model_without_its_key_and_the_playground(no_key: ServedProcess) -> None:
    assert no_key.stdout_path is not None
    lines = no_key.stdout_path.read_text().splitlines()
    assert f"  playground: http://127.0.0.1:{no_key.port}/  (open it in a browser)" in lines
    for model in ("gpt", "claude"):
        said = (
            f"  model '{model}' has no key: set {KEY_ENV} and restart the gateway "
            "(until then it answers 401)"
        )
        assert said in lines, lines


def test_the_banner_says_nothing_of_keys_that_are_set() -> None:
    import tomllib

    config = parse(tomllib.loads(NO_KEY))
    lines = banner(config, "0.0.0.0", 8080, None, {KEY_ENV: "set"})
    assert lines[1] == "  playground: http://127.0.0.1:8080/  (open it in a browser)"
    assert not any("has no key" in line for line in lines)


# -- validate: what the input is when it is no stream -------------------------------------


def test_validate_leads_with_the_conversion_hint() -> None:
    capture = ROOT / "examples" / "captures" / "openai-hello.sse"
    res = subprocess.run(
        [sys.executable, "-m", "tokenwire", "validate", str(capture)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,  # one pipe: the order a terminal shows
        text=True,
        timeout=120,
    )
    first = res.stdout.splitlines()[0]
    assert first.startswith("tokenwire validate: this is a vendor capture (openai: "), first
    assert first.endswith(
        f"convert it first: tokenwire convert --from openai {capture} | tokenwire validate"
    )


def test_validate_on_a_request_body_says_where_to_send_it(tmp_path: Path) -> None:
    body = tmp_path / "request.json"
    body.write_text('{"version":"1.0","stream":true,"model":"demo","messages":[]}')
    res = cli("validate", str(body))
    assert res.returncode == 1
    assert res.stderr.splitlines()[0] == (
        'tokenwire validate: this is a request body (JSON with "messages"), not a stream; '
        "send it to a gateway and validate the answer: curl -sN http://127.0.0.1:8080/v1/stream "
        f"-H 'Content-Type: application/llm-request+json' -d @{body} | tokenwire validate"
    )


def test_validate_on_random_bytes_says_what_they_look_like() -> None:
    jpeg = bytes.fromhex("ff d8 ff e0 00 10 4a 46 49 46")  # a JPEG's first bytes
    res = cli("validate", stdin=jpeg)
    assert res.stderr.splitlines()[0] == (
        "tokenwire validate: the input is binary data (10 bytes starting ff d8 ff e0 00 10 4a "
        "46…), not a stream; validate takes the body of an LLM-Stream answer (lines "
        "'event: TYPE' and 'data: {...}'), e.g. curl -sN http://127.0.0.1:8080/v1/stream ... "
        "| tokenwire validate"
    )


# -- check: an unknown model is not a wrong URL --------------------------------------------


def test_check_names_an_unknown_model_and_the_option_to_pass(demo: ServedProcess) -> None:
    res = cli("check", demo.url, "--model", "nope")
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.strip() == (
        f"tokenwire check: {demo.url}/v1/stream does not serve model 'nope' "
        '(unknown model "nope" (served: demo)); pass --model with a model it serves'
    )


def test_check_on_a_wrong_url_names_the_urls_to_pass(demo: ServedProcess) -> None:
    res = cli("check", f"{demo.url}/llm")
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.strip() == (
        f"tokenwire check: {demo.url}/llm/v1/stream answers HTTP 404 to a POST: it is no "
        "LLM-Stream endpoint; pass the gateway's base URL or its stream URL (for a gateway at "
        f"{demo.url}: {demo.url} or {demo.url}/v1/stream)"
    )


# -- connection errors say what to try -------------------------------------------------------


def test_a_refused_connection_asks_whether_the_gateway_runs() -> None:
    port = free_port()  # closed again: connections are refused
    res = cli("chat", "--url", f"http://127.0.0.1:{port}", "hi")
    assert res.returncode == 1
    assert (
        f"; nothing listens at 127.0.0.1:{port}: is `tokenwire serve` running there? "
        "(`make run` starts one at http://127.0.0.1:8080)"
    ) in res.stderr


def test_tls_to_a_plain_http_port_says_to_use_http(demo: ServedProcess) -> None:
    res = cli("check", f"https://127.0.0.1:{demo.port}")
    assert res.returncode == 2
    assert res.stderr.rstrip().endswith(
        f"; the server at 127.0.0.1:{demo.port} speaks plain HTTP, not TLS: "
        f"try http://127.0.0.1:{demo.port}/v1/stream"
    ), res.stderr


def test_an_unknown_host_and_an_unknown_error_get_what_fits() -> None:
    url = "http://no-such-host.invalid:8080/v1/stream"
    said = "ConnectError: [Errno -2] Name or service not known"
    assert connection_hint(said, url) == (
        "; the host name 'no-such-host.invalid' does not resolve: check the URL"
    )
    assert connection_hint("ReadError: something else", url) == ""


# -- file errors name the file and the position ------------------------------------------------


def test_a_bad_tools_file_is_named_with_its_line_and_column(tmp_path: Path) -> None:
    tools = tmp_path / "bad.json"
    tools.write_text('{"tools": [\n  {"name": "x",}\n]}')
    res = cli("chat", "--url", "http://127.0.0.1:9", "--tools", str(tools), "hi")
    assert res.returncode == 2
    assert res.stderr.splitlines()[-1] == (
        f"Error: Invalid value for --tools: {tools}, line 2 column 16: JSON is malformed: "
        'trailing comma in object (byte 27); fix the file (a JSON object with a "tools" list)'
    )
