"""The lines that open every report, before any speedup: what the intervals cover, the
run's noise floor (the A/A check), where the baseline came from and where sequential
stopping stopped. Each A/A point shows its row's stored interval, the one the tables show.
"""

from __future__ import annotations

import math

from speedbench.metrics.cells import num
from speedbench.metrics.headline import ENGINE, headline, headline_clock
from speedbench.metrics.stored import NoiseFloorEntry
from speedbench.report.tables import fmt, fmt_speedup, ok
from speedbench.report.trust import trust_lines
from speedbench.results import Run
from speedbench.scenario.model import AA_SUFFIX


def _floor_cell(run: Run, f: NoiseFloorEntry) -> str:
    """One A/A point in the report's header: the A/A row's stored headline interval, the
    same one the tables show (the simultaneous interval only decides the verdict); the
    floor entry's own figures for a run whose rows lack the A/A arm."""
    c, v = f.concurrency, str(f.variant or "")
    where = f"c={c}" + (f" [{v}]" if v else "")
    row = run.row(f"{run.baseline}{AA_SUFFIX}", int(num(c)), v) if run.baseline and ok(c) else None
    if row is not None and ok(headline(row)[0]):
        clock = headline_clock(row)
        return f"{where} {fmt_speedup(*headline(row))}" + (" (engine)" if clock == ENGINE else "")
    return f"{where} {fmt_speedup(f.speedup, f.ci_low, f.ci_high)}"


def noise_lines(run: Run) -> list[str]:
    """What the intervals cover, and the run's noise floor (the A/A check), for the top
    of every report: a reader must know this before reading any speedup."""
    rounds = max((len(r.speedup_by_repeat or []) for r in run.rows), default=0)
    out = trust_lines(run)
    if rounds >= 2:
        sds = [num(r.speedup_between_sd) for r in run.rows if ok(r.speedup_between_sd)]
        out.append(f"Intervals cover {rounds} rounds of fresh server starts (two-level bootstrap over servers and "
                   f"prompts, the spread between rounds pooled over each arm's concurrencies); the speedup moved "
                   f"between rounds by a standard deviation of up to {max(sds, default=math.nan):.3f}x.")
    elif any(ok(r.speedup_ci_low) for r in run.rows):
        out.append("One server per arm: intervals cover prompt-to-prompt noise only, not the run-to-run noise of "
                   "server starts. Set repeats: 3 and aa_check: true to measure it.")
    floor = run.noise_floor
    if floor:
        cells = [_floor_cell(run, f) for f in floor]
        bad = [f for f in floor if f.contains_one is False]
        level = num(floor[0].level)
        at = (f"intervals simultaneous over its {len(floor)} point(s), each at {100 * level:.1f}%"
              if math.isfinite(level) else "95% intervals")
        out.append(f"Noise floor (A/A check: a second {run.baseline or 'baseline'} server, which should read 1.00x; "
                   f"each point's stored 95% interval, as in the tables; judged at {at}): " + "; ".join(cells) + "."
                   + (f" {len(bad)} point(s) exclude 1.00x at that level: the two servers differed by more than "
                      "this run's intervals allow. A correct run fails this check about one time in twenty; if it "
                      "fails again, the intervals of this machine are too narrow." if bad else ""))
    out += _baseline_and_stopping_lines(run)
    return out


def _baseline_and_stopping_lines(run: Run) -> list[str]:
    """Where the baseline came from (a reused one: which run, how old, its canary) and
    where sequential stopping stopped each point."""
    out = []
    src = run.baseline_source
    if src.reused:
        canary = ", ".join(f"c={c.concurrency} {fmt(c.ratio, 3)}x "
                           f"(±{fmt(100 * num(c.tolerance), 1)}%)" for c in src.canary)
        out.append(f"Baseline reused from run {src.run_id}, measured {src.measured_utc} "
                   f"({fmt(src.age_days, 1)} days before this run); canary against it: {canary}.")
    elif src.reason:
        out.append(f"Baseline measured in this run: {src.reason}.")
    stops = [s for s in run.stopping if s.reason]
    if stops:
        cells = [f"{s.arm} c={s.concurrency}{' [' + s.variant + ']' if s.variant else ''}: "
                 f"{s.prompts} prompts ({str(s.reason).replace('_', ' ')})" for s in stops]
        out.append("Sequential stopping (intervals of stopped points at the look level "
                   f"{fmt(stops[0].level, 4)}): " + "; ".join(cells) + ".")
    return out
