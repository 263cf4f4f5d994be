"""A first visit to the playground, in Chromium at 1280 and 390 px: timing shows at the
default pace, the chart's labels fit, the layout holds on a phone, and input of no
known format says so. Each run's screenshot is written next to the test's files
(``screenshots.py`` writes the ones in docs/ the same way)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.playground.first_run import first_run
from tests.playground.servers import ServerProcess, chromium_context

WIDTHS = (1280, 390)


@pytest.fixture(params=WIDTHS, ids=lambda w: f"{w}px")
def page(request: pytest.FixtureRequest) -> Iterator[Any]:
    width: int = request.param
    with chromium_context(viewport={"width": width, "height": 844}, color_scheme="dark") as ctx:
        page = ctx.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        yield page
        assert errors == [], errors


def test_the_first_answer_shows_its_timing_and_the_layout_holds(
    page: Any, server: ServerProcess, tmp_path: Path
) -> None:
    seen = first_run(page, server.url)
    page.screenshot(path=str(tmp_path / "first-run.png"), full_page=True)
    assert (tmp_path / "first-run.png").stat().st_size > 0
    # The default pace reaches the demo model: the answer arrives over time, so the
    # rows' times differ and there is a rate (at 0 ms every row said the same).
    assert seen.pace == {"delay_ms": 40}
    assert len(set(seen.times)) > len(seen.times) // 2, seen.times
    assert seen.rate != "–"
    assert seen.clipped_before == [] and seen.clipped_after == []
    assert seen.overflow == []


def test_a_file_of_no_known_format_says_so(page: Any, server: ServerProcess) -> None:
    page.add_init_script("try { localStorage.clear() } catch (e) {}")
    page.goto(server.url + "/")
    page.wait_for_selector("body[data-ready=true]")
    garbage = {"name": "noise.bin", "mimeType": "application/octet-stream"}
    page.set_input_files("#capture", {**garbage, "buffer": os.urandom(512)})
    note = page.locator(".msg.replay .notes").inner_text(timeout=10_000)
    assert note.startswith("format not recognised: noise.bin is no standard stream")
    assert note.endswith("pick its format in the list next to the button if you know it")
    assert page.locator("#events li.row").count() == 0  # nothing was replayed
