"""What a newcomer's first `speedbench run` ends with: speedbench's own lines, and no
report from a library that the run's process imported (issue 45); and every line of it
fits the 80 columns of a log (issue 54). The first run builds
the tiny fixtures; that build imports torch, and torch's triton bindings print dozens of
"nanobind: leaked ..." lines when the process that imported them exits."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from speedbench.fixtures.assemble import is_built
from tests.helpers.cli_runs import fake_local, scenario, write_prompts, write_yaml
from tests.helpers.widths import too_wide

REPO = Path(__file__).resolve().parents[2]


def test_a_first_run_that_builds_its_fixtures_ends_with_its_results_line(tmp_path):
    fixtures = tmp_path / "fresh" / ".fixtures" / "tiny"  # none yet, as on a fresh checkout
    prompts = write_prompts(tmp_path / "p.jsonl", [f"question {i}" for i in range(4)])
    sc = scenario("first", prompts, server=fake_local(**{"t-step": 0.002, "output-tokens": 4}),
                  arms=[{"name": "base"}], fixtures=str(fixtures),
                  concurrency=[1, 2])  # a second point: the first one's line carries the ETA, the longest
    path = write_yaml(tmp_path / "s.yaml", sc)
    proc = subprocess.run([sys.executable, "-m", "speedbench.cli", "run", str(path), "-o", str(tmp_path / "out"),
                           "--skip-doctor"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env={**os.environ, "COLUMNS": "80"}, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert is_built(fixtures)  # the run did build them, in a child process
    lines = proc.stdout.rstrip("\n").splitlines()
    last = max(i for i, ln in enumerate(lines) if ln.startswith("results: "))
    assert Path(lines[last].removeprefix("results: ")).is_dir()  # the whole path, on one line
    assert lines[last + 1:] == [], lines[last + 1:]  # nothing follows it
    assert not any("nanobind" in ln or "leaked" in ln for ln in lines), proc.stdout[-3000:]
    run = lines[last].removeprefix("results: ")
    assert any("(ETA" in ln for ln in lines)  # the run's longest progress line was there to wrap
    # only its folder's path, to copy, may run past 80 columns (a long temporary folder)
    assert too_wide(proc.stdout, 80, [f"run folder: {run}", f"results: {run}"]) == [], proc.stdout
