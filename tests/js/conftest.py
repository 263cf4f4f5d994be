"""Fixtures of the JavaScript package tests: Node, ``npm ci`` once, the build.

``js_package`` is the ``js/`` folder after ``npm ci`` (skipped when
``node_modules`` already matches ``package-lock.json``: a stamp holds the
lock file's hash) and one ``npm run build`` per session. Node and npm come
from the PATH; when missing they are installed with apt-get (as root), like
Chromium for the playground tests. Without them the tests skip, and under
CI=true they fail instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.js.npm import JSPackage, ensure_built
from tests.playground.servers import ServerProcess, free_port, serve_argv


@pytest.fixture(scope="session")
def js_package() -> JSPackage:
    return ensure_built()


@pytest.fixture(scope="session")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """``tokenwire serve`` with the demo model on 127.0.0.1, an ephemeral port."""
    port = free_port()
    workdir: Path = tmp_path_factory.mktemp("js-gateway")
    server = ServerProcess(serve_argv(port), port, workdir, "tokenwire-serve").start()
    try:
        yield server
    finally:
        server.stop()
