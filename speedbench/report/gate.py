"""CI gates: absolute bounds and noise-aware regressions against a baseline run.

Rules (docs/gates.md explains them with examples):
- absolute: ``min`` / ``max`` on the point estimate of the metric;
- relative (``max_regression`` r): for a higher-is-better metric the gate fails only
  when the value dropped below ``baseline × (1 − r)`` AND the upper end of the current
  95% CI is below that threshold too (the drop is not noise). For ``error_rate`` (lower
  is better; r is absolute) it fails when the Wilson lower bound of the current error
  rate exceeds ``baseline rate + r``.
- a gate that names an arm, concurrency or variant the run lacks, or an arm that failed,
  fails: a gate never passes for want of data. A relative gate with no baseline run, or
  with no matching row in it, is reported as skipped.

The relative check, and what a gate reads of a row, are report/regression.py's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from speedbench.errors import UsageError, did_you_mean
from speedbench.metrics.gates import DEFAULT_GATES, GATE_METRICS, LOSSLESS, DefaultGate
from speedbench.metrics.registry import SummaryRow
from speedbench.report import lossless, tables, trust
from speedbench.report.regression import clock_tag, gate_clock, ident, metric_value, relative
from speedbench.results import Run
from speedbench.scenario import GateSpec
from speedbench.scenario.gatefile import load_gates_file, scenario_gates


@dataclass
class GateResult:
    index: int  # position of the gate in its list (stable testcase names); default gates follow
    gate: GateSpec | DefaultGate
    arm: str | None
    concurrency: int | None
    variant: str | None
    status: str  # "pass", "fail" or "skip"
    value: float
    message: str

    @property
    def bounds(self) -> str:
        g = self.gate
        if isinstance(g, DefaultGate):
            return g.rule
        parts = [f"min {g.min:g}" if g.min is not None else "", f"max {g.max:g}" if g.max is not None else "",
                 f"max_regression {g.max_regression:g}" if g.max_regression is not None else ""]
        return ", ".join(p for p in parts if p)

    @property
    def where(self) -> str:
        parts = [f"arm={self.arm}" if self.arm else "", f"c={self.concurrency}" if self.concurrency is not None else "",
                 f"variant={self.variant}" if self.variant else ""]
        return " ".join(p for p in parts if p) or "(no rows)"

    @property
    def name(self) -> str:
        return f"{self.gate.metric} ({self.bounds}) {self.where}"


def load_gates(run: Run, path: str | Path | None = None) -> list[GateSpec]:
    """Gates from a gates file (a list, or a mapping with ``gates:``), else the run's
    scenario; either is read as a scenario is (scenario/gatefile.py: file:line, "did you
    mean", the fix), and a gate's arm must be one the run knows."""
    if path is not None:
        gates, where = load_gates_file(path, gate_arms(run)), str(path)
    else:
        gates, where = _scenario_gates(run)
    if not gates and not default_gates(run):
        raise UsageError(f"no gates defined: add 'gates:' to the scenario or pass --gates FILE ({where})")
    return gates


def default_gates(run: Run) -> list[DefaultGate]:
    """The default gates that judge ``run``: those its scenario did not turn off
    (``gates_off``) and that it has the data for (lossless: outputs that were compared)."""
    off = set(run.stored_scenario.gates_off)
    return [g for name, g in DEFAULT_GATES.items() if name not in off and (g is not LOSSLESS or lossless.applies(run))]


def _default_results(run: Run, defaults: list[DefaultGate], start: int) -> list[GateResult]:
    out = []
    for i, g in enumerate(defaults, start):
        if g is LOSSLESS:
            out += [GateResult(i, g, c.arm, None, None, c.status, float(c.lossy), c.message)
                    for c in lossless.arm_checks(run)]
    return out


def gate_arms(run: Run) -> list[str]:
    """Every arm name a gate may give for ``run``: its rows' arms and its scenario's (one
    that failed before any row is still an arm: its gate fails, exit 1, rather than exit 2).
    Not a sweep's template: no row carries that name, so its gate could only fail."""
    names = [*run.arms(), *run.stored_scenario.arm_names]
    return list(dict.fromkeys(n for n in names if isinstance(n, str) and n))


def _scenario_gates(run: Run) -> tuple[list[GateSpec], str]:
    if run.dir is None:
        return [], "no run folder"
    scen = run.dir.scenario_path
    if not scen.exists():  # its gates are unknown, not absent: never "no gates defined"
        raise UsageError(f"{run.path}: {scen.name} is missing, so the run's own gates are unknown -- fix: pass "
                         "--gates FILE, or restore the file from a copy of the run folder")
    return scenario_gates(run.stored_scenario.gates or [], str(scen), scen.read_text(encoding="utf-8")), str(scen)


def _select(run: Run, g: GateSpec) -> tuple[list[SummaryRow], list[str]]:
    """(rows the gate applies to, problems that fail it outright)."""
    problems: list[str] = []
    spec_only = GATE_METRICS[g.metric].speculative_only
    if g.arm is not None:
        if g.arm not in run.arms():
            problems.append(f"arm {g.arm} has no results in this run{did_you_mean(g.arm, run.arms())} "
                            f"(arms: {', '.join(run.arms()) or 'none'})")
        rows = [r for r in run.rows if r.arm == g.arm]
    else:
        rows = [r for r in run.rows if tables.is_speculative(r)] if spec_only else list(run.rows)
        expected = [a.name for a in run.stored_scenario.arms if a.speculative_config or not spec_only]
        problems += [f"arm {a} has no results in this run" for a in expected if a not in run.arms()]
        if not rows and not problems:
            problems.append("no speculative arm in this run" if spec_only else "the run has no rows")
    if g.concurrency is not None:
        rows = [r for r in rows if r.concurrency == g.concurrency]
        if not rows and not problems:
            problems.append(f"no results at concurrency {g.concurrency}")
    if g.variant is not None:
        rows = [r for r in rows if (r.variant or "") == g.variant]
        if not rows and not problems:
            problems.append(f"no results for variant '{g.variant}'")
    return rows, problems


def _damaged(run: Run, gates: list[GateSpec | DefaultGate], which: str) -> list[GateResult]:
    """Records that no longer match their rounds' digests (``speedbench verify``) leave
    every figure of the run unchecked: each gate fails on them instead of passing."""
    problems = run.record_problems
    if not problems:
        return []
    missing = run.verification.missing if run.verification else []
    if missing:  # its own fix: `run --resume` does not bring back a scenario
        more = f"; {len(problems) - 1} more problems: `speedbench verify {run.path}`" if len(problems) > 1 else ""
        msg = f"the {which} {run.path} cannot be checked: {missing[0].describe()}{more}"
    else:
        msg = (f"the {which}'s records are damaged ({len(problems)} problems; first: {problems[0]}) -- "
               f"`speedbench verify {run.path}` lists them, `speedbench run --resume {run.path}` re-measures them")
    return _fail_every(gates, msg)


def _fail_every(gates: list[GateSpec | DefaultGate], msg: str) -> list[GateResult]:
    """One failed result per gate, for a fault of the whole run (damaged records, failed controls)."""
    return [GateResult(i, g, g.arm, g.concurrency, g.variant, "fail", math.nan, msg) for i, g in enumerate(gates)]


def _controls(run: Run, gates: list[GateSpec | DefaultGate]) -> list[GateResult]:
    """A control whose result is impossible (metrics/controls.py) leaves no figure of the
    run trustworthy: every gate fails on it, naming the control and why."""
    failed = trust.controls_failed(run)
    if not failed:
        return []
    return _fail_every(gates, "controls failed: " + "; ".join(failed))


def _confounded(run: Run, row: SummaryRow, metric: str) -> str | None:
    """Why a speedup gate reads this row as missing data: its arms ran under materially
    different conditions (metrics/conditions.py), so the ratio measures the host too."""
    if gate_clock(row, metric) is None:
        return None
    why = trust.confounded(run, *ident(row))
    return None if why is None else f"confounded, counted as missing data: {why}"


def evaluate_gates(run: Run, gates: list[GateSpec], baseline: Run | None = None,
                   history: list[Run] | None = None) -> list[GateResult]:
    """``gates`` and the run's default gates (:func:`default_gates`, after them).
    ``history``: earlier runs; with at least 3 of the same scenario, a relative gate
    also needs the drop to exceed 2 night-to-night standard deviations."""
    defaults = default_gates(run)
    every: list[GateSpec | DefaultGate] = [*gates, *defaults]
    results = _damaged(run, every, "run") + (_damaged(baseline, every, "baseline run") if baseline else [])
    results += _controls(run, every)
    for i, g in enumerate(gates):
        rows, problems = _select(run, g)
        for p in problems:
            results.append(GateResult(index=i, gate=g, arm=g.arm, concurrency=g.concurrency, variant=g.variant,
                                      status="fail", value=math.nan, message=p))
        results += [_row_result(run, i, g, row, baseline, history) for row in rows]
    return results + _default_results(run, defaults, len(gates))


def _row_result(run: Run, i: int, g: GateSpec, row: SummaryRow, baseline: Run | None,
                history: list[Run] | None) -> GateResult:
    """One gate on one summary row."""
    where = ident(row)
    value = metric_value(row, g.metric)
    if row.status == "failed":
        return GateResult(i, g, *where, "fail", value, f"arm failed: {row.failure or 'no message'}")
    if not math.isfinite(value):
        return GateResult(i, g, *where, "fail", value, f"{g.metric} is not available for this point")
    why = _confounded(run, row, g.metric)
    if why is not None:
        return GateResult(i, g, *where, "fail", math.nan, why)
    fails: list[str] = []
    notes: list[str] = []
    if g.min is not None:
        (fails if value < g.min else notes).append(
            f"{value:.4g} {'<' if value < g.min else '>='} min {g.min:g}{clock_tag(row, g.metric)}")
    if g.max is not None:
        (fails if value > g.max else notes).append(
            f"{value:.4g} {'>' if value > g.max else '<='} max {g.max:g}{clock_tag(row, g.metric)}")
    status = "fail" if fails else "pass"
    if g.max_regression is not None:
        rel_status, rel_msg = relative(run, row, g, value, baseline, history)
        (fails if rel_status == "fail" else notes).append(rel_msg)
        if rel_status == "fail":
            status = "fail"
        elif rel_status == "skip" and g.min is None and g.max is None:
            status = "skip"
    return GateResult(i, g, *where, status, value, "; ".join(fails or notes))


def exit_code(results: list[GateResult]) -> int:
    return 1 if any(r.status == "fail" for r in results) else 0


def nothing_checked(results: list[GateResult], baseline: Run | None) -> str | None:
    """Why no check was made, when every one was skipped (else None): `speedbench gate`
    must not pass a run it did not check. Only relative gates skip, so the reason is
    always the baseline run: none given, or none of its rows match."""
    if not results or any(r.status != "skip" for r in results):
        return None
    n = f"all {len(results)} checks were skipped"
    if baseline is None:
        return (f"nothing was checked: {n}, because every gate is relative (max_regression) and no --baseline-run "
                "was given -- fix: pass --baseline-run with an earlier run of this scenario, or add a min/max gate")
    return (f"nothing was checked: {n}, because baseline run {baseline.path} has no usable row for any gated point "
            "-- fix: pass a --baseline-run that measured these arms, concurrencies and variants")
