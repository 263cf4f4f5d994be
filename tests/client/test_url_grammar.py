"""The one URL grammar (tokenwire/client/_url.py) on its shared table, tests/vectors/url/.

The same table drives js/test/url.test.mjs (the TypeScript ``Client``), and
here ``stream_url``, ``Client``, ``AsyncClient``, ``tokenwire chat`` and
``tokenwire check``: what each one posts to, or the one-line error it gives.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from tokenwire.client import AsyncClient, Client, stream_url
from tokenwire.client._url import endpoint
from tokenwire.errors import TokenwireError

TABLE = Path(__file__).resolve().parents[1] / "vectors" / "url" / "grammar.json"
CASES: list[dict[str, str]] = json.loads(TABLE.read_text())["cases"]
GOOD = [c for c in CASES if "error" not in c]
BAD = [c for c in CASES if "error" in c]


def test_the_table_covers_every_kind_of_input() -> None:
    given = [c["in"] for c in CASES]
    assert any(":" in g and "://" not in g for g in given)  # bare host:port
    assert any(g.rstrip("/").endswith("/v1") for g in given)
    assert any("/v1/chat/completions" in g for g in given)  # a vendor route
    assert len(BAD) >= 8 and len(GOOD) >= 10


@pytest.mark.parametrize("case", GOOD, ids=[c["in"] for c in GOOD])
def test_endpoint_reads_the_table(case: dict[str, str]) -> None:
    found = endpoint(case["in"])
    assert (found.base, found.stream) == (case["base"], case["stream"])
    assert stream_url(case["in"]) == case["stream"]
    # What it gives is read back the same: base and stream URL name one endpoint.
    assert endpoint(found.base + found.query).stream == endpoint(found.stream).stream
    assert endpoint(found.stream).stream == case["stream"]


@pytest.mark.parametrize("case", BAD, ids=[c["in"] for c in BAD])
def test_endpoint_refuses_in_one_line(case: dict[str, str]) -> None:
    with pytest.raises(ValueError) as info:
        endpoint(case["in"])
    assert str(info.value) == case["error"]
    assert "\n" not in str(info.value)


def _posting(seen: list[httpx.Request]) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        body = json.dumps({"error": {"code": "invalid_request", "message": "x"}}).encode()
        return httpx.Response(400, stream=httpx.ByteStream(body))

    return httpx.MockTransport(handle)


@pytest.mark.parametrize("case", GOOD, ids=[c["in"] for c in GOOD])
def test_client_posts_where_the_table_says(case: dict[str, str]) -> None:
    seen: list[httpx.Request] = []
    with Client(case["in"], transport=_posting(seen)) as client:
        with pytest.raises(TokenwireError):
            client.create(model="demo", messages="hi")
    assert [str(r.url) for r in seen] == [case["stream"]]


@pytest.mark.parametrize("case", GOOD, ids=[c["in"] for c in GOOD])
def test_async_client_posts_where_the_table_says(case: dict[str, str]) -> None:
    seen: list[httpx.Request] = []

    async def main() -> None:
        async with AsyncClient(case["in"], transport=_posting(seen)) as client:
            with pytest.raises(TokenwireError):
                await client.create(model="demo", messages="hi")

    asyncio.run(main())
    assert [str(r.url) for r in seen] == [case["stream"]]


@pytest.mark.parametrize("case", BAD, ids=[c["in"] for c in BAD])
def test_the_clients_refuse_what_the_table_refuses(case: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="^" + _escaped(case["error"]) + "$"):
        Client(case["in"])
    with pytest.raises(ValueError, match="^" + _escaped(case["error"]) + "$"):
        AsyncClient(case["in"])


def _escaped(text: str) -> str:
    import re

    return re.escape(text)


def _cli(*argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tokenwire", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "COLUMNS": "80", **env},
    )


VENDOR_ROUTES = [c for c in BAD if "route" in c["error"]][:3]


@pytest.mark.parametrize("case", VENDOR_ROUTES, ids=[c["in"] for c in VENDOR_ROUTES])
@pytest.mark.parametrize("command", ["chat", "check"])
def test_chat_and_check_name_a_vendor_route_in_one_line(command: str, case: dict[str, Any]) -> None:
    argv = ["chat", "--url", case["in"], "hi"] if command == "chat" else ["check", case["in"]]
    res = _cli(*argv)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "Traceback" not in res.stderr
    # click's usage error: the grammar's message, whole, on one line of its own.
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert any(case["error"] in line for line in lines), res.stderr
