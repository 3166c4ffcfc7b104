"""Screening: each checkpoint's AL from one server at one high concurrency, the speedups
its calibration predicts at the scenario's levels, and the rule that promotes the best.

Why this is enough to rank checkpoints: at T = 0 the target's greedy output, and so the
accepted drafts, do not depend on the batch, and speedup = AL * t_base / t_spec where
the step times belong to the system, not to the checkpoint (calibration/fit.py).
docs/metrics.md says when that breaks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, NamedTuple

from speedbench.metrics.registry import SummaryRow
from speedbench.metrics.cells import num
from speedbench.metrics.stored import ScreenEntry
from speedbench.calibration.store import Calibration
from speedbench.scenario import Scenario
from speedbench.scenario.traffic import PromoteSpec


class Ranked(NamedTuple):
    """One candidate :func:`promote` ranks: its name (a screened arm, or a matrix cell) and
    its screening entry (summary.json's ``screening``, typed)."""

    name: str
    entry: ScreenEntry

    def al(self, by: str) -> float:
        """The AL the rule ranks by (``al_tokens`` or ``al_requests``); NaN when not measured."""
        return num(self.entry.al_requests if by == "al_requests" else self.entry.al_tokens)


def _copied(r: SummaryRow) -> dict[str, Any]:
    """The row's acceptance figures a screening entry carries (summary.json's names)."""
    return {"arm": r.arm, "concurrency": r.concurrency, "variant": r.variant, "n_ok": r.n_ok,
            "al_tokens": r.al_tokens, "al_requests": r.al_requests, "al_prometheus": r.al_prometheus,
            "draft_acceptance_rate": r.draft_acceptance_rate, "per_position_joint": r.per_position_joint,
            "per_position_conditional": r.per_position_conditional}


def screening_rows(rows: Sequence[SummaryRow], sc: Scenario,
                   calibrations: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per screened (arm, variant): its acceptance figures and, per concurrency
    level of the scenario, the predicted speedup (NaN without a calibration curve there)."""
    out = []
    typed = {arm: Calibration.from_dict(cal) for arm, cal in calibrations.items() if cal}
    for r in rows:
        if not r.speculative or r.status == "failed":
            continue
        cal = typed.get(str(r.arm))
        predicted = []
        for c in sc.concurrency:
            s, lo, hi = cal.predict(c, r.al_tokens, str(r.variant or "")) if cal else (math.nan,) * 3
            predicted.append({"concurrency": c, "speedup": s, "ci_low": lo, "ci_high": hi})
        out.append({**_copied(r), "predicted": predicted,
                    "calibration": cal.file if cal else None, "promoted": False})
    return out


def promote(candidates: Sequence[Ranked], rule: PromoteSpec | None) -> list[str]:
    """The names the rule promotes, best AL first. ``beats`` names a candidate whose AL the
    others must exceed (it is never promoted by beating itself)."""
    if rule is None:
        return []
    scored = [(c.name, c.al(rule.by)) for c in candidates]
    scored = [(n, al) for n, al in scored if math.isfinite(al)]
    if rule.beats is not None:
        ref = [al for n, al in scored if n == rule.beats]
        if not ref:
            return []  # the reference was not measured: nothing can be said to beat it
        scored = [(n, al) for n, al in scored if al > ref[0]]
    if rule.min_al is not None:
        scored = [(n, al) for n, al in scored if al >= rule.min_al]
    scored.sort(key=lambda x: -x[1])
    if rule.best is not None:
        scored = scored[:rule.best]
    return [n for n, _ in scored]


def screening_block(rows: Sequence[SummaryRow], sc: Scenario,
                    calibrations: dict[str, dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """(screening entries, promoted arms) of a screening run; ([], []) otherwise."""
    if sc.load.mode != "screen":
        return [], []
    entries = [ScreenEntry.from_dict(e) for e in screening_rows(rows, sc, calibrations)]
    promoted = promote([Ranked(str(e.arm), e) for e in entries], sc.promote)
    return [replace(e, promoted=e.arm in promoted).to_dict() for e in entries], promoted
