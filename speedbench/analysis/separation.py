"""Where two AL curves separate: EAGLE 3 against EAGLE 3.1 over depth (k) or context
(docs/drift.md); pure functions over summary rows, as in analysis/drift.py."""

from __future__ import annotations

import math
from dataclasses import dataclass

from speedbench.analysis.drift import may_speculate, k_of, series_of, usable, variant_of
from speedbench.metrics.cells import al_of, num
from speedbench.metrics.registry import SummaryRow

# Two AL curves "separate" where they differ by more than this fraction of arm A's AL
# (and by more than the rows' own measurement disagreement, see separation()).
SEPARATION_REL = 0.02


@dataclass(frozen=True)
class SepPoint:
    x: int  # k (depth) or context tokens (context)
    al_a: float
    al_b: float
    rel_diff: float  # (al_b - al_a) / al_a
    noise: float  # the AL difference that counts as noise at this point
    separated: bool


@dataclass(frozen=True)
class Separation:
    a: str
    b: str
    axis: str  # "depth" or "context"
    concurrency: int
    fixed: str  # what is held fixed: the variant (depth) or "k=<K>" (context)
    points: tuple[SepPoint, ...]
    first: int | None  # x of the first separated point, None when they never separate
    leader: str | None  # a or b: whichever has the higher AL at `first`


def _disagreement(r: SummaryRow) -> float:
    t, p = num(r.al_tokens), num(r.al_prometheus)
    return abs(t - p) if math.isfinite(t) and math.isfinite(p) else 0.0


def separation(rows: list[SummaryRow], arm_a: str, arm_b: str, axis: str = "depth", *,
               variant_tokens: dict[str, int] | None = None, concurrency: int | None = None,
               variant: str | None = None, k: int | None = None) -> Separation:
    """Where arm_b's AL curve leaves arm_a's, over k (depth) or context buckets.

    arm_a / arm_b are arm or series names. A point is *separated* when
    |AL_b - AL_a| > max(SEPARATION_REL * AL_a, d_a + d_b), d = a row's disagreement between
    its token-weighted and Prometheus AL: 2% is the floor, and a pair whose own two AL
    measurements disagree more than that must differ by more. Defaults: the lowest
    concurrency both have; depth uses the first variant; context uses the largest common k
    (drift grows with depth, so differences show there first).
    """
    if axis not in ("depth", "context"):
        raise ValueError("axis must be 'depth' or 'context'")
    rs = usable(rows)
    pick = {n: [r for r in rs if n in (r.arm, series_of(r)) and may_speculate(r)]
            for n in (arm_a, arm_b)}
    concs = {n: {int(num(r.concurrency)) for r in pick[n]} for n in pick}
    common_c = sorted(concs[arm_a] & concs[arm_b])
    conc = concurrency if concurrency is not None else (common_c[0] if common_c else 0)
    vt = variant_tokens or {}
    fixed_v = variant if variant is not None else next((variant_of(r) for r in pick[arm_a]), "")
    ks = sorted({k for r in pick[arm_a] if (k := k_of(r))} & {k for r in pick[arm_b] if (k := k_of(r))})
    fixed_k = k if k is not None else (ks[-1] if ks else None)

    def index(name: str) -> dict[int, SummaryRow]:  # x -> row at the fixed concurrency
        sel = [r for r in pick[name] if int(num(r.concurrency)) == conc]
        if axis == "depth":
            return {kr: r for r in sel if variant_of(r) == fixed_v and (kr := k_of(r)) is not None}
        return {vt[variant_of(r)]: r for r in sel if variant_of(r) in vt and k_of(r) == fixed_k}

    points = _compared(index(arm_a), index(arm_b))
    first = next((p for p in points if p.separated), None)
    return Separation(
        a=arm_a, b=arm_b, axis=axis, concurrency=conc, fixed=fixed_v if axis == "depth" else f"k={fixed_k}",
        points=tuple(points),
        first=first.x if first else None, leader=(arm_b if first.al_b > first.al_a else arm_a) if first else None,
    )


def _compared(ia: dict[int, SummaryRow], ib: dict[int, SummaryRow]) -> list[SepPoint]:
    """The two curves compared at each x both have, in order of x."""
    points = []
    for x in sorted(set(ia) & set(ib)):
        a, b = al_of(ia[x])[0], al_of(ib[x])[0]
        noise = max(SEPARATION_REL * a, _disagreement(ia[x]) + _disagreement(ib[x]))
        ok = math.isfinite(a) and math.isfinite(b) and a > 0
        points.append(SepPoint(x=x, al_a=a, al_b=b, rel_diff=(b - a) / a if ok else math.nan, noise=noise,
                               separated=ok and abs(b - a) > noise))
    return points


def eagle_pairs(rows: list[SummaryRow]) -> list[tuple[str, str]]:
    """(EAGLE 3 series, EAGLE 3.1 series) pairs to compare; same template first."""
    info: dict[str, tuple[str, str]] = {}
    for r in usable(rows):
        if may_speculate(r):
            info.setdefault(series_of(r), (str(r.eagle_version or ""), str(r.template or r.arm)))
    v3 = [s for s, (v, _) in info.items() if v == "3"]
    v31 = [s for s, (v, _) in info.items() if v == "3.1"]
    pairs = [(a, b) for a in v3 for b in v31]
    return sorted(pairs, key=lambda p: (info[p[0]][1] != info[p[1]][1], p))
