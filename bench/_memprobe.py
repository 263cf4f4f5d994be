"""A ``provider = "python"`` plugin for bench/load.py ``--trace``: where a worker's bytes go.

Model ``probe`` (``factory = "_memprobe:provider"``, with bench/ on the
worker's ``PYTHONPATH``): a request whose ``"tokenwire:probe"`` extension is
``{"do": "start"}`` starts ``tracemalloc`` and counts the worker's objects by
type; ``{"do": "snap"}`` diffs both against that start and writes the result
(JSON) to the file named by ``TOKENWIRE_MEMPROBE_OUT``. Each answers one delta.
Bench only: never configured in a real gateway.
"""

from __future__ import annotations

import gc
import json
import os
import tracemalloc
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from tokenwire import events as ev
from tokenwire.request import Request

_start: dict[str, Any] = {}


def _types() -> Counter[str]:
    return Counter(f"{type(o).__module__}.{type(o).__qualname__}" for o in gc.get_objects())


def _rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _start_probe() -> str:
    gc.collect()
    _start["types"] = _types()
    _start["rss"] = _rss_kib()
    tracemalloc.start(1)
    _start["snapshot"] = tracemalloc.take_snapshot()
    return "started"


def _snap() -> str:
    snapshot = tracemalloc.take_snapshot()
    types = _types()
    diff = snapshot.compare_to(_start["snapshot"], "lineno")
    files = snapshot.compare_to(_start["snapshot"], "filename")
    current, _peak = tracemalloc.get_traced_memory()
    out = {
        "rss_kib": _rss_kib() - _start["rss"],
        "traced_bytes": sum(stat.size_diff for stat in diff),
        "traced_now": current,
        "lines": [
            {"where": str(stat.traceback[0]), "bytes": stat.size_diff, "count": stat.count_diff}
            for stat in diff[:60]
        ],
        "files": [
            {"where": stat.traceback[0].filename, "bytes": stat.size_diff, "count": stat.count_diff}
            for stat in files[:30]
        ],
        "types": (types - _start["types"]).most_common(60),
    }
    Path(os.environ["TOKENWIRE_MEMPROBE_OUT"]).write_text(json.dumps(out, indent=1))
    tracemalloc.stop()
    return "written"


class Probe:
    async def generate(self, request: Request) -> AsyncIterator[ev.Event]:
        option = request.extension("tokenwire:probe")
        do = option.get("do") if isinstance(option, dict) else None
        text = _start_probe() if do == "start" else _snap() if do == "snap" else "?"
        yield ev.ContentDelta(
            v=ev.VERSION, seq=0, index=0, role="assistant", delta=ev.Delta(text=text)
        )


def provider() -> Probe:
    return Probe()
