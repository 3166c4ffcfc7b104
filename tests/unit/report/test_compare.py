"""speedbench compare: runs side by side, two arms of one run, significance tests."""

from __future__ import annotations

import copy
import io

from rich.console import Console
from tests.helpers.runfactory import DEFAULT_ARMS, make_run

from speedbench.cli import main
from speedbench.report import significance
from speedbench.report.compare import (
    compare_arms,
    compare_runs,
    print_comparison,
    render_comparison_html,
)
from speedbench.results.loader import load_run


def slower(factor: float, arm_index: int = 2) -> list[dict]:
    arms = copy.deepcopy(DEFAULT_ARMS)
    arms[arm_index]["speedup"] = {c: s * factor for c, s in arms[arm_index]["speedup"].items()}
    return arms


ARMS_TITLE = "Speedup (headline clock), from each point's stored interval"


def section(cmp, title):
    return next(s for s in cmp.sections if s.title == title)


def test_runs_side_by_side_with_bootstrap(tmp_path):
    a = load_run(make_run(tmp_path / "a", seed=1).path)
    b = load_run(make_run(tmp_path / "b", seed=2, arms=slower(0.75)).path)
    cmp = compare_runs([a, b])
    e31 = section(cmp, "Speedup: eagle3.1")
    assert e31.headers[:3] == ["c", "R1 speedup [95% CI]", "R2 speedup [95% CI]"]
    assert "stored interval" in e31.note  # the rows' own intervals, not a prompts-only bootstrap
    assert [row[4] for row in e31.rows] == ["yes", "yes", "yes"]  # a 25% drop is real
    assert all(row[3].startswith("-") for row in e31.rows)
    assert e31.significant_rows == {0, 1, 2}
    e3 = section(cmp, "Speedup: eagle3")  # unchanged arm, different noise: not significant
    assert [row[4] for row in e3.rows] == ["no", "no", "no"]
    assert section(cmp, "Acceptance length per category").headers == ["arm", "coding", "math"]
    assert len(section(cmp, "Per-position acceptance").rows) == 8  # 2 runs x 2 arms x (joint, conditional)
    assert set(cmp.speedups) == {"R1 eagle3", "R2 eagle3", "R1 eagle3.1", "R2 eagle3.1"}


def test_bootstrap_difference_matches_records(tmp_path):
    a = load_run(make_run(tmp_path / "a", seed=1).path)
    b = load_run(make_run(tmp_path / "b", seed=1, arms=slower(0.5)).path)
    iv = significance.speedup_diff_runs(a, b, "eagle3.1", 1, "")
    # identical noise draws, speculative TPS halved: the speedup halves exactly
    assert abs(iv.value + a.row("eagle3.1", 1).speedup_mean / 2) < 1e-9
    assert iv.low < iv.value < iv.high and iv.excludes_zero
    same = significance.speedup_diff_runs(a, a, "eagle3.1", 1, "")
    assert same.value == 0 and not same.excludes_zero


def test_ci_overlap_fallback_without_records(tmp_path):
    a = load_run(make_run(tmp_path / "a", seed=1, write_records=False).path)
    b = load_run(make_run(tmp_path / "b", seed=2, arms=slower(0.7), write_records=False).path)
    cmp = compare_runs([a, b])
    e31 = section(cmp, "Speedup: eagle3.1")
    assert "stored interval" in e31.note  # records or none, the same intervals
    assert [row[4] for row in e31.rows] == ["yes", "yes", "yes"]


def test_arm_missing_from_a_run(tmp_path):
    a = load_run(make_run(tmp_path / "a", seed=1).path)
    b = load_run(make_run(tmp_path / "b", seed=1, arms=DEFAULT_ARMS[:2]).path)
    cmp = compare_runs([a, b])
    assert "arm eagle3.1 is missing from R2" in cmp.notes
    assert section(cmp, "Speedup: eagle3.1").headers == ["c", "R1 speedup [95% CI]", "R1 outputs"]


def test_two_arms_in_one_run(tmp_path):
    run = load_run(make_run(tmp_path, seed=4).path)
    cmp = compare_arms(run, "eagle3", "eagle3.1")
    sec = section(cmp, ARMS_TITLE)
    assert "stored interval" in sec.note
    assert [row[4] for row in sec.rows] == ["yes", "yes", "yes"]  # EAGLE 3.1 is ~10% faster here
    assert all(row[3].startswith("+") for row in sec.rows)
    same = compare_arms(run, "eagle3", "eagle3")
    assert [row[4] for row in section(same, ARMS_TITLE).rows] == ["no"] * 3
    buf = io.StringIO()
    print_comparison(cmp, Console(file=buf, width=250))
    assert "eagle3.1 vs eagle3" in buf.getvalue()


def test_cli_and_html(tmp_path, capsys):
    arms = copy.deepcopy(DEFAULT_ARMS)
    arms[1]["name"] = "eagle3<script>alert(1)</script>"
    a = make_run(tmp_path / "a", seed=1, arms=arms)
    b = make_run(tmp_path / "b", seed=2, arms=arms)
    out = tmp_path / "cmp.html"
    assert main(["compare", str(a.path), str(b.path), "--html", str(out)]) == 0
    html = out.read_text()
    assert "<script" not in html and "&lt;script&gt;" in html and html.count("<svg") == 2
    assert "Speedup: eagle3.1" in capsys.readouterr().out
    assert main(["compare", str(a.path)]) == 2  # one run needs --arms
    assert main(["compare", str(a.path), "--arms", "baseline", "nope"]) == 2
    out2 = tmp_path / "arms.html"
    assert main(["compare", str(a.path), str(b.path), "--arms", "eagle3.1", arms[1]["name"], "--html", str(out2)]) == 0
    assert "headline clock" in out2.read_text()
    assert "<script" not in render_comparison_html(compare_arms(load_run(a.path), "eagle3.1", arms[1]["name"]))
