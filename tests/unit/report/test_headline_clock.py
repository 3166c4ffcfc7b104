"""The clock that holds, everywhere: tables, the star, compare and gates read the row's
headline speedup, and a drop it sees is never excused by the other clock's width."""

from __future__ import annotations

import copy
import io
import json

from rich.console import Console
from tests.helpers.runfactory import DEFAULT_ARMS, make_run

from speedbench.metrics.headline import HEADLINE_KEYS
from speedbench.report import header, notes, tables
from speedbench.report.compare import compare_arms
from speedbench.report.gate import evaluate_gates
from speedbench.report.terminal import print_summary
from speedbench.results.loader import load_run
from speedbench.scenario import GateSpec


def halved() -> list[dict]:
    arms = copy.deepcopy(DEFAULT_ARMS)
    for a in arms[1:]:
        a["speedup"] = {c: s * 0.5 for c, s in a["speedup"].items()}
    return arms


def busy_host(rd, client_ci=(0.0, 3.45), lag=0.9, engine_half=0.05):
    """Rewrite the run as a busy host leaves it: a lag-ruined client interval, a tight
    engine one around the same ratio, and no stored headline (derived on read, as for an
    old run folder)."""
    summary = json.loads(rd.summary_path.read_text())
    for r in summary["rows"]:
        m = r.get("speedup_mean")
        if m is None:
            continue
        r.update(speedup_ci_low=client_ci[0], speedup_ci_high=client_ci[1], speedup_lag_bound=lag,
                 speedup_engine_mean=m, speedup_engine_ci_low=m * (1 - engine_half),
                 speedup_engine_ci_high=m * (1 + engine_half))
        for k in HEADLINE_KEYS:
            r.pop(k, None)
    rd.write_summary(summary)
    return rd


def test_halved_speedups_fail_max_regression_on_a_busy_host(tmp_path):
    base = load_run(busy_host(make_run(tmp_path / "base", seed=1)).path)
    cur = load_run(busy_host(make_run(tmp_path / "cur", seed=1, arms=halved())).path)
    results = evaluate_gates(cur, [GateSpec(metric="speedup", arm="eagle3.1", max_regression=0.05)], base)
    assert [r.status for r in results] == ["fail"] * 3, [r.message for r in results]
    assert all("engine-clock" in r.message and "within noise" not in r.message for r in results)
    # the client clock, named explicitly, is as wide as the host made it: no verdict on a drop
    client = evaluate_gates(cur, [GateSpec(metric="speedup_client", arm="eagle3.1", max_regression=0.05)], base)
    assert all("within noise" in r.message for r in client)


def test_lag_widened_client_interval_is_not_noise(tmp_path):
    """Bounded but lag-widened past the engine's: the engine's interval judges the drop."""
    base = load_run(busy_host(make_run(tmp_path / "base", seed=1), client_ci=(0.5, 1.727), lag=0.4).path)
    cur = load_run(busy_host(make_run(tmp_path / "cur", seed=1, arms=halved()), client_ci=(0.5, 1.727),
                             lag=0.4).path)
    results = evaluate_gates(cur, [GateSpec(metric="speedup", arm="eagle3.1", max_regression=0.05)], base)
    assert {r.status for r in results} == {"fail"}


def test_speedup_engine_gate_reads_the_engine_clock(tmp_path):
    run = load_run(busy_host(make_run(tmp_path, seed=1), engine_half=0.01).path)
    row = run.row("eagle3.1", 1)
    results = evaluate_gates(run, [GateSpec(metric="speedup_engine", arm="eagle3.1", concurrency=1,
                                            min=row.speedup_engine_mean + 0.01)])
    assert [r.status for r in results] == ["fail"]
    assert results[0].value == row.speedup_engine_mean


def test_tables_lead_with_the_headline_clock(tmp_path):
    run = load_run(busy_host(make_run(tmp_path, seed=1)).path)
    t = next(t for t in tables.speedup_tables(run) if t.arm == "eagle3.1")
    r = t.rows[0]
    assert r.clock == "engine" and "unbounded" in r.clock_reason
    assert r.ci_low == run.row("eagle3.1", r.concurrency).speedup_engine_ci_low
    assert r.speedup_cell.endswith("(engine)") and r.other_cell.endswith("(client)")
    buf = io.StringIO()
    print_summary(run, Console(file=buf, width=200, highlight=False, color_system=None))
    out = buf.getvalue()
    line = next(x for x in out.splitlines() if "(engine)" in x)
    assert line.index("(engine)") < line.index("(client)")  # the engine figure first
    assert "[0.00, 3.45]" in line


def test_compare_arms_sign_matches_the_figures_shown(tmp_path):
    run = load_run(make_run(tmp_path, seed=4).path)
    cmp = compare_arms(run, "eagle3", "eagle3.1")
    for row in cmp.sections[0].rows:
        a, b = (float(cell.split("×")[0]) for cell in row[1:3])
        delta = float(row[3].split()[0])
        assert (delta > 0) == (b > a) or abs(b - a) < 0.01


def test_compare_arms_overlapping_engine_intervals_are_not_significant(tmp_path):
    """The issue's c=4 case: engine intervals [0.70, 1.34] and [0.81, 1.62] overlap on a
    busy host; a prompts-only bootstrap of the client clock must not call it."""
    rd = make_run(tmp_path, seed=4)
    busy_host(rd, engine_half=0.3)
    cmp = compare_arms(load_run(rd.path), "eagle3", "eagle3.1")
    assert [row[4] for row in cmp.sections[0].rows] == ["no"] * 3
    assert all("(engine)" in row[1] for row in cmp.sections[0].rows)


def test_report_header_shows_the_aa_rows_stored_interval(tmp_path):
    """The A/A point reads the same interval in the header as in the tables; the
    simultaneous interval of the noise floor only decides the verdict."""
    rd = make_run(tmp_path, seed=1)
    summary = json.loads(rd.summary_path.read_text())
    aa = dict(next(r for r in summary["rows"] if r["arm"] == "eagle3" and r["concurrency"] == 16))
    aa.update(arm="baseline-aa", speedup_mean=1.02, speedup_ci_low=0.31, speedup_ci_high=2.56, speculative=False)
    for k in HEADLINE_KEYS:
        aa.pop(k, None)
    summary["rows"].append(aa)
    summary["noise_floor"] = [{"concurrency": 16, "variant": "", "speedup": 1.02, "ci_low": 0.27, "ci_high": 2.98,
                               "level": 0.983, "contains_one": True}]
    rd.write_summary(summary)
    line = next(x for x in header.noise_lines(load_run(rd.path)) if x.startswith("Noise floor"))
    assert "c=16 1.02× [0.31, 2.56]" in line and "2.98" not in line


def test_the_report_names_each_engine_led_point_and_why(tmp_path):
    run = load_run(busy_host(make_run(tmp_path, seed=1)).path)
    line = next(x for x in notes.measured_lines(run) if x.startswith("Headline clock"))
    assert "eagle3.1 c=1 (the client-side interval is unbounded)" in line
