"""CPU per request of the adaptation table (``tokenwire.translate.adapt``).

A vendor body for a model of another format goes through ``adapt`` (the table:
finders over the whole body, mappings), the ingress parser (as before) and
``finish`` (the mapped fields into the request). This measures the parse alone
and the three together, on Claude Code-shaped bodies of growing length (every
turn with ``cache_control`` on its blocks, thinking, ``context_management``,
tools), toward an OpenAI Chat upstream. Sans-I/O: the gateway's own CPU, per
request, without the network.

    .venv/bin/python bench/adapt.py [--repeat 200] [--no-write]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from _common import header, md_table, write_section
from tokenwire.testing.processes import loadavg
from tokenwire.translate import adapt, get

CACHED = {"type": "ephemeral"}


def claude_code_body(turns: int) -> dict[str, Any]:
    """A Claude Code turn after ``turns`` earlier user/assistant pairs."""
    messages: list[Any] = []
    for i in range(turns):
        block = {"type": "text", "text": f"step {i} " + "x" * 400}
        messages.append(
            {"role": "user", "content": [{**block, "cache_control": {"type": "ephemeral"}}]}
        )
        messages.append({"role": "assistant", "content": [{"type": "text", "text": "y" * 400}]})
    messages.append({"role": "user", "content": "go on"})
    return {
        "model": "m",
        "max_tokens": 32000,
        "stream": True,
        "system": [{"type": "text", "text": "s" * 8000, "cache_control": {"type": "ephemeral"}}],
        "messages": messages,
        "tools": [{"name": f"tool{i}", "input_schema": {"type": "object"}} for i in range(20)],
        "thinking": {"type": "enabled", "budget_tokens": 31999},
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
        "metadata": {"user_id": "user_0"},
    }


def per_call_ms(work: Callable[[], object], repeat: int) -> float:
    """The median of five rounds of ``repeat`` calls, in ms per call."""
    rounds = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(repeat):
            work()
        rounds.append((time.perf_counter() - start) / repeat * 1e3)
    return statistics.median(rounds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    load_before = loadavg()
    ingress = get("anthropic").ingress
    assert ingress is not None
    rows = []
    for turns in (1, 50, 200):
        body = claude_code_body(turns)

        def parse_only(body: dict[str, Any] = body) -> object:
            return ingress.parse(body)

        def adapted(body: dict[str, Any] = body) -> object:
            out = adapt.adapt("anthropic", body, ["openai"])
            return adapt.finish(out, ingress.parse(out.body)[0])

        base = per_call_ms(parse_only, args.repeat)
        total = per_call_ms(adapted, args.repeat)
        rows.append([str(2 * turns + 1), f"{base:.3f}", f"{total:.3f}", f"{total - base:+.3f}"])
    lines = [
        "## adapt",
        "",
        "CPU per request of the adaptation table on a Claude Code body toward an OpenAI",
        "Chat upstream (`bench/adapt.py`): the ingress parse alone, and `adapt` + parse +",
        "`finish`, median of five rounds.",
        "",
        *header("bench/adapt.py", load_before),
        "",
        *md_table(["messages", "parse ms", "adapt + parse + finish ms", "difference ms"], rows),
    ]
    print("\n".join(lines))
    if not args.no_write:
        write_section("adapt", "\n".join(lines))


if __name__ == "__main__":
    main()
