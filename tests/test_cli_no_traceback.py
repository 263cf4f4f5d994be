"""No input gives a traceback, on any ``tokenwire`` command (issue 25).

Hypothesis feeds every command of ``tokenwire.cli.COMMANDS`` what a user
could: deep JSON and TOML, empty, binary and huge inputs, on stdin, in the
files the command reads and in its arguments. The command must end with an
exit status (``SystemExit``: 0, 1 or 2) and a message; any other exception is
a traceback on the user's terminal. Commands run in-process (click's
``CliRunner``), so one example takes milliseconds; ``chat`` and ``check`` talk
to a closed port on 127.0.0.1 and ``serve`` stops where it would bind.
"""

from __future__ import annotations

import socket
import threading
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokenwire.cli import COMMANDS, main
from tokenwire.client._url import endpoint
from tokenwire.translate import VENDORS

SETTINGS = settings(
    max_examples=40,
    deadline=None,
    # The files fixture is overwritten by each example; monkeypatch sets the same thing.
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
    derandomize=True,
)

#: Past every limit: the decoders' (1 MiB events), the config's (1 MiB), convert's head.
HUGE = 3 << 20


def _deep(opening: bytes, closing: bytes, inner: bytes = b"1") -> st.SearchStrategy[bytes]:
    return st.integers(50, 20_000).map(lambda n: opening * n + inner + closing * n)


#: What a user may hand a command, file or stdin.
INPUTS: st.SearchStrategy[bytes] = st.one_of(
    st.just(b""),
    st.binary(max_size=512),
    st.text(max_size=200).map(str.encode),
    _deep(b"[", b"]"),
    _deep(b'{"a":', b"}"),
    _deep(b"data: [", b"]").map(lambda b: b + b"\n\n"),
    _deep(b'data: {"choices":', b"}").map(lambda b: b + b"\n\n"),
    _deep(b"a = [", b"]"),
    _deep(b"a = {b=", b"}"),
    st.sampled_from([b"\x00" * 64, b"\xff\xfe\x00\x00", b"\x89PNG\r\n\x1a\n", b"\xef\xbb\xbf"]),
    st.sampled_from([b"x", b"data: x", b"{", b"[[", b"\x1e"]).map(lambda b: b * (HUGE // len(b))),
    st.just(b"event: stream.start\ndata: " + b"{" * 100_000 + b"\n\n"),
    st.just(b'[server]\nport = "x"\n[[models]]\nname = 1\n'),
)

#: One input of each kind, run by every command whatever Hypothesis draws:
#: the cases of the issue (deep, empty, binary, huge), inside the shapes each
#: command reads (a tools file, a request, a config, a vendor capture).
DEEP = 20_000
SPECIMENS: dict[str, bytes] = {
    "empty": b"",
    "whitespace": b" \n\r\n\t",
    "bom": b"\xef\xbb\xbf",
    "binary-png": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)),
    "binary-nul": b"\x00" * 4096,
    "not-utf8": b"\xff\xfe\xfa" * 100,
    "deep-json": b"[" * DEEP + b"]" * DEEP,
    "deep-jsonl": b'{"a":' * DEEP + b"1" + b"}" * DEEP + b"\n",
    "deep-sse": b"data: " + b"[" * DEEP + b"]" * DEEP + b"\n\n",
    "deep-in-an-object": b'{"tools":[{"name":"x","parameters":{"p":'
    + b"[" * DEEP
    + b"]" * DEEP
    + b'}}],"version":"1.0","model":"m","messages":'
    + b"[" * DEEP
    + b"]" * DEEP
    + b"}",
    "deep-toml": b"a = " + b"[" * DEEP + b"]" * DEEP + b"\n",
    "deep-toml-table": b"a = " + b"{b=" * DEEP + b"1" + b"}" * DEEP + b"\n",
    "huge-line": b"x" * HUGE,
    "huge-event": b"event: content.delta\ndata: " + b"x" * HUGE + b"\n\n",
    "huge-jsonl": b'{"choices":[{"delta":{"content":"' + b"x" * HUGE + b'"}}]}\n',
}


@pytest.fixture(scope="module")
def closed_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"  # closed now: connections are refused


def invoke(args: list[str], stdin: bytes = b"") -> Result:
    return CliRunner().invoke(main, args, input=stdin, catch_exceptions=True)


def assert_no_traceback(result: Result, args: list[str]) -> None:
    exc = result.exception
    if exc is None or isinstance(exc, SystemExit):
        assert result.exit_code in (0, 1, 2, 3), (args[:3], result.exit_code, result.output[-500:])
        assert "Traceback (most recent call last)" not in result.output
        return
    shown = "".join(traceback.format_exception(exc))[-3000:]
    pytest.fail(f"tokenwire {' '.join(a[:40] for a in args[:4])}: a traceback:\n{shown}")


@pytest.fixture()
def files(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path


def _write(folder: Path, data: bytes, name: str) -> str:
    path = folder / name
    path.write_bytes(data)
    return str(path)


def test_every_command_is_covered() -> None:
    # A new command must be added here, with the inputs it reads.
    assert set(COMMANDS) == {"serve", "chat", "validate", "convert", "check", "bench", "keys"}


def run_validate(data: bytes, files: Path, strict: bool = False) -> None:
    args = ["validate", *(["--strict"] if strict else [])]
    assert_no_traceback(invoke(args, data), args)
    args = ["validate", "--request", _write(files, data, "req.json"), "--json", "-"]
    assert_no_traceback(invoke(args, b"event: stream.start\ndata: {}\n\n"), args)


@SETTINGS
@given(data=INPUTS, strict=st.booleans())
def test_validate(data: bytes, strict: bool, files: Path) -> None:
    run_validate(data, files, strict)


def run_convert(data: bytes, files: Path, vendor: str | None = None) -> None:
    args = ["convert", *(["--from", vendor] if vendor else [])]
    assert_no_traceback(invoke(args, data), args)
    args = ["convert", "--request", _write(files, data, "req.json"), "--from", "openai"]
    assert_no_traceback(invoke(args, b"data: [DONE]\n\n"), args)


@SETTINGS
@given(data=INPUTS, vendor=st.sampled_from([None, *sorted(VENDORS)]))
def test_convert(data: bytes, vendor: str | None, files: Path) -> None:
    run_convert(data, files, vendor)


def run_serve(data: bytes, files: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tokenwire.cli.serve as serve

    def stop_before_binding(host: str, port: int) -> int:
        raise click.exceptions.Exit(0)  # the config was read: the rest is binding and serving

    monkeypatch.setattr(serve, "claim_port", stop_before_binding)
    args = ["serve", "--config", _write(files, data, "gateway.toml")]
    assert_no_traceback(invoke(args), args)


@SETTINGS
@given(data=INPUTS)
def test_serve_reads_any_config_file(
    data: bytes, files: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_serve(data, files, monkeypatch)


def _text(data: bytes) -> str:
    return data[:4096].decode("utf-8", "replace")


CHAT_PARTS = ["prompt", "tools", "url", "header", "model"]


def run_chat(data: bytes, where: str, files: Path, closed_url: str) -> None:
    url, prompt, extra = closed_url, "hi", []
    if where == "prompt":
        prompt = _text(data)
    elif where == "tools":
        extra = ["--tools", _write(files, data, "tools.json")]
    elif where == "url":
        url = _local_or_refused(_text(data), closed_url)
    elif where == "header":
        extra = ["--header", _text(data), "--api-key", _text(data[:64])]
    else:
        extra = ["--model", _text(data)]
    args = ["chat", "--url", url, "--timeout", "5", *extra, "--", prompt]
    assert_no_traceback(invoke(args), args)


@SETTINGS
@given(data=INPUTS, where=st.sampled_from(CHAT_PARTS))
def test_chat(data: bytes, where: str, files: Path, closed_url: str) -> None:
    run_chat(data, where, files, closed_url)


CHECK_PARTS = ["url", "header", "only", "model"]


def run_check(data: bytes, where: str, closed_url: str) -> None:
    url, extra = closed_url, []
    if where == "url":
        url = _local_or_refused(_text(data), closed_url)
    elif where == "header":
        extra = ["--header", _text(data), "--api-key", _text(data[:64])]
    elif where == "only":
        extra = ["--only", _text(data)]
    else:
        extra = ["--model", _text(data)]
    args = ["check", "--timeout", "5", *extra, "--", url]
    assert_no_traceback(invoke(args), args)


@SETTINGS
@given(data=INPUTS, where=st.sampled_from(CHECK_PARTS))
def test_check(data: bytes, where: str, closed_url: str) -> None:
    run_check(data, where, closed_url)


def _local_or_refused(text: str, closed_url: str) -> str:
    """``text`` as a URL when the grammar refuses it, else the same path on the closed port:
    no test ever resolves a name or leaves 127.0.0.1."""
    try:
        found = endpoint(text)
    except ValueError:
        return text
    path = found.stream.split("://", 1)[1].partition("/")[2]
    return f"{closed_url}/{path}"


KEY_OPTIONS = ["--id", "--model", "--rpm", "--tpm", "--budget"]


def run_keys(data: bytes, option: str) -> None:
    args = ["keys", "create", option, _text(data)]
    assert_no_traceback(invoke(args), args)


@SETTINGS
@given(data=INPUTS, option=st.sampled_from(KEY_OPTIONS))
def test_keys(data: bytes, option: str) -> None:
    run_keys(data, option)


def _not_a_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return True
    return False


@SETTINGS
@given(
    text=INPUTS.map(_text).filter(_not_a_number),
    option=st.sampled_from(["--events", "--seconds", "--conns", "--requests"]),
)
def test_bench_refuses_what_is_not_a_number(text: str, option: str) -> None:
    # Only values click refuses: a number would start the benchmark (servers, seconds).
    args = ["bench", option, text]
    assert_no_traceback(invoke(args), args)


@SETTINGS
@given(data=INPUTS)
def test_the_command_group(data: bytes) -> None:
    args = [_text(data)[:200]]
    if args[0].strip() in COMMANDS or args[0].startswith("-"):
        args = ["--", *args]
    assert_no_traceback(invoke(args), args)


@pytest.mark.parametrize("name", list(SPECIMENS))
def test_every_command_on_each_specimen(
    name: str, files: Path, closed_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = SPECIMENS[name]
    run_validate(data, files, strict=True)
    for vendor in (None, "openai", "anthropic", "gemini", "signalr", "connect"):
        run_convert(data, files, vendor)
    run_serve(data, files, monkeypatch)
    for where in CHAT_PARTS:
        run_chat(data, where, files, closed_url)
    for where in CHECK_PARTS:
        run_check(data, where, closed_url)
    for option in KEY_OPTIONS:
        run_keys(data, option)
    text = _text(data)
    if _not_a_number(text):
        assert_no_traceback(invoke(["bench", "--events", text]), ["bench"])
    assert_no_traceback(invoke(["--", text[:200]]), ["(group)"])


#: (status, content type, body) a hostile endpoint answers every request with.
HOSTILE = {
    "deep-json-400": (400, "application/json", b"[" * 60_000 + b"]" * 60_000),
    "deep-json-error-event": (
        200,
        "text/event-stream",
        b"event: error\ndata: " + b'{"a":' * 20_000 + b"1" + b"}" * 20_000 + b"\n\n",
    ),
    "binary-stream": (200, "text/event-stream", bytes(range(256)) * 64),
    "empty-200": (200, "text/event-stream", b""),
    "huge-event": (200, "text/event-stream", b"data: " + b"x" * HUGE + b"\n\n"),
}


@contextmanager
def hostile(status: int, kind: str, body: bytes) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, *args: object) -> None:
            pass

        def _answer(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            self.rfile.read(length)
            self.send_response(status)
            self.send_header("content-type", kind)
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_DELETE = _answer

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.mark.parametrize("name", list(HOSTILE))
def test_chat_and_check_against_a_hostile_endpoint(name: str) -> None:
    with hostile(*HOSTILE[name]) as url:
        args = ["chat", "--url", url, "--timeout", "10", "hi"]
        assert_no_traceback(invoke(args), args)
        args = ["check", "--timeout", "10", "--only", "media-type", "--only", "envelope", url]
        assert_no_traceback(invoke(args), args)
