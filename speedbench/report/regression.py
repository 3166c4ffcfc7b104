"""Relative gates (``max_regression``): a figure against the same point of a baseline run,
failed only by a drop beyond noise (the current 95% CI, and with earlier nights their
spread); and what a gate reads of a summary row: its metric's value, on which clock.
report/gate.py runs the gates; docs/gates.md explains the rules.
"""

from __future__ import annotations

import math

from speedbench.metrics.cells import num
from speedbench.metrics.gates import GATE_METRICS
from speedbench.metrics.headline import CLIENT, ENGINE, clock_figure, headline_clock
from speedbench.metrics.registry import SummaryRow
from speedbench.report import noise, significance
from speedbench.results import Run
from speedbench.scenario import GateSpec


def metric_value(row: SummaryRow | None, metric: str) -> float:
    """A gate metric's value in a summary row (metrics.gates.GATES says which column)."""
    if not row:
        return math.nan
    # the gate names its column as data (metrics/gates.py, declared keys), so read through cell
    gm = GATE_METRICS[metric]
    value = num(row.cell(gm.column))
    if not math.isfinite(value) and gm.fallback:
        value = num(row.cell(gm.fallback))
    return value


# the gate metrics that read one clock's speedup; ``speedup`` reads the row's headline clock
SPEEDUP_CLOCKS = {"speedup_client": CLIENT, "speedup_engine": ENGINE}


def gate_clock(row: SummaryRow, metric: str) -> str | None:
    """The clock a speedup gate reads on this row (None for the other metrics)."""
    if metric == "speedup":
        return headline_clock(row) or CLIENT
    return SPEEDUP_CLOCKS.get(metric)


def ident(row: SummaryRow) -> tuple[str, int, str]:
    """(arm, concurrency, variant) of a row, as gate results and baseline look-ups name it."""
    return str(row.arm), int(row.concurrency), str(row.variant or "")


def clock_tag(row: SummaryRow, metric: str) -> str:
    """The clock a gate's figure was read on, where it is not said already: the ``speedup``
    gate's on a point whose headline is the engine's, and the client's per-user TPS."""
    if metric == "speedup" and gate_clock(row, metric) == ENGINE:
        return " (engine clock)"
    return " (client clock)" if metric == "per_user_tps" else ""


def unit(row: SummaryRow, metric: str) -> str:
    """The value's unit in a gate's message, its clock named (:func:`clock_tag`)."""
    return GATE_METRICS[metric].suffix + (clock_tag(row, metric) if metric == "speedup" else "")


def _current_ci_high(run: Run, row: SummaryRow, metric: str) -> tuple[float, str]:
    """Upper end of the current value's 95% CI and where it came from. A speedup reads the
    stored interval of the clock the gate reads: never the other clock's, whose width
    (a busy host's lag-widened client interval) says nothing about this one's drop."""
    arm, c, v = ident(row)
    clock = gate_clock(row, metric)
    if clock is not None:
        _, _, high = clock_figure(row, clock)
        if math.isfinite(high):
            n = noise.rounds(row)
            return high, (f"{clock}-clock summary CI over {n} rounds of server starts" if n >= 2
                          else f"{clock}-clock summary CI, one server per arm")
        if clock == ENGINE:  # no per-request fallback: the records' bootstrap is the client's clock
            return metric_value(row, metric), "point estimate (no engine-clock interval)"
    iv = significance.NAN_INTERVAL
    if run.records:
        if clock is not None:
            iv = significance.speedup_ci(run, arm, c, v)
        elif metric == "acceptance_length":
            iv = significance.al_ci(run, arm, c, v)
        elif metric == "per_user_tps":
            iv = significance.mean_tps_ci(run, arm, c, v)
    if math.isfinite(iv.high):
        return iv.high, iv.test
    return metric_value(row, metric), "point estimate (no per-request data)"


def _baseline_value(row: SummaryRow, brow: SummaryRow | None, metric: str) -> float:
    """The baseline run's figure for a relative gate, on the same clock as the current
    row's (a busy night's engine-clock headline is not compared with a client figure)."""
    if not brow or brow.status == "failed":
        return math.nan
    clock = gate_clock(row, metric)
    if clock is not None:
        same = clock_figure(brow, clock)[0]
        return same if math.isfinite(same) else metric_value(brow, metric)
    return metric_value(brow, metric)


def relative(run: Run, row: SummaryRow, g: GateSpec, value: float, baseline: Run | None,
             history: list[Run] | None = None) -> tuple[str, str]:
    """A relative gate (``max_regression``) on one row: ("pass" | "fail" | "skip", why)."""
    if baseline is None:
        return "skip", "relative gate skipped: no --baseline-run given"
    brow = baseline.row(*ident(row))
    bval = _baseline_value(row, brow, g.metric)
    if not math.isfinite(bval):
        return "skip", f"relative gate skipped: no usable {g.metric} for this point in baseline run {baseline.run_id}"
    r = g.max_regression or 0.0
    if not GATE_METRICS[g.metric].higher_is_better:
        return _error_rate_rise(row, value, bval, r)
    return _drop(run, row, g.metric, (value, bval, r), history)


def _error_rate_rise(row: SummaryRow, value: float, bval: float, r: float) -> tuple[str, str]:
    # error_rate, the one lower-is-better gate metric: r is absolute, and the Wilson
    # lower bound of the current rate must clear the limit too.
    threshold = bval + r
    n, k = int(num(row.n_requests) or 0), int(num(row.n_errors) or 0)
    low, _ = significance.wilson(k, n)
    if value > threshold and low > threshold:
        return "fail", (f"error rate rose from {bval:.4f} to {value:.4f} (> {threshold:.4f} = baseline + {r:g}); "
                        f"Wilson 95% lower bound {low:.4f} is above it too")
    return "pass", f"error rate {value:.4f} vs baseline {bval:.4f}; limit {threshold:.4f} (Wilson low {low:.4f})"


def _drop(run: Run, row: SummaryRow, metric: str, figures: tuple[float, float, float],
          history: list[Run] | None) -> tuple[str, str]:
    """A higher-is-better figure against baseline × (1 − r) (``figures``: value, baseline,
    r): a regression only when the upper end of its 95% CI is below the limit too and, with
    enough earlier nights, the night-to-night detector agrees."""
    value, bval, r = figures
    u = unit(row, metric)
    threshold = bval * (1 - r)
    change = value / bval - 1 if bval else math.nan
    if value >= threshold:
        return "pass", f"{value:.3f}{u} vs baseline {bval:.3f}{u} ({change:+.1%}); limit {threshold:.3f}{u}"
    high, source = _current_ci_high(run, row, metric)
    if not high < threshold:  # a NaN end too: an interval not known shows no drop
        return "pass", (f"dropped {change:+.1%} to {value:.3f}{u} (baseline {bval:.3f}{u}) but within noise: 95% CI "
                        f"upper end {high:.3f} ({source}) reaches the limit {threshold:.3f}")
    # Beyond one run's interval; is it beyond the night-to-night spread too?
    within, spread = _night_to_night(run, row, metric, value, history)
    if within:
        return "pass", f"dropped {change:+.1%} to {value:.3f}{u} (baseline {bval:.3f}{u}) but within the " + within
    return "fail", (f"regression: {value:.3f}{u} vs baseline {bval:.3f}{u} ({change:+.1%}, more than "
                    f"{r:.0%}); the 95% CI upper end {high:.3f} ({source}) is below the limit {threshold:.3f}"
                    + spread)


def _night_to_night(run: Run, row: SummaryRow, metric: str, value: float,
                    history: list[Run] | None) -> tuple[str, str]:
    """Tonight's figure against the earlier nights of the same scenario and point (at least
    noise.MIN_NIGHTS of them): (why the drop is within their spread, else ""), (what the
    dashboard's detector says of the drop, else "")."""
    past = noise.history_values(history or [], run.scenario_name, *ident(row), GATE_METRICS[metric].column,
                                exclude=[run.run_id], before=run.created_utc)
    if len(past) < noise.MIN_NIGHTS:
        return "", ""
    called = noise.tonight(past, value)
    if called is None or called.delta >= 0:
        return (f"night-to-night noise: the dashboard's detector puts no lower level on this night "
                f"over {len(past)} earlier runs (night-to-night sd {noise.night_sd(past):.3f})"), ""
    return "", (f"; the dashboard's detector calls it too: {called.before:.3f} → {called.after:.3f}, "
                f"{called.sigmas:.1f}x the night-to-night sd {called.noise_sd:.3f} ({len(past)} runs)")
