"""Whether a run's figures can be trusted, said before any of them: its controls (an
impossible result marks the whole run "controls failed") and its conditions (which were
checked, which could not be, and each comparison whose arms ran under materially
different ones: confounded). metrics/controls.py and metrics/conditions.py decide; this
module only words it for the report's opening lines and the gate. The outputs check
(report/outputs.py) follows them: a speedup whose outputs differ is no speedup."""

from __future__ import annotations

from speedbench.metrics import controls
from speedbench.report import outputs
from speedbench.results import Run


def controls_failed(run: Run) -> list[str]:
    """Why each failed control failed ([] when none failed, or the run has none)."""
    return run.controls.failed_lines() if run.controls else []


def confounded(run: Run, arm: str, concurrency: int, variant: str = "") -> str | None:
    """Why a point's comparison with the baseline is confounded (metrics/conditions.py), or None."""
    return run.conditions.confounded(arm, concurrency, variant) if run.conditions else None


def _control_lines(run: Run) -> list[str]:
    block = run.controls
    if block is None:
        return ["Controls: not recorded (a run folder from before they were checked)."]
    failed = block.failed_lines()
    if failed:
        return ["CONTROLS FAILED: a control's result is impossible, so no figure of this run can be trusted: "
                + "; ".join(failed) + "."]
    if block.note:
        return [f"Controls: {block.note}."]
    names = ", ".join(f"{p.arm} ({controls.NAMES.get(str(p.control), p.control)})" for p in block.present)
    return [f"Controls: {names}; each within what is possible."]


def _condition_lines(run: Run) -> list[str]:
    block = run.conditions
    if block is None:
        return ["Conditions: not recorded (a run folder from before they were)."]
    out = []
    checked = "; ".join(block.checked or []) or "nothing"
    missing = "; ".join(block.not_checked or [])
    bad = [e for e in block.points if e.confounded]
    out.append(f"Conditions checked between arms: {checked}." + (f" Not checked: {missing}." if missing else "")
               + (f" {len(bad)} comparison(s) CONFOUNDED: their arms ran under materially different conditions; "
                  "each is marked beside its speedup, gates count it as missing data, and a run on a quieter "
                  "host measures it again." if bad else ""))
    for e in bad:
        why = block.confounded(str(e.arm), int(e.concurrency or 0), str(e.variant or ""))
        where = f"c={e.concurrency}" + (f" [{e.variant}]" if e.variant else "")
        out.append(f"CONFOUNDED: {e.arm} {where}: {why}.")
    return out


def trust_lines(run: Run) -> list[str]:
    """The report's opening lines on trust: controls first, then conditions, then outputs."""
    return _control_lines(run) + _condition_lines(run) + outputs.opening_lines(run)
