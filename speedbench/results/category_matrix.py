"""``speedbench export RUNS... --format category-matrix``: category x checkpoint, over
one or more runs, the way SPEED-Bench results are compared across models.

Two shapes are written:

- AIPerf's ``speed-bench-report`` layout, one CSV per figure: a ``Model`` column (our
  checkpoint label), one column per category in AIPerf's order, and ``Overall`` (the
  mean over categories), each to two decimals. AIPerf reads its AL from the server's
  counters (1 + accepted / drafts, pooled over steps), so ``speed_bench_report.csv``
  holds ``al_tokens``; the other files hold ``al_requests``, the acceptance rate and
  the speedup in the same layout.
- ``category_matrix.csv``, ours: one row per category, one column group per checkpoint
  (both ALs, acceptance rate, speedup with its 95% CI, requests), full precision.

AL is the summary's per-category rows, copied. The speedup is each row's headline: a
category follows its point's headline clock (``Run.categories``: the engine's figures of the
category where the point's headline is the engine's), and ``speedup_clock`` names it; a last
row, ``(all)`` (all categories), copies the point's own summary row (its stored headline
speedup and interval), so the matrix shows the same interval for the point as every report
and never one clock beside the other. The acceptance rate
per category has no summary column; it is accepted / drafted tokens over the category's
ok measured requests, the summary row's ``draft_acceptance_rate`` restricted to them.
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.table import Table

from speedbench.metrics.headline import ENGINE, headline, headline_clock
from speedbench.errors import UsageError
from speedbench.results.files import atomic_write, ensure_dir
from speedbench.results.run import Run

# AIPerf's qualitative SPEED-Bench categories in its column order; others follow sorted.
AIPERF_CATEGORIES = ("coding", "humanities", "math", "multilingual", "qa", "rag", "reasoning", "roleplay", "stem",
                     "summarization", "writing")
# A cell's figures: the category block's keys (summary.json's categories), the point's from its row.
# (file, figure) in AIPerf's layout; the first is AIPerf's own default file name.
AIPERF_FILES = (("speed_bench_report.csv", "al_tokens"), ("speed_bench_report_al_requests.csv", "al_requests"),
                ("speed_bench_report_accept_rate.csv", "acceptance_rate"),
                ("speed_bench_report_speedup.csv", "speedup"))
# the speedup figures are the headline's, named as summary.csv names them (results/formats.py)
FIGURES = ("al_tokens", "al_requests", "acceptance_rate", "speedup", "speedup_clock", "speedup_ci_low",
           "speedup_ci_high", "n_ok")
# figure -> the headline key it is read from (a category row's, or the point's summary row's)
HEADLINE = {"speedup": "speedup_headline_mean", "speedup_clock": "speedup_headline_clock",
            "speedup_ci_low": "speedup_headline_ci_low", "speedup_ci_high": "speedup_headline_ci_high"}
MATRIX_FILE = "category_matrix.csv"
# The whole point's row: its figures copied from the summary row, the speedup the row's
# stored headline figure and interval (the one every report and export shows for the point)
ALL = "(all)"


@dataclass
class Checkpoint:
    """One column group: a speculative arm of one run, at one concurrency and variant."""
    label: str
    run: Run
    arm: str
    concurrency: int
    variant: str
    draft: str
    cells: dict[str, dict[str, Any]] = field(default_factory=dict)  # category -> figure -> value


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def _category_rates(run: Run, arm: str, concurrency: int, variant: str) -> dict[str, float | None]:
    """accepted / draft tokens per category over the point's ok measured requests."""
    sums: dict[str, list[float]] = {}
    for r in run.records:
        if r.arm != arm or int(r.concurrency) != concurrency or (r.variant or "") != variant:
            continue
        if r.warmup or r.error is not None or r.spec is None or r.spec.num_draft_tokens <= 0:
            continue
        s = sums.setdefault(r.category or "", [0.0, 0.0])
        s[0] += r.spec.num_accepted_tokens
        s[1] += r.spec.num_draft_tokens
    return {cat: acc / drafted if drafted else None for cat, (acc, drafted) in sums.items()}


def _pick_concurrency(run: Run, wanted: int | None) -> int | None:
    levels = sorted({int(r.concurrency) for r in run.categories if r.concurrency is not None})
    if wanted is not None:
        return wanted if wanted in levels else None
    return levels[0] if levels else None


def _server_args_apart(runs: list[Run]) -> dict[int, str]:
    """Per run, the server args in which the runs differ (``dtype=bfloat16``): what most
    often tells two runs of one scenario apart. Empty when no arg differs."""
    args = [r.stored_scenario.server.args or {} for r in runs]
    keys = sorted({k for a in args for k in a if len({json.dumps(b.get(k), sort_keys=True) for b in args}) > 1})
    return {id(r): ",".join(f"{k}={a.get(k)}" for k in keys) for r, a in zip(runs, args)} if keys else {}


def _labels(points: list[tuple[Run, str]]) -> list[str]:
    """The arm name when it names one column group; else arm@scenario; else arm@ the
    server args the runs differ in; else arm@run id."""
    apart = _server_args_apart(list({id(r): r for r, _ in points}.values()))
    for make in (lambda run, arm: arm, lambda run, arm: f"{arm}@{run.scenario_name}",
                 lambda run, arm: f"{arm}@{apart.get(id(run), '')}", lambda run, arm: f"{arm}@{run.run_id}"):
        names = [make(run, arm) for run, arm in points]
        if len(set(names)) == len(names):
            return names
    return [f"{arm}@{run.run_id}#{i}" for i, (run, arm) in enumerate(points)]


def checkpoints(runs: list[Run], concurrency: int | None = None, variant: str = "") -> list[Checkpoint]:
    """Every speculative arm of every run with per-category rows at the chosen point
    (default: each run's lowest concurrency, where SPEED-Bench quotes its speedups)."""
    found: list[tuple[Run, str, int]] = []
    for run in runs:
        conc = _pick_concurrency(run, concurrency)
        if conc is None:
            continue
        spec_arms = {r.arm for r in run.rows if r.speculative}
        for arm in run.arms():
            if arm in spec_arms and any(c.arm == arm and c.concurrency == conc
                                        and (c.variant or "") == variant for c in run.categories):
                found.append((run, arm, conc))
    if not found:
        raise UsageError("no speculative arm with per-category rows"
                         + (f" at concurrency {concurrency}" if concurrency is not None else "") + " in these runs")
    out = []
    for label, (run, arm, conc) in zip(_labels([(r, a) for r, a, _ in found]), found):
        draft = run.provenance_of(arm).spec_model
        cp = Checkpoint(label, run, arm, conc, variant, draft)
        rates = _category_rates(run, arm, conc, variant)
        for c in run.categories:
            if (c.arm, c.concurrency, c.variant or "") == (arm, conc, variant):
                cat = str(c.category or "")
                cp.cells[cat] = {**{k: c.cell(HEADLINE.get(k, k)) for k in FIGURES if k != "acceptance_rate"},
                                 "acceptance_rate": rates.get(cat)}
        _point_cell(cp)
        out.append(cp)
    return out


def _point_cell(cp: Checkpoint) -> None:
    """The point itself under ALL, read from its summary row, never recomputed."""
    row = cp.run.row(cp.arm, cp.concurrency, cp.variant)
    if row is None:
        return
    m, lo, hi = headline(row)
    cp.cells[ALL] = {"al_tokens": row.al_tokens, "al_requests": row.al_requests,
                     "acceptance_rate": row.draft_acceptance_rate, "speedup": m, "speedup_clock": headline_clock(row),
                     "speedup_ci_low": lo, "speedup_ci_high": hi, "n_ok": row.n_ok}


def category_order(cps: list[Checkpoint]) -> list[str]:
    """The categories in AIPerf's order (the point's own ALL row is not one of them)."""
    seen = {cat for cp in cps for cat in cp.cells} - {ALL}
    return [c for c in AIPERF_CATEGORIES if c in seen] + sorted(seen - set(AIPERF_CATEGORIES))


def _two(v: float | None) -> str:
    return f"{v:.2f}" if v is not None else ""


def _write_csv(path: Path, rows: list[list[Any]]) -> Path:
    """Through the one writer: an unwritable folder is exit 3, never a half-written CSV."""
    buf = io.StringIO(newline="")
    csv.writer(buf).writerows(rows)
    atomic_write(path, buf.getvalue())
    return path


def write_aiperf(cps: list[Checkpoint], cats: list[str], figure: str, path: Path) -> Path:
    """AIPerf's layout: Model, one column per category, Overall (mean over the categories
    with a value), two decimals, empty where there is no value. Rows sorted by model."""
    rows: list[list[Any]] = [["Model", *cats, "Overall"]]
    for cp in sorted(cps, key=lambda c: c.label):
        values = [_num(cp.cells.get(cat, {}).get(figure)) for cat in cats]
        present = [v for v in values if v is not None]
        rows.append([cp.label, *(_two(v) for v in values), _two(sum(present) / len(present) if present else None)])
    return _write_csv(path, rows)


def matrix_header(cps: list[Checkpoint]) -> list[str]:
    return ["category"] + [f"{cp.label}:{fig}" for cp in cps for fig in FIGURES]


def write_matrix(cps: list[Checkpoint], cats: list[str], path: Path) -> Path:
    """Ours: a row per category, a column group per checkpoint, values as in the summaries."""
    rows: list[list[Any]] = [matrix_header(cps)]
    for cat in [*cats, ALL]:
        row: list[Any] = [cat]
        for cp in cps:
            cell = cp.cells.get(cat, {})
            row += [_matrix_value(cell.get(fig), fig) for fig in FIGURES]
        rows.append(row)
    return _write_csv(path, rows)


def _matrix_value(v: Any, fig: str) -> Any:
    if fig == "speedup_clock":
        return v or ""
    return "" if _num(v) is None else v


def write_checkpoints(cps: list[Checkpoint], path: Path) -> Path:
    """What each label stands for: run, arm, point, draft, the clock of its speedups (the
    AIPerf-layout speedup file has no room to name it), and the point's outputs verdict and
    identical fraction (a lossy point's speedups are not of the same computation)."""
    rows: list[list[Any]] = [["label", "run_id", "scenario", "run_path", "arm", "concurrency", "variant", "draft",
                              "speedup_clock", "outputs_verdict", "outputs_identical_fraction"]]
    for cp in cps:
        out = cp.run.outputs_of(cp.arm, cp.concurrency, cp.variant)
        frac = out.fraction
        rows.append([cp.label, cp.run.run_id, cp.run.scenario_name, str(cp.run.path or ""), cp.arm, cp.concurrency,
                     cp.variant, cp.draft, cp.cells.get(ALL, {}).get("speedup_clock") or "", out.verdict_text,
                     "" if frac is None else frac])
    return _write_csv(path, rows)


def export_matrix(runs: list[Run], out: Path, concurrency: int | None = None, variant: str = "") -> list[Path]:
    ensure_dir(out)
    cps = checkpoints(runs, concurrency, variant)
    cats = category_order(cps)
    written = [write_matrix(cps, cats, out / MATRIX_FILE), write_checkpoints(cps, out / "checkpoints.csv")]
    written += [write_aiperf(cps, cats, figure, out / name) for name, figure in AIPERF_FILES]
    return written


def rich_table(cps: list[Checkpoint], cats: list[str]):
    """The console view: a row per category, a column per checkpoint, each cell both ALs,
    the acceptance rate and the speedup with its CI."""
    t = Table(title="category matrix: AL per step / per request, acceptance rate, speedup [95% CI] (headline clock)",
              title_justify="left", header_style="bold")
    t.add_column("category")
    for cp in cps:
        t.add_column(f"{cp.label}\nc={cp.concurrency}", justify="right")
    for cat in [*cats, ALL]:
        t.add_row(cat, *(_cell_text(cp.cells.get(cat, {})) for cp in cps))
    return t


def _cell_text(cell: dict[str, Any]) -> str:
    def f(key: str, fmt: str) -> str:
        v = _num(cell.get(key))
        return format(v, fmt) if v is not None else "-"
    speed = f"x{f('speedup', '.2f')} [{f('speedup_ci_low', '.2f')}, {f('speedup_ci_high', '.2f')}]"
    if cell.get("speedup_clock") == ENGINE:  # the clock named wherever it is not the client's
        speed += " (engine)"
    return f"AL {f('al_tokens', '.2f')} / {f('al_requests', '.2f')}\nrate {f('acceptance_rate', '.2f')}\n{speed}"
