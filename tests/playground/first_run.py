"""What a first visit to the playground shows, measured in the page (shared by the layout
test and ``screenshots.py``): nothing set, one prompt, the answer at the default pace."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

TIMEOUT_MS = 30_000

#: Every text of the chart's SVG that reaches outside it (its box against the SVG's width).
_CLIPPED_CHART_TEXT = """() => {
  const svg = document.querySelector('#chart svg');
  const width = svg.viewBox.baseVal.width;
  return [...svg.querySelectorAll('text')]
    .map(t => ({ text: t.textContent, box: t.getBBox() }))
    .filter(({ box }) => box.x < -0.5 || box.x + box.width > width + 0.5)
    .map(({ text, box }) => `${text}: x ${box.x.toFixed(1)}..${(box.x + box.width).toFixed(1)}`
      + ` of ${width}`);
}"""

#: What does not fit the viewport's width: the page itself, or a stat's own box.
_OVERFLOW = """() => {
  const out = [];
  const vw = window.innerWidth;
  if (document.documentElement.scrollWidth > vw)
    out.push(`the page is ${document.documentElement.scrollWidth} px wide in ${vw}`);
  const head = document.querySelector('.inspector-head').getBoundingClientRect();
  const follow = document.querySelector('.follow').getBoundingClientRect();
  if (follow.right > head.right + 0.5)
    out.push(`the follow switch ends at ${follow.right.toFixed(0)}, its row at ${head.right}`);
  for (const s of document.querySelectorAll('.stat')) {
    const r = s.getBoundingClientRect();
    if (s.scrollWidth > s.clientWidth + 1 || r.right > vw + 0.5)
      out.push(`${s.querySelector('.k').textContent}: ${s.scrollWidth} px in ${s.clientWidth},`
        + ` right edge ${r.right.toFixed(0)} of ${vw}`);
  }
  return out;
}"""

_ROW_TIMES = """() => [...document.querySelectorAll('#events li.row:not(.gap) .time')]
  .map(t => t.textContent)"""


@dataclass(frozen=True)
class FirstRun:
    """What the page showed."""

    clipped_before: list[str]  # chart labels cut off on the empty chart
    clipped_after: list[str]  # and once the answer is drawn
    overflow: list[str]  # what did not fit the viewport's width
    times: list[str]  # the inspector's "+N ms" column, one per event
    rate: str  # the tokens/s stat
    pace: Any  # the "tokenwire:demo" extension the request carried


def first_run(page: Any, server_url: str, prompt: str = "Hello") -> FirstRun:
    """Open the page with nothing saved, send ``prompt`` to the default model as it
    is, and wait for the verdict."""
    sent: list[str] = []
    page.on(
        "request", lambda r: sent.append(r.post_data or "") if r.url.endswith("/v1/stream") else 0
    )
    page.add_init_script("try { localStorage.clear() } catch (e) {}")
    page.goto(server_url + "/")
    page.wait_for_selector("body[data-ready=true]")
    page.wait_for_selector("#chart svg")
    clipped_before = page.evaluate(_CLIPPED_CHART_TEXT)
    page.fill("#prompt", prompt)
    page.click("#send")
    page.wait_for_selector("#verdict[data-verdict=conformant]", timeout=TIMEOUT_MS)
    body = json.loads(sent[0])
    return FirstRun(
        clipped_before=clipped_before,
        clipped_after=page.evaluate(_CLIPPED_CHART_TEXT),
        overflow=page.evaluate(_OVERFLOW),
        times=page.evaluate(_ROW_TIMES),
        rate=page.inner_text("#rate"),
        pace=(body.get("extensions") or {}).get("tokenwire:demo"),
    )
