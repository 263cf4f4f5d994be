"""What the install tests share: a fresh copy of the tree, a served gateway checked end to end.

Both tests install from the package index (the only network there is), so
they are slow; each is bounded (``pytest.mark.timeout``) and runs in CI too.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import tokenwire
from tokenwire.testing.processes import ServedProcess

ROOT = Path(__file__).resolve().parents[2]


def fresh_copy(dest: Path) -> Path:
    """The files a fresh clone has (tracked, or new and not ignored), copied to ``dest``.

    Not ``git clone``: uncommitted work is what a test must see.
    """
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout
    for name in filter(None, listed.decode().split("\0")):
        src = ROOT / name
        if not src.is_file():  # deleted in the work tree, not yet committed
            continue
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)
    return dest


def clean_env(**extra: str) -> dict[str, str]:
    """The environment minus this test run's venv, so nothing leaks into the new one."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != bin_dir)
    return {**env, **extra}


def size_mb(folder: Path) -> float:
    """What ``du`` would say of ``folder``, in MB (files only, links not followed)."""
    total = sum(p.lstat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())
    return total / 1e6


def get(url: str) -> tuple[int, str, bytes]:
    with urllib.request.urlopen(url, timeout=30) as r:  # noqa: S310 - 127.0.0.1 only
        return r.status, r.headers.get("content-type", ""), r.read()


def check_served(served: ServedProcess) -> None:
    """The demo answers a conformant stream, and the playground and its script are served."""
    body = json.dumps(
        {
            "version": "1.0",
            "stream": True,
            "model": "demo",
            "messages": [{"role": "user", "content": "Hello"}],
        }
    ).encode()
    request = urllib.request.Request(
        f"{served.url}/v1/stream",
        data=body,
        headers={"Content-Type": "application/llm-request+json"},
    )
    with urllib.request.urlopen(request, timeout=30) as r:  # noqa: S310 - 127.0.0.1 only
        assert r.status == 200
        stream = r.read()
    report = tokenwire.validate([stream])
    assert report.ok, [str(v) for v in report.violations]
    assert report.events > 3
    status, kind, page = get(f"{served.url}/")
    assert status == 200 and kind.startswith("text/html"), (status, kind)
    assert b"<html" in page.lower()
    assert b"/static/app.js" in page, page[:400]
    for name in ("app.js", "tokenwire.js", "app.css"):  # the page's files came with the package
        status, _, data = get(f"{served.url}/static/{name}")
        assert status == 200 and data, name
    models = json.loads(get(f"{served.url}/v1/models")[2])
    assert "demo" in json.dumps(models)
