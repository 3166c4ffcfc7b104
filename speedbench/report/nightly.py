"""The nightly answer: for every figure the dashboard charts, did it change, is the change
real, since which night, and what else changed that night.

A *series* is one figure of one arm at one point, night by night, within one scenario:
speedup and per-user TPS at each concurrency (the baseline arm's TPS too), the share of
prompts whose outputs were identical to the reference's (``identical outputs``), AL pooled
over concurrency and per category, and per-position (joint) acceptance. A night whose
point cannot vouch for its speedup (a failed control, a confounded point, outputs that
differ: lossy) is a missing night of that speedup series. A series follows the
arm, not the draft it loads: a nightly slot that starts loading another draft is exactly
the change a reader must see, so the draft shows up as what changed, not as a new line.

Each series goes through analysis.changepoints over its last ``HISTORY_NIGHTS`` nights.
Its verdict is the latest real change that began within the recent nights (``since``),
or no change, or insufficient data. ``gate --history`` and ``speedbench changes`` read
the same verdicts, so a gate, the alert and the dashboard never disagree.
"""

from __future__ import annotations

import datetime as dt
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from speedbench.metrics.cells import al_of, num, pool_by_n_ok
from speedbench.metrics.headline import headline
from speedbench.metrics.stored_outputs import OutputsEntry
from speedbench.report import trust
from speedbench.analysis.changepoints import (
    IMPROVEMENT,
    MIN_BASELINE,
    REGRESSION,
    SUSPICIOUS,
    K_SIGMA,
    WINDOW,
    Change,
    find_changes,
    robust_sd,
)
from speedbench.report import facts, tables, whatchanged
from speedbench.results import Run

NO_CHANGE, INSUFFICIENT = "no change", "insufficient data"
IDENTICAL_OUTPUTS = "identical outputs"  # the series of a point's identical fraction
STATUSES = (REGRESSION, IMPROVEMENT, SUSPICIOUS, NO_CHANGE, INSUFFICIENT)
HISTORY_NIGHTS = 60  # nights a series is judged over (older ones are settled); plots.JUDGED_NIGHTS too
RECENT_NIGHTS = 7  # a change that began within these last nights is still news


@dataclass(frozen=True)
class Night:
    created: dt.datetime
    run: Run


@dataclass
class Series:
    scenario: str
    arm: str  # arm label (with its variant)
    metric: str  # "speedup", "per-user TPS", "identical outputs", "AL", "acceptance (joint)"
    point: str  # "c=4", "pooled", a category, "position 2"
    deps: tuple[str, ...]  # arms whose provenance the figure depends on
    nights: list[int] = field(default_factory=list)  # indices into the scenario's nights
    values: list[float] = field(default_factory=list)
    half_widths: list[float] = field(default_factory=list)
    floors: list[float] = field(default_factory=list)

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.scenario, self.arm, self.metric, self.point)


@dataclass
class OpenRegression:
    """A regression that was called and has not recovered (no later change up), whatever its age."""

    change: Change
    began: Night  # the first night at the lower level
    nights: int  # nights of the series from that night to the last
    acknowledged: str = ""  # the reason, when RESULTS/acknowledged.yaml acknowledges it


@dataclass
class Verdict:
    series: Series
    status: str
    checkpoint: str  # the arm and the draft it loaded on the latest night
    change: Change | None = None
    before: Night | None = None  # the last night at the old level
    after: Night | None = None  # the night the change began
    what_changed: list[str] = field(default_factory=list)
    floor_rel: float = math.nan
    open: OpenRegression | None = None  # the series' open regression, recent or not

    @property
    def began(self) -> dt.datetime | None:
        return self.after.created if self.after else None


def checkpoint(run: Run, arm: str) -> str:
    """What a trend line follows: the arm name plus the draft it loads."""
    draft = facts.draft_model(run, arm)
    return f"{arm} · {draft}" if draft and draft != arm else arm


def pooled_al(run: Run, arm: str, variant: str) -> float:
    """AL pooled over concurrency: the points' AL weighted by their completed requests."""
    return pool_by_n_ok((al_of(r)[0], r.n_ok) for r in run.rows if r.arm == arm and (r.variant or "") == variant)


def _floors(run: Run) -> dict[tuple[int, str], float]:
    """The A/A noise floor per point as a fraction: how far from 1 its interval reaches."""
    out = {}
    for e in run.noise_floor:
        lo, hi = num(e.ci_low), num(e.ci_high)
        if math.isfinite(lo) and math.isfinite(hi):
            out[(int(e.concurrency or 0), str(e.variant or ""))] = max(1 - lo, hi - 1, 0.0)
    return out


class _Collector:
    def __init__(self, scenario: str):
        self.scenario = scenario
        self.series: dict[tuple[str, str, str, str], Series] = {}

    def add(self, idx: int, arm: str, metric: str, point: str, deps: tuple[str, ...], value: float,
            hw: float = math.nan, floor: float = math.nan) -> None:
        if not math.isfinite(value):
            return
        s = self.series.setdefault((self.scenario, arm, metric, point), Series(self.scenario, arm, metric, point, deps))
        s.nights.append(idx)
        s.values.append(value)
        s.half_widths.append(hw)
        s.floors.append(floor)

    def run(self, idx: int, run: Run) -> None:
        floors, base = _floors(run), run.baseline or ""
        # a night that cannot vouch for a speedup (a failed control, or arms measured under
        # different loads) is a missing night for it, never a change (docs/metrics.md, "Trust")
        vouched = not trust.controls_failed(run)
        # sampled above temperature 0 (the block's not_checked): who matched whom is chance, no series
        sampled = bool(run.outputs_block is not None and run.outputs_block.not_checked)
        for r in run.rows:
            if r.status == "failed":
                continue
            arm, v, c = str(r.arm), str(r.variant or ""), int(r.concurrency or 0)
            name, fl = tables.label(arm, v), floors.get((c, v), math.nan)
            self.add(idx, name, "per-user TPS", f"c={c}", (arm,), num(r.per_user_tps_mean), floor=fl)
            outputs = run.outputs_of(arm, c, v)
            if not sampled:
                self._outputs(idx, name, arm, c, outputs)
            # a lossy point's speedup is not the same computation made faster: like a
            # confounded one, it is a missing night for the speedup series
            if tables.is_speculative(r) and vouched and not trust.confounded(run, arm, c, v) \
                    and not lossy(outputs):
                m, lo, hi = headline(r)
                self.add(idx, name, "speedup", f"c={c}", (arm, base), m, (hi - lo) / 2, fl)
        for arm in tables.spec_arms(run):
            for v in tables.variants(run):
                self.add(idx, tables.label(arm, v), "AL", "pooled", (arm,), pooled_al(run, arm, v))
        for (arm, v), by_cat in tables.category_al(run)[1].items():
            for cat, al in by_cat.items():
                self.add(idx, tables.label(arm, v), "AL", cat, (arm,), al)
        for (arm, v), (joint, _cond) in tables.position_curves(run).items():
            for i, p in enumerate(joint):
                self.add(idx, tables.label(arm, v), "acceptance (joint)", f"position {i + 1}", (arm,), num(p))


    def _outputs(self, idx: int, name: str, arm: str, c: int, entry: OutputsEntry) -> None:
        """The point's identical fraction (results/output_summary.py), a series like the
        speedup's; it depends on the arm and the arm its outputs are held against. No
        interval: the nights' own spread is its noise. Not checked: a missing night."""
        frac = entry.identical_fraction
        if not isinstance(frac, (int, float)):
            return
        ref = str((entry.reference.arm if entry.reference is not None else None) or arm)
        self.add(idx, name, IDENTICAL_OUTPUTS, f"c={c}", (arm,) if ref == arm else (arm, ref), float(frac))


def lossy(entry: OutputsEntry) -> bool:
    """The point's outputs differ from its reference's beyond numerics (metrics/outputs.py)."""
    return entry.lossy


def collect(scenario: str, nights: Sequence[Night]) -> list[Series]:
    """Every series of one scenario's nights (in time order)."""
    col = _Collector(scenario)
    for idx, night in enumerate(nights):
        col.run(idx, night.run)
    return list(col.series.values())


def _arm_of(series: Series) -> str:
    return series.deps[0] if series.deps else series.arm


def draft_changes(series: Series, nights: Sequence[Night]) -> list[int]:
    """Positions in the series where its arm's draft changed from the night before: another
    draft, config or weights under the same arm name (provenance; unknown is no change)."""
    arm, out = _arm_of(series), []
    ids = [whatchanged.draft_identity(nights[i].run, arm) for i in series.nights]
    for pos in range(1, len(ids)):
        if ids[pos] and ids[pos - 1] and ids[pos] != ids[pos - 1]:
            out.append(pos)
    return out


def changes(series: Series, nights: Sequence[Night] = ()) -> tuple[list[Change], list[int], float]:
    """Every real change of the series over its last ``HISTORY_NIGHTS`` nights, the night
    index of each of those nights, and the A/A floor (median over the nights) used. With
    the ``nights``, the nights where the arm's draft changed are known change points."""
    keep = slice(-HISTORY_NIGHTS, None)
    idx = series.nights[keep]
    floors = [f for f in series.floors[keep] if math.isfinite(f)]
    floor = statistics.median(floors) if floors else math.nan
    skipped = len(series.nights) - len(idx)
    known = [p - skipped for p in draft_changes(series, nights) if p >= skipped] if nights else []
    return find_changes(series.values[keep], series.half_widths[keep], floor_rel=floor, known=known,
                        short=bool(nights) and steady(series, nights)), idx, floor


def steady(series: Series, nights: Sequence[Night]) -> bool:
    """The figure is the same every night for the same draft: acceptance (not a timed
    figure) of a greedy workload (sampling above temperature 0 moves it by chance)."""
    if series.metric not in ("AL", "acceptance (joint)"):
        return False
    temps = {nights[i].run.stored_scenario.temperature for i in series.nights}
    return all(isinstance(t, (int, float)) and t == 0 for t in temps)


def _latest_real(found: Sequence[Change]) -> Change | None:
    real = [c for c in found if c.kind != SUSPICIOUS]
    return real[-1] if real else None


def _older_change(series: Series) -> tuple[Change | None, list[int]]:
    """The latest real change before the judged nights, for a series longer than them whose
    judged nights hold none: windows further back, each judged only when the level at its
    start differs from tonight's by more than ``K_SIGMA`` night-to-night sds (a flat series
    costs no PELT)."""
    y, step = series.values, HISTORY_NIGHTS // 2
    sd = robust_sd(y[-HISTORY_NIGHTS:])
    now = statistics.fmean(y[-WINDOW:])
    end, lo = len(y) - step, len(y)
    while lo > 0 and math.isfinite(sd):
        lo = max(end - HISTORY_NIGHTS, 0)
        if abs(statistics.fmean(y[lo:lo + WINDOW]) - now) > K_SIGMA * sd:
            latest = _latest_real(find_changes(y[lo:end], series.half_widths[lo:end]))
            if latest is not None:
                return latest, series.nights[lo:end]
        end -= step
    return None, []


def open_regression(series: Series, nights: Sequence[Night], found: Sequence[Change], idx: list[int]
                    ) -> OpenRegression | None:
    """The series' latest real change, when it is a regression (a later improvement closes it)."""
    latest = _latest_real(found)
    if latest is None and len(series.values) > HISTORY_NIGHTS:
        latest, idx = _older_change(series)
    if latest is None or latest.kind != REGRESSION:
        return None
    began = idx[latest.index]
    return OpenRegression(latest, nights[began], sum(i >= began for i in series.nights))


def judge(series: Series, nights: Sequence[Night], since: dt.datetime | None = None) -> Verdict:
    """The series' verdict: its latest real change that began on or after ``since``
    (default: within the last ``RECENT_NIGHTS`` of the scenario's nights)."""
    last = nights[series.nights[-1]]
    ck = checkpoint(last.run, _arm_of(series))
    if len(series.values) < MIN_BASELINE + 1 and not (steady(series, nights) and draft_changes(series, nights)):
        return Verdict(series, INSUFFICIENT, ck)
    found, idx, floor = changes(series, nights)
    cutoff = since if since is not None else nights[max(len(nights) - RECENT_NIGHTS, 0)].created
    recent = [c for c in found if nights[idx[c.index]].created >= cutoff]
    # a series no longer measured in the recent nights (an arm taken out) cannot recover: not open
    retired = series.nights[-1] < len(nights) - RECENT_NIGHTS
    still = None if retired else open_regression(series, nights, found, idx)
    if not recent:
        return Verdict(series, NO_CHANGE, ck, floor_rel=floor, open=still)
    ch = recent[-1]
    before, after = nights[idx[ch.index - 1]], nights[idx[ch.index]]
    lines = whatchanged.diff(before.run, after.run, series.deps)
    old = checkpoint(before.run, _arm_of(series))
    ck = ck if old == ck else f"{old} → {ck}"  # the slot loads another draft: say so
    return Verdict(series, ch.kind, ck, ch, before, after, lines, floor, still)


def verdicts(by_scenario: dict[str, list[Night]], since: dt.datetime | None = None) -> list[Verdict]:
    """Every series' verdict, scenario by scenario; within one, the changes first."""
    out: list[Verdict] = []
    for name, nights in by_scenario.items():
        vs = [judge(s, nights, since) for s in collect(name, nights)]
        vs.sort(key=lambda v: (STATUSES.index(v.status), -(v.began.timestamp() if v.began else 0)))
        out += vs
    return out


def counts(vs: Sequence[Verdict]) -> dict[str, int]:
    return {s: sum(v.status == s for v in vs) for s in STATUSES}


def _interval(mean: float, hw: float, digits: int) -> str:
    if math.isfinite(hw):
        return f"{mean:.{digits}f} [{mean - hw:.{digits}f}, {mean + hw:.{digits}f}]"
    return f"{mean:.{digits}f}"


def describe(v: Verdict) -> str:
    """One line, e.g. ``eagle3.1 speedup c=4: 1.71 [1.69, 1.73] → 1.59 [1.57, 1.61]
    (−7.0%, 6.1 night-to-night sd) from 2026-12-14``."""
    s = v.series
    head = f"{s.arm} {s.metric} {s.point}"
    ch = v.change
    if ch is None:
        return f"{head}: {v.status}"
    digits = 3 if abs(ch.before) < 10 else 1
    size = f"{100 * ch.relative:+.1f}%".replace("-", "−")
    sig = "≫ noise" if math.isinf(ch.sigmas) else f"{ch.sigmas:.1f} night-to-night sd"
    floor = f", A/A floor ±{100 * v.floor_rel:.1f}%" if math.isfinite(v.floor_rel) else ""
    when = f" from {v.began:%Y-%m-%d}" if v.began else ""
    nights = "1 night" if ch.nights == 1 else f"{ch.nights} nights"
    if ch.baseline_nights < MIN_BASELINE:  # a known draft change, judged on fewer nights before it
        nights += (f"; {ch.baseline_nights} night{'s' if ch.baseline_nights > 1 else ''} before it, "
                   f"{MIN_BASELINE} needed to call more than suspicious")
    return (f"{head}: {_interval(ch.before, ch.before_hw, digits)} → {_interval(ch.after, ch.after_hw, digits)} "
            f"({size}, {sig}{floor}; {nights}){when}")
