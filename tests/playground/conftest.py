"""Fixtures of the playground tests: a real gateway process and headless Chromium.

``server`` is ``tokenwire serve`` (demo model) when it serves the playground,
else the local stand-in (the same gateway app plus ``playground.routes()``).
``page`` is a fresh tab on ``GET /`` with empty storage; it records console
errors, page errors and dialogs, and fails the test on any of them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.playground.servers import ServerProcess, chromium_context, playground_server

VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "playground"
# tests/playground/conftest.py -> /work/main -> ../shared/vendor-fixtures
FIXTURES = Path(__file__).resolve().parents[2].parent / "shared" / "vendor-fixtures"


def replay_cases() -> list[dict[str, Any]]:
    """The replay manifest (tests/vectors/playground/replay.json)."""
    cases: list[dict[str, Any]] = json.loads((VECTORS / "replay.json").read_text())["cases"]
    return cases


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with playground_server(tmp_path_factory.mktemp("playground")) as srv:
        yield srv


@pytest.fixture(scope="module")
def browser_context() -> Iterator[Any]:
    with chromium_context(viewport={"width": 1440, "height": 900}, color_scheme="dark") as ctx:
        yield ctx


class PageProbe:
    """What the page did that a test must not miss: console errors, page errors, dialogs."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.console_errors: list[str] = []
        self.page_errors: list[str] = []
        self.dialogs: list[str] = []
        self.requests: list[tuple[str, str | None]] = []
        page.on(
            "console",
            lambda m: (
                self.console_errors.append(m.text) if m.type in ("error", "warning") else None
            ),
        )
        page.on("pageerror", lambda e: self.page_errors.append(str(e)))
        page.on("dialog", self._dialog)
        page.on("request", lambda r: self.requests.append((r.url, r.post_data)))

    def _dialog(self, dialog: Any) -> None:
        self.dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()

    def stream_requests(self) -> list[dict[str, Any]]:
        """The bodies POSTed to /v1/stream, in order."""
        return [
            json.loads(body) for url, body in self.requests if url.endswith("/v1/stream") and body
        ]


@pytest.fixture
def probe(browser_context: Any, server: ServerProcess) -> Iterator[PageProbe]:
    page = browser_context.new_page()
    probe = PageProbe(page)
    # Settings persist per origin in localStorage: every test starts clean.
    page.add_init_script("try { localStorage.clear() } catch (e) {}")
    page.goto(server.url + "/")
    page.wait_for_selector("body[data-ready=true]")
    try:
        yield probe
    finally:
        page.close()
    assert probe.page_errors == [], probe.page_errors
    assert probe.console_errors == [], probe.console_errors
    assert probe.dialogs == [], probe.dialogs
