"""The fault-injection suite's gateway: a real ``tokenwire serve`` in front of broken upstreams.

One session gateway (``tokenwire.processes.serve_gateway``: its own process group
on a free 127.0.0.1 port, always stopped) serves:

==================  ==========================================================
``stall-before``    stalls 30 s before its status line; ``timeout_s = 0.5``
``stall-after``     sends one event, then stalls 30 s; ``timeout_s = 0.5``
``cut``             drops the connection after 5 events, inside the HTTP body
``cut-eof``         ends the body cleanly after 5 events, without ``[DONE]``
``mid-event-drop``  half an SSE event, then the connection drops
``mid-event-eof``   half an SSE event, then a clean end of the body
``bad-json``        a garbled JSON event after 3 good ones
``huge``            one 64 MiB event after the first (over every size limit)
``paced``           400 words, 2 ms apart (long enough to hang up in)
``probe``           the worker's task/socket counts (``fault_plugins.Probe``)
``firehose``        a million 100-byte deltas made on demand (``fault_plugins.Firehose``)
``demo``            the built-in demo model
==================  ==========================================================

``FakeUpstream`` and ``RawUpstream`` run in this process's threads.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.faults.raw_upstream import RawUpstream

from tokenwire import events as ev
from tokenwire.testing import processes
from tokenwire.testing.upstream import FakeUpstream, Fault, Script

HERE = Path(__file__).resolve().parent
MEDIA_TYPE = "application/llm-request+json"

#: The first event of an OpenAI stream and half of the second: a cut inside an event.
HALF_EVENT = (
    b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m",'
    b'"choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"},'
    b'"finish_reason":null}]}\n\n'
    b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m",'
    b'"choices":[{"index":0,"delta":{"content":" the'
)


class Faults:
    """The session's upstreams and gateway."""

    def __init__(self) -> None:
        long_text = processes.words(200)
        self.fakes: dict[str, FakeUpstream] = {
            "stall-before": FakeUpstream(
                "openai", fault=Fault(kind="stall_before_first_byte", stall_s=30)
            ),
            "stall-after": FakeUpstream(
                "openai",
                Script(text=long_text),
                fault=Fault(kind="stall_after_first_event", stall_s=30),
            ),
            "cut": FakeUpstream(
                "openai", Script(text=long_text), fault=Fault(kind="cut", after_events=5)
            ),
            "cut-eof": FakeUpstream(
                "openai",
                Script(text=long_text),
                fault=Fault(kind="cut", after_events=5, graceful=True),
            ),
            "bad-json": FakeUpstream(
                "openai", Script(text=long_text), fault=Fault(kind="bad_json", after_events=3)
            ),
            "huge": FakeUpstream(
                "openai", Script(text=long_text), fault=Fault(kind="huge_event", size=64 << 20)
            ),
            "paced": FakeUpstream("openai", Script(text=processes.words(400), delay_s=0.002)),
        }
        self.raws: dict[str, RawUpstream] = {
            "mid-event-drop": RawUpstream(HALF_EVENT, end="drop"),
            "mid-event-eof": RawUpstream(HALF_EVENT, end="eof"),
        }

    def config(self) -> str:
        models: dict[str, dict[str, Any]] = {}
        for name, fake in self.fakes.items():
            models[name] = {"provider": "openai", "base_url": fake.url + "/v1"}
            if name.startswith("stall"):
                models[name]["timeout_s"] = 0.5
        for name, raw in self.raws.items():
            models[name] = {"provider": "openai", "base_url": raw.url + "/v1"}
        models["probe"] = {"provider": "python", "factory": "fault_plugins:Probe"}  # debug only
        models["firehose"] = {"provider": "python", "factory": "fault_plugins:Firehose"}
        return processes.gateway_config(models)

    def start(self) -> None:
        for fake in self.fakes.values():
            fake.start()
        for raw in self.raws.values():
            raw.start()

    def stop(self) -> None:
        for fake in self.fakes.values():
            fake.stop()
        for raw in self.raws.values():
            raw.stop()


@pytest.fixture(scope="session")
def faults() -> Iterator[Faults]:
    f = Faults()
    f.start()
    try:
        yield f
    finally:
        f.stop()


@pytest.fixture(scope="session")
def gateway(faults: Faults) -> Iterator[processes.ServedProcess]:
    """``tokenwire serve`` (one worker) for the fault models, with ``fault_plugins`` importable."""
    path = os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))
    with processes.serve_gateway(faults.config(), env={"PYTHONPATH": path}) as gw:
        yield gw


def request_body(model: str, text: str = "Hello", **fields: Any) -> bytes:
    body: dict[str, Any] = {"version": "1.0", "stream": True, "model": model}
    body["messages"] = [{"role": "user", "content": text}]
    body.update(fields)
    return json.dumps(body).encode()


def stream(gw: processes.ServedProcess, model: str, **fields: Any) -> tuple[bytes, list[ev.Event]]:
    """POST one standard request and read the whole stream: ``(raw body, typed events)``."""
    import tokenwire

    with httpx.Client(base_url=gw.url, timeout=60.0) as client:
        response = client.post(
            "/v1/stream",
            content=request_body(model, **fields),
            headers={"content-type": MEDIA_TYPE},
        )
    assert response.status_code == 200, response.text
    raw = response.content
    return raw, list(tokenwire.iter_events(raw))


def probe(gw: processes.ServedProcess) -> dict[str, Any]:
    """The worker's ``{"tasks", "sockets", "threads", "pool", "pid"}`` (``probe`` model)."""
    _raw, events = stream(gw, "probe")
    texts = [e.delta.text for e in events if isinstance(e, ev.ContentDelta)]
    snapshot: dict[str, Any] = json.loads("".join(texts))
    return snapshot
