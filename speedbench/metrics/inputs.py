"""What summarize() knows of an arm and of a point besides its records: ArmInfo, PointInfo."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any


@dataclass
class ArmInfo:
    template: str = ""  # sweep template name; "" = the arm's own name
    speculative: bool = False
    method: str = ""
    num_speculative_tokens: int | None = None
    eagle_version: str = ""  # "3", "3.1" or ""
    status: str = "ok"  # "failed" when the arm died or never started (applies to points without records)
    failure: str | None = None
    series: str = ""  # arms that differ only in k share it; "" = not known (a run folder from before it was stored)

    @classmethod
    def from_arm(cls, arm: Any, *, eagle_version: str = "", status: str = "ok", failure: str | None = None) -> ArmInfo:
        """From a ``scenario.ArmSpec``."""
        sc = arm.speculative_config  # scenario.SpeculativeConfig or None
        return cls(arm.template or arm.name, sc is not None, sc.method if sc else "",
                   sc.k if sc else None, eagle_version, status, failure, arm.series or "")


@dataclass
class PointInfo:
    wall_s: float | None = None  # summed over repeats; None = derive from records
    loop_lag_ms_max: float | None = None
    status: str | None = None  # None = derive from records; "failed" when the server died
    failure: str | None = None
    request_rate: float | None = None  # rate mode: requests/s of the arrival schedule; None = closed loop
    burstiness: float | None = None

    @classmethod
    def from_point(cls, p: Mapping[str, Any]) -> PointInfo:
        """From a point's marks: one round's, or its rounds folded by :func:`fold_rounds`."""
        lag = p.get("loop_lag_ms_max")
        if lag is None and isinstance(p.get("loop_lag_ms"), dict):  # a run folder from before the max was stored
            lag = p["loop_lag_ms"].get("max")
        status = p.get("status")
        # An interrupted point has partial data; it is reported as failed so nobody
        # mistakes it for a complete measurement.
        return cls(wall_s=p.get("wall_s"), loop_lag_ms_max=lag,
                   status="failed" if status in ("failed", "interrupted") else None,
                   failure=p.get("failure") or (status if status == "interrupted" else None),
                   request_rate=p.get("request_rate"), burstiness=p.get("burstiness"))

    @classmethod
    def from_results(cls, results: Iterable[Any]) -> PointInfo:
        """The ``loadgen.PointResult`` of every round of one point, folded as a run folder's
        rounds are (for callers that measure in memory, with no run folder)."""
        return cls.from_point(fold_rounds(
            (i, {"wall_s": r.wall_s, "loop_lag_ms_max": r.loop_lag_ms.get("max", 0.0),
                 "status": "failed" if r.aborted else "ok", "failure": r.aborted})
            for i, r in enumerate(results)))


# worst last: a point's folded status is its worst round's
_STATUS_RANK = {"ok": 0, "partial": 1, "interrupted": 2, "failed": 3}


def fold_rounds(rounds: Iterable[tuple[int, Mapping[str, Any]]]) -> dict[str, Any]:
    """One point's rounds, each (round number, its marks as points.json holds them), folded:
    the first round's marks, wall time summed, the largest loop lag, the worst status with
    its failure, and ``repeats`` the rounds in order."""
    out: dict[str, Any] = {}
    for rnd, p in sorted(rounds, key=lambda rp: rp[0]):
        if not out:
            out = {**p, "repeats": [rnd]}
            continue
        out["repeats"].append(rnd)
        if p.get("wall_s") is not None:
            out["wall_s"] = (out.get("wall_s") or 0.0) + p["wall_s"]
        lag = p.get("loop_lag_ms_max")
        if lag is not None:
            out["loop_lag_ms_max"] = max(lag, out.get("loop_lag_ms_max") or 0.0)
        if _STATUS_RANK.get(p.get("status") or "", 3) > _STATUS_RANK.get(out.get("status") or "", 3):
            out["status"], out["failure"] = p.get("status"), p.get("failure")
    return out


def coerce(cls: type, v: Any) -> Any:
    """An ArmInfo / PointInfo from itself, a dict with (some of) its fields, or None."""
    if v is None or isinstance(v, cls):
        return v or cls()
    return cls(**{f.name: v[f.name] for f in fields(cls) if f.name in v})
