"""The playground in real headless Chromium (Debian's), driven by Playwright.

Each test uses the page the way a person does (type, click, load a file) and
checks the DOM: streamed text in ``#output``, one row per event in
``#events``, the verdict in ``#verdict``. The gateway is a real process on
127.0.0.1; the stop test reads its request log and ``/metrics`` to see that
it noticed the disconnect.
"""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import pytest
from tests.playground.conftest import FIXTURES, VECTORS, PageProbe, replay_cases
from tests.playground.servers import ServerProcess, unavailable

from tokenwire import iter_events
from tokenwire.testing import wait_until
from tokenwire.translate import VENDORS

TIMEOUT_MS = 20_000
CASES = replay_cases()


def rows(page: Any) -> list[dict[str, str]]:
    """The inspector's event rows (gap rows left out): seq, type, time and JSON text."""
    script = """() => [...document.querySelectorAll('#events li.row:not(.gap)')].map(li => ({
        seq: li.querySelector('.seq').textContent,
        type: li.querySelector('.type').textContent,
        time: li.querySelector('.time').textContent,
        json: li.querySelector('.json').textContent,
    }))"""
    result: list[dict[str, str]] = page.evaluate(script)
    return result


def send(page: Any, prompt: str) -> None:
    page.fill("#prompt", prompt)
    page.click("#send")


# Note: the page's CSP has no 'unsafe-eval', so Playwright's string predicates
# (wait_for_function) cannot run in it; locators and evaluate() can.


def wait_verdict(page: Any, verdict: str = "conformant") -> None:
    page.wait_for_selector(f"#verdict[data-verdict={verdict}]", timeout=TIMEOUT_MS)


def open_settings(page: Any) -> None:
    if not page.evaluate("document.getElementById('settings').open"):
        page.click("#settings summary")


def request_log(server: ServerProcess, request_id: str, wait_s: float = 10.0) -> dict[str, Any]:
    """The gateway's JSON request-log line for ``request_id`` (written when the request ends)."""

    def logged() -> dict[str, Any] | None:
        for line in server.stderr().splitlines():
            if request_id in line and line.startswith("{"):
                record: dict[str, Any] = json.loads(line)
                if record.get("request_id") == request_id:
                    return record
        return None

    found = wait_until(
        logged,
        timeout=wait_s,
        what=lambda: f"a request log line for {request_id}:\n{server.stderr()[-3000:]}",
    )
    assert found is not None
    return found


def disconnected_count(server: ServerProcess) -> float:
    text = httpx.get(server.url + "/metrics", timeout=5.0).text
    pattern = r'tokenwire_streams_completed_total\{model="demo",outcome="disconnected"\} (\S+)'
    match = re.search(pattern, text)
    return float(match.group(1)) if match else 0.0


# --- the page itself --------------------------------------------------------------------


def test_page_lists_models_and_capture_formats(probe: PageProbe, server: ServerProcess) -> None:
    page = probe.page
    models = httpx.get(server.url + "/v1/models", timeout=5.0).json()["data"]
    options = page.eval_on_selector_all("#model option", "os => os.map(o => o.value)")
    assert options == [m["id"] for m in models]
    assert "demo" in options
    formats = page.eval_on_selector_all("#capture-format option", "os => os.map(o => o.value)")
    assert formats == ["auto", "standard", *sorted(VENDORS)]
    for element in ("#prompt", "#send", "#stop", "#output", "#events", "#model"):
        if element != "#output":  # #output is the answer of the first turn: made on send
            assert page.query_selector(element) is not None, element
    assert page.is_disabled("#stop")


def test_csp_blocks_injected_inline_script(probe: PageProbe) -> None:
    # The policy really is in force: an inline script added to the DOM does not run.
    page = probe.page
    page.evaluate(
        """() => new Promise(resolve => {
            document.addEventListener('securitypolicyviolation', e => {
                window.__violation = e.violatedDirective; resolve();
            }, {once: true});
            const s = document.createElement('script');
            s.textContent = 'window.__ran = true';
            document.body.append(s);
        })"""
    )
    assert page.evaluate("window.__ran") is None
    assert page.evaluate("window.__violation").startswith("script-src")
    probe.console_errors.clear()  # Chromium reports the refused script on the console


# --- a streamed answer ------------------------------------------------------------------------


def test_prompt_streams_text_and_every_event_to_stream_end(
    probe: PageProbe, server: ServerProcess
) -> None:
    page = probe.page
    open_settings(page)
    page.fill("#delay", "60")  # the demo's pace: the stream takes a few seconds
    send(page, "What is a content block?")

    # Mid-stream: text has arrived, the stream has not ended.
    page.locator("#events li.row").nth(5).wait_for(timeout=TIMEOUT_MS)
    partial = page.inner_text("#output")
    assert partial.startswith(("You ", "Your "))
    assert page.get_attribute("#verdict", "data-verdict") == "none"
    assert page.is_enabled("#stop") and page.is_disabled("#send")

    wait_verdict(page)
    final = page.inner_text("#output")
    assert len(final) > len(partial) and final.startswith(partial)
    assert "What is a content block?" in final

    got = rows(page)
    assert got[0]["type"] == "stream.start" and got[0]["seq"] == "0"
    assert got[-1]["type"] == "stream.end"
    assert [r["seq"] for r in got] == [str(i) for i in range(len(got))]
    assert {r["type"] for r in got} == {
        "stream.start",
        "content.delta",
        "content.stop",
        "usage",
        "stream.end",
    }
    assert all(r["time"].startswith("+") for r in got)
    deltas = [json.loads(r["json"])["delta"]["text"] for r in got if r["type"] == "content.delta"]
    assert "".join(deltas) == final

    # The gateway streamed exactly these events to this request.
    request_id = probe.stream_requests()[0]["metadata"]["request_id"]
    assert json.loads(got[0]["json"])["request_id"] == request_id  # §4.6 echo
    record = request_log(server, request_id)
    assert record["events"] == len(got) and record["disconnected"] is False

    verdict = page.inner_text("#verdict")
    assert "Conformant" in verdict and f"{len(got)} events" in verdict
    assert page.inner_text("#ttft") != "–"
    assert page.query_selector("#chart svg path.line") is not None
    assert page.query_selector("#chart svg line.ttft") is not None
    assert page.is_enabled("#send") and page.is_disabled("#stop")


def test_multi_turn_history_is_sent(probe: PageProbe) -> None:
    page = probe.page
    open_settings(page)
    page.fill("#system", "Answer briefly.")
    send(page, "First question about streams")
    wait_verdict(page)
    first = page.inner_text("#output")
    send(page, "Second question about events")
    page.locator("#output", has_text="Second question").wait_for(timeout=TIMEOUT_MS)
    wait_verdict(page)
    bodies = probe.stream_requests()
    assert len(bodies) == 2
    assert bodies[1]["messages"] == [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": "First question about streams"},
        {"role": "assistant", "content": first},
        {"role": "user", "content": "Second question about events"},
    ]
    assert bodies[0]["metadata"]["request_id"] != bodies[1]["metadata"]["request_id"]
    # The first answer stays in the transcript; #output moved to the new one.
    assert page.locator(".msg.assistant .text").count() == 2


# --- stop ----------------------------------------------------------------------------------


def test_stop_aborts_the_fetch_and_the_gateway_sees_the_disconnect(
    probe: PageProbe, server: ServerProcess
) -> None:
    page = probe.page
    before = disconnected_count(server)
    open_settings(page)
    page.fill("#delay", "250")  # 40-odd events: about ten seconds if nobody stops it
    send(page, "Tell me everything about sequence numbers")
    page.locator("#events li.row").nth(2).wait_for(timeout=TIMEOUT_MS)
    page.click("#stop")
    wait_verdict(page, "aborted")
    shown = len(rows(page))
    assert page.inner_text("#status") == "stopped"
    assert page.is_enabled("#send") and page.is_disabled("#stop")
    assert "Stopped" in page.inner_text("#verdict")

    request_id = probe.stream_requests()[0]["metadata"]["request_id"]
    record = request_log(server, request_id)
    assert record["disconnected"] is True
    assert record["events"] < 20  # the demo would have sent 44
    assert shown <= record["events"]
    assert disconnected_count(server) == before + 1

    # Nothing more arrives after the stop.
    page.wait_for_timeout(600)
    assert len(rows(page)) == shown


# --- the §4.8 tool loop -------------------------------------------------------------------


def test_tool_loop(probe: PageProbe) -> None:
    page = probe.page
    open_settings(page)
    page.click("#tools-example")
    assert "1 tool: get_weather" in page.inner_text("#tools-status")
    send(page, "What is the weather in Vienna?")

    card = page.wait_for_selector(".tool-card", timeout=TIMEOUT_MS)
    wait_verdict(page)
    assert card.query_selector(".tool-name").inner_text() == "get_weather"
    assert json.loads(card.query_selector(".tool-args").inner_text()) == {"city": "Vienna"}
    assert "tool.call" in [r["type"] for r in rows(page)]

    page.fill(".tool-card .tool-result", "Vienna: 24C, sunny")
    page.click(".tool-card .tool-send")
    page.locator("#output", has_text="24C").wait_for(timeout=TIMEOUT_MS)
    wait_verdict(page)
    answer = page.inner_text("#output")
    assert 'The get_weather tool returned: "Vienna: 24C, sunny".' in answer

    first, second = probe.stream_requests()
    call_id = card.get_attribute("data-call-id")
    assert call_id
    assert first["tools"][0]["name"] == "get_weather"
    assert second["messages"] == [
        {"role": "user", "content": "What is the weather in Vienna?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": call_id, "name": "get_weather", "arguments": '{"city":"Vienna"}'}
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "content": "Vienna: 24C, sunny"},
    ]
    assert second["tools"] == first["tools"]  # §4.8: tools travel with every request


# --- XSS --------------------------------------------------------------------------------------

XSS = (
    "Hello <img src=x onerror=\"window.__xss=1;alert('xss')\"> and <script>window.__xss=2</script>"
)


def assert_no_markup_ran(probe: PageProbe) -> None:
    page = probe.page
    assert page.evaluate("window.__xss") is None
    assert page.evaluate("document.title") == "tokenwire playground"
    # The only image on the page is the logo in the top bar.
    assert page.evaluate("document.querySelectorAll('img:not(.logo)').length") == 0
    assert (
        page.evaluate("document.querySelectorAll('#transcript script, #events script').length") == 0
    )
    assert probe.dialogs == []


def test_model_text_is_rendered_as_text(probe: PageProbe) -> None:
    page = probe.page
    send(page, XSS)  # the demo echoes the question, so the reply carries the markup
    wait_verdict(page)
    answer = page.inner_text("#output")
    assert "<img src=x onerror=" in answer and "<script>" in answer
    assert_no_markup_ran(probe)
    # The inspector shows the raw JSON, as text too.
    assert any("<img" in r["json"] for r in rows(page))


# --- replay --------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=[c["file"] for c in CASES])
def test_replay_capture(probe: PageProbe, case: dict[str, Any]) -> None:
    page = probe.page
    page.set_input_files("#capture", str(VECTORS / case["file"]))  # format: auto-detect
    wait_verdict(page, case["verdict"])
    got = rows(page)
    assert [r["type"] for r in got] == case["types"]
    assert page.inner_text("#output") == case["text"]
    assert (
        page.eval_on_selector_all(".tool-card .tool-name", "ns => ns.map(n => n.textContent)")
        == (case["tools"])
    )
    assert page.query_selector(".tool-card .tool-result") is None  # a replay sends nothing
    shown = page.eval_on_selector_all(
        "#verdict .violations code", "cs => cs.map(c => c.textContent)"
    )
    assert shown == case["rules"]
    label = page.inner_text(".msg.replay .who")
    assert case["file"] in label and case["format"] in label
    if case["file"] == "standard-seq-gap.sse":
        assert page.query_selector("#events li.gap") is not None
    assert_no_markup_ran(probe)
    assert probe.stream_requests() == []  # nothing was sent to the model


# --- replay of the shared vendor recordings (read in place) --------------------------------

RECORDINGS = [
    ("anthropic", "anthropic/raw-sse-text-then-tool-use.sse"),
    ("openai", "openai-chat/raw-sse-tool-call-single.sse"),
    ("openai", "openai-chat/raw-sse-text-stop.sse"),
]


@pytest.mark.fixtures
@pytest.mark.parametrize(("vendor", "name"), RECORDINGS, ids=[n for _, n in RECORDINGS])
def test_replay_shared_recording(
    probe: PageProbe, server: ServerProcess, vendor: str, name: str
) -> None:
    path = FIXTURES / name
    if not path.is_file():
        unavailable(f"the shared vendor recording {path} is missing")
    expected = httpx.post(
        f"{server.url}/v1/convert?from={vendor}&model=replay:{vendor}",
        content=path.read_bytes(),
        timeout=20.0,
    )
    types = [e.type for e in iter_events([expected.content])]
    page = probe.page
    page.set_input_files("#capture", str(path))  # auto-detect must pick the vendor
    wait_verdict(page, "conformant")
    assert [r["type"] for r in rows(page)] == types
    assert vendor in page.inner_text(".msg.replay .who")
    text = "".join(
        e.delta.text for e in iter_events([expected.content]) if e.type == "content.delta"
    )
    assert page.inner_text("#output") == text


@pytest.mark.parametrize(
    ("transport", "label"),
    [("frames", "frames over HTTP"), ("ws", "frames over WebSocket")],
)
def test_the_transport_switch_streams_the_same_events(
    probe: PageProbe, transport: str, label: str
) -> None:
    """The binary binding (docs/binary.md) over HTTP or the WebSocket: the same events
    and verdict as SSE, and the inspector names the transport that carried them."""
    page = probe.page
    page.select_option("#transport", transport)
    send(page, "Hello over frames")
    wait_verdict(page)
    assert page.inner_text("#transport-used") == label
    got = rows(page)
    assert got[0]["type"] == "stream.start" and got[-1]["type"] == "stream.end"
    assert [r["seq"] for r in got] == [str(i) for i in range(len(got))]
    assert "Hello over frames" in page.inner_text("#output")
    assert "Conformant" in page.inner_text("#verdict")
