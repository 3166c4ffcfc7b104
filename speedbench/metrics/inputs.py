"""What summarize() knows of an arm and of a point besides its records: ArmInfo, PointInfo."""

from __future__ import annotations

from collections.abc import Iterable
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
    def from_results(cls, results: Iterable[Any]) -> PointInfo:
        """Fold the ``loadgen.PointResult`` of every repeat of one point."""
        info = cls(wall_s=0.0, loop_lag_ms_max=0.0)
        for r in results:
            info.wall_s += r.wall_s
            info.loop_lag_ms_max = max(info.loop_lag_ms_max, r.loop_lag_ms.get("max", 0.0))
            if r.aborted:
                info.status, info.failure = "failed", r.aborted
        return info


def coerce(cls: type, v: Any) -> Any:
    """An ArmInfo / PointInfo from itself, a dict with (some of) its fields, or None."""
    if v is None or isinstance(v, cls):
        return v or cls()
    return cls(**{f.name: v[f.name] for f in fields(cls) if f.name in v})
