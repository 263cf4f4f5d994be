"""``tokenwire serve``'s command line: what it refuses before starting a server."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from tokenwire.cli import main
from tokenwire.cli.serve import command


def test_serve_is_a_subcommand() -> None:
    result = CliRunner().invoke(main, ["serve", "--help"])
    assert result.exit_code == 0
    for option in ("--config", "--host", "--port", "--workers", "--certfile", "--keyfile"):
        assert option in result.output
    assert "--log-content" in result.output


def test_bad_config_stops_with_the_key_named(tmp_path: Path) -> None:
    path = tmp_path / "g.toml"
    path.write_text('[[models]]\nname = "x"\nprovider = "openai"\n')
    result = CliRunner().invoke(command, ["--config", str(path)])
    assert result.exit_code == 1
    assert "models[0].base_url" in result.output


def test_certfile_needs_keyfile(tmp_path: Path) -> None:
    cert = tmp_path / "cert.pem"
    cert.write_text("not used")
    result = CliRunner().invoke(command, ["--certfile", str(cert)])
    assert result.exit_code == 2
    assert "--keyfile" in result.output
