"""Must show (issue 25): a package that installs.

``python -m build`` gives a wheel and an sdist, ``twine check`` passes on
both, and the wheel installed into an empty venv (with the ``server`` and
``cli`` extras, what ``make run`` installs) runs ``tokenwire serve``: the demo
model and the playground. The sdist carries the LICENSE and CHANGELOG.
Bounded: 15 minutes, one gateway, stopped after.
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from tests.install.helpers import check_served, clean_env, fresh_copy

from tokenwire.testing.processes import ServedProcess, free_port

pytestmark = [pytest.mark.install, pytest.mark.timeout(900)]


def run(*argv: str, cwd: Path | None = None) -> str:
    result = subprocess.run(
        list(argv), cwd=cwd, capture_output=True, text=True, timeout=600, env=clean_env()
    )
    assert result.returncode == 0, f"{argv} exited {result.returncode}\n{result.stderr[-4000:]}"
    return result.stdout


def test_the_built_wheel_installs_into_an_empty_venv_and_serves(tmp_path: Path) -> None:
    tree = fresh_copy(tmp_path / "tree")
    dist = tmp_path / "dist"
    run(sys.executable, "-m", "build", "--outdir", str(dist), str(tree))
    (wheel,) = dist.glob("tokenwire-*.whl")
    (sdist,) = dist.glob("tokenwire-*.tar.gz")
    out = run(sys.executable, "-m", "twine", "check", "--strict", str(wheel), str(sdist))
    assert out.count("PASSED") == 2, out

    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
    assert "tokenwire/gateway/static/index.html" in names
    assert "tokenwire/py.typed" in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    with tarfile.open(sdist) as t:
        top = {n.split("/", 2)[1] for n in t.getnames() if n.count("/") >= 1}
    assert {"LICENSE", "CHANGELOG.md", "README.md", "src", "pyproject.toml"} <= top
    assert not top & {"js", "tests"}  # those are the npm package's and the repo's

    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", str(venv))
    python = str(venv / "bin" / "python")
    run(python, "-m", "pip", "install", "-q", "--disable-pip-version-check", f"{wheel}[server,cli]")
    port = free_port()
    argv = [str(venv / "bin" / "tokenwire"), "serve", "--host", "127.0.0.1", "--port", str(port)]
    # Run from an empty folder: nothing may come from the source tree.
    with ServedProcess(argv, port, cwd=tmp_path, env=clean_env(), timeout_s=120) as served:
        check_served(served)
    where = run(python, "-c", "import tokenwire; print(tokenwire.__file__)")
    assert str(venv) in where, where
