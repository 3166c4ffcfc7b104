"""The report's lines of prose about the run, beside its tables: what was measured and
where the figures come from (the run's facts, from facts.py), and its warnings, one line
per cause naming the points it hit (failed arms first)."""

from __future__ import annotations

import re
from typing import cast

from speedbench.analysis.al_trend import al_trends
from speedbench.metrics.cells import num
from speedbench.metrics.headline import ENGINE
from speedbench.metrics.registry import SummaryRow
from speedbench.records import PointKey
from speedbench.report.facts import engine_notes, engine_version, hardware, target_model
from speedbench.report.tables import fmt, label, spec_arms
from speedbench.results import Run

LOOP_LAG_WARN_MS = 10.0  # above this the client's own timestamps may be late


def measured_lines(run: Run) -> list[str]:
    """Plain-language statement of what the numbers are and where they come from."""
    w = run.stored_scenario.workload
    lines = [
        ("Per-user TPS: decode tokens/s of each request, (output tokens - 1) / (last token time - first token "
         "time), mean over requests. Speedup: mean speculative / mean baseline per-user TPS at the same "
         "concurrency over the prompts both arms completed, with a 95% paired bootstrap CI from the same "
         "requests. AL: tokens per drafting step, 1 + accepted/steps, in three forms: pooled over all steps "
         "from per-request counters, the mean over requests (SPEED-Bench's per-category figure), and pooled "
         "from Prometheus counter deltas (vLLM bench serve's figure)."),
    ]
    engine_led = [f"{label(str(r.arm), str(r.variant or ''))} c={r.concurrency} ({r.speedup_headline_reason})"
                  for r in run.rows if r.speedup_headline_clock == ENGINE]
    if engine_led:
        lines.append("Headline clock: where the client-side interval is unbounded or its loop lag widened it past "
                     "the engine's, the speedup shown first (and gated, starred, compared) is the engine's own "
                     "per-request timing, marked (engine); the client's figure stands beside it. Engine-led: "
                     + "; ".join(engine_led) + ".")
    facts = [f"target {target_model(run) or 'unknown model'}", f"hardware {hardware(run)}"]
    engine, version = engine_version(run)
    if version:
        facts.append(f"{engine} {version}")
    facts += [f"{label} {text}" for label, text in engine_notes(run)]
    if w:
        src = str(w.source if w.has("source") else "")
        if src == "speed_bench":
            src += f"/{w.config if w.has('config') else ''}"
        if w.categories:
            src += " " + ",".join(map(str, w.categories))
        facts.append(f"workload {src}, T={w.temperature}, max_tokens={w.max_tokens}")
    if run.baseline:
        facts.append(f"baseline arm {run.baseline}")
    lines.append("Measured: " + "; ".join(facts) + ".")
    if run.reference.source:
        lines.append(f"Reference figures: {run.reference.source}.")
    return lines


def _where(r: SummaryRow) -> str:
    # a summary row's concurrency, as stored (the label only prints it)
    return PointKey(str(r.arm), cast(int, r.concurrency), r.variant or "").label


def _grouped(items: list[tuple[str, str]]) -> list[str]:
    """(point, warning) -> one line per cause naming the points it hit. Warnings that
    differ only in their figures are one cause; the figures shown are the first point's."""
    groups: dict[str, list[tuple[str, str]]] = {}
    for where, text in items:
        groups.setdefault(re.sub(r"\d+(\.\d+)?", "#", text), []).append((where, text))
    out = []
    for hits in groups.values():
        first_where, first_text = hits[0]
        if len(hits) == 1:
            out.append(f"{first_where}: {first_text}")
            continue
        arms: dict[str, list[str]] = {}
        for where, _ in hits:
            arm, _, rest = where.partition(" ")
            arms.setdefault(arm, []).append(rest)
        points = "; ".join(f"{a} {', '.join(rs)}" for a, rs in arms.items())
        out.append(f"{first_text} [at {len(hits)} points: {points}; figures from {first_where}]")
    return out


def run_warnings(run: Run) -> list[str]:
    """One line per cause, naming the points it hit; failed arms first."""
    out: list[str] = []
    items: list[tuple[str, str]] = []
    failed: dict[str, list[str]] = {}
    for r in run.rows:
        where = _where(r)
        if r.status == "failed":
            failed.setdefault(str(r.arm), []).append(str(r.failure or "no message"))
            continue
        if num(r.n_errors) > 0:
            items.append((where, f"{int(num(r.n_errors))} of {int(num(r.n_requests))} requests failed "
                                 f"(error rate {num(r.error_rate):.1%})"))
        if r.al_agree is False:
            items.append((where, "AL sources disagree by more than 1%: pooled over steps (per-request counters) "
                                 f"{fmt(r.al_tokens, 3)}, Prometheus {fmt(r.al_prometheus, 3)} "
                                 f"(mean over requests {fmt(r.al_requests, 3)})"))
        for w in r.warnings or []:  # rows written before warnings existed have none
            items.append((where, w))
        lag = num(r.loop_lag_ms_max)
        if lag > LOOP_LAG_WARN_MS:
            items.append((where, f"client event-loop lag reached {lag:.0f} ms (> {LOOP_LAG_WARN_MS:.0f} ms); "
                                 "token timestamps may be late, so TPS may be understated"))
    out += _grouped(items)
    for arm, msgs in failed.items():
        out.insert(0, f"arm {arm} FAILED: {msgs[0]}")
    for (arm, c, v), p in run.points.items():
        if p.status == "interrupted":
            out.append(f"{PointKey(arm, c, v).label}: interrupted; resume the run to complete it")
    if not run.baseline and spec_arms(run):
        out.append("no baseline arm: speedups are not available")
    out += [t.line() for t in al_trends(run.records) if t.significant]  # AL within the run (analysis/al_trend.py)
    return out
