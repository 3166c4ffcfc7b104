"""The default gate ``lossless`` (docs/gates.md, "Default gates"): same outputs, or no speedup.

Read from summary.json's ``outputs`` block alone (results/output_summary.py), one check per
arm: an arm with a point whose verdict is "lossy" fails, naming the points; the other
verdicts pass, and the line counts the points that were not checked, so a pass never hides
how much went unread. The gate applies to a run whose outputs were compared: not a folder
from before outputs were kept, nor a run that sampled (temperature above 0).
"""

from __future__ import annotations

from dataclasses import dataclass

from speedbench.metrics import outputs as cmp
from speedbench.metrics.stored_outputs import OutputsEntry
from speedbench.results import Run


@dataclass(frozen=True)
class ArmCheck:
    arm: str
    status: str  # "pass" or "fail"
    lossy: int  # its lossy points
    message: str


def applies(run: Run) -> bool:
    """Whether the run's outputs were compared: some point of it has pairs to compare."""
    block = run.outputs_block
    if block is None or block.not_checked:
        return False
    return any(int(e.pairs or 0) > 0 for e in run.outputs.values())


def _where(e: OutputsEntry) -> str:
    return f"c={e.concurrency}" + (f" variant={e.variant}" if e.variant else "")


def _check(arm: str, entries: list[OutputsEntry]) -> ArmCheck:
    verdicts = [e.verdict for e in entries]
    lossy = [e for e in entries if e.lossy]
    fine = sum(v in (cmp.IDENTICAL, cmp.NUMERICS) for v in verdicts)
    unchecked = len(entries) - fine - len(lossy)
    counts = f"{fine} point{'s' if fine != 1 else ''} identical/within numerics" + (
        f", {unchecked} not checked" if unchecked else "")
    if not lossy:
        return ArmCheck(arm, "pass", 0, counts)
    why = "; ".join(f"{_where(e)} ({e.reason if e.has('reason') else ''})" for e in lossy)
    rest = f"; {counts}" if fine or unchecked else ""
    return ArmCheck(arm, "fail", len(lossy), f"{len(lossy)} of {len(entries)} points lossy: {why}{rest}")


def arm_checks(run: Run) -> list[ArmCheck]:
    """One check per arm with compared points (their reference's arm included), in the
    summary's order; none when the gate does not apply."""
    if not applies(run):
        return []
    by_arm: dict[str, list[OutputsEntry]] = {}
    for key, e in run.outputs.items():
        by_arm.setdefault(key.arm, []).append(e)
    order = [a for a in run.arms() if a in by_arm] + [a for a in by_arm if a not in run.arms()]
    return [_check(arm, by_arm[arm]) for arm in order]
