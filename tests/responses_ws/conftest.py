"""The gateways of these tests serve on granian: tokenwire's own HTTP/1.1 server (the
default engine) refuses protocol upgrades (501), the WebSocket handshake among them."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tokenwire.cli.serve import ENGINE_ENV


@pytest.fixture(autouse=True, scope="session")
def granian_engine() -> Iterator[None]:
    before = os.environ.get(ENGINE_ENV)
    os.environ[ENGINE_ENV] = "granian"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(ENGINE_ENV, None)
        else:
            os.environ[ENGINE_ENV] = before
