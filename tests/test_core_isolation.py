"""The protocol core does no I/O: importing it loads no network or async stack."""

from __future__ import annotations

import json
import subprocess
import sys

FORBIDDEN = ["asyncio", "httpx", "starlette", "socket", "granian", "ssl", "jsonschema"]


def test_core_import_loads_no_io_modules() -> None:
    code = (
        "import sys, json\n"
        "import tokenwire\n"
        "from tokenwire import sse, events, request, lifecycle, writer, iter_events, validate\n"
        "list(iter_events(b''))\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout
    loaded = set(json.loads(out))
    assert not [m for m in FORBIDDEN if m in loaded]
