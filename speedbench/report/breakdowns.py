"""Tables that break a run down: every point, latency distributions per point, per
category, AL per category, per position, per prompt (slowest first), per request rate and
screening. Plain rows of strings; model.py collects them into the report model, which
markdown.py, html.py and terminal.py lay out."""

from __future__ import annotations

import math
from typing import Any

from speedbench.metrics.cells import num
from speedbench.metrics.stored import PromptRow
from speedbench.metrics.registry import (BY_KEY, LATENCY_LABELS, LATENCY_METRICS, SummaryRow,
                                         percentile_tag)
from speedbench.metrics.registry import label as metric_label
from speedbench.records import PointKey, rate_label
from speedbench.report import outputs
from speedbench.report.tables import TPS_CLIENT, count, fmt, fmt_speedup, headline_cell, label, ok, spec_arms
from speedbench.results import Run


def _head(key: str, *, unit: bool = False) -> str:
    """A column header from the metric registry: its label, with the unit when asked."""
    u = BY_KEY[key].unit if unit and key in BY_KEY else ""
    return f"{metric_label(key)} {u}" if u else metric_label(key)


# "All points": one column per detail_rows() cell, each named by the registry.
DETAIL_HEADERS = [
    _head("arm"), _head("concurrency"), _head("status"), f"{_head('n_ok')}/{_head('n_requests')}",
    f"{TPS_CLIENT} mean (p10–p90)", _head("output_tps"), _head("ttft_ms_median", unit=True),
    _head("tpot_ms_median", unit=True), _head("speedup_headline_mean"),
    " / ".join(_head(k) for k in ("al_tokens", "al_requests", "al_prometheus")), _head("draft_acceptance_rate"),
]


def _speedup(run: Run, r: SummaryRow) -> str:
    """A point's headline speedup, marked where its outputs differ from the baseline's."""
    cell = headline_cell(r)
    return cell if cell == "–" else cell + outputs.mark(run, r)


def detail_rows(run: Run) -> list[list[str]]:
    out = []
    for r in run.rows:
        out.append([
            label(str(r.arm), str(r.variant or "")), str(r.concurrency),
            str(r.status or ""), f"{count(r.n_ok)}/{count(r.n_requests)}",
            (f"{fmt(r.per_user_tps_mean, 1)} ({fmt(r.per_user_tps_p10, 1)}–"
             f"{fmt(r.per_user_tps_p90, 1)})"),
            fmt(r.output_tps, 1), fmt(r.ttft_ms_median, 1), fmt(r.tpot_ms_median, 2),
            _speedup(run, r),
            " / ".join(fmt(x, 3) for x in (r.al_tokens, r.al_requests, r.al_prometheus)),
            fmt(r.draft_acceptance_rate, 3),
        ])
    return out


PLAIN_HEADERS = ["arm", "concurrency", TPS_CLIENT, "output TPS", "TTFT ms", "errors", "status"]


def plain_rows(run: Run) -> list[list[str]]:
    """Per-arm throughput only, for a run with no speculative arm (or no baseline)."""
    return [[label(str(r.arm), str(r.variant or "")), str(r.concurrency), fmt(r.per_user_tps_mean, 1),
             fmt(r.output_tps, 1), fmt(r.ttft_ms_median, 0), count(r.n_errors), str(r.status)] for r in run.rows]


def category_rows(cats: list[str], al: dict[tuple[str, str], dict[str, float]], ref: list[float],
                  ref_arm: str | None) -> tuple[list[str], list[list[str]]]:
    """AL per arm and category (tables.category_al's ``cats`` and ``al``), and a row of the
    reference figures ``ref`` (one per category) when any is known."""
    headers = ["arm"] + cats
    rows = [[label(*k)] + [fmt(v.get(c), 3) for c in cats] for k, v in al.items()]
    if any(math.isfinite(x) for x in ref):
        rows.append([f"reference ({ref_arm or 'published'})"] + [fmt(x, 3) for x in ref])
    return headers, rows


def position_rows(curves: dict[tuple[str, str], tuple[list[float], list[float]]]
                  ) -> tuple[list[str], list[list[str]]]:
    """Two rows (joint, conditional) per arm of tables.position_curves's ``curves``."""
    n = max((len(j) for j, _ in curves.values()), default=0)
    headers = ["arm", "kind"] + [f"pos {i + 1}" for i in range(n)]
    rows = []
    for k, (joint, cond) in curves.items():
        rows.append([label(*k), "joint"] + [fmt(x, 3) for x in joint])
        rows.append([label(*k), "conditional"] + [fmt(x, 3) for x in cond])
    return headers, rows


# Latency distributions (metrics.registry.LATENCY): one row per point and metric.


def latency_table(run: Run) -> tuple[list[str], list[list[str]]]:
    """Headers and rows: arm, c, metric, mean, std, then each percentile (ms).

    A run summarised before the latency block existed has none of these keys; it then
    yields no rows rather than a table of dashes."""
    pcts = run.percentiles
    tags = [percentile_tag(p) for p in pcts]
    headers = ["arm", "c", "metric (ms)", "mean", "std"] + [t.replace("_", ".") for t in tags]
    rows = []
    for r in run.rows:
        # the latency block is no declared field: it lives in the row's ``more``
        if r.status == "failed" or f"{LATENCY_METRICS[0]}_std" not in r.more:
            continue
        for m in LATENCY_METRICS:
            digits = 2 if m in ("tpot_ms", "itl_token_ms", "itl_chunk_ms") else 1
            # its keys are built from the family and the run's percentiles, so read through cell
            rows.append([label(str(r.arm), str(r.variant or "")), str(r.concurrency),
                         LATENCY_LABELS[m]] + [fmt(r.cell(f"{m}_{s}"), digits) for s in ("mean", "std", *tags)])
    return headers, rows


CATEGORY_HEADERS = ["arm", "c", "category", "ok", TPS_CLIENT, "speedup [95% CI] (the point's headline clock)",
                    "AL pooled over steps", "AL mean over requests"]


def category_table(run: Run) -> list[list[str]]:
    """One row per (arm, variant, concurrency, category) of summary.json's categories:
    per-user TPS, speedup against the baseline's requests of the same category, both ALs.
    Runs summarised before the per-category TPS existed yield no rows."""
    rows = []
    for c in run.categories:
        if not c.has("per_user_tps_mean"):
            continue
        rows.append([label(str(c.arm), str(c.variant or "")), str(c.concurrency),
                     str(c.category or ""), str(c.n_ok) if c.has("n_ok") else "–", fmt(c.per_user_tps_mean, 1),
                     headline_cell(c),
                     fmt(c.al_tokens, 3), fmt(c.al_requests, 3)])
    return rows


# a prompt's speedup is the ratio of the client's mean TPS (no interval, no clock choice): named so
PROMPT_HEADERS = ["question_id", "category", "ok", f"baseline {TPS_CLIENT}", TPS_CLIENT, "speedup (client clock)",
                  "AL mean over requests"]


def prompt_tables(run: Run) -> list[tuple[str, list[list[str]]]]:
    """Per speculative point (title, rows): one row per question_id, slowest speedup
    first, so a regression leads to the prompts that caused it. From the records."""
    # Here, not at the top: speedbench.metrics loads pandas, which no other table needs.
    from speedbench.metrics.breakdown import prompt_rows  # function-local: pandas, only these tables need it

    # a run's finish hands the request table its summary built (run.requests); a report builds it here
    records = run.requests if run.requests is not None else run.records
    rows = prompt_rows(records, run.baseline, [a for a in run.arms() if isinstance(a, str)])
    out: dict[tuple[str, int, str], list[PromptRow]] = {}
    spec = set(spec_arms(run))
    for r in rows:
        if r.arm in spec:
            out.setdefault((r.arm, r.concurrency, r.variant), []).append(r)
    tables = []
    for (arm, c, v), rs in out.items():
        rs.sort(key=lambda r: (num(r.speedup) if ok(r.speedup) else math.inf, str(r.prompt_id)))
        tables.append((PointKey(arm, c, v).label,
                       [[str(r.prompt_id), str(r.category), str(r.n_ok), fmt(r.baseline_per_user_tps, 1),
                         fmt(r.per_user_tps, 1), fmt(r.speedup, 2, "×"), fmt(r.al_requests, 2)]
                        for r in rs]))
    return tables


RATE_HEADERS = ["arm", "request rate (req/s)", "burstiness", "ok/total", TPS_CLIENT, "speedup [95% CI]",
                "goodput (req/s)", "within SLO"]


def _workload_variant(row: SummaryRow) -> str:
    """A rate point's workload variant (``code`` for the label ``code@2rps``)."""
    if row.workload is not None:
        return row.workload
    # A run folder from before the workload was stored: the label is built again from the
    # row's own rate and taken off, never parsed for a number.
    v = str(row.variant or "")
    tag = rate_label(num(row.request_rate))
    return v[: -len(tag)].rstrip("@") if v.endswith(tag) else v


def rate_table(run: Run) -> list[list[str]]:
    """Rate-mode points (rows with a ``request_rate``), arm by arm in rate order: the
    open-loop counterpart of the per-concurrency speedup tables, with goodput."""
    rows = [r for r in run.rows if ok(r.request_rate)]
    arms: list[Any] = run.arms()
    rows.sort(key=lambda r: (arms.index(r.arm) if r.arm in arms else 0, num(r.request_rate)))
    return [[label(str(r.arm), _workload_variant(r)), fmt(r.request_rate, 3).rstrip("0").rstrip("."),
             fmt(r.burstiness, 2), f"{count(r.n_ok)}/{count(r.n_requests)}",
             fmt(r.per_user_tps_mean, 1),
             _speedup(run, r), fmt(r.goodput, 3),
             fmt(num(r.goodput_share) * 100, 0, "%")] for r in rows]


# Screening runs (load: {mode: screen}): AL per arm and the speedups its calibration predicts.

def screening_table(run: Run) -> tuple[list[str], list[list[str]]]:
    """Headers and rows: arm, screened at, both ALs, predicted speedup per level, promoted."""
    entries = run.screening
    levels = sorted({int(p.concurrency or 0) for e in entries for p in e.predicted})
    headers = ["arm", "screened at c", "AL (pooled over steps)", "AL (mean over requests)",
               *[f"pred. speedup c={c} [95% CI]" for c in levels], "promoted"]
    rows = []
    for e in entries:
        pred = {int(p.concurrency or 0): p for p in e.predicted}
        cells = [fmt_speedup(num(pred[c].speedup), num(pred[c].ci_low), num(pred[c].ci_high))
                 if c in pred and ok(pred[c].speedup) else "– (no calibration)" for c in levels]
        rows.append([str(e.arm), str(e.concurrency), fmt(num(e.al_tokens), 3),
                     fmt(num(e.al_requests), 3), *cells, "yes" if e.promoted else "no"])
    return headers, rows
