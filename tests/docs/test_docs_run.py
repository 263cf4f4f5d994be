"""Every code block and command of README.md and docs/*.md, run as written (issue 13).

A real ``tokenwire serve`` (the demo model) runs on an ephemeral port for the
module; ``127.0.0.1:8080`` in a block is rewritten to it. Each block runs in a
scratch directory made of symlinks to the checkout, so relative paths
(``.venv/bin/tokenwire``, ``examples/gateway.toml``) resolve and files a block
writes stay out of the repository. ``docblocks`` says what each language does
and how a block is marked as not run (``text``, or ``no-run: <reason>``).

One test per block, named ``<file>:<line>``; a failure shows the file, the
line, the script as run and its output.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from tests.docs.docblocks import KNOWN, NOT_RUN, ROOT, SHELL, Block, blocks, doc_files
from tests.docs.docblocks import inline_commands as inline_commands_of
from tests.gateway.gateway_procs import Gateway

from tokenwire.cli import COMMANDS, main
from tokenwire.gateway import config

DOC_PORT = 8080
BIN = Path(sys.executable).parent  # the venv's bin: tokenwire, python
TIMEOUT_S = 120

ALL_BLOCKS = [b for path in doc_files() for b in blocks(path)]


def block_id(block: Block) -> str:
    return block.where


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    with Gateway(tmp_path_factory.mktemp("docs-gateway")) as gw:
        yield gw


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    """A directory that looks like the checkout (symlinks) but keeps what is written."""
    for entry in ROOT.iterdir():
        if entry.name not in (".git",):
            (tmp_path / entry.name).symlink_to(entry)
    return tmp_path


def env() -> dict[str, str]:
    out = dict(os.environ)
    out["PATH"] = f"{BIN}{os.pathsep}{out.get('PATH', '')}"
    out["NO_COLOR"] = "1"
    out["COLUMNS"] = "160"
    return out


def report(block: Block, script: str, proc: subprocess.CompletedProcess[str]) -> str:
    script = script.removeprefix(PRELUDE)  # the harness's own lines say nothing
    return (
        f"\n{block.where}: ```{block.language} block failed (exit {proc.returncode})\n"
        f"--- as run (in a scratch copy of the checkout) ---\n{script}\n"
        f"--- stdout ---\n{proc.stdout[-4000:]}\n"
        f"--- stderr ---\n{proc.stderr[-4000:]}"
    )


def run_process(
    argv: list[str], cwd: Path, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run in its own session; whatever it started is killed when it is done."""
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env(),
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(stdin, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        err += f"\n[docs test: killed after {TIMEOUT_S} s]"
    finally:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def rewrite_port(text: str, doc_port: int, port: int) -> str:
    return re.sub(rf"\b(127\.0\.0\.1|localhost):{doc_port}\b", rf"\g<1>:{port}", text)


# -- shell blocks ---------------------------------------------------------------------

PRELUDE = """set -e -o pipefail
__tw_pids=()
__tw_stop() { for p in "${__tw_pids[@]}"; do kill -INT "$p" 2>/dev/null || true; done; wait; }
trap __tw_stop EXIT
__tw_wait() {  # until the gateway a block started answers (bounded poll)
  for _ in $(seq 600); do
    curl -fsS -o /dev/null "$1/healthz" 2>/dev/null && return 0
    kill -0 "${__tw_pids[-1]}" 2>/dev/null || { echo "tokenwire serve exited"; cat "$2"; return 1; }
    sleep 0.1
  done
  echo "tokenwire serve did not answer at $1"; cat "$2"; return 1
}
"""

_MAKE = re.compile(r"^make(\s+(?P<args>[^#]*))?(#.*)?$")
_SERVE = re.compile(r"^(\S*/)?tokenwire\s+serve\b")


def makefile_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text()
    return set(re.findall(r"^([A-Za-z0-9_.-]+)\s*:(?!=)", text, re.MULTILINE))


def logical_lines(text: str) -> list[str]:
    out: list[str] = []
    pending = ""
    for line in text.splitlines():
        if line.rstrip().endswith("\\"):
            pending += line + "\n"
            continue
        out.append(pending + line)
        pending = ""
    if pending:
        out.append(pending)
    return out


def shell_script(block: Block, gateway_port: int) -> tuple[str, list[str]]:
    """The block as bash runs it, and the ``make`` targets it names (checked, not run).

    Each ``tokenwire serve`` line gets a free port of its own, and the docs' address
    of every gateway the block started (its ``--port``, else 8080) is rewritten to
    it, so a block can start several (replicas) and talk to each."""
    makes: list[str] = []
    lines: list[str] = []
    ports = {DOC_PORT: gateway_port}
    for line in logical_lines(block.text):
        stripped = line.strip()
        make = _MAKE.match(stripped)
        if make is not None:
            args = shlex.split(make["args"] or "")
            makes += [a for a in args if "=" not in a and not a.startswith("-")] or ["<default>"]
            lines.append(f": checked against the Makefile: {stripped}")
            continue
        if _SERVE.match(stripped):
            # The block's own gateway, on a free port, for the rest of the block.
            command = re.sub(r"\s+#.*$", "", stripped)
            found = re.search(r"--port[ =](\d+)", command)
            port = ports[int(found.group(1)) if found else DOC_PORT] = free_port()
            command = re.sub(r"\s*--port[ =]\d+", "", command)
            command = re.sub(r"\s*--host[ =]\S+", "", command)
            log = f"serve-{port}.log"
            lines.append(f"{command} --host 127.0.0.1 --port {port} >{log} 2>&1 &")
            lines.append("__tw_pids+=($!)")
            lines.append(f"__tw_wait http://127.0.0.1:{port} {log}")
            continue
        for doc_port, port in ports.items():
            line = rewrite_port(line, doc_port, port)
        lines.append(line)
    return PRELUDE + "\n".join(lines) + "\n", makes


def run_shell(block: Block, gateway: Gateway, cwd: Path) -> None:
    script, makes = shell_script(block, gateway.port)
    targets = makefile_targets()
    missing = [t for t in makes if t != "<default>" and t not in targets]
    assert not missing, f"{block.where}: make target(s) {missing} not in the Makefile"
    proc = run_process(["bash", "-c", script], cwd)
    assert proc.returncode == 0, report(block, script, proc)


# -- the other languages ----------------------------------------------------------------


def run_python(block: Block, gateway: Gateway, cwd: Path) -> None:
    script = rewrite_port(block.text, DOC_PORT, gateway.port)
    (cwd / "doc_block.py").write_text(script)
    proc = run_process([sys.executable, "doc_block.py"], cwd)
    assert proc.returncode == 0, report(block, script, proc)


def run_js(block: Block, gateway: Gateway, cwd: Path) -> None:
    script = rewrite_port(block.text, DOC_PORT, gateway.port)
    (cwd / "doc_block.mjs").write_text(script)
    proc = run_process(["node", "doc_block.mjs"], cwd)
    assert proc.returncode == 0, report(block, script, proc)


def load_toml(block: Block) -> None:
    try:
        config.parse(tomllib.loads(block.text))
    except (tomllib.TOMLDecodeError, config.ConfigError) as exc:
        pytest.fail(f"{block.where}: the config check refuses this block: {exc}\n{block.text}")


def load_json(block: Block) -> None:
    try:
        json.loads(block.text)
    except json.JSONDecodeError as exc:
        pytest.fail(f"{block.where}: not JSON: {exc}\n{block.text}")


def load_yaml(block: Block) -> None:
    try:
        yaml.safe_load(block.text)
    except yaml.YAMLError as exc:
        pytest.fail(f"{block.where}: not YAML: {exc}\n{block.text}")


def is_run(block: Block) -> bool:
    return block.no_run is None and block.language in KNOWN - NOT_RUN


def test_every_block_says_what_it_is() -> None:
    """A language the test knows, and a reason for every ``no-run``."""
    problems = []
    for block in ALL_BLOCKS:
        if not block.language:
            problems.append(
                f"{block.where}: a block without a language; say what it is (```sh, "
                "```python, ```toml, ```json, ```text for output samples and synopses)"
            )
        elif block.language not in KNOWN:
            problems.append(f"{block.where}: unknown language {block.language!r} ({sorted(KNOWN)})")
        elif block.no_run == "":
            problems.append(f"{block.where}: `no-run` needs a reason (```sh no-run: why)")
    assert not problems, "\n".join(problems)


def test_the_blocks_not_run_are_few_and_say_why() -> None:
    marked = [b for b in ALL_BLOCKS if b.no_run]
    # Not run: output samples and synopses (```text), diagrams, schemas, and these.
    assert len(marked) <= 6, "\n".join(f"{b.where}: {b.no_run}" for b in marked)


@pytest.mark.parametrize("block", [b for b in ALL_BLOCKS if is_run(b)], ids=block_id)
def test_doc_block_runs(block: Block, gateway: Gateway, scratch: Path) -> None:
    if block.language in SHELL:
        run_shell(block, gateway, scratch)
    elif block.language == "python":
        run_python(block, gateway, scratch)
    elif block.language == "js":
        run_js(block, gateway, scratch)
    elif block.language == "toml":
        load_toml(block)
    elif block.language == "json":
        load_json(block)
    elif block.language == "yaml":
        load_yaml(block)


# -- inline commands: `tokenwire SUBCOMMAND --option` and `make TARGET` exist ----------


def help_of(*args: str) -> str:
    result = CliRunner().invoke(main, [*args, "--help"])
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("path", doc_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_inline_commands_exist(path: Path) -> None:
    targets = makefile_targets()
    problems: list[str] = []
    helps: dict[str, str] = {}
    for line, span in inline_commands_of(path):
        words = span.split()
        where = f"{path.relative_to(ROOT)}:{line}: `{span}`"
        if words[0] == "make":
            for target in words[1:]:
                if "=" not in target and target not in targets:
                    problems.append(f"{where}: no make target {target!r}")
            continue
        sub = words[1]
        if sub not in COMMANDS:
            if not sub.startswith("-"):
                problems.append(f"{where}: no subcommand {sub!r} (known: {', '.join(COMMANDS)})")
            continue
        text = helps.setdefault(sub, help_of(sub))
        for word in words[2:]:
            option = word.split("=")[0].rstrip(",.;:)")
            if option.startswith("--") and option not in text:
                problems.append(f"{where}: `tokenwire {sub}` has no option {option}")
    assert not problems, "\n".join(problems)


def test_every_doc_is_linked_from_the_start_page() -> None:
    # README -> docs/README.md ("start here") -> every other doc, by its relative path.
    assert "(docs/README.md)" in (ROOT / "README.md").read_text()
    start = (ROOT / "docs" / "README.md").read_text()
    unlinked = [
        str(rel)
        for p in sorted((ROOT / "docs").rglob("*"))
        if p.suffix in (".md", ".txt")
        and (rel := p.relative_to(ROOT / "docs")) != Path("README.md")
        if f"]({rel.as_posix()})" not in start
    ]
    assert not unlinked, f"docs/README.md links no [..](PATH) for: {unlinked}"


def test_every_relative_link_points_at_a_file_in_the_repository() -> None:
    problems = []
    for path in doc_files():
        for n, line in enumerate(path.read_text().splitlines(), 1):
            for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", line):
                if re.match(r"^[a-z]+:", target):
                    continue  # a URL, not a file
                found = (path.parent / target).resolve()
                if not found.is_relative_to(ROOT) or not found.exists():
                    problems.append(f"{path.relative_to(ROOT)}:{n}: {target}")
    assert not problems, "links to nothing in the repository:\n" + "\n".join(problems)
