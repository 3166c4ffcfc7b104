"""summary.json's blocks that are objects rather than tables, typed as metrics/stored.py
types its tables: the controls, the conditions, the published reference, where the baseline
came from, and what each arm's servers cost.

Each is read once (results.Run's properties) and then read by attribute. A block or an
entry keeps an old folder's keys and order (:class:`~speedbench.metrics.stored.StoredRow`),
and a list of entries inside a block is typed too (``StoredRow.nested``). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from speedbench.metrics.stored import Num, StoredRow

# ---- controls (metrics/controls.py's controls_block) -----------------------------------


@dataclass(frozen=True)
class PresentControl(StoredRow):
    """A control the run has: its arm and which control it is (metrics.controls's names)."""

    arm: str | None = None
    control: str | None = None


@dataclass(frozen=True)
class FailedControl(StoredRow):
    """A control whose result is impossible, and why."""

    control: str | None = None
    arm: str | None = None
    concurrency: int | None = None
    variant: str | None = None
    why: str | None = None


@dataclass(frozen=True)
class Controls(StoredRow):
    """summary.json's ``controls``: the run's controls, the failed ones, and a note when
    the scenario has none."""

    present: tuple[PresentControl, ...] = ()
    failed: tuple[FailedControl, ...] = ()
    note: str | None = None
    nested: ClassVar[Mapping[str, type[StoredRow]]] = {"present": PresentControl, "failed": FailedControl}

    def failed_lines(self) -> list[str]:
        """Each failed control's reason, for the report and the gate."""
        return [str(f.why) for f in self.failed]


# ---- conditions (metrics/conditions.py's conditions_block) -----------------------------


@dataclass(frozen=True)
class ComparedPoint(StoredRow):
    """One point compared with the baseline's: whether their conditions differed, why,
    and each side's conditions in a few words."""

    arm: str | None = None
    concurrency: int | None = None
    variant: str | None = None
    confounded: bool | None = None
    why: list[str] | None = None
    rounds: int | None = None
    arm_conditions: str | None = None
    baseline_conditions: str | None = None

    def reason(self) -> str:
        """Why the comparison is confounded, both arms' conditions named."""
        over = f"over {self.rounds} rounds; " if (self.rounds or 1) > 1 else ""
        return ("; ".join(self.why or []) + f" ({over}arm: {self.arm_conditions}; "
                f"baseline: {self.baseline_conditions})")


@dataclass(frozen=True)
class Conditions(StoredRow):
    """summary.json's ``conditions``: what was checked, what could not be, and each
    compared point."""

    checked: list[str] | None = None
    not_checked: list[str] | None = None
    points: tuple[ComparedPoint, ...] = ()
    nested: ClassVar[Mapping[str, type[StoredRow]]] = {"points": ComparedPoint}

    def confounded(self, arm: str, concurrency: int, variant: str = "") -> str | None:
        """Why a point's comparison is confounded, or None (not confounded, or not compared)."""
        for e in self.points:
            where = (e.arm, int(e.concurrency or 0), str(e.variant or ""))
            if where == (arm, concurrency, variant) and e.confounded:
                return e.reason()
        return None


# ---- the reference, the baseline's source, the arms' costs ------------------------------


@dataclass(frozen=True)
class Reference(StoredRow):
    """summary.json's ``reference`` (the scenario's, for an older folder): published
    figures shown beside the measured ones."""

    source: str | None = None
    arm: str | None = None  # the speculative arm the figures refer to
    speedup: Mapping[Any, Any] | None = None  # by concurrency
    acceptance_length: Mapping[str, Any] | None = None  # by category

    def speedup_at(self, concurrency: int) -> Any:
        # JSON turns integer keys into strings; accept both.
        d = self.speedup or {}
        return d.get(concurrency, d.get(str(concurrency)))

    def al_of(self, category: str) -> Any:
        return (self.acceptance_length or {}).get(category)


@dataclass(frozen=True)
class Canary(StoredRow):
    """One point of a reused baseline's canary (run/reuse.py)."""

    concurrency: int | None = None
    variant: str | None = None
    prompts: int | None = None
    pairs: int | None = None
    ratio: Num = None
    source: str | None = None
    tolerance: Num = None
    tolerance_source: str | None = None
    ok: bool | None = None


@dataclass(frozen=True)
class BaselineSource(StoredRow):
    """summary.json's ``baseline_source``: whether the baseline was reused from an earlier
    run (which, how old, its canary) and why, or measured in this run."""

    reused: bool | None = None
    results: str | None = None
    run_id: str | None = None
    path: str | None = None
    measured_utc: str | None = None
    age_days: Num = None
    canary: tuple[Canary, ...] = ()
    reason: str | None = None
    nested: ClassVar[Mapping[str, type[StoredRow]]] = {"canary": Canary}


@dataclass(frozen=True)
class ArmCost(StoredRow):
    """One arm's entry in summary.json's ``arms``: its servers' start times, wall time,
    GPUs and GPU-hours."""

    server_start_s: list[float] | None = None
    wall_s: Num = None
    gpus: int | None = None
    gpu_hours: Num = None
