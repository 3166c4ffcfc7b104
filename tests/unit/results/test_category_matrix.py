"""speedbench export RUNS... --format category-matrix: AIPerf's speed-bench-report layout and ours."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from speedbench.cli import main
from speedbench.metrics.headline import headline
from speedbench.report import tables
from speedbench.results.loader import load_run
from speedbench.results.category_matrix import ALL, FIGURES, HEADLINE, checkpoints
from tests.helpers.runfactory import make_run

CATS = ("coding", "math", "qa", "writing")


def _rows(path: Path) -> list[list[str]]:
    with open(path, newline="") as f:
        return list(csv.reader(f))


@pytest.fixture()
def two_runs(tmp_path):
    a = make_run(tmp_path / "a", scenario="night_a", categories=CATS, concurrencies=(1, 4), seed=1)
    b = make_run(tmp_path / "b", scenario="night_b", categories=CATS, concurrencies=(1, 4), seed=2)
    return a.path, b.path


def _rate(run, arm: str, conc: int, cat: str) -> float:
    recs = [r for r in run.records if r.arm == arm and r.concurrency == conc and r.category == cat and r.ok]
    return sum(r.spec.num_accepted_tokens for r in recs) / sum(r.spec.num_draft_tokens for r in recs)


def test_one_row_per_category_and_a_column_group_per_checkpoint(two_runs, tmp_path, capsys):
    out = tmp_path / "m"
    assert main(["export", *map(str, two_runs), "--format", "category-matrix", "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "category matrix" in printed and "eagle3@night_a" in printed
    rows = _rows(out / "category_matrix.csv")
    labels = ["eagle3@night_a", "eagle3.1@night_a", "eagle3@night_b", "eagle3.1@night_b"]
    assert rows[0] == ["category"] + [f"{lab}:{fig}" for lab in labels for fig in FIGURES]
    assert [r[0] for r in rows[1:]] == ["coding", "math", "qa", "writing", ALL]  # AIPerf's category order
    runs = {"night_a": load_run(two_runs[0]), "night_b": load_run(two_runs[1])}
    for lab in labels:  # the point's own row: the summary row's stored interval, as the report shows it
        arm, scen = lab.split("@")
        cells = dict(zip(rows[0], rows[-1]))
        want = headline(runs[scen].row(arm, 1))
        got = tuple(float(cells[f"{lab}:{fig}"]) for fig in ("speedup", "speedup_ci_low", "speedup_ci_high"))
        assert got == want
        shown = next(r for t in tables.speedup_tables(runs[scen]) if t.arm == arm for r in t.rows
                     if r.concurrency == 1)
        assert (shown.speedup, shown.ci_low, shown.ci_high) == want
    for r in rows[1:-1]:
        cells = dict(zip(rows[0], r))
        for lab in labels:
            arm, scen = lab.split("@")
            run = runs[scen]
            want = next(c for c in run.categories if c.arm == arm and c.concurrency == 1
                        and c.category == r[0])
            for fig in ("al_tokens", "al_requests", "speedup", "speedup_ci_low", "speedup_ci_high"):
                assert float(cells[f"{lab}:{fig}"]) == want.cell(HEADLINE.get(fig, fig))  # the summary's, not rounded
            assert cells[f"{lab}:speedup_clock"] == "client"  # the point's headline clock (this host was quiet)
            assert int(cells[f"{lab}:n_ok"]) == want.n_ok
            assert float(cells[f"{lab}:acceptance_rate"]) == pytest.approx(_rate(run, arm, 1, r[0]), rel=1e-12)


def test_aiperf_layout_model_rows_category_columns_and_overall(two_runs, tmp_path):
    out = tmp_path / "m"
    assert main(["export", *map(str, two_runs), "--format", "category-matrix", "-o", str(out)]) == 0
    rows = _rows(out / "speed_bench_report.csv")
    assert rows[0] == ["Model", "coding", "math", "qa", "writing", "Overall"]
    assert [r[0] for r in rows[1:]] == sorted(["eagle3@night_a", "eagle3.1@night_a", "eagle3@night_b",
                                               "eagle3.1@night_b"])
    run = load_run(two_runs[0])
    al = {c.category: c.al_tokens for c in run.categories if c.arm == "eagle3" and c.concurrency == 1}
    got = next(r for r in rows if r[0] == "eagle3@night_a")
    assert got[1:5] == [f"{al[c]:.2f}" for c in ("coding", "math", "qa", "writing")]
    assert got[5] == f"{sum(al.values()) / 4:.2f}"
    with open(out / "speed_bench_report.csv", "rb") as f:
        assert f.readline().endswith(b"\r\n")  # csv.writer's line ends, as AIPerf writes them
    for name in ("speed_bench_report_al_requests.csv", "speed_bench_report_accept_rate.csv",
                 "speed_bench_report_speedup.csv", "checkpoints.csv"):
        assert (out / name).exists()


def test_concurrency_picks_the_point_and_labels_stay_short_when_unique(tmp_path):
    rd = make_run(tmp_path / "a", categories=CATS, concurrencies=(1, 4))
    cps = checkpoints([load_run(rd.path)], concurrency=4)
    assert [(cp.label, cp.concurrency) for cp in cps] == [("eagle3", 4), ("eagle3.1", 4)]
    run = load_run(rd.path)
    want = next(c for c in run.categories if c.arm == "eagle3" and c.concurrency == 4 and c.category == "qa")
    assert cps[0].cells["qa"]["speedup"] == want.speedup_mean  # the client's: the point's headline clock


def test_same_run_twice_is_told_apart_and_a_missing_point_is_an_error(tmp_path):
    rd = make_run(tmp_path / "a", categories=CATS, concurrencies=(1,))
    run = load_run(rd.path)
    cps = checkpoints([run, run])
    assert len({cp.label for cp in cps}) == 4
    assert main(["export", str(rd.path), "--format", "category-matrix", "--concurrency", "64",
                 "-o", str(tmp_path / "m")]) == 2
