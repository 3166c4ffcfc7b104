"""AL within a run: does acceptance length drift while a server runs?

Users report AL that decays over hours inside one long-running server. Within one arm,
every prompt is sent at each concurrency level (and in each round), at different times of
the server's life, so a prompt's own difficulty can be taken out: each request's AL minus
the mean AL of the same prompt (and turn) over the arm. What is left is regressed on the
request's time since its round began (rounds are fresh servers), within each round. The
slope's interval is simultaneous over the arms checked (Bonferroni), and a trend is
reported only when that interval excludes zero and the fitted change over the arm's span
is at least ``MIN_CHANGE`` of its AL (vLLM's own nightly acceptance test holds 2%).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from speedbench.records import RequestRecord

FAMILY_LEVEL = 0.95
MIN_CHANGE = 0.02
MIN_REQUESTS = 12


@dataclass(frozen=True)
class AlTrend:
    arm: str
    variant: str
    n: int  # requests whose prompt was seen at least twice
    span_min: float  # minutes from the first to the last request of a round (longest round)
    al: float  # the arm's mean AL over those requests
    slope: float  # relative change of AL per minute
    low: float  # simultaneous interval of the slope
    high: float
    early: float = float("nan")  # mean AL of the first third of the requests in time (each round)
    late: float = float("nan")  # ... and of the last third

    @property
    def change(self) -> float:
        """The fitted relative change over the span."""
        return self.slope * self.span_min

    @property
    def significant(self) -> bool:
        return (self.low > 0 or self.high < 0) and abs(self.change) >= MIN_CHANGE

    def line(self) -> str:
        arm = self.arm + (f" [{self.variant}]" if self.variant else "")
        # the observed ends, not the fitted line's: a step (a draft that broke mid-run) makes
        # a straight line's change over the span overshoot, even past -100%
        moved = (f"from {self.early:.2f} in the first third of its requests to {self.late:.2f} in the last"
                 if math.isfinite(self.early) and math.isfinite(self.late) else f"{100 * self.change:+.1f}%")
        return (f"{arm}: AL drifted {moved}, over {self.span_min:.0f} min of its servers' life (slope "
                f"{100 * self.slope:+.2f}%/min [{100 * self.low:+.2f}, {100 * self.high:+.2f}], same prompts "
                f"compared); a long-running server may lose acceptance")


def _usable(records: Iterable[RequestRecord]) -> dict[tuple[str, str], list[RequestRecord]]:
    by_arm: dict[tuple[str, str], list[RequestRecord]] = {}
    for r in records:
        if r.ok and not r.warmup and r.spec is not None and r.spec.num_spec_steps > 0:
            by_arm.setdefault((r.arm, r.variant), []).append(r)
    return by_arm


def _fit(recs: list[RequestRecord]) -> tuple[int, float, float, float, float, float, float] | None:
    """(n, span in minutes, mean AL, slope per minute relative, its standard error, mean AL
    of the first and of the last third of each round's requests)."""
    al = np.array([1 + r.spec.num_accepted_tokens / r.spec.num_spec_steps for r in recs])  # type: ignore[union-attr]
    prompt = [(r.prompt_index, r.turn) for r in recs]
    seen: dict[tuple[int, int], list[int]] = {}
    for i, p in enumerate(prompt):
        seen.setdefault(p, []).append(i)
    keep = [i for idxs in seen.values() if len(idxs) >= 2 for i in idxs]
    if len(keep) < MIN_REQUESTS:
        return None
    y = al.copy()
    for idxs in seen.values():
        y[idxs] -= al[idxs].mean()  # the prompt's own difficulty out
    t = np.array([r.t_sent_ns for r in recs], dtype=float) / 60e9
    rounds = np.array([r.repeat for r in recs])
    x = np.zeros_like(t)
    span = 0.0
    early: list[float] = []
    late: list[float] = []
    for k in set(rounds[keep].tolist()):
        m = np.array([i for i in keep if rounds[i] == k])
        x[m] = t[m] - t[m].mean()
        y[m] = y[m] - y[m].mean()
        span = max(span, float(t[m].max() - t[m].min()))
        by_time = m[np.argsort(t[m], kind="stable")]
        third = max(len(by_time) // 3, 1)
        early += al[by_time[:third]].tolist()
        late += al[by_time[-third:]].tolist()
    x, y = x[keep], y[keep]
    sxx = float((x * x).sum())
    if sxx <= 0 or span <= 0:
        return None
    b = float((x * y).sum()) / sxx
    dof = max(len(keep) - len(set(rounds[keep].tolist())) - 1, 1)
    s2 = float(((y - b * x) ** 2).sum()) / dof
    level = float(al[keep].mean())
    return (len(keep), span, level, b / level, math.sqrt(s2 / sxx) / level, float(np.mean(early)),
            float(np.mean(late)))


def al_trends(records: Iterable[RequestRecord], family: float = FAMILY_LEVEL) -> list[AlTrend]:
    """One entry per speculative arm (and variant) that has enough repeated prompts."""
    fits = {k: f for k, recs in _usable(records).items() if (f := _fit(recs)) is not None}
    if not fits:
        return []
    z = NormalDist().inv_cdf(1 - (1 - family) / (2 * len(fits)))
    return [AlTrend(arm, v, n, span, al, slope, slope - z * se, slope + z * se, early, late)
            for (arm, v), (n, span, al, slope, se, early, late) in fits.items()]
