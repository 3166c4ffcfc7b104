"""One clock per figure, labelled everywhere: on a busy host (the client's interval
unusable at c=1 and c=4, so the engine's clock leads there) every view that shows a
point's speedup shows its headline figure, or names the clock of the figure it shows."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import math
import re

import pytest
from rich.console import Console
from tests.helpers.runfactory import make_run

from speedbench.analysis import checkpoints as stats
from speedbench.metrics.headline import ENGINE, HEADLINE_KEYS, headline, headline_clock, headline_of
from speedbench.report import breakdowns, checkpoints, tables
from speedbench.report.gate import evaluate_gates
from speedbench.report.leaderboard import leaderboard
from speedbench.report.markdown import render_markdown
from speedbench.report.model import build_report
from speedbench.report.terminal import print_report
from speedbench.results.loader import load_run
from speedbench.results.category_matrix import ALL, checkpoints as matrix_points, rich_table, write_matrix
from speedbench.results.exports import export_run
from speedbench.scenario import GateSpec

SKEW = 1.13  # the engine's TPS over the client's on the speculative arms: its speedup is 13% higher
CATS = ("coding", "math")


def busy_run(root, seed=1, day=1):
    """A run folder a busy host leaves: at c=1 and c=4 the client's interval is lag-ruined
    (the engine's clock leads), at c=16 it holds (the client's leads)."""
    rd = make_run(root, seed=seed, engine_skew=SKEW, categories=CATS,
                  created=dt.datetime(2026, 11, day, 12, tzinfo=dt.timezone.utc))
    summary = json.loads(rd.summary_path.read_text())
    for r in summary["rows"]:
        m = r.get("speedup_mean")
        if not r["speculative"] or m is None:
            continue
        e = m * SKEW  # the records' own engine-clock ratio (every engine TPS is the client's x SKEW)
        r.update(speedup_engine_mean=e, speedup_engine_ci_low=e * 0.95, speedup_engine_ci_high=e * 1.05)
        if r["concurrency"] < 16:
            r.update(speedup_ci_low=0.0, speedup_ci_high=3.45, speedup_lag_bound=0.9)
        r.update(headline_of(r))  # stored, as a run writes it
    rd.write_summary(summary)
    return rd


@pytest.fixture(scope="module")
def busy(tmp_path_factory):
    return load_run(busy_run(tmp_path_factory.mktemp("busy")).path)


def _figures(x: float) -> set[str]:
    return {f"{x:.2f}", f"{x:.3f}"}


def _clients(run) -> set[str]:
    """How the client's figures of the engine-led points (and their categories) print, less any
    string a headline figure also prints as (a coincidence at two decimals is not a leak)."""
    out, allowed = set(), set()
    for r in run.rows:
        allowed |= {s for x in headline(r) if math.isfinite(x) for s in _figures(x)}
        if r.speculative and r.speedup_headline_clock == ENGINE:
            out |= _figures(r.speedup_mean) | {"[0.00, 3.45]"}
    for c in run.categories:  # a category is engine-led where its point is
        allowed |= {s for k in HEADLINE_KEYS[2:] if math.isfinite(c.cell(k)) for s in _figures(c.cell(k))}
        if headline_clock(run.row(c.arm, c.concurrency)) == ENGINE:
            out |= _figures(c.speedup_mean)
    out -= allowed
    assert out, "the run has no client figure that differs from every headline"
    return out


def _unlabelled(text: str, clients: set[str]) -> list[str]:
    """Cells (table cells, lines) that show a client figure and do not name the client's clock."""
    bad = []
    for part in re.split(r"\n|\||│|<t[dh]\b|</t[dh]>|;", text):
        for fig in clients:
            if re.search(rf"(?<![\d.]){re.escape(fig)}(?![\d])", part) and "client" not in part:
                bad.append(part.strip())
    return bad


def test_the_fixture_is_a_busy_host(busy):
    led = {(r.arm, r.concurrency): r.speedup_headline_clock for r in busy.rows if r.speculative}
    assert led[("eagle3", 1)] == ENGINE and led[("eagle3", 16)] == "client"
    cat = next(c for c in busy.categories if c.arm == "eagle3" and c.concurrency == 1)
    # a category follows its point's clock: the engine's figure of the category's own requests
    assert cat.speedup_headline_clock == ENGINE
    assert cat.speedup_headline_mean == pytest.approx(cat.speedup_mean * SKEW, rel=1e-9)


def test_report_markdown_and_terminal(busy):
    report = build_report(busy)
    md = render_markdown(report)
    buf = io.StringIO()
    print_report(report, Console(file=buf, width=250, highlight=False, color_system=None))
    for text in (md, buf.getvalue()):
        assert _unlabelled(text, _clients(busy)) == []
        assert "per-user TPS (client clock)" in text or "(client clock) ┃" in text  # rich breaks the header


def test_report_tables_show_the_headline(busy):
    clients = _clients(busy)
    for rows in (breakdowns.detail_rows(busy), breakdowns.category_table(busy)):
        assert _unlabelled("\n".join(" | ".join(r) for r in rows), clients) == []
    assert all("per-user TPS" not in h or "client clock" in h
               for h in [*breakdowns.DETAIL_HEADERS, *breakdowns.CATEGORY_HEADERS, *breakdowns.PROMPT_HEADERS])
    cat = next(r for r in breakdowns.category_table(busy) if r[:3] == ["eagle3", "1", "coding"])
    want = next(c for c in busy.categories if (c.arm, c.concurrency, c.category) == ("eagle3", 1, "coding"))
    assert cat[5].startswith(f"{want.speedup_mean * SKEW:.2f}×") and cat[5].endswith("(engine)")


def test_category_matrix(busy, tmp_path):
    cps = matrix_points([busy])
    path = write_matrix(cps, list(CATS), tmp_path / "m.csv")
    with open(path, newline="") as f:
        header, *rows = list(csv.reader(f))
    for row in rows:
        cells = dict(zip(header, row))
        cat = row[0]
        for cp in cps:
            point = busy.row(cp.arm, cp.concurrency)
            want = headline(point)[0] if cat == ALL else SKEW * next(
                c.speedup_mean for c in busy.categories
                if (c.arm, c.concurrency, c.category) == (cp.arm, cp.concurrency, cat))
            got = float(cells.get(f"{cp.label}:speedup") or cells[f"{cp.label}:speedup_mean"])
            assert got == pytest.approx(want, rel=1e-9)
            assert cells[f"{cp.label}:speedup_clock"] == ENGINE  # c=1: engine-led
    buf = io.StringIO()
    Console(file=buf, width=250, color_system=None).print(rich_table(cps, list(CATS)))
    assert _unlabelled(buf.getvalue(), _clients(busy)) == []


def test_csv_export_leads_with_the_headline(busy, tmp_path):
    for path in [busy.dir.summary_csv_path, *export_run(busy, "csv", tmp_path, counters=lambda t: None)]:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
        cols = list(rows[0])
        speed = [c for c in cols if c.startswith("speedup")]
        assert speed[:2] == ["speedup", "speedup_clock"], path
        for row in rows:
            if row["speedup_clock"] != ENGINE:
                continue
            # the headline under the plain name; the client's figure only under a column naming its clock
            assert float(row["speedup"]) == pytest.approx(float(row["speedup_engine_mean"]))
            client = float(row["speedup_client_mean"])
            assert all("client" in c for c in speed if row[c] and _float(row[c]) == client), path


def _float(s: str) -> float:
    try:
        return float(s)
    except ValueError:
        return math.nan


def test_compare_checkpoints_and_dashboard(tmp_path):
    runs = [load_run(busy_run(tmp_path / f"n{i}", seed=i, day=i + 1).path) for i in range(3)]
    comps = checkpoints.compare_all({"cpu_tiny": runs})
    ck = next(r for r in comps[0].checkpoints if r.name.startswith("eagle3 ·"))
    pooled = ck.pooled[("speedup", "c=1")]
    assert pooled.value == pytest.approx(stats.pool([headline(r.row("eagle3", 1))[0] for r in runs]).value)
    text = "\n".join(checkpoints.text_lines(comps))
    assert any("speedup (engine clock) c=1" in x for x in text.splitlines())
    assert next(p for p in checkpoints.as_json(comps)[0]["checkpoints"][0]["pooled"]
                if p["point"] == "c=1")["clocks"] == ["engine"]
    assert "engine clock" in checkpoints.block(comps)
    assert _unlabelled(leaderboard("cpu_tiny", runs[-1], None), _clients(runs[-1])) == []


def test_gates_name_the_clock(busy):
    results = evaluate_gates(busy, [GateSpec(metric="speedup", arm="eagle3", concurrency=1, min=0.5),
                                    GateSpec(metric="per_user_tps", arm="eagle3", concurrency=1, min=1.0)])
    assert "(engine clock)" in results[0].message and "(client clock)" in results[1].message
    assert results[0].value == headline(busy.row("eagle3", 1))[0]


def test_speedup_tables_and_compare_keep_the_labels(busy):
    t = next(t for t in tables.speedup_tables(busy) if t.arm == "eagle3")
    assert all(h.endswith("(client clock)") for h in tables.speedup_headers(t, busy.baseline)[0][1:3])
