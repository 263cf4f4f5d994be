"""``tokenwire bench`` runs end to end on this machine (tiny sizes; figures not judged).

It shares ``tokenwire.testing.processes`` (server processes, the fake upstream process,
the raw client) with this suite, and must work from the installed package.
"""

from __future__ import annotations

import json

from click.testing import CliRunner

from tokenwire.cli import main


def test_tokenwire_bench_prints_every_figure() -> None:
    args = ["bench", "--json", "--events", "300", "--seconds", "0.3", "--requests", "3"]
    result = CliRunner().invoke(main, [*args, "--conns", "2"])
    assert result.exit_code == 0, result.output
    figures = json.loads(result.stdout)
    assert figures["decode"]["events"] == 304  # start + 300 deltas + stop, usage, end
    assert figures["gateway"]["start_s"] > 0 and figures["gateway"]["idle_rss_mib"] > 0
    paths = {p["path"]: p for p in figures["gateway"]["paths"]}
    assert set(paths) == {"demo model, zero delay", "openai translator <- fake upstream"}
    for path in paths.values():
        assert path["events_per_s"] > 0 and path["ttfe_p50_ms"] > 0
