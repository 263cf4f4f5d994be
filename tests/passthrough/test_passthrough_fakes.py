"""The strict fakes refuse malformed agent requests as the vendors do (issue 23).

What the passthrough tests rely on: a fake that took anything would let a
gateway that mangles these items pass.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.passthrough.conftest import UPSTREAM_MODEL, Fakes

VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "passthrough"
CASES: list[dict[str, Any]] = json.loads((VECTORS / "fake_refusals.json").read_text())["cases"]

BASE: dict[str, tuple[str, dict[str, Any]]] = {
    "anthropic": (
        "/v1/messages",
        {"max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]},
    ),
    "openai-responses": ("/v1/responses", {"input": "hi"}),
}


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c['vendor']}: {c['name']}")
def test_the_fake_refuses_as_the_vendor_does(fakes: Fakes, case: dict[str, Any]) -> None:
    fake = fakes.direct[case["vendor"]]
    path, base = BASE[case["vendor"]]
    body = {"model": UPSTREAM_MODEL, "stream": True, **base, **case["body"]}
    headers = {"anthropic-version": "2023-06-01", **case.get("headers", {})}
    response = httpx.post(fake.url + path, json=body, headers=headers)
    assert response.status_code == 400
    assert case["problem"] in response.text


@pytest.mark.parametrize("vendor", sorted(BASE))
def test_the_valid_base_request_is_served(fakes: Fakes, vendor: str) -> None:
    path, base = BASE[vendor]
    body = {"model": UPSTREAM_MODEL, "stream": True, **base}
    response = httpx.post(
        fakes.direct[vendor].url + path, json=body, headers={"anthropic-version": "2023-06-01"}
    )
    assert response.status_code == 200
