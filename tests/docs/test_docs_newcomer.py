"""What the README and docs tell a newcomer, checked against the code.

``test_docs_run.py`` runs every block; these check what it cannot see: a first
screen that is the user's problem and its solution (the two set-up commands,
the three snippets), user docs without internal issue numbers, test paths or
draft section signs, that no command relies on ``.venv/bin`` being on PATH,
what the core example prints, the system packages the tests install (in
CONTRIBUTING.md), that no doc installs from an index that has no tokenwire,
and that ``serve --help`` names every config section.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import msgspec
from click.testing import CliRunner
from tests.docs.docblocks import ROOT, SHELL, blocks, doc_files

from tokenwire.cli import main
from tokenwire.gateway.config import Config

README = ROOT / "README.md"


CONTRIBUTING = ROOT / "CONTRIBUTING.md"
DOCS = ROOT / "docs"
#: The pages a user reads first: no draft section numbers, no internals.
USER_PAGES = [README, DOCS / "README.md", DOCS / "tutorial.md", *sorted(DOCS.glob("how-to/*.md"))]


def _section(title: str, path: Path = README) -> list:  # type: ignore[type-arg]
    text = path.read_text()
    start = text.index(f"## {title}")
    end = text.find("\n## ", start + 1)
    first, last = text[:start].count("\n") + 1, text[: end if end > 0 else None].count("\n") + 1
    return [b for b in blocks(path) if first <= b.line <= last]


def test_the_quick_start_has_exactly_two_set_up_commands() -> None:
    (setup, *_) = [b for b in _section("Quick start") if b.language in SHELL]
    commands = [line.split("#")[0].strip() for line in setup.text.splitlines() if line.strip()]
    assert commands == ["make run", "make test"]


def test_the_first_screen_is_the_users_problem_and_three_runnable_snippets() -> None:
    text = README.read_text()
    first_screen = text.split("\n## What's inside", 1)[0]
    intro = first_screen.split("\n## ", 1)[0]
    assert "base URL" in intro and "any model" in intro
    for internal in ("§", "envelope", "`seq`", "../"):
        assert internal not in first_screen, internal
    snippets = [b for b in _section("Three ways to use it") if b.language != "toml"]
    by_text = {b.language: b.text for b in snippets}
    assert [b.language for b in snippets[:3]] == ["python", "python", "sh"]
    openai_sdk, anthropic_sdk, curl = (b.text for b in snippets[:3])
    assert 'OpenAI(base_url="http://127.0.0.1:8080/v1", api_key=' in openai_sdk  # no env key
    assert "stream=True" in openai_sdk
    assert 'anthropic.Anthropic(base_url="http://127.0.0.1:8080", api_key=' in anthropic_sdk
    assert curl.startswith("curl -N http://127.0.0.1:8080/v1/stream")
    assert by_text  # every one of them is run by test_docs_run against a real gateway


def test_user_pages_name_no_issue_test_path_or_draft_section() -> None:
    problems = []
    for path in USER_PAGES:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            for pattern in (r"\bissue \d", r"\btests/", "§"):
                if re.search(pattern, line):
                    problems.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not problems, "\n".join(problems)


def test_no_doc_names_an_internal_issue_number() -> None:
    # "issue 23" is ours; "vercel/ai issue 18331" names another project's, and stays.
    ours = re.compile(r"(?:^|(?P<before>\S+) )issue \d+")
    problems = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in doc_files()
        for n, line in enumerate(path.read_text().splitlines(), 1)
        for found in ours.finditer(line)
        if "/" not in (found["before"] or "")
    ]
    assert not problems, "\n".join(problems)


def test_contributing_names_the_flaky_target() -> None:
    said = " ".join(CONTRIBUTING.read_text().split())
    assert "repeats the process-level test folders N times (`make flaky N=10`)" in said
    assert "not part of `make test`" in said


def test_no_readme_command_needs_the_venv_on_path() -> None:
    # After `make run` the command is .venv/bin/tokenwire; a bare `tokenwire` is not found.
    for block in blocks(README):
        if block.language not in SHELL:
            continue
        for line in block.text.splitlines():
            for command in re.split(r"&&|\|\||;|\|", line.split(" #")[0]):
                word = command.strip().split(" ", 1)[0]
                assert word != "tokenwire", f"{block.where}: {line.strip()}"


def test_the_core_example_prints_what_its_comment_says(tmp_path: Path) -> None:
    (example,) = [b for b in _section("The standard underneath") if b.language == "python"]
    said = example.text.rstrip().splitlines()[-1].rsplit("#", 1)[1].strip()
    script = tmp_path / "core.py"
    script.write_text(example.text)
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert out.splitlines()[-1] == said == "True []"


def _apt_packages() -> set[str]:
    """Every package a test installs with apt-get (their literal argument lists)."""
    found: set[str] = set()
    for path in (ROOT / "tests").rglob("*.py"):
        if ".node" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.List) and len(node.elts) >= 3:
                words = [e.value for e in node.elts if isinstance(e, ast.Constant)]
                if words[:2] == ["apt-get", "install"]:
                    found |= {w for w in words[2:] if isinstance(w, str) and w != "-y"}
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "_apt_install":
                found |= {a.value for a in node.args if isinstance(a, ast.Constant)}
    return found


def test_contributing_names_every_system_package_the_tests_install() -> None:
    packages = _apt_packages()
    assert {"redis-server", "chromium"} <= packages  # the scan itself works
    suite = CONTRIBUTING.read_text().split("## The test suite", 1)[1].split("\n## ", 1)[0]
    missing = sorted(p for p in packages if f"`{p}`" not in suite)
    assert not missing, f"CONTRIBUTING.md's test suite section does not name {missing}"
    assert re.search(r"\d+ min \d+ s", suite), "the measured `make test` time"


def test_no_doc_installs_tokenwire_from_an_index() -> None:
    # No index has tokenwire yet: every install is from a clone or a built wheel.
    wrong = re.compile(r"pip install\s+['\"]?tokenwire(?=[\[\s'\"]|$)")
    assert wrong.search("pip install 'tokenwire[otel]'") and wrong.search("pip install tokenwire")
    for path in doc_files():
        for n, line in enumerate(path.read_text().splitlines(), 1):
            assert not wrong.search(line), f"{path.relative_to(ROOT)}:{n}: {line.strip()}"


def test_serve_help_names_every_config_section() -> None:
    sections = [f.encode_name for f in msgspec.structs.fields(Config) if f.name != "production"]
    sections += ["keys", "limits", "telemetry"]  # the production tables (config/production.py)
    out = CliRunner().invoke(main, ["serve", "--help"], terminal_width=200).output
    config_help = " ".join(out.split("--config FILE", 1)[1].split("--host", 1)[0].split())
    for name in sections:
        assert f"[{name}]" in config_help or f"[[{name}]]" in config_help, (name, config_help)
