"""Speedup against acceptance length, one curve per concurrency (pure arithmetic).

Why a line through the origin: a speculative step verifies k drafts whatever is later
accepted, so its time ``t_spec(k, c)`` does not depend on AL, and it delivers AL tokens;
a baseline step delivers one token in ``t_base(c)``. Per-user TPS is then AL / t_spec
against 1 / t_base, and the speedup is ``AL * t_base / t_spec``: proportional to AL, with
a slope that belongs to the engine, the hardware, the draft architecture and k, not to one
checkpoint's weights. The affine model (``a + b * AL``) is there for engines whose step
cost does depend on how many drafts were accepted (KV rollback, sampling work on the
CPU); its intercept says how far the data are from the proportional model.

Points are weighted by their own intervals (inverse variance, sigma = CI half-width /
1.96). The slope's standard error is the weighted least-squares one, scaled up by the
reduced chi-square when the points scatter more than their intervals say (never down),
so a bad model shows as a wide interval rather than a confident wrong curve.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np

from speedbench.metrics.registry import SummaryRow
from speedbench.metrics.cells import num

Model = Literal["origin", "affine"]
Z95 = 1.959964
# A point whose interval is missing or zero still counts, with this relative sigma (1%):
# the fake's engine clock is exact, and a zero-width interval must not take all the weight.
_MIN_REL_SIGMA = 0.01


@dataclass(frozen=True)
class CurvePoint:
    al: float  # tokens per verify step (al_tokens)
    speedup: float
    ci_low: float = math.nan
    ci_high: float = math.nan
    source: str = ""  # the arm measured

    def sigma(self) -> float:
        half = (self.ci_high - self.ci_low) / 2
        floor = _MIN_REL_SIGMA * abs(self.speedup)
        return max(half / Z95, floor) if math.isfinite(half) else floor


@dataclass(frozen=True)
class Curve:
    concurrency: int
    model: str
    intercept: float  # 0 for "origin"
    slope: float
    cov: tuple[tuple[float, float], tuple[float, float]]  # of (intercept, slope)
    points: tuple[CurvePoint, ...] = field(default_factory=tuple)
    chi2_dof: float = math.nan  # reduced chi-square of the weighted fit (NaN: no residual dof)
    variant: str = ""  # the workload variant: context length changes the step cost, so each has its curve

    def predict(self, al: float) -> tuple[float, float, float]:
        """(speedup, 95% low, 95% high) of the curve at ``al``."""
        if not (isinstance(al, (int, float)) and math.isfinite(al)):
            return (math.nan, math.nan, math.nan)
        mean = self.intercept + self.slope * al
        var = self.cov[0][0] + 2 * al * self.cov[0][1] + al * al * self.cov[1][1]
        half = Z95 * math.sqrt(max(var, 0.0))
        return (mean, mean - half, mean + half)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["cov"] = [list(r) for r in self.cov]
        d["points"] = [asdict(p) for p in self.points]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Curve:
        cov = d["cov"]
        return cls(concurrency=int(d["concurrency"]), model=str(d["model"]), intercept=float(d["intercept"]),
                   slope=float(d["slope"]), cov=((float(cov[0][0]), float(cov[0][1])),
                                                 (float(cov[1][0]), float(cov[1][1]))),
                   points=tuple(CurvePoint(num(p.get("al")), num(p.get("speedup")), num(p.get("ci_low")),
                                           num(p.get("ci_high")), str(p.get("source") or ""))
                                for p in d.get("points", [])),
                   chi2_dof=num(d.get("chi2_dof")), variant=str(d.get("variant") or ""))


def fit_curve(points: Sequence[CurvePoint], concurrency: int, model: Model = "origin", variant: str = "") -> Curve:
    """Weighted least squares of speedup on AL; ``origin`` needs 1 point, ``affine`` 2 distinct ALs."""
    pts = [p for p in points if math.isfinite(p.al) and math.isfinite(p.speedup)]
    need = 1 if model == "origin" else 2
    if len({round(p.al, 6) for p in pts}) < need:
        raise ValueError(f"c={concurrency}: a {model} fit needs {need} distinct AL value(s), got {len(pts)} point(s)")
    x = np.array([p.al for p in pts])
    y = np.array([p.speedup for p in pts])
    w = 1.0 / np.array([p.sigma() for p in pts]) ** 2
    design = x[:, None] if model == "origin" else np.column_stack([np.ones_like(x), x])
    xtwx = design.T @ (design * w[:, None])
    cov = np.linalg.inv(xtwx)
    beta = cov @ (design.T @ (w * y))
    resid = y - design @ beta
    dof = len(pts) - design.shape[1]
    chi2_dof = float(np.sum(w * resid**2) / dof) if dof > 0 else math.nan
    if dof > 0:
        cov = cov * max(1.0, chi2_dof)  # scatter beyond the points' own intervals widens, never narrows
    if model == "origin":
        c2 = ((0.0, 0.0), (0.0, float(cov[0, 0])))
        return Curve(concurrency, model, 0.0, float(beta[0]), c2, tuple(pts), chi2_dof, variant)
    c2 = ((float(cov[0, 0]), float(cov[0, 1])), (float(cov[1, 0]), float(cov[1, 1])))
    return Curve(concurrency, model, float(beta[0]), float(beta[1]), c2, tuple(pts), chi2_dof, variant)


def _clock(row: SummaryRow, engine: bool) -> tuple[float, float, float]:
    """(speedup, low, high) of one clock of the row."""
    if engine:
        return num(row.speedup_engine_mean), num(row.speedup_engine_ci_low), num(row.speedup_engine_ci_high)
    return num(row.speedup_mean), num(row.speedup_ci_low), num(row.speedup_ci_high)


def point_from_row(row: SummaryRow, source: str = "engine") -> CurvePoint | None:
    """A summary row -> a curve point: ``al_tokens`` and the engine-side speedup
    (``source="engine"``; the client's when the engine's is missing) or the client's."""
    al = num(row.al_tokens)
    s, lo, hi = _clock(row, source == "engine")
    if source == "engine" and not math.isfinite(s):
        s, lo, hi = _clock(row, False)
    if not (math.isfinite(al) and math.isfinite(s)):
        return None
    return CurvePoint(al, s, lo, hi, str(row.arm or ""))


def curves_from_rows(rows: Iterable[SummaryRow], arms: Sequence[str], *, model: Model = "origin",
                     source: str = "engine") -> list[Curve]:
    """One fitted curve per (concurrency, variant) from the summary rows of ``arms`` (ok or
    partial points)."""
    by_point: dict[tuple[int, str], list[CurvePoint]] = {}
    for r in rows:
        if r.arm not in arms or r.status == "failed":
            continue
        p = point_from_row(r, source)
        if p is not None:
            by_point.setdefault((int(r.concurrency), str(r.variant or "")), []).append(p)
    return [fit_curve(pts, c, model, v) for (c, v), pts in sorted(by_point.items())]
