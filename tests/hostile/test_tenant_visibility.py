"""What a stranger and a tenant can see (issue 30), and logs with bounds.

The audit's smaller leaks, one test each: an unauthenticated ``/metrics``
named every model and its traffic; ``/v1/models`` ignored the key's list; a
stream created with ``?key=`` was not bound to that key; a 100 KB
``request_id`` and a 60 KB path (no key needed) went to the log uncut. (The
resumable POST that told whether another tenant's ``request_id`` existed:
``test_server_resume_owner.py::test_a_reused_request_id``.)
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator

import pytest
from tests.hostile.tenant_rig import Rig, body

from tokenwire.gateway.telemetry.logs import LOGGER_NAME

TOKEN = "tokenwire-resume-token"
#: docs/gateway.md ("Security"): a string from a request is logged cut to this.
MAX_FIELD_CHARS = 256


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def log_lines() -> Iterator[list[str]]:
    logger = logging.getLogger(LOGGER_NAME)
    handler = _Lines()
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield handler.lines
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def test_metrics_can_require_a_key() -> None:
    rig = Rig(
        {"ops": {}, "tenant": {"models": ["demo"]}},
        ("secret-model",),
        metrics={"keys": ["ops"]},
    )

    async def run() -> tuple[int, int, int, bytes]:
        stranger = await rig.call("/metrics", method="GET")
        tenant = await rig.call("/metrics", method="GET", headers=rig.auth("tenant"))
        ops = await rig.call("/metrics", method="GET", headers=rig.auth("ops"))
        return stranger.status, tenant.status, ops.status, ops.body

    stranger, tenant, ops, text = asyncio.run(run())
    assert (stranger, tenant, ops) == (401, 403, 200)
    assert b"secret-model" in text


def test_metrics_are_closed_on_the_serving_port_where_keys_are_configured() -> None:
    # /metrics names every model and its traffic: with keys, not for whoever asks.
    rig = Rig({"ops": {}}, ("secret-model",))
    moved = Rig({"ops": {}}, ("secret-model",), metrics={"listen": "127.0.0.1:9464"})

    async def run() -> tuple[int, int, int, int]:
        stranger = await rig.call("/metrics", method="GET")
        keyed = await rig.call("/metrics", method="GET", headers=rig.auth("ops"))
        unknown = await rig.call("/no-such-route", method="GET")
        elsewhere = await moved.call("/metrics", method="GET", headers=moved.auth("ops"))
        return stranger.status, keyed.status, unknown.status, elsewhere.status

    # The same 404 as a route that does not exist: the port does not say it has them.
    assert asyncio.run(run()) == (404, 404, 404, 404)


def test_metrics_stay_open_without_keys() -> None:
    rig = Rig({}, ("secret-model",))

    async def run() -> tuple[int, bytes]:
        answer = await rig.call("/metrics", method="GET")
        return answer.status, answer.body

    status, text = asyncio.run(run())
    assert status == 200
    assert b"secret-model" in text


def test_models_lists_only_what_the_key_may_use() -> None:
    rig = Rig({"ops": {}, "tenant": {"models": ["demo", "b"]}}, ("a", "b", "c"))

    async def run() -> tuple[list[str], list[str]]:
        tenant = await rig.call("/v1/models", method="GET", headers=rig.auth("tenant"))
        ops = await rig.call("/v1/models", method="GET", headers=rig.auth("ops"))
        ids = [[m["id"] for m in json.loads(x.body)["data"]] for x in (tenant, ops)]
        return ids[0], ids[1]

    tenant, ops = asyncio.run(run())
    assert sorted(tenant) == ["b", "demo"]
    assert sorted(ops) == ["a", "b", "c", "demo"]


def test_a_stream_created_with_a_query_key_is_bound_to_that_key() -> None:
    rig = Rig({"alice": {}, "mallory": {}})
    alice = rig.secrets["alice"]

    async def run() -> tuple[int, int, int, int]:
        payload = body("demo", metadata={"request_id": "query-key-1"})
        payload["extensions"] = {"tokenwire:resumable": True}
        created = await rig.call("/v1/stream", payload, query=f"key={alice}".encode())
        assert created.status == 200
        token = created.headers[TOKEN]
        path = "/v1/streams/query-key-1"
        seen = {TOKEN: token, "last-event-id": "1"}
        other = await rig.call(path, method="GET", headers={**seen, **rig.auth("mallory")})
        cancel = await rig.call(
            path, method="DELETE", headers={TOKEN: token, **rig.auth("mallory")}
        )
        by_query = await rig.call(path, method="GET", headers=seen, query=f"key={alice}".encode())
        by_header = await rig.call(path, method="GET", headers={**seen, **rig.auth("alice")})
        return other.status, cancel.status, by_query.status, by_header.status

    assert asyncio.run(run()) == (404, 404, 200, 200)


def _longest_field(lines: list[str]) -> int:
    longest = 0
    for line in lines:
        for value in json.loads(line).values():
            if isinstance(value, str):
                longest = max(longest, len(value))
    return longest


def test_a_huge_request_id_is_logged_cut(log_lines: list[str]) -> None:
    rig = Rig({"k": {}})
    request_id = "r" * 100_000

    async def run() -> int:
        payload = body("demo", metadata={"request_id": request_id})
        return (await rig.call("/v1/stream", payload, headers=rig.auth("k"))).status

    assert asyncio.run(run()) == 200
    lines = [line for line in log_lines if '"request"' in line]
    assert lines
    assert all(len(line) < 4 * MAX_FIELD_CHARS + 2000 for line in lines)
    assert _longest_field(lines) <= MAX_FIELD_CHARS + 32
    assert json.loads(lines[-1])["request_id"].startswith("r" * MAX_FIELD_CHARS)


def test_a_huge_path_without_a_key_is_logged_cut(log_lines: list[str]) -> None:
    rig = Rig({"k": {}})

    async def run() -> int:
        return (await rig.call("/v1/" + "p" * 60_000, body("demo"))).status

    assert asyncio.run(run()) == 401
    assert log_lines
    assert all(len(line) < 4 * MAX_FIELD_CHARS + 2000 for line in log_lines)
    assert _longest_field(log_lines) <= MAX_FIELD_CHARS + 32
