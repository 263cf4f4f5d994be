"""Which vendor's error shape a gateway path answers in: one answer per path.

An SDK raises its own exceptions only for its vendor's error shape, so a
refused key (401), an unknown route (404) and a bad body on one path must all
be written the same way (tests/vectors/routes/vendor-paths.json).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from tokenwire import translate

VECTORS = json.loads(
    (Path(__file__).resolve().parents[1] / "vectors" / "routes" / "vendor-paths.json").read_text()
)["paths"]


@pytest.mark.parametrize("case", VECTORS, ids=lambda case: case["path"])
def test_each_path_has_one_vendor(case: dict[str, Any]) -> None:
    assert translate.vendor_of(case["path"]) == case["vendor"]


@pytest.mark.parametrize("case", VECTORS, ids=lambda case: case["path"])
@pytest.mark.parametrize("status", [401, 404, 429])
def test_every_status_on_a_path_is_in_that_paths_shape(case: dict[str, Any], status: int) -> None:
    body = translate.error_body_for(case["path"], status, "unauthorized", "no")
    if case["vendor"] is None:
        assert body is None  # the caller answers in the standard's shape
        return
    assert body is not None
    ingress = translate.get(case["vendor"]).ingress
    assert ingress is not None and ingress.error_body is not None
    assert msgspec.json.decode(body) == msgspec.json.decode(
        ingress.error_body(status, "unauthorized", "no", None)
    )


def test_a_refused_openai_key_carries_openais_own_code() -> None:
    body = translate.error_body_for("/v1/embeddings", 401, "unauthorized", "bad key")
    assert body is not None
    assert msgspec.json.decode(body)["error"]["code"] == "invalid_api_key"
