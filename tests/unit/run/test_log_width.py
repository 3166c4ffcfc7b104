"""Every scenario's dry-run fits an 80-column log: its prose wraps between words, and the
commands to paste (the server command, measurement flags, environment) stand whole on
lines of their own, the only lines that may run past 80 columns."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.helpers.widths import too_wide

from speedbench.cli import main
from speedbench.run.plan import build_plan, display_argv, display_env, shell_line
from speedbench.scenario import load_scenario

SCENARIOS = sorted((Path(__file__).resolve().parents[3] / "scenarios").glob("*.yaml"))


def _commands(path: Path) -> list[str]:
    """What the dry-run prints for pasting, each arm's."""
    sc = load_scenario(path)
    out = []
    for ap in build_plan(sc).arms:
        if not ap.launched:
            continue
        out.append(shell_line(display_argv(sc, ap, measurement=False), {}))
        if ap.launch.measurement or ap.launch.measurement_env:
            out.append(shell_line(ap.launch.measurement, ap.launch.measurement_env))
        if env := display_env(sc, ap):
            out.append(" ".join(f"{k}={v}" for k, v in env.items()))
    return out


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_a_dry_run_fits_80_columns(path, monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("COLUMNS", "80")
    capsys.readouterr()
    assert main(["run", str(path), "--dry-run", "-o", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    commands = _commands(path)
    assert too_wide(out, 80, commands) == []
    lines = {line.strip() for line in out.splitlines()}
    assert [c for c in commands if c not in lines] == []  # each whole, on a line of its own
