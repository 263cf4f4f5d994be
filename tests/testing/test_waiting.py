"""``wait_until`` / ``async_wait_until``: return the condition's value, fail by name."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

import pytest

from tokenwire.testing import WaitTimeout, async_wait_until, wait_for_file, wait_until


def test_returns_the_truthy_value_another_thread_makes() -> None:
    box: list[str] = []
    made = threading.Event()

    def make() -> None:
        made.wait(30)
        box.append("ready")

    thread = threading.Thread(target=make)
    thread.start()
    calls = 0

    def ready() -> list[str]:
        nonlocal calls
        calls += 1
        made.set()  # the value appears only after the first check failed
        return box

    assert wait_until(ready) == ["ready"]
    assert calls >= 2
    thread.join()


def test_a_condition_that_never_holds_fails_naming_it() -> None:
    with pytest.raises(WaitTimeout, match=r"not within 0\.05 s: the log line for r1") as info:
        wait_until(lambda: False, timeout=0.05, what=lambda: "the log line for r1")
    assert isinstance(info.value, AssertionError)  # pytest reports it as a failure


def test_async_waits_on_another_task_and_awaits_coroutine_predicates() -> None:
    async def run() -> None:
        event = asyncio.Event()
        asyncio.get_running_loop().call_soon(event.set)

        async def is_set() -> bool:
            return event.is_set()

        assert await async_wait_until(is_set) is True
        assert await async_wait_until(lambda: 7) == 7
        with pytest.raises(WaitTimeout, match="the subscription"):
            await async_wait_until(lambda: 0, timeout=0.02, what="the subscription")

    asyncio.run(run())


def test_wait_for_file_rereads_a_half_written_file(tmp_path: Path) -> None:
    path = tmp_path / "record.json"
    path.write_text('{"cancelled_at": 1')  # the writer is not done yet
    reads = 0

    def parse(text: str) -> dict[str, float]:
        nonlocal reads
        reads += 1
        if reads == 2:
            path.write_text('{"cancelled_at": 1.5}')
        parsed: dict[str, float] = json.loads(text)
        return parsed

    assert wait_for_file(path, parse) == {"cancelled_at": 1.5}
    with pytest.raises(WaitTimeout, match="the missing record"):
        wait_for_file(tmp_path / "none", json.loads, timeout=0.02, what="the missing record")
