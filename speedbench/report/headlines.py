"""The verdict that opens ``report`` and ``gate``: one headline line per arm.

"eagle3.1 (EAGLE 3.1): 1.43× [1.12, 1.83] at c=1, engine clock; 21 of 21 gates pass"; an
arm whose outputs differ from the baseline's at any load says so before its tally.
The figure is the point's stored headline (metrics/headline.py) at the arm's lowest
concurrency with a speedup, the point the dashboard's run list leads with too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from speedbench.report import outputs, tables, trust
from speedbench.results import Run


class _Result(Protocol):
    """What a headline reads of a gate result (report/gate.py's GateResult)."""

    arm: str | None
    variant: str | None
    status: str


def arm_headlines(run: Run, results: Sequence[_Result] | None = None,
                  speedups: Sequence[tables.SpeedupTable] | None = None) -> list[str]:
    """One line per speculative arm (and variant); with gate results, each line ends with
    that arm's gate tally, and arms gated without a speedup (the baseline) get a line too.
    ``speedups``: the run's speedup tables when the caller has them already."""
    lines: list[str] = []
    speedups = tables.speedup_tables(run) if speedups is None else speedups
    # a failed control leaves no figure of the run trustworthy: every headline says so first
    mark = "CONTROLS FAILED: " if trust.controls_failed(run) else ""
    for t in speedups:
        first = next((r for r in t.rows if tables.ok(r.speedup)), None)
        line = f"{mark}{t.title}: " + (f"{tables.fmt_speedup(first.speedup, first.ci_low, first.ci_high)} at "
                                       f"c={first.concurrency}, {first.clock} clock"
                                       + (", CONFOUNDED (conditions differed)" if first.confounded else "")
                                       if first else "no speedup measured")
        lossy = [str(r.concurrency) for r in t.rows if r.lossy]
        # outputs that differ from the target's make the speedup no speedup: the verdict line says so
        line += f"; {outputs.DIFFER.upper()} (lossy at c={', '.join(lossy)})" if lossy else ""
        if results is not None:
            line += "; " + _tally([r for r in results if r.arm == t.arm and r.variant in (None, t.variant)])
        lines.append(line)
    shown = {t.arm for t in speedups}
    for arm in dict.fromkeys(r.arm for r in results or () if r.arm and r.arm not in shown):
        lines.append(f"{arm}: " + _tally([r for r in results or () if r.arm == arm]))
    return lines


def _tally(results: Sequence[_Result]) -> str:
    n_pass, n_fail = sum(r.status == "pass" for r in results), sum(r.status == "fail" for r in results)
    n_skip = len(results) - n_pass - n_fail
    if not results:
        return "no gates"
    return (f"{n_pass} of {len(results)} gates pass" + (f", {n_fail} fail" if n_fail else "")
            + (f", {n_skip} skipped" if n_skip else ""))
