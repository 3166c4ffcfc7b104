"""A static dashboard over many run folders: the verdict block first (did anything change
last night, is it real, since when and why: report/nightly.py), then the latest runs,
trends per draft checkpoint with their change points marked, an AL matrix by category,
per-position acceptance, and links to every run's report.

The site is plain files (index.html + runs/<scenario>/<run>/report.html) that open from
file:// with no network: inline CSS and SVG, no JavaScript, and the same CSP and
escaping as report.html.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from speedbench.errors import SpeedbenchError
from speedbench.metrics.headline import headline
from speedbench.metrics.registry import SummaryRow
from speedbench.report import acknowledged, facts, html
from speedbench.report import checkpoints as across_nights
from speedbench.report import leaderboard
from speedbench.report import nightly
from speedbench.report import plots
from speedbench.report import tables
from speedbench.report import verdicts as verdict_block
from speedbench.report.nightly import checkpoint, pooled_al
from speedbench.results import Run, atomic_write
from speedbench.results.discover import discover_runs, require_runs
from speedbench.results.loader import load_run
from speedbench.results.files import ensure_dir
from speedbench.report.render import render_report

MAX_LATEST = 50  # rows in the "latest runs" table
DIFFER = plots.OUTPUTS_DIFFER  # a checkpoint's lossy nights on the speedup chart: "<checkpoint> (outputs differ)"


@dataclass
class SiteRun:
    run: Run
    rel: Path  # run folder relative to the results root
    created: dt.datetime
    report: str | None = None  # link relative to index.html


@dataclass
class Dashboard:
    index: Path
    runs: list[SiteRun] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _safe_rel(rel: Path) -> Path:
    """A path under site/runs built from folder names only, never from summary contents."""
    return Path(*[re.sub(r"[^A-Za-z0-9_.\-]", "_", p).lstrip(".") or "_" for p in rel.parts])


def scan(results_dir: Path, skip: Path | None = None, required: bool = False) -> tuple[list[SiteRun], list[str]]:
    """Every run under results_dir once (results/discover.py), in time order, and the
    folders skipped; ``required``: no run at all is a UsageError (exit 2)."""
    found = discover_runs(results_dir, load_run, skip)
    if required:
        require_runs(found, results_dir)
    runs = [SiteRun(run, run.dir.path.relative_to(results_dir) if run.dir else Path(run.run_id), run.started)
            for run in found.runs]
    runs.sort(key=lambda r: r.created)
    return runs, found.problems


def _up_to_date(dest: Path, src: Path, same_size: bool) -> bool:
    """The site's copy is newer than what it was made from (and, for a copy, the same size)."""
    try:
        d, s = dest.stat(), src.stat()
    except OSError:
        return False
    return d.st_mtime >= s.st_mtime and (not same_size or d.st_size == s.st_size)


def _copy_report(sr: SiteRun, site: Path, problems: list[str]) -> None:
    dest = site / "runs" / _safe_rel(sr.rel) / "report.html"
    assert sr.run.dir is not None  # scan() loads run folders
    src = sr.run.dir.report_html_path
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        if _up_to_date(dest, src if src.exists() else sr.run.dir.summary_path, same_size=src.exists()):
            pass  # an incremental build: this run's page is already in the site
        elif src.exists():
            shutil.copyfile(src, dest)
        else:  # never rendered (e.g. the run was interrupted): render the copy only
            atomic_write(dest, render_report(sr.run)[1])
        sr.report = quote(dest.relative_to(site).as_posix())
    except (OSError, SpeedbenchError, ValueError) as e:
        problems.append(f"no report for {sr.rel}: {e}")


@dataclass
class _Trends:
    """What a scenario's charts draw, gathered run by run (in time order). Each chart:
    panel (a concurrency, an int: labelled only when drawn) -> series (checkpoint) ->
    [(time, value, ...)]."""

    speed: dict[int, dict[str, list]] = field(default_factory=dict)
    al: dict[str, dict[str, list]] = field(default_factory=lambda: {"pooled over concurrency": {}})
    tps: dict[int, dict[str, list]] = field(default_factory=dict)
    # what each run cost: GPU-hours (0 on CPU hosts) and server wall hours, summed over arms
    cost: dict[str, dict[str, list]] = field(
        default_factory=lambda: {"GPU-hours": {}, "server hours (any device)": {}})
    latest_curves: dict[str, tuple[list[float], list[float]]] = field(default_factory=dict)

    def add(self, sr: SiteRun) -> None:
        run = sr.run
        screening = run.screening
        for e in screening:  # predicted, not measured: a series of its own, named so
            ck = tables.label(checkpoint(run, str(e.arm)), str(e.variant or "")) + " (predicted)"
            for p in e.predicted:
                self.speed.setdefault(int(p.concurrency or 0), {}).setdefault(ck, []).append(
                    (sr.created, tables.num(p.speedup), tables.num(p.ci_low), tables.num(p.ci_high)))
        for r in run.rows:
            self._add_row(sr, r, measured=not screening)  # a screening run measured no speedup
        arms_cost = run.arm_costs
        if arms_cost:
            gpu_h = sum(float(a.gpu_hours or 0.0) for a in arms_cost.values())
            wall_h = sum(float(a.wall_s or 0.0) for a in arms_cost.values()) / 3600
            self.cost["GPU-hours"].setdefault("run", []).append((sr.created, gpu_h))
            self.cost["server hours (any device)"].setdefault("run", []).append((sr.created, wall_h))
        for arm in tables.spec_arms(run):
            for v in tables.variants(run):
                ck = tables.label(checkpoint(run, arm), v)
                self.al["pooled over concurrency"].setdefault(ck, []).append((sr.created, pooled_al(run, arm, v)))
        for (arm, v), curve in tables.position_curves(run).items():
            self.latest_curves[tables.label(checkpoint(run, arm), v)] = curve  # in time order: the last wins

    def _add_row(self, sr: SiteRun, r: SummaryRow, *, measured: bool) -> None:
        arm, v, c = str(r.arm), str(r.variant or ""), int(r.concurrency)
        ck = tables.label(checkpoint(sr.run, arm), v)
        self.tps.setdefault(c, {}).setdefault(ck, []).append((sr.created, tables.num(r.per_user_tps_mean)))
        if tables.is_speculative(r) and measured:
            # a lossy night is drawn apart, marked, and left out of the line's levels and change
            # points, as the verdicts leave it out of the speedup series (report/nightly.py)
            name = ck + DIFFER if nightly.lossy(sr.run.outputs_of(arm, c, v)) else ck
            self.speed.setdefault(c, {}).setdefault(name, []).append((sr.created, *headline(r)))
            pred = tables.num(r.speedup_predicted)
            if math.isfinite(pred):  # a calibrated full run: the model's figure beside the measured one
                self.speed[c].setdefault(ck + " (predicted)", []).append(
                    (sr.created, pred, tables.num(r.speedup_predicted_ci_low),
                     tables.num(r.speedup_predicted_ci_high)))


def _scenario_section(name: str, runs: list[SiteRun], idx: int, colors: dict[str, str]) -> str:
    t = _Trends()
    for sr in runs:
        t.add(sr)
    speed, al, tps, cost, latest_curves = t.speed, t.al, t.tps, t.cost, t.latest_curves

    def by_c(d: dict[int, dict[str, list]]) -> dict[str, dict[str, list]]:
        return {f"concurrency {c}": series for c, series in sorted(d.items())}

    charts = [
        ("Speedup in per-user TPS over time (each run's headline clock): bars are each run's 95% interval, "
         "shading each level's "
         "night-to-night noise band (mean ± 2 sd of its own nights), triangles the change points; crosses: "
         "nights whose outputs differ from the baseline's (lossy), left out of the line",
         plots.trend(by_c(speed), "speedup (×)", colors, bands=True)),
        ("Acceptance length over time (triangles: change points)",
         plots.trend(al, "AL pooled over steps (tokens/step)", colors, bands=True)),
        ("Per-user TPS (client clock) over time (triangles: change points)",
         plots.trend(by_c(tps), "tokens/s", colors, bands=True)),
        ("Per-position acceptance (latest run of each checkpoint)", plots.position_curves(latest_curves, colors)),
        ("What each run cost: GPU-hours and server hours, summed over its arms", plots.trend(cost, "hours")),
    ]
    cards = "".join(html.card(html.Safe(svg), cap) for cap, svg in charts)
    return (f'<h2 id="s{idx}">Scenario {html.esc(name)} <span class="muted">({len(runs)} runs)</span></h2>'
            f'<div class="grid">{cards}</div>')


def _heat(v: float, lo: float, hi: float) -> str:
    if not math.isfinite(v):
        return ""
    f = 0.5 if hi <= lo else (v - lo) / (hi - lo)
    # white -> blue; light text would be unreadable on the pale end, so stay dark
    return f"background:hsl(212,60%,{96 - 38 * f:.0f}%)"


def _al_matrix(by_scenario: dict[str, list[SiteRun]]) -> str:
    latest: dict[tuple[str, str], dict[str, float]] = {}
    cats: list[str] = []
    for scen, runs in by_scenario.items():
        for sr in runs:  # time order: later runs overwrite
            rcats, al = tables.category_al(sr.run)
            cats += [c for c in rcats if c not in cats]
            for (arm, v), vals in al.items():
                latest[(scen, tables.label(checkpoint(sr.run, arm), v))] = vals
    if not latest:
        return ""
    values = [x for vals in latest.values() for x in vals.values() if math.isfinite(x)]
    lo, hi = (min(values), max(values)) if values else (0.0, 0.0)
    rows = [[scen, ck] + [html.Cell(tables.fmt(vals.get(c), 3), style=_heat(tables.num(vals.get(c)), lo, hi))
                          for c in cats]
            for (scen, ck), vals in sorted(latest.items())]
    legend = f'<p class="muted">Latest run of each checkpoint; shading from {lo:.2f} (light) to {hi:.2f} (dark).</p>'
    return "<h2>Acceptance length: category × checkpoint</h2>" + html.card(
        html.Safe(html.table(["scenario", "checkpoint"] + cats, rows, left=2) + legend))


def screening_heads(run: Run) -> list[str]:
    """A screening run's headline: the speedup predicted at the lowest calibrated level, marked."""
    out = []
    for e in run.screening:
        first = next((p for p in e.predicted if math.isfinite(tables.num(p.speedup))), None)
        name = tables.label(str(e.arm), str(e.variant or ""))
        mark = " (promoted)" if e.promoted else ""
        out.append(f"{name} predicted {tables.num(first.speedup):.2f}× @c={first.concurrency}{mark}" if first
                   else f"{name} AL {tables.num(e.al_tokens):.2f}, no calibration{mark}")
    return out


_DIFFER_PILL = html.Safe('<span class="pill v-reg">outputs differ</span>')


def lossy_points(run: Run) -> list[str]:
    """The run's points whose outputs differ from their reference's (verdict lossy)."""
    return [tables.label(str(r.arm), str(r.variant or "")) + f" c={r.concurrency}" for r in run.rows
            if nightly.lossy(run.outputs_of(str(r.arm), int(r.concurrency), str(r.variant or "")))]


def _latest_table(runs: list[SiteRun]) -> str:
    rows = []
    for sr in sorted(runs, key=lambda r: r.created, reverse=True)[:MAX_LATEST]:
        run = sr.run
        heads = []
        for t in tables.speedup_tables(run):
            first = next((x for x in t.rows if math.isfinite(x.speedup)), None)
            if first:
                heads.append(f"{tables.label(t.arm, t.variant)} {first.speedup:.2f}× @c={first.concurrency} measured"
                             + (DIFFER if nightly.lossy(run.outputs_of(t.arm, first.concurrency, t.variant)) else ""))
        heads += screening_heads(run)
        failed = sorted({str(r.arm) for r in run.rows if r.status == "failed"})
        status = html.pill("failed") if failed else (_DIFFER_PILL if lossy_points(run) else html.pill("ok"))
        link = html.Safe(f'<a href="{html.esc(sr.report)}">{html.esc(run.run_id)}</a>') if sr.report else run.run_id
        rows.append([sr.created.strftime("%Y-%m-%d %H:%M"), run.scenario_name, link, facts.hardware(run),
                     "; ".join(heads) or "–", status, ", ".join(failed)])
    return "<h2>Latest runs</h2>" + html.card(html.table(
        ["created (UTC)", "scenario", "run (report)", "hardware", "headline speedup", "status", "failed arms"], rows,
        left=7))


def checkpoint_colors(runs: list[SiteRun]) -> dict[str, str]:
    """One colour per checkpoint on every chart of the page, in order of first appearance;
    its predicted series share it (drawn dashed)."""
    names: list[str] = []
    for sr in runs:
        for arm in sr.run.arms():
            for v in tables.variants(sr.run) or [""]:
                name = tables.label(checkpoint(sr.run, arm), v)
                if name not in names:
                    names.append(name)
    colors = {name: plots.color_for(i) for i, name in enumerate(names)}
    return colors | {name + " (predicted)": c for name, c in colors.items()} | {
        name + DIFFER: c for name, c in colors.items()}


def _verdicts(by_scenario: dict[str, list[SiteRun]], results: Path, problems: list[str],
              since: dt.datetime | None = None) -> list[nightly.Verdict]:
    """Every series' verdict, its open regression acknowledged where results/acknowledged.yaml says so."""
    nights = {name: [nightly.Night(sr.created, sr.run) for sr in rs] for name, rs in by_scenario.items()}
    vs = nightly.verdicts(nights, since)
    acks, bad = acknowledged.load(results)
    problems += bad
    acknowledged.apply(vs, acks)
    return vs


def results_verdicts(results_dir: str | Path, since: dt.datetime | None = None
                     ) -> tuple[list[nightly.Verdict], list[str]]:
    """The verdicts over every run folder under results_dir (``speedbench changes``)."""
    results = Path(results_dir).resolve()
    runs, problems = scan(results, required=True)
    by_scenario: dict[str, list[SiteRun]] = {}
    for sr in runs:
        by_scenario.setdefault(sr.run.scenario_name, []).append(sr)
    vs = _verdicts(by_scenario, results, problems, since)
    return vs, problems


def build_dashboard(results_dir: str | Path, site_dir: str | Path) -> Dashboard:
    results, site = Path(results_dir).resolve(), Path(site_dir).resolve()
    runs, problems = scan(results, skip=site, required=True)
    # the same per-round digests as `speedbench verify`: a damaged run is listed, not hidden
    problems += [f"{sr.rel}: records damaged: {p}" for sr in runs for p in sr.run.record_problems[:3]]
    ensure_dir(site)
    for sr in runs:
        _copy_report(sr, site, problems)
    by_scenario: dict[str, list[SiteRun]] = {}
    for sr in runs:
        by_scenario.setdefault(sr.run.scenario_name, []).append(sr)
    nav = " · ".join(f'<a href="#s{i}">{html.esc(n)}</a>' for i, n in enumerate(by_scenario))
    body = [f'<header class="top"><h1>speedbench dashboard</h1><div class="sub">{len(runs)} runs, '
            f"{len(by_scenario)} scenarios · generated {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC"
            + (f" · {nav}" if nav else "") + "</div></header>"]
    vs = _verdicts(by_scenario, results, problems) if runs else []
    if problems:
        body.append(html.card(html.Safe("<ul>" + "".join(f"<li>{html.esc(p)}</li>" for p in problems) + "</ul>"),
                           "Skipped runs and damaged records", "warn"))
    if runs:  # scan(required=True) refused none; kept so that an empty list cannot crash here
        links = {id(sr.run): sr.report for sr in runs}
        body.insert(1, verdict_block.block(vs, lambda run: links.get(id(run))))
        body.insert(2, "".join(leaderboard.leaderboard(name, rs[-1].run, rs[-1].report)
                               for name, rs in by_scenario.items()))
        body.insert(3, across_nights.block(across_nights.compare_all(
            {name: [sr.run for sr in rs] for name, rs in by_scenario.items()})))
        body.append(_latest_table(runs))
        body.append(_al_matrix(by_scenario))
        colors = checkpoint_colors(runs)
        body += [_scenario_section(name, rs, i, colors) for i, (name, rs) in enumerate(by_scenario.items())]
    index = site / "index.html"
    atomic_write(index, html.page("speedbench dashboard", "".join(body)))
    return Dashboard(index, runs, problems)
