"""The docs test's own reading of Markdown: fences, info strings, inline commands, and
how a shell block is rewritten before it runs."""

from __future__ import annotations

from pathlib import Path

from tests.docs.docblocks import ROOT, blocks, inline_commands
from tests.docs.test_docs_run import DOC_PORT, PRELUDE, rewrite_port, shell_script

SAMPLE = """# Title

Run `tokenwire validate --json x.sse` or `make test`; `not a command`.

```sh
make run PORT=9000
tokenwire serve --config examples/gateway.toml --port 8080   # a comment
curl -s http://127.0.0.1:8080/v1/models \\
  -H 'x: y'
```

- a list item:

  ```json
  {"a": 1}
  ```

~~~python no-run: needs a real vendor key
print("x")
~~~

```
no language
```
"""


def sample(tmp_path: Path) -> Path:
    path = tmp_path / "sample.md"
    path.write_text(SAMPLE)
    return path


def test_fences_info_strings_and_lines(tmp_path: Path) -> None:
    path = sample(tmp_path)
    found = blocks(path)
    assert [(b.line, b.language, b.no_run) for b in found] == [
        (5, "sh", None),
        (14, "json", None),
        (18, "python", "needs a real vendor key"),
        (22, "", None),
    ]
    assert found[1].text == '{"a": 1}\n'  # the list item's indent is removed
    assert found[0].where == f"{path}:5"
    assert blocks(ROOT / "README.md")[0].where.startswith("README.md:")  # relative
    assert inline_commands(path) == [(3, "tokenwire validate --json x.sse"), (3, "make test")]


def test_a_serve_line_gets_its_own_port_and_make_lines_are_checked_not_run(
    tmp_path: Path,
) -> None:
    block = blocks(sample(tmp_path))[0]
    script, makes = shell_script(block, gateway_port=41000)
    assert makes == ["run"]
    body = script.removeprefix(PRELUDE).splitlines()
    serve = next(line for line in body if "tokenwire serve" in line)
    assert "--config examples/gateway.toml --host 127.0.0.1 --port " in serve
    assert "# a comment" not in serve and "--port 8080" not in serve
    port = serve.split("--port ")[1].split()[0]
    assert f"curl -s http://127.0.0.1:{port}/v1/models \\" in body  # the block's own gateway
    assert not any(line.startswith("make ") for line in body)


def test_rewrite_port_only_touches_the_docs_address() -> None:
    text = "http://127.0.0.1:8080/v1 localhost:8080 127.0.0.1:80800 10.0.0.1:8080"
    assert rewrite_port(text, DOC_PORT, 5) == (
        "http://127.0.0.1:5/v1 localhost:5 127.0.0.1:80800 10.0.0.1:8080"
    )
