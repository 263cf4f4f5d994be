"""Take the playground screenshots of docs/playground.md.

    .venv/bin/python tests/playground/screenshots.py [--out docs]

Starts the gateway (``tokenwire serve``, or the local stand-in while the
playground routes are not wired into it) on 127.0.0.1 and drives Debian's
headless Chromium through a short session:

* ``playground-streaming.png``: a tool loop done, a second answer mid-stream;
* ``playground-inspector.png``: the inspector at the end of a stream, one
  envelope opened, the verdict;
* ``playground-replay.png``: a replayed standard capture with a seq gap;
* ``playground-first-run-1280.png``, ``playground-first-run-390.png``: a first
  visit (nothing set, one prompt at the default pace) on a laptop and a phone,
  as ``test_first_run.py`` checks it.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.playground.first_run import first_run  # noqa: E402
from tests.playground.servers import chromium_context, playground_server  # noqa: E402

VIEWPORT = {"width": 1440, "height": 900}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs")
    parser.add_argument("--scheme", choices=["dark", "light"], default="dark")
    args = parser.parse_args()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)

    with tempfile.TemporaryDirectory() as work, playground_server(Path(work)) as server:
        with chromium_context(
            viewport=VIEWPORT, color_scheme=args.scheme, device_scale_factor=1
        ) as ctx:
            page = ctx.new_page()
            page.add_init_script("try { localStorage.clear() } catch (e) {}")
            page.goto(server.url + "/")
            page.wait_for_selector("body[data-ready=true]")

            # A tool loop first, so the transcript shows a card and its answer.
            page.click("#settings summary")
            page.fill("#system", "You are a concise weather assistant.")
            page.click("#tools-example")
            page.fill("#prompt", "What is the weather in Vienna?")
            page.click("#send")
            page.wait_for_selector("#verdict[data-verdict=conformant]")
            page.fill(".tool-card .tool-result", "Vienna: 24C, sunny, light breeze from the west")
            page.click(".tool-card .tool-send")
            page.locator("#output", has_text="24C").wait_for()
            page.wait_for_selector("#verdict[data-verdict=conformant]")

            # Then a paced answer, caught mid-stream (slow enough for a loaded machine).
            page.fill("#delay", "160")
            page.click("#settings summary")  # fold the settings away again
            page.fill("#prompt", "Will I need an umbrella for a walk along the Danube tonight?")
            page.click("#send")
            page.locator("#events li.row").nth(18).wait_for()
            page.screenshot(path=str(out / "playground-streaming.png"))
            if page.get_attribute("#verdict", "data-verdict") != "none":
                sys.exit("the stream ended before the screenshot: run it again")
            print("wrote", out / "playground-streaming.png")

            # The end of the stream: the verdict; open one envelope.
            page.wait_for_selector("#verdict[data-verdict=conformant]")
            page.uncheck("#follow")
            page.locator("#events li.t-usage").click()
            page.locator("#events").evaluate("list => { list.scrollTop = list.scrollHeight }")
            page.screenshot(path=str(out / "playground-inspector.png"))
            print("wrote", out / "playground-inspector.png")

            # A replayed capture that breaks the rules.
            page.check("#follow")
            page.select_option("#capture-format", "auto")
            page.set_input_files(
                "#capture", str(ROOT / "tests" / "vectors" / "playground" / "standard-seq-gap.sse")
            )
            page.wait_for_selector("#verdict[data-verdict=violations]")
            page.screenshot(path=str(out / "playground-replay.png"))
            print("wrote", out / "playground-replay.png")

        for width in (1280, 390):
            with chromium_context(
                viewport={"width": width, "height": 844},
                color_scheme=args.scheme,
                device_scale_factor=1,
            ) as ctx:
                page = ctx.new_page()
                first_run(page, server.url)
                shot = out / f"playground-first-run-{width}.png"
                page.screenshot(path=str(shot), full_page=width < 600)
                print("wrote", shot)


if __name__ == "__main__":
    main()
